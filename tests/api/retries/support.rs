//! What the end-to-end retry tests share (docs/retries.md and docs/api.md):
//! the API over plain HTTP and a step endpoint's reply (`backoff.rs`,
//! `classification.rs`, `late_results.rs`), and the checks and report of
//! the conformance cases (`backoff.rs`, `classification.rs`).

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::response::Response;
use serde_json::Value;

use crate::helpers::{StepServer, TestApp};

/// How long any one flow may take to finish. The slowest cases wait 9 s (B18)
/// and 7 s (K15's `Retry-After: 7`); the bound is generous on purpose.
pub(super) const FLOW_BOUND: Duration = Duration::from_secs(40);

// ---------------------------------------------------------------------------
// The API, over plain HTTP, for the harness's app and for the app with
// scaled global defaults of backoff.rs.

#[derive(Clone)]
pub(super) struct Api {
    pub(super) base: String,
    pub(super) client: reqwest::Client,
}

impl Api {
    pub(super) fn of(app: &TestApp) -> Api {
        Api {
            base: app.url(""),
            client: app.client.clone(),
        }
    }

    pub(super) async fn post_with(&self, path: &str, content_type: &str, body: &str) -> (u16, Value) {
        let url = if path.starts_with("http") {
            path.to_string()
        } else {
            format!("{}{path}", self.base)
        };
        let resp = self
            .client
            .post(url)
            .header("content-type", content_type)
            .body(body.to_string())
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.unwrap_or_default();
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    pub(super) async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.post_with(path, "application/json", &body.to_string()).await
    }

    pub(super) async fn get(&self, path: &str) -> Value {
        let resp = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        assert_eq!(resp.status().as_u16(), 200, "GET {path}");
        resp.json().await.unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    pub(super) async fn flow(&self, id: &str) -> Value {
        self.get(&format!("/engine/flow/{id}")).await
    }

    pub(super) async fn events(&self, id: &str) -> Vec<Value> {
        let body = self.get(&format!("/engine/flow/{id}/events")).await;
        body["events"].as_array().cloned().unwrap_or_default()
    }

    /// Poll the flow (bounded) until `done` holds; `None` when it never did.
    pub(super) async fn wait_until(&self, id: &str, done: impl Fn(&Value) -> bool) -> Option<Value> {
        let until = Instant::now() + FLOW_BOUND;
        loop {
            let flow = self.flow(id).await;
            if done(&flow) {
                return Some(flow);
            }
            if Instant::now() > until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Poll until the flow is terminal and deactivated.
    pub(super) async fn wait_for_flow(&self, id: &str) -> Option<Value> {
        self.wait_until(id, |f| f["status"] != "active" && !f["deactivated_at"].is_null())
            .await
    }
}

pub(super) fn events_of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// An HTTP response as a step endpoint gives it.
pub(super) fn reply(
    status: u16,
    content_type: Option<&str>,
    body: &str,
    headers: &[(String, String)],
) -> Response {
    let mut builder = axum::http::Response::builder().status(status);
    if let Some(ct) = content_type {
        builder = builder.header("content-type", ct);
    }
    for (name, value) in headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    builder.body(Body::from(body.to_string())).unwrap()
}

/// Every call a step server received carries the same receipt token and
/// `Tartan-Attempt: 1..n`.
pub(super) fn check_calls(svc: &StepServer, problems: &mut Vec<String>) -> Option<String> {
    let calls = svc.requests();
    let tokens: Vec<String> = calls
        .iter()
        .map(|r| {
            r.headers
                .get("argyll-receipt-token")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        })
        .collect();
    if tokens.iter().any(|t| t.is_empty() || *t != tokens[0]) {
        problems.push(format!("receipt tokens differ between attempts: {tokens:?}"));
    }
    let numbers: Vec<String> = calls
        .iter()
        .map(|r| {
            r.headers
                .get("tartan-attempt")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        })
        .collect();
    let wanted: Vec<String> = (1..=calls.len()).map(|n| n.to_string()).collect();
    if numbers != wanted {
        problems.push(format!("Tartan-Attempt headers {numbers:?}, expected {wanted:?}"));
    }
    tokens.first().cloned()
}

/// The only work item of a step's execution, with its token.
pub(super) fn only_work(flow: &Value, step: &str, problems: &mut Vec<String>) -> Option<(String, Value)> {
    let items = flow["executions"][step]["work_items"].as_object()?;
    if items.len() != 1 {
        problems.push(format!("{} work items, expected 1", items.len()));
    }
    items.iter().next().map(|(k, v)| (k.clone(), v.clone()))
}

/// Report the outcome of all cases of a test: print every case, fail on the
/// unexpected failures and on known failures that pass now.
pub(super) fn conclude(results: Vec<(String, Result<String, String>)>, known: &[&str], started: Instant) {
    let mut unexpected = Vec::new();
    let mut fixed = Vec::new();
    for (id, result) in &results {
        match result {
            Ok(summary) => {
                eprintln!("{id} ok: {summary}");
                if known.contains(&id.as_str()) {
                    fixed.push(id.clone());
                }
            }
            Err(problems) if known.contains(&id.as_str()) => {
                eprintln!("{id} KNOWN FAILURE: {problems}");
            }
            Err(problems) => {
                eprintln!("{id} FAILED: {problems}");
                unexpected.push(format!("{id}: {problems}"));
            }
        }
    }
    eprintln!(
        "{} cases in {:.1} s",
        results.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(unexpected.is_empty(), "failing cases:\n{}", unexpected.join("\n"));
    assert!(
        fixed.is_empty(),
        "known failures that pass now, take them off the list: {fixed:?}"
    );
}
