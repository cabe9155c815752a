//! Retries: every backoff scenario, why an item stopped, caps on what a step sends, retrying a finished flow.

mod caps;
mod rerun;
mod scenarios;
mod why_stopped;
