//! Schedules (docs/schedules.md): fires on time through the binary on both
//! stores, pause, resume, trigger and delete, overlaps, every fire made
//! once by three engines on one Postgres with one killed, a time zone's
//! daylight-saving change on a paused clock, and each refusal.

mod clock;
mod engines;
mod firing;
mod refusals;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::helpers::{call, json_reply, Binary, StepServer};

/// Calls of the step by flow id (its `Argyll-Flow-ID` header).
type Calls = Arc<Mutex<HashMap<String, usize>>>;

/// A step server answering `{"done": true}` after `delay_ms`, counting the
/// calls of each flow.
async fn counting_step(delay_ms: u64) -> (StepServer, Calls) {
    let calls: Calls = Arc::default();
    let seen = Arc::clone(&calls);
    let svc = StepServer::start_async(move |r, _| {
        let flow = r
            .headers
            .get("argyll-flow-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        *seen.lock().unwrap().entry(flow).or_default() += 1;
        Box::pin(async move {
            tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
            json_reply(200, json!({"done": true}))
        })
    })
    .await;
    (svc, calls)
}

/// The step `tick` on `svc`.
fn tick(svc: &StepServer) -> Value {
    json!({"id": "tick", "name": "Tick", "type": "sync", "http": {"endpoint": svc.url("/tick")},
        "attributes": {"done": {"role": "output"}}})
}

fn time(v: &Value) -> DateTime<Utc> {
    match v.as_str().map(DateTime::parse_from_rfc3339) {
        Some(Ok(t)) => t.with_timezone(&Utc),
        _ => panic!("not a time: {v}"),
    }
}

/// Every flow the schedule started, as the flow query finds them.
async fn flows_of(engine: &Binary, schedule: &str) -> Vec<Value> {
    let mut flows = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut q = json!({"labels": {"schedule": schedule}, "limit": 500, "total": false});
        if let Some(c) = &cursor {
            q["cursor"] = json!(c);
        }
        let (status, page) = call(engine, reqwest::Method::POST, "/engine/flow/query", Some(q)).await;
        assert_eq!(status, 200, "{page}");
        flows.extend(page["flows"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(c) if page["has_more"] == true => cursor = Some(c.to_string()),
            _ => return flows,
        }
    }
}
