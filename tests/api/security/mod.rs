//! Safe to expose: tokens, hosts, outbound policy, bad input, bounds, errors, connections, scripts, readers.

mod auth;
mod bad_input;
mod bounds;
mod connections;
mod errors;
mod hosts;
mod outbound;
mod readers;
mod scripts;
mod tls;
