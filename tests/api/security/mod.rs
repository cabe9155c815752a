//! Safe to expose: tokens, hosts, outbound policy, bad input, bounds, errors, connections, scripts.

mod auth;
mod bad_input;
mod bounds;
mod connections;
mod errors;
mod hosts;
mod outbound;
mod scripts;
mod tls;
