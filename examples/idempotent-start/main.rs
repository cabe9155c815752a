//! An idempotent flow start (examples/idempotent-start/README.md): an
//! order service whose `place` step counts the orders it placed, so that
//! the README can show that starting the same flow twice places one order.
//!
//! `cargo run --example idempotent-start` serves `POST /place` and
//! `GET /placed` on 127.0.0.1:8081 (or `STEPS_ADDR`).

#[path = "../kit/mod.rs"]
mod kit;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

pub fn app() -> Router {
    Router::new()
        .route("/place", post(place))
        .route("/placed", get(placed))
        .with_state(kit::Counts::default())
}

async fn place(
    State(orders): State<kit::Counts>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    let order = body["order_id"].as_str().unwrap_or("-").to_string();
    orders.bump("placed");
    println!(
        "placed {order} (flow {})",
        kit::header(&headers, "argyll-flow-id")
    );
    Json(json!({ "confirmation": format!("conf-{order}") }))
}

async fn placed(State(orders): State<kit::Counts>) -> Json<Value> {
    Json(json!({ "placed": orders.get("placed") }))
}

#[allow(dead_code)] // the docs' tests take `app` alone
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve("idempotent-start", app()).await
}
