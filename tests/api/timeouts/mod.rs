//! Timeouts and cancellation end to end.

mod attempts;
mod flows;
mod inactivity;
pub(crate) mod support;
