//! Step services for Tartan in a few lines of axum.
//!
//! A step is an async function from a typed input to typed outputs; the
//! SDK reads the call (`400` naming the member for a body of the wrong
//! shape), answers its failures as the engine classifies them
//! ([`StepError`]), runs async steps behind a `202` with heartbeats and the
//! result posted to the signed webhook URL the engine handed out, serves
//! `GET /health` for the engines' health checks, and registers the steps
//! at start. It speaks Argyll's step protocol, so the same service runs
//! under Argyll; it does not depend on the engine's crates.
//!
//! ```no_run
//! use serde::{Deserialize, Serialize};
//! use tartan_step::{Ctx, Registration, Service, Step, StepError, Type};
//!
//! #[derive(Deserialize)]
//! struct Name { name: String }
//!
//! #[derive(Serialize)]
//! struct Greeting { greeting: String }
//!
//! async fn greet(input: Name, _ctx: Ctx) -> Result<Greeting, StepError> {
//!     if input.name.is_empty() {
//!         return Err(StepError::permanent("name is required"));
//!     }
//!     Ok(Greeting { greeting: format!("Hello, {}!", input.name) })
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), tartan_step::Error> {
//!     Service::new("greeter")
//!         .step(Step::sync("greet", greet).required("name", Type::String).output("greeting", Type::String))
//!         .register_with(Registration::new("http://localhost:8080", "http://127.0.0.1:8081"))
//!         .serve("127.0.0.1:8081")
//!         .await
//! }
//! ```
//!
//! docs/steps.md ("Writing a step service") shows more: failures that are
//! retried, `Retry-After`, an async step with heartbeats.

mod ctx;
mod error;
mod register;
mod service;
mod step;

pub use ctx::{Ctx, Webhook, WebhookError};
pub use error::{StepError, PROBLEM_JSON};
pub use register::{RegisterError, Registration, DEFAULT_PATIENCE};
pub use service::{Error, Service, DEFAULT_BODY_LIMIT, DEFAULT_MAX_ASYNC};
pub use step::{Compensation, Kind, Step, Type};

// The docs' Rust examples compile: docs/steps.md's blocks are doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/steps.md")]
struct StepsPage;
