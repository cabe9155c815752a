//! Async steps: webhooks, heartbeats, for_each items, compensation.

mod compensation;
mod deliveries;
mod for_each;
mod support;
mod webhooks;
