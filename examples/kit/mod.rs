//! What the pattern examples' step services share (examples/README.md)
//! beside tartan-step, which answers their steps: serving on `STEPS_ADDR`
//! (127.0.0.1:8081 by default, where the examples' step files point) and a
//! bounded count per key. The problem and header helpers are for the
//! failover driver in bench/, a step service written without the SDK.

#![allow(dead_code)] // each example takes what it needs

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::json;

/// An RFC 9457 problem, which Tartan records as the attempt's error.
pub fn problem(status: StatusCode, detail: &str) -> Response {
    (
        status,
        [("content-type", "application/problem+json")],
        json!({"type": "about:blank", "title": status.canonical_reason(), "status": status.as_u16(), "detail": detail})
            .to_string(),
    )
        .into_response()
}

/// The same, asking to be called again after `seconds` (`Retry-After`).
pub fn busy(detail: &str, seconds: u64) -> Response {
    let mut response = problem(StatusCode::SERVICE_UNAVAILABLE, detail);
    if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
        response.headers_mut().insert("retry-after", value);
    }
    response
}

/// A request header as text, `-` when absent.
pub fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("-")
}

/// The work item's receipt token: the same on every attempt of one item.
pub fn receipt_token(headers: &HeaderMap) -> String {
    header(headers, "argyll-receipt-token").to_string()
}

/// Serve `app` on `STEPS_ADDR` until stopped.
pub async fn serve(name: &str, app: Router) -> std::io::Result<()> {
    serve_from("STEPS_ADDR", name, app).await
}

/// Serve `app` on the address the environment variable `var` names
/// (127.0.0.1:8081 without it) until stopped.
pub async fn serve_from(var: &str, name: &str, app: Router) -> std::io::Result<()> {
    let addr = std::env::var(var).unwrap_or_else(|_| "127.0.0.1:8081".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("{name} step service listening on {}", listener.local_addr()?);
    axum::serve(listener, app).await
}

/// How many times each key was seen, bounded: a long-running example
/// forgets what it counted once it holds this many keys.
#[derive(Clone, Default)]
pub struct Counts(std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, u32>>>);

const MAX_KEYS: usize = 10_000;

impl Counts {
    /// Count one more of `key`; its count, 1 for the first.
    pub fn bump(&self, key: &str) -> u32 {
        let mut counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if counts.len() >= MAX_KEYS && !counts.contains_key(key) {
            counts.clear();
        }
        let n = counts.entry(key.to_string()).or_default();
        *n += 1;
        *n
    }

    /// How many of `key` were counted.
    pub fn get(&self, key: &str) -> u32 {
        let counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
        counts.get(key).copied().unwrap_or(0)
    }
}
