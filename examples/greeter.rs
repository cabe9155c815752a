//! A small step service for the README walk-through: two sync steps that
//! speak the Argyll step protocol.
//!
//! `cargo run --example greeter` serves on 127.0.0.1:8081 (or `GREETER_ADDR`):
//! - `POST /greet`  `{"name": "Ada"}`        -> `{"greeting": "Hello, Ada!"}`
//! - `POST /shout`  `{"greeting": "Hi"}`     -> `{"shout": "HI"}`
//!
//! Errors are answered as problem+json, which Tartan records as the step's error.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

fn problem(status: StatusCode, detail: &str) -> Response {
    (
        status,
        [("content-type", "application/problem+json")],
        json!({"type": "about:blank", "title": status.canonical_reason(), "status": status.as_u16(), "detail": detail})
            .to_string(),
    )
        .into_response()
}

async fn greet(headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let token = headers
        .get("argyll-receipt-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-");
    match body.get("name").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => {
            println!("greet {name} (receipt token {token})");
            Json(json!({ "greeting": format!("Hello, {name}!") })).into_response()
        }
        _ => problem(StatusCode::UNPROCESSABLE_ENTITY, "name is required"),
    }
}

async fn shout(Json(body): Json<Value>) -> Response {
    match body.get("greeting").and_then(Value::as_str) {
        Some(text) => Json(json!({ "shout": text.to_uppercase() })).into_response(),
        None => problem(StatusCode::UNPROCESSABLE_ENTITY, "greeting is required"),
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::var("GREETER_ADDR").unwrap_or_else(|_| "127.0.0.1:8081".into());
    let app = Router::new()
        .route("/greet", post(greet))
        .route("/shout", post(shout));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("greeter listening on {}", listener.local_addr()?);
    axum::serve(listener, app).await
}
