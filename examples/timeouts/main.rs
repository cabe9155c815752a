//! Timeouts at each level (examples/timeouts/README.md): an endpoint that
//! answers after as many milliseconds as its path says.
//!
//! `cargo run --example timeouts` serves `POST /sleep/{ms}` on
//! 127.0.0.1:8081 (or `STEPS_ADDR`): `{"done": true}` after `ms` (at most
//! a minute).

#[path = "../kit/mod.rs"]
mod kit;

use std::time::Duration;

use axum::extract::Path;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

const LONGEST: u64 = 60_000;

pub fn app() -> Router {
    Router::new().route("/sleep/{ms}", post(sleep))
}

async fn sleep(Path(ms): Path<u64>) -> Json<Value> {
    tokio::time::sleep(Duration::from_millis(ms.min(LONGEST))).await;
    Json(json!({ "done": true }))
}

#[allow(dead_code)] // the docs' tests take `app` alone
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve("timeouts", app()).await
}
