//! Retries: every backoff scenario, why an item stopped, caps on what a step sends, retrying a finished flow, and retries and timeouts in paused time.

mod caps;
mod classes;
mod parking;
mod paused_clock;
mod rerun;
mod scenarios;
mod why_stopped;
