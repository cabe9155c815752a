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
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use tartan_step::{Ctx, Service, Step, StepError, Type};

#[derive(Clone, Default)]
pub struct Load {
    now: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

/// One work item's element of `image`, in place of the array.
#[derive(Deserialize)]
struct Image {
    image: Option<String>,
}

pub fn app() -> Router {
    let load = Load::default();
    let counted = load.clone();
    let thumbnail = Step::sync("thumbnail", move |input: Image, _: Ctx| {
        thumbnail(counted.clone(), input)
    })
    .name("Make thumbnails")
    .for_each("image")
    .output("thumbnail", Type::String)
    .parallelism(2);
    let peak = Router::new().route("/peak", get(peak)).with_state(load);
    Service::new("for-each").step(thumbnail).router().merge(peak)
}

async fn thumbnail(load: Load, input: Image) -> Result<Value, StepError> {
    let Some(image) = input.image else {
        return Err(StepError::permanent("image is required"));
    };
    let now = load.now.fetch_add(1, Ordering::SeqCst) + 1;
    load.peak.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    load.now.fetch_sub(1, Ordering::SeqCst);
    let thumb = match image.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}-thumb.{ext}"),
        None => format!("{image}-thumb"),
    };
    Ok(json!({ "thumbnail": thumb }))
}

async fn peak(State(load): State<Load>) -> Json<Value> {
    Json(json!({"peak": load.peak.load(Ordering::SeqCst)}))
}

#[allow(dead_code)] // the docs' tests take `app` alone
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve("for-each", app()).await
}
