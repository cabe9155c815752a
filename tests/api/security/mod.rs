//! Safe to expose: tokens, webhook signatures, browsers, hosts, outbound policy, bad input, bounds, errors, connections, scripts, readers.

mod bad_input;
mod bounds;
mod browsers;
mod connections;
mod errors;
mod hosts;
mod outbound;
mod readers;
mod scripts;
mod support;
mod tls;
mod tokens;
mod webhook_signatures;
