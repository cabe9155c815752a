//! Bulk retry after an outage (examples/bulk-retry/README.md): a shipping
//! service that can be taken down and brought back; while it is down every
//! call is answered `503`.
//!
//! `cargo run --example bulk-retry` serves on 127.0.0.1:8081 (or
//! `STEPS_ADDR`):
//! - `POST /ship`    `{"order_id": "o-1"}` -> `{"tracking": "trk-o-1"}`
//! - `PUT /outage`   `{"down": true}` or `{"down": false}`

#[path = "../kit/mod.rs"]
mod kit;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{post, put};
use axum::{Json, Router};
use serde_json::{json, Value};

#[derive(Clone, Default)]
pub struct Outage(Arc<AtomicBool>);

pub fn app() -> Router {
    Router::new()
        .route("/ship", post(ship))
        .route("/outage", put(outage))
        .with_state(Outage::default())
}

async fn ship(State(outage): State<Outage>, Json(body): Json<Value>) -> Response {
    if outage.0.load(Ordering::SeqCst) {
        return kit::problem(StatusCode::SERVICE_UNAVAILABLE, "shipping is down");
    }
    let order = body["order_id"].as_str().unwrap_or("-");
    Json(json!({ "tracking": format!("trk-{order}") })).into_response()
}

async fn outage(State(outage): State<Outage>, Json(body): Json<Value>) -> Response {
    let down = body["down"].as_bool().unwrap_or(false);
    outage.0.store(down, Ordering::SeqCst);
    println!("shipping is {}", if down { "down" } else { "up" });
    Json(json!({ "down": down })).into_response()
}

#[allow(dead_code)] // the docs' tests take `app` alone
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve("bulk-retry", app()).await
}
