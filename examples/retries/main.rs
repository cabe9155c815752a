//! Retries against a flaky endpoint (examples/retries/README.md): a card
//! processor that answers `503` with `Retry-After: 1` to the first two
//! calls of each work item, then charges it.
//!
//! `cargo run --example retries` serves `POST /charge` on 127.0.0.1:8081
//! (or `STEPS_ADDR`).

#[path = "../kit/mod.rs"]
mod kit;

use axum::http::HeaderMap;
use axum::routing::post;
use axum::{extract::State, Json, Router};
use serde_json::{json, Value};

/// Answers `503` this many times per work item before it succeeds.
const BUSY_ANSWERS: u32 = 2;

pub fn app() -> Router {
    Router::new()
        .route("/charge", post(charge))
        .with_state(kit::Counts::default())
}

async fn charge(
    State(calls): State<kit::Counts>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let token = kit::receipt_token(&headers);
    let call = calls.bump(&token);
    if call <= BUSY_ANSWERS {
        println!("charge {token}: call {call}, 503");
        return kit::busy("card processor busy", 1);
    }
    let order = body["order_id"].as_str().unwrap_or("-");
    println!("charge {token}: call {call}, charged {order}");
    // The same charge for every call of one item: the receipt token makes
    // the charge idempotent on the processor's side.
    Json(json!({"charge_id": format!("ch_{}", &token[..token.len().min(8)])})).into_response()
}

#[allow(dead_code)] // the docs' tests take `app` alone
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve("retries", app()).await
}
