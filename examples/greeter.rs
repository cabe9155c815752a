//! A small step service for the README walk-through and the docs' examples:
//! sync steps written with tartan-step (docs/steps.md, "Writing a step
//! service").
//!
//! `cargo run --example greeter` serves on 127.0.0.1:8081 (or `GREETER_ADDR`):
//! - `POST /greet`  `{"name": "Ada"}`        -> `{"greeting": "Hello, Ada!"}`
//! - `POST /shout`  `{"greeting": "Hi"}`     -> `{"shout": "HI"}`
//! - `POST /flaky`  as `/greet`, but the first call of each work item (its
//!   `Argyll-Receipt-Token`) answers `503` "warming up" with `Retry-After: 1`:
//!   a retryable failure, then a success on the retry (docs/retries.md)
//! - `POST /slow`   `{"name": "Ada"}` -> `{"late_greeting": "Hello, Ada!"}`,
//!   after 5 s: longer than an attempt timeout of a few seconds
//!   (docs/timeouts.md)
//! - `GET /health`  `{"status": "healthy", "service": "greeter"}`
//!
//! A missing or empty input is a `422` "name is required" (permanent); a
//! body of the wrong shape a `400` naming the member. Errors are answered
//! as problem+json, which Tartan records as the step's error. The docs'
//! runnable examples call these routes, and a test runs them
//! (tests/api/docs), so what the docs show is what the greeter answers.

#[path = "kit/mod.rs"]
mod kit;

use std::time::Duration;

use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};
use tartan_step::{Ctx, Service, Step, StepError, Type};

#[derive(Deserialize)]
struct Name {
    name: Option<String>,
}

#[derive(Deserialize)]
struct Greeting {
    greeting: Option<String>,
}

/// The greeter's routes, for `main` and for the tests that run the docs.
pub fn app() -> Router {
    service().router()
}

/// The greeter's steps, described as examples/steps/ registers them.
pub fn service() -> Service {
    // `/flaky`'s calls per work item (bounded, `kit::Counts`).
    let calls = kit::Counts::default();
    let flaky = Step::sync("flaky", move |input: Name, ctx: Ctx| {
        let calls = calls.clone();
        async move { flaky(&calls, input, ctx) }
    });
    Service::new("greeter")
        .step(named(Step::sync("greet", greet), "Greet", "greeting").timeout(Duration::from_secs(5)))
        .step(
            Step::sync("shout", shout)
                .name("Shout")
                .required("greeting", Type::String)
                .output("shout", Type::String),
        )
        .step(named(flaky, "Flaky greet", "greeting"))
        .step(named(Step::sync("slow", slow), "Slow greet", "late_greeting").timeout(Duration::from_secs(10)))
}

/// A step from `name` to the greeting under `output`.
fn named(step: Step, name: &str, output: &str) -> Step {
    step.name(name)
        .required("name", Type::String)
        .output(output, Type::String)
}

/// `Hello, <name>!` as `output`, or a permanent failure without a name.
fn greeting(name: Option<String>, output: &str) -> Result<Value, StepError> {
    match name {
        Some(name) if !name.is_empty() => Ok(json!({ output: format!("Hello, {name}!") })),
        _ => Err(StepError::permanent("name is required")),
    }
}

async fn greet(input: Name, ctx: Ctx) -> Result<Value, StepError> {
    println!("greet (receipt token {})", ctx.receipt_token().unwrap_or("-"));
    greeting(input.name, "greeting")
}

async fn shout(input: Greeting, _: Ctx) -> Result<Value, StepError> {
    match input.greeting {
        Some(text) => Ok(json!({ "shout": text.to_uppercase() })),
        None => Err(StepError::permanent("greeting is required")),
    }
}

fn flaky(calls: &kit::Counts, input: Name, ctx: Ctx) -> Result<Value, StepError> {
    let token = ctx.receipt_token().unwrap_or("-");
    if calls.bump(token) == 1 {
        println!("flaky (receipt token {token}): 503, retry after 1 s");
        return Err(StepError::retryable("warming up").retry_after(Duration::from_secs(1)));
    }
    println!("flaky (receipt token {token}): 200");
    greeting(input.name, "greeting")
}

async fn slow(input: Name, _: Ctx) -> Result<Value, StepError> {
    tokio::time::sleep(Duration::from_secs(5)).await;
    greeting(input.name, "late_greeting")
}

#[allow(dead_code)] // the docs' tests take `app` alone (tests/api/docs)
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve_from("GREETER_ADDR", "greeter", app()).await
}
