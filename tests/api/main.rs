//! End-to-end tests: the real server on port 0 against a fresh database,
//! real step servers on loopback. Most tests run on SQLite and on Postgres.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod argyll_examples;
mod async_steps;
mod bulk;
mod cluster;
mod docs;
mod flows;
mod helpers;
mod lanes;
mod model;
mod operate;
mod resilience;
mod retries;
mod schedules;
mod sdk;
mod security;
mod steps;
mod streams;
mod timeouts;
mod wire;
