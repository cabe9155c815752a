//! Async steps: webhooks, heartbeats, for_each items, compensation.

mod webhooks;
mod work_items;
