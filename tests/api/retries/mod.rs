//! Retries: every backoff and classification case, late results, why an item stopped, caps on what a step sends, retrying a finished flow or an item now, and retries and timeouts in paused time.

mod backoff;
mod caps;
mod classes;
mod classification;
mod late_results;
mod parking;
mod paused_clock;
mod rerun;
mod retry_now;
mod support;
mod why_stopped;
