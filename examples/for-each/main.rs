//! for_each with parallelism (examples/for-each/README.md): a thumbnailer
//! called once per image, each call taking 300 ms; it reports how many
//! calls it had at once, at most.
//!
//! `cargo run --example for-each` serves `POST /thumbnail` and
//! `GET /peak` on 127.0.0.1:8081 (or `STEPS_ADDR`).

#[path = "../kit/mod.rs"]
mod kit;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

#[derive(Clone, Default)]
pub struct Load {
    now: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

pub fn app() -> Router {
    Router::new()
        .route("/thumbnail", post(thumbnail))
        .route("/peak", get(peak))
        .with_state(Load::default())
}

async fn thumbnail(State(load): State<Load>, Json(body): Json<Value>) -> Response {
    let Some(image) = body["image"].as_str().map(str::to_string) else {
        return kit::problem(StatusCode::UNPROCESSABLE_ENTITY, "image is required");
    };
    let now = load.now.fetch_add(1, Ordering::SeqCst) + 1;
    load.peak.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    load.now.fetch_sub(1, Ordering::SeqCst);
    let thumb = match image.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}-thumb.{ext}"),
        None => format!("{image}-thumb"),
    };
    Json(json!({ "thumbnail": thumb })).into_response()
}

async fn peak(State(load): State<Load>) -> Json<Value> {
    Json(json!({"peak": load.peak.load(Ordering::SeqCst)}))
}

#[allow(dead_code)] // the docs' tests take `app` alone
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve("for-each", app()).await
}
