//! Operating it: the CLI, configuration, metrics, traces, retention, the OpenAPI document, counting active flows.

mod bookkeeping;
mod cli_commands;
mod cli_errors;
mod cli_live_view;
mod cli_support;
mod config;
mod dashboard;
mod logs;
mod metrics;
mod migrations;
mod openapi;
mod retention;
mod traces;
mod upgrade;
