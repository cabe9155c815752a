//! Timeouts at each level (examples/timeouts/README.md): an endpoint that
//! answers after as many milliseconds as its path says.
//!
//! `cargo run --example timeouts` serves `POST /sleep/{ms}` on
//! 127.0.0.1:8081 (or `STEPS_ADDR`): `{"done": true}` after `ms` (at most
//! a minute). The steps `quote` and `report` (steps.json) both call it,
//! with their `delay` input in the path.

#[path = "../kit/mod.rs"]
mod kit;

use std::time::Duration;

use axum::http::StatusCode;
use axum::Router;
use serde_json::{json, Value};
use tartan_step::{Ctx, Service, Step, StepError, Type};

const LONGEST: u64 = 60_000;

pub fn app() -> Router {
    let sleep = Step::sync("sleep", sleep)
        .path("/sleep/{ms}")
        .required("ms", Type::String)
        .output("done", Type::Boolean);
    Service::new("timeouts").step(sleep).router()
}

async fn sleep(_: Value, ctx: Ctx) -> Result<Value, StepError> {
    let Some(ms) = ctx.param("ms").and_then(|ms| ms.parse::<u64>().ok()) else {
        return Err(StepError::status(
            StatusCode::BAD_REQUEST,
            "the path ends with whole milliseconds",
        ));
    };
    tokio::time::sleep(Duration::from_millis(ms.min(LONGEST))).await;
    Ok(json!({ "done": true }))
}

#[allow(dead_code)] // the docs' tests take `app` alone
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve("timeouts", app()).await
}
