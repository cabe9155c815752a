//! The steps the failover driver serves itself, what it records of each
//! call it answers and each webhook it posts, and their registration.
//!
//! `fo-once`, the goal of the bulk flows, refuses its first call of each
//! flow for good (`400`): the flow fails, and only a bulk retry job
//! (`bulk.rs`) makes it complete. A retry starts the failed work item over
//! under the same receipt token, so it is the flow, not the token, that
//! `fo-once` keys on.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::{kit, lock, REQUEST_TIMEOUT};

/// A webhook delivery that gave up.
const WEBHOOK_GIVE_UP: Duration = Duration::from_secs(60);

/// What the step server saw and answered, and how the webhooks went.
#[derive(Default)]
pub struct Records {
    /// Calls per (step, token): the attempts seen, in order of arrival.
    pub calls: Mutex<HashMap<(String, String), Called>>,
    /// (token, attempt) of every call answered with a result (sync `200`).
    pub answered: Mutex<HashSet<(String, u32)>>,
    /// Each webhook delivery, by (token, attempt).
    pub webhooks: Mutex<HashMap<(String, u32), Delivery>>,
    pub heartbeats_ok: AtomicU64,
    pub heartbeats_other: AtomicU64,
    /// Flows whose first call of `fo-once` was refused with `400`.
    pub once_refused: Mutex<HashSet<String>>,
}

/// The calls of one work item: its flow and the attempt of each call.
#[derive(Default)]
pub struct Called {
    pub flow: String,
    pub attempts: Vec<u32>,
}

/// A result posted to a webhook: its flow, the final answer (0: none) and
/// how many tries it took.
pub struct Delivery {
    pub flow: String,
    pub status: u16,
    pub tries: u32,
}

#[derive(Clone)]
struct StepState {
    records: Arc<Records>,
    client: reqwest::Client,
}

/// The step server's routes, recording into `records`.
pub fn app(records: Arc<Records>, client: reqwest::Client) -> Router {
    Router::new()
        .route("/sync", post(sync_step))
        .route("/async", post(async_step))
        .route("/each", post(each_step))
        .route("/once", post(once_step))
        .with_state(StepState { records, client })
}

fn attempt_of(headers: &HeaderMap) -> u32 {
    kit::header(headers, "tartan-attempt").parse().unwrap_or(0)
}

/// Note a call; its place among the calls of its token, 1 for the first.
fn note_call(records: &Records, step: &str, headers: &HeaderMap) -> (String, u32, usize) {
    let token = kit::receipt_token(headers);
    let attempt = attempt_of(headers);
    let mut calls = lock(&records.calls);
    let seen = calls.entry((step.to_string(), token.clone())).or_default();
    seen.flow = kit::header(headers, "argyll-flow-id").to_string();
    seen.attempts.push(attempt);
    (token, attempt, seen.attempts.len())
}

async fn sync_step(State(s): State<StepState>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let (token, attempt, nth) = note_call(&s.records, "fo-sync", &headers);
    if nth == 1 {
        return kit::busy("warming up", 1);
    }
    lock(&s.records.answered).insert((token, attempt));
    let n = body["n"].as_u64().unwrap_or(0);
    Json(json!({"a": n * 2})).into_response()
}

async fn each_step(State(s): State<StepState>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let (token, attempt, _) = note_call(&s.records, "fo-each", &headers);
    lock(&s.records.answered).insert((token, attempt));
    let item = body["items"].as_u64().unwrap_or(0);
    Json(json!({"c": item * 10})).into_response()
}

/// `400` to the first call of each flow, a result to every later one.
async fn once_step(State(s): State<StepState>, headers: HeaderMap) -> Response {
    let (token, attempt, _) = note_call(&s.records, "fo-once", &headers);
    let flow = kit::header(&headers, "argyll-flow-id").to_string();
    if lock(&s.records.once_refused).insert(flow) {
        return kit::problem(
            StatusCode::BAD_REQUEST,
            "the first call of each flow fails for good: a bulk retry runs it again",
        );
    }
    lock(&s.records.answered).insert((token, attempt));
    Json(json!({"d": 1})).into_response()
}

async fn async_step(State(s): State<StepState>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let (token, attempt, _) = note_call(&s.records, "fo-async", &headers);
    let webhook = kit::header(&headers, "argyll-webhook-url").to_string();
    if !webhook.starts_with("http") {
        return kit::problem(
            StatusCode::BAD_REQUEST,
            "no Argyll-Webhook-URL: is the step async?",
        );
    }
    let flow = kit::header(&headers, "argyll-flow-id").to_string();
    let a = body["a"].as_u64().unwrap_or(0);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let beat = s
            .client
            .post(format!("{webhook}/heartbeat"))
            .header("content-type", "application/json")
            .body("{}")
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await;
        let counter = match beat {
            Ok(r) if r.status() == StatusCode::OK => &s.records.heartbeats_ok,
            _ => &s.records.heartbeats_other,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(150)).await;
        let (status, tries) = deliver(&s.client, &webhook, &json!({"b": a + 1})).await;
        lock(&s.records.webhooks).insert((token, attempt), Delivery { flow, status, tries });
    });
    (StatusCode::ACCEPTED, Json(json!({"accepted": true}))).into_response()
}

/// Post a result to its webhook until it is answered with anything but a
/// `503`, another `5xx` or no answer, or a minute passes (status 0: none).
async fn deliver(client: &reqwest::Client, url: &str, result: &Value) -> (u16, u32) {
    let started = Instant::now();
    let mut tries = 0;
    loop {
        tries += 1;
        let status = match client
            .post(url)
            .json(result)
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
        {
            Ok(r) => r.status().as_u16(),
            Err(_) => 0,
        };
        if (status != 0 && status < 500) || started.elapsed() > WEBHOOK_GIVE_UP {
            return (status, tries);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The step definitions, their endpoints under `base`.
pub fn steps(base: &str) -> Vec<Value> {
    let retry = json!({"max_retries": 30, "init_backoff": 200, "backoff_type": "fixed"});
    vec![
        json!({"id": "fo-sync", "name": "Failover sync", "type": "sync",
            "http": {"endpoint": format!("{base}/sync"), "timeout": "5s"},
            "attributes": {"n": {"role": "required", "type": "number"},
                           "a": {"role": "output", "type": "number"}},
            "work_config": retry}),
        json!({"id": "fo-async", "name": "Failover async", "type": "async",
            "http": {"endpoint": format!("{base}/async"), "timeout": "5s"},
            "timeouts": {"inactivity": "10s"},
            "attributes": {"a": {"role": "required", "type": "number"},
                           "b": {"role": "output", "type": "number"}},
            "work_config": retry}),
        json!({"id": "fo-each", "name": "Failover for_each", "type": "sync",
            "http": {"endpoint": format!("{base}/each"), "timeout": "5s"},
            "attributes": {"b": {"role": "required", "type": "number"},
                           "items": {"role": "required", "type": "array", "required": {"for_each": true}},
                           "c": {"role": "output", "type": "number"}},
            "work_config": {"max_retries": 30, "init_backoff": 200, "backoff_type": "fixed", "parallelism": 3}}),
        json!({"id": "fo-once", "name": "Failover once", "type": "sync",
            "http": {"endpoint": format!("{base}/once"), "timeout": "5s"},
            "attributes": {"c": {"role": "required", "type": "number"},
                           "d": {"role": "output", "type": "number"}},
            "work_config": retry}),
        json!({"id": "fo-probe", "name": "Failover probe", "type": "script",
            "script": {"language": "lua", "script": "return { q = p }"},
            "attributes": {"p": {"role": "required", "type": "number"},
                           "q": {"role": "output", "type": "number"}}}),
    ]
}

/// Register one step, trying again for up to 30 s while the engine does
/// not answer; a refusal (`4xx`) is an error at once.
pub async fn register(client: &reqwest::Client, engine: &str, step: &Value) -> Result<(), String> {
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let sent = client
            .post(format!("{engine}/engine/step"))
            .json(step)
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await;
        match sent {
            Ok(r) if r.status() == StatusCode::CREATED => return Ok(()),
            Ok(r) if r.status().is_client_error() => {
                return Err(format!(
                    "registering {}: {} {}",
                    step["id"],
                    r.status(),
                    r.text().await.unwrap_or_default()
                ))
            }
            other if Instant::now() > give_up => {
                return Err(format!("registering {}: {other:?}", step["id"]))
            }
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}
