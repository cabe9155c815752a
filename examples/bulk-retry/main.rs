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
use axum::routing::put;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use tartan_step::{Ctx, Service, Step, StepError, Type};

#[derive(Clone, Default)]
pub struct Outage(Arc<AtomicBool>);

#[derive(Deserialize)]
struct Order {
    order_id: Option<String>,
}

pub fn app() -> Router {
    let outage = Outage::default();
    let down = outage.clone();
    let ship = Step::sync("ship", move |order: Order, _: Ctx| {
        let down = down.0.load(Ordering::SeqCst);
        async move {
            if down {
                // Retryable: the flows fail only once their attempts are used.
                return Err(StepError::retryable("shipping is down"));
            }
            let order = order.order_id.unwrap_or_else(|| "-".into());
            Ok(json!({ "tracking": format!("trk-{order}") }))
        }
    });
    let ship = ship
        .name("Ship an order")
        .required("order_id", Type::String)
        .output("tracking", Type::String);
    let switch = Router::new()
        .route("/outage", put(outage_switch))
        .with_state(outage);
    Service::new("bulk-retry").step(ship).router().merge(switch)
}

async fn outage_switch(State(outage): State<Outage>, Json(body): Json<Value>) -> Json<Value> {
    let down = body["down"].as_bool().unwrap_or(false);
    outage.0.store(down, Ordering::SeqCst);
    println!("shipping is {}", if down { "down" } else { "up" });
    Json(json!({ "down": down }))
}

#[allow(dead_code)] // the docs' tests take `app` alone
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve("bulk-retry", app()).await
}
