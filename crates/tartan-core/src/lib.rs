#![forbid(unsafe_code)]
//! # Tartan core
//!
//! The pure domain of Tartan: no IO, no async, no clock. Everything here is a
//! function of its arguments, so it is where the property and table tests live.
//!
//! # Layout
//! From the leaves up (a module uses only those listed before it):
//! - `json`, `ids`, `nesting`, `error`, `duration`, `hosts`: named JSON
//!   values, id sanitising, the JSON nesting limit, the error types, the one
//!   parser for every duration format, where steps may call.
//! - `endpoint`: endpoint URL templates: parsing, where placeholders stand,
//!   filling them in so that values cannot change where a call goes.
//! - `retry`: retry policies (every dialect normalised), the delay math, why
//!   a retry did not follow.
//! - `timeouts`: timeout policies (step, flow), scope precedence, the
//!   timeout problem.
//! - `outcome`: how an attempt ended, and its classification (the one place).
//! - `lanes`: limits shared by the calls to one step or host (concurrency,
//!   rate, breaker), and the rate arithmetic.
//! - `step`: step definitions, their validation and their typed policies.
//! - `catalog`: rules across steps (attribute graph, type conflicts, cycles).
//! - `plan`: goals + initial inputs -> the minimal plan.
//! - `health`: step health: a check's verdict, which engine checks which
//!   step, and every step's health (flow steps from their sub-flows).
//! - `flow`: flow state, its events and the fold that applies them.
//! - `request`: flow start requests and their limits.
//! - `bulk`: bulk retry and cancel requests, parsed into a typed job spec,
//!   and a job's typed status.
//! - `machine`: the decisions: `apply(state, command, ctx)` returns the
//!   events and their effects.

pub mod bulk;
pub mod catalog;
pub mod classes;
pub mod concurrency;
pub mod duration;
pub mod endpoint;
pub mod error;
pub mod filter;
pub mod flow;
pub mod health;
pub mod hosts;
pub mod ids;
pub mod json;
pub mod lanes;
pub mod machine;
pub mod nesting;
pub mod outcome;
pub mod plan;
pub mod request;
pub mod retry;
pub mod schedule;
pub mod step;
pub mod suggest;
pub mod timeouts;
pub mod webhook;
