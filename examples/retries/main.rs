//! Retries against a flaky endpoint (examples/retries/README.md): a card
//! processor that answers `503` with `Retry-After: 1` to the first two
//! calls of each work item, then charges it.
//!
//! `cargo run --example retries` serves `POST /charge` on 127.0.0.1:8081
//! (or `STEPS_ADDR`).

#[path = "../kit/mod.rs"]
mod kit;

use std::time::Duration;

use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};
use tartan_step::{Ctx, Service, Step, StepError, Type};

/// Answers `503` this many times per work item before it succeeds.
const BUSY_ANSWERS: u32 = 2;

#[derive(Deserialize)]
struct Charge {
    order_id: Option<String>,
}

pub fn app() -> Router {
    let calls = kit::Counts::default();
    let charge = Step::sync("charge", move |input: Charge, ctx: Ctx| {
        let calls = calls.clone();
        async move { charge(&calls, input, &ctx) }
    });
    let charge = charge
        .name("Charge a card")
        .required("order_id", Type::String)
        .output("charge_id", Type::String);
    Service::new("retries").step(charge).router()
}

fn charge(calls: &kit::Counts, input: Charge, ctx: &Ctx) -> Result<Value, StepError> {
    let token = ctx.receipt_token().unwrap_or("-");
    let call = calls.bump(token);
    if call <= BUSY_ANSWERS {
        println!("charge {token}: call {call}, 503");
        return Err(StepError::retryable("card processor busy").retry_after(Duration::from_secs(1)));
    }
    let order = input.order_id.unwrap_or_else(|| "-".into());
    println!("charge {token}: call {call}, charged {order}");
    // The same charge for every call of one item: the receipt token makes
    // the charge idempotent on the processor's side.
    let short: String = token.chars().take(8).collect();
    Ok(json!({"charge_id": format!("ch_{short}")}))
}

#[allow(dead_code)] // the docs' tests take `app` alone
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve("retries", app()).await
}
