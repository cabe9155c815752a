//! An idempotent flow start (examples/idempotent-start/README.md): an
//! order service whose `place` step counts the orders it placed, so that
//! the README can show that starting the same flow twice places one order.
//!
//! `cargo run --example idempotent-start` serves `POST /place` and
//! `GET /placed` on 127.0.0.1:8081 (or `STEPS_ADDR`).

#[path = "../kit/mod.rs"]
mod kit;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use tartan_step::{Ctx, Service, Step, StepError, Type};

#[derive(Deserialize)]
struct Order {
    order_id: Option<String>,
}

pub fn app() -> Router {
    let orders = kit::Counts::default();
    let placed = orders.clone();
    let place = Step::sync("place", move |order: Order, ctx: Ctx| {
        let placed = placed.clone();
        async move { place(&placed, order, &ctx) }
    });
    let place = place
        .name("Place an order")
        .required("order_id", Type::String)
        .output("confirmation", Type::String);
    let count = Router::new().route("/placed", get(count)).with_state(orders);
    Service::new("idempotent-start").step(place).router().merge(count)
}

fn place(orders: &kit::Counts, order: Order, ctx: &Ctx) -> Result<Value, StepError> {
    let order = order.order_id.unwrap_or_else(|| "-".into());
    orders.bump("placed");
    println!("placed {order} (flow {})", ctx.flow_id().unwrap_or("-"));
    Ok(json!({ "confirmation": format!("conf-{order}") }))
}

async fn count(State(orders): State<kit::Counts>) -> Json<Value> {
    Json(json!({ "placed": orders.get("placed") }))
}

#[allow(dead_code)] // the docs' tests take `app` alone
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve("idempotent-start", app()).await
}
