//! What the tests of async steps, for_each work items and compensation
//! share (docs/api.md, "Async steps and webhooks"; docs/work-items.md):
//! step definitions, requests, and the checks of a problem answer and of a
//! terminal flow's deactivation.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use crate::helpers::{events, of_type, read_reply, sync_step, types, Received, Reply, StepServer, TestApp};

/// How long a bounded wait lasts.
pub(super) const WAIT: Duration = Duration::from_secs(10);

pub(super) fn at(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a time: {v}"))
}

pub(super) async fn register(app: &TestApp, step: &Value) {
    let r = app.register(step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{step}: {:?}", r.body);
}

pub(super) async fn start(app: &TestApp, body: Value) {
    let r = app.start_flow(&body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{body}: {:?}", r.body);
}

/// A problem+json answer with this status.
pub(super) fn assert_problem(reply: &Reply, status: u16) {
    assert_eq!(reply.status.as_u16(), status, "{reply:?}");
    assert!(
        reply.content_type.starts_with("application/problem+json"),
        "{reply:?}"
    );
    assert_eq!(reply.body["status"], status, "{reply:?}");
    assert_eq!(reply.body["error"], reply.body["detail"], "{reply:?}");
}

/// An RFC 9457 problem response, as a step service (or Argyll's SDK) sends it.
pub(super) fn problem(status: u16, detail: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({
        "type": "about:blank",
        "title": code.canonical_reason().unwrap_or(""),
        "status": status,
        "detail": detail,
    });
    (
        code,
        [("content-type", "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}

pub(super) fn header(r: &Received, name: &str) -> String {
    r.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// POST a raw body with a content type; the reply and its raw length.
pub(super) async fn post_raw(url: &str, content_type: &str, body: &str) -> (Reply, usize) {
    let resp = reqwest::Client::new()
        .post(url)
        .header("content-type", content_type)
        .body(body.to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    read_reply(resp).await
}

/// An async step definition.
pub(super) fn async_step(id: &str, endpoint: &str, inputs: &[&str], outputs: &[&str]) -> Value {
    let mut step = sync_step(id, endpoint, inputs, outputs);
    step["type"] = json!("async");
    step
}

/// A sync step whose `for_each` inputs are arrays, one work item per element
/// (per element of their Cartesian product), with one output.
pub(super) fn for_each_step(
    id: &str,
    endpoint: &str,
    for_each: &[&str],
    output: &str,
    parallelism: i64,
) -> Value {
    let mut attributes = Map::new();
    for name in for_each {
        attributes.insert(
            (*name).into(),
            json!({"role": "required", "type": "array", "required": {"for_each": true}}),
        );
    }
    attributes.insert(output.into(), json!({"role": "output"}));
    json!({
        "id": id,
        "name": id,
        "type": "sync",
        "http": {"endpoint": endpoint},
        "attributes": attributes,
        "work_config": {"parallelism": parallelism},
    })
}

/// The work items of a step, by token.
pub(super) fn work_items(flow: &Value, step: &str) -> BTreeMap<String, Value> {
    flow["executions"][step]["work_items"]
        .as_object()
        .unwrap_or_else(|| panic!("no work items for {step}: {flow}"))
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Wait (bounded) until the server has received `n` requests on paths
/// starting with `prefix`.
pub(super) async fn wait_for_requests(svc: &StepServer, prefix: &str, n: usize) -> Vec<Received> {
    let until = Instant::now() + WAIT;
    loop {
        let got: Vec<Received> = svc
            .requests()
            .into_iter()
            .filter(|r| r.path.starts_with(prefix))
            .collect();
        if got.len() >= n {
            return got;
        }
        assert!(
            Instant::now() < until,
            "only {} of {n} requests to {prefix}",
            got.len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A terminal flow is deactivated last: `flow_deactivated` is its last event,
/// carries the final status and the flow's `deactivated_at`; the status view
/// is `{"id","status"}`.
pub(super) async fn assert_deactivated_last(app: &TestApp, id: &str, status: &str) {
    let flow = app.flow(id).await;
    assert_eq!(flow["status"], status, "{flow}");
    let evs = events(app, id).await;
    let last = evs.last().unwrap_or_else(|| panic!("no events for {id}"));
    assert_eq!(last["type"], "flow_deactivated", "{:?}", types(&evs));
    assert_eq!(of_type(&evs, "flow_deactivated").len(), 1, "{:?}", types(&evs));
    assert_eq!(last["data"]["status"], status, "{last}");
    assert_eq!(at(&last["timestamp"]), at(&flow["deactivated_at"]), "{flow}");
    assert!(at(&flow["completed_at"]) <= at(&flow["deactivated_at"]), "{flow}");
    let view = app.get(&format!("/engine/flow/{id}/status")).await;
    assert_eq!(view.status, StatusCode::OK);
    assert_eq!(view.body, json!({"id": id, "status": status}));
}
