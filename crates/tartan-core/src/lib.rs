#![forbid(unsafe_code)]
//! # Tartan core
//!
//! The pure domain of Tartan: no IO, no async, no clock. Everything here is a
//! function of its arguments, so it is where the property and table tests live.
//!
//! # Layout
//! From the leaves up (a module uses only those above it):
//! - `json`: named JSON values, and how a value's kind is named.
//! - `ids`: step and flow id sanitising.
//! - `step`: step definitions and their validation.
//! - `catalog`: rules across steps (attribute graph, type conflicts, cycles).
//! - `plan`: goals + initial inputs -> the minimal plan.
//! - `flow`: flow state, its events and `apply`.
//! - `machine`: the decisions that produce events.
//! - `endpoint`: endpoint URL templates: parsing, where placeholders stand,
//!   filling them in so that values cannot change where a call goes.
//! - `hosts`: where steps may call (`TARTAN_STEP_HOSTS`): names, patterns,
//!   ranges, link-local addresses.
//! - `nesting`: the JSON nesting limit, checked before parsing.
//! - `outcome`: classification of an attempt's HTTP outcome.
//! - `request`: flow start requests and their limits.
//! - `duration`: the one parser for every duration format.
//! - `retry`: retry policies (every dialect normalised) and the delay math.
//! - `timeouts`: timeout policies (step, flow), scope precedence, the timeout problem.

pub mod catalog;
pub mod duration;
pub mod endpoint;
pub mod error;
pub mod flow;
pub mod hosts;
pub mod ids;
pub mod json;
pub mod machine;
pub mod nesting;
pub mod outcome;
pub mod plan;
pub mod request;
pub mod retry;
pub mod step;
pub mod timeouts;
