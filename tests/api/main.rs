//! End-to-end tests: the real server on port 0 against a fresh database,
//! real step servers on loopback. Most tests run on SQLite and on Postgres.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bad_input;
mod bookkeeping;
mod bulk;
mod caps;
mod chaos;
mod cli;
mod config;
mod durability;
mod edges;
mod errors;
mod fairness;
mod flows;
mod helpers;
mod limits;
mod metrics;
mod openapi;
mod outages;
mod outbound;
mod retention;
mod retries;
mod retry;
mod security;
mod slow_streams;
mod steps;
mod streams;
mod timeouts;
mod traces;
mod volume;
mod webhooks;
mod why_stopped;
mod work_items;
mod ws;
