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

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

/// The receipt tokens `/flaky` has failed once, so their retry succeeds.
/// At most this many are kept, then the set starts over: a long-running
/// greeter stays small, and a forgotten token only fails once more.
const FLAKY_REMEMBERED: usize = 10_000;

#[derive(Clone, Default)]
pub struct Greeter {
    failed_once: Arc<Mutex<HashSet<String>>>,
}

/// The greeter's routes, for `main` and for the tests that run the docs.
pub fn app() -> Router {
    Router::new()
        .route("/greet", post(greet))
        .route("/shout", post(shout))
        .route("/flaky", post(flaky))
        .route("/slow", post(slow))
        .with_state(Greeter::default())
}

fn problem(status: StatusCode, detail: &str) -> Response {
    (
        status,
        [("content-type", "application/problem+json")],
        json!({"type": "about:blank", "title": status.canonical_reason(), "status": status.as_u16(), "detail": detail})
            .to_string(),
    )
        .into_response()
}

fn receipt_token(headers: &HeaderMap) -> &str {
    headers
        .get("argyll-receipt-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
}

/// `Hello, <name>!` as `output`, or a 422 without a name.
fn greeting(body: &Value, output: &str) -> Response {
    match body.get("name").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => Json(json!({ output: format!("Hello, {name}!") })).into_response(),
        _ => problem(StatusCode::UNPROCESSABLE_ENTITY, "name is required"),
    }
}

async fn greet(headers: HeaderMap, Json(body): Json<Value>) -> Response {
    println!("greet (receipt token {})", receipt_token(&headers));
    greeting(&body, "greeting")
}

async fn shout(Json(body): Json<Value>) -> Response {
    match body.get("greeting").and_then(Value::as_str) {
        Some(text) => Json(json!({ "shout": text.to_uppercase() })).into_response(),
        None => problem(StatusCode::UNPROCESSABLE_ENTITY, "greeting is required"),
    }
}

async fn flaky(State(greeter): State<Greeter>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let token = receipt_token(&headers).to_string();
    let first = {
        let mut seen = greeter.failed_once.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= FLAKY_REMEMBERED {
            seen.clear();
        }
        seen.insert(token.clone())
    };
    if first {
        println!("flaky (receipt token {token}): 503, retry after 1 s");
        let mut response = problem(StatusCode::SERVICE_UNAVAILABLE, "warming up");
        response
            .headers_mut()
            .insert("retry-after", axum::http::HeaderValue::from_static("1"));
        return response;
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
    let addr = std::env::var("GREETER_ADDR").unwrap_or_else(|_| "127.0.0.1:8081".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("greeter listening on {}", listener.local_addr()?);
    axum::serve(listener, app()).await
}
