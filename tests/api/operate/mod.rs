//! Operating it: the CLI, configuration, metrics, traces, retention, the OpenAPI document, counting active flows.

mod bookkeeping;
mod cli;
mod config;
mod dashboard;
mod logs;
mod metrics;
mod migrations;
mod openapi;
mod retention;
mod traces;
mod upgrade;
