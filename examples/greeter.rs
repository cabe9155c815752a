//! A small step service for the README walk-through and the docs' examples:
//! sync steps that speak the Argyll step protocol.
//!
//! `cargo run --example greeter` serves on 127.0.0.1:8081 (or `GREETER_ADDR`):
//! - `POST /greet`  `{"name": "Ada"}`        -> `{"greeting": "Hello, Ada!"}`
//! - `POST /shout`  `{"greeting": "Hi"}`     -> `{"shout": "HI"}`
//! - `POST /flaky`  as `/greet`, but the first call of each work item (its
//!   `Argyll-Receipt-Token`) answers `503` "warming up" with `Retry-After: 1`:
//!   a retryable failure, then a success on the retry (docs/retries.md)
//! - `POST /slow`   `{"name": "Ada"}` -> `{"late_greeting": "Hello, Ada!"}`,
//!   after 5 s: longer than an attempt timeout of a few seconds
//!   (docs/timeouts.md)
//!
//! Errors are answered as problem+json, which Tartan records as the step's
//! error. The docs' runnable examples call these routes, and a test runs
//! them (tests/api/docs), so what the docs show is what the greeter answers.

#[path = "kit/mod.rs"]
mod kit;

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

/// The greeter's routes, for `main` and for the tests that run the docs.
/// The state counts `/flaky`'s calls per work item (bounded, `kit::Counts`).
pub fn app() -> Router {
    Router::new()
        .route("/greet", post(greet))
        .route("/shout", post(shout))
        .route("/flaky", post(flaky))
        .route("/slow", post(slow))
        .with_state(kit::Counts::default())
}

/// `Hello, <name>!` as `output`, or a 422 without a name.
fn greeting(body: &Value, output: &str) -> Response {
    match body.get("name").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => Json(json!({ output: format!("Hello, {name}!") })).into_response(),
        _ => kit::problem(StatusCode::UNPROCESSABLE_ENTITY, "name is required"),
    }
}

async fn greet(headers: HeaderMap, Json(body): Json<Value>) -> Response {
    println!("greet (receipt token {})", kit::receipt_token(&headers));
    greeting(&body, "greeting")
}

async fn shout(Json(body): Json<Value>) -> Response {
    match body.get("greeting").and_then(Value::as_str) {
        Some(text) => Json(json!({ "shout": text.to_uppercase() })).into_response(),
        None => kit::problem(StatusCode::UNPROCESSABLE_ENTITY, "greeting is required"),
    }
}

async fn flaky(State(calls): State<kit::Counts>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let token = kit::receipt_token(&headers);
    if calls.bump(&token) == 1 {
        println!("flaky (receipt token {token}): 503, retry after 1 s");
        return kit::busy("warming up", 1);
    }
    println!("flaky (receipt token {token}): 200");
    greeting(&body, "greeting")
}

async fn slow(Json(body): Json<Value>) -> Response {
    tokio::time::sleep(Duration::from_secs(5)).await;
    greeting(&body, "late_greeting")
}

#[allow(dead_code)] // the docs' tests take `app` alone (tests/api/docs)
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve_from("GREETER_ADDR", "greeter", app()).await
}
