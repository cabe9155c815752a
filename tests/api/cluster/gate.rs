//! Health gates dispatch (docs/operating.md, "Health gates dispatch"),
//! through the binary: work for an unhealthy step is deferred, not called,
//! using no attempt; it is called as soon as the step is healthy again,
//! also when the engine that deferred it was killed meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use reqwest::Method;
use serde_json::{json, Value};
use tartan_testkit::{both_backends, Backend, TestDb};

use super::{checked_step, flipping};
use crate::helpers::{
    attempt_of, call, json_reply, of_type, register, spawn_binary_with, start_on_with, wait_for_terminal,
    Binary,
};

both_backends!(
    an_unhealthy_steps_work_waits_without_attempts_and_runs_once_it_is_healthy,
    an_engine_with_checks_off_gates_nothing,
    a_compensations_first_call_goes_out_and_its_retry_waits_for_health,
);

const QUICK: [(&str, &str); 1] = [("TARTAN_HEALTH_INTERVAL", "100ms")];

/// Poll `GET path` on the binary until `done` holds of its body (bounded).
async fn until(engine: &Binary, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..400 {
        let (status, body) = call(engine, Method::GET, path, None).await;
        if status == 200 && done(&body) {
            return body;
        }
        last = body;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{path} never got there: {last}");
}

async fn start(engine: &Binary, id: &str) {
    let body = json!({"id": id, "goals": ["checked"], "init": {"seed": [1]}});
    let (status, reply) = call(engine, Method::POST, "/engine/flow", Some(body)).await;
    assert_eq!(status, 201, "{reply}");
}

/// The flow's one item of `checked`, once its call is deferred.
async fn deferred_item(engine: &Binary, id: &str) -> Value {
    let flow = until(engine, &format!("/engine/flow/{id}"), |f| {
        f["executions"]["checked"]["work_items"]
            .as_object()
            .is_some_and(|items| items.values().any(|w| w["deferred_since"].is_string()))
    })
    .await;
    let items = flow["executions"]["checked"]["work_items"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert_eq!(items.len(), 1, "{flow}");
    items.into_values().next().unwrap_or_default()
}

async fn events(engine: &Binary, id: &str) -> Vec<Value> {
    let (_, body) = call(engine, Method::GET, &format!("/engine/flow/{id}/events"), None).await;
    body["events"].as_array().cloned().unwrap_or_default()
}

async fn an_unhealthy_steps_work_waits_without_attempts_and_runs_once_it_is_healthy(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let up = Arc::new(AtomicBool::new(false));
    let svc = flipping(up.clone()).await;
    let calls = || {
        svc.requests()
            .into_iter()
            .filter(|r| r.path == "/run")
            .collect::<Vec<_>>()
    };
    let mut engine = spawn_binary_with(&db, "gate-node", &QUICK).await;
    register(&engine, vec![checked_step("checked", &svc)]).await;
    until(&engine, "/engine/health/checked", |h| h["status"] == "unhealthy").await;

    // Unhealthy: the item waits, pending, with no attempt, and says why once.
    start(&engine, "while-down").await;
    let item = deferred_item(&engine, "while-down").await;
    assert_eq!(item["status"], "pending", "{item}");
    assert_eq!(item["attempts"], json!([]), "{item}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(calls().is_empty(), "an unhealthy step was called");
    let log = events(&engine, "while-down").await;
    let deferred = of_type(&log, "dispatch_deferred");
    assert_eq!(deferred.len(), 1, "one event per wait, not per round: {log:?}");
    assert_eq!(deferred[0]["data"]["step_id"], "checked");
    assert_eq!(deferred[0]["data"]["error"], "HTTP 503");
    assert_eq!(of_type(&log, "work_started").len(), 0);
    let metrics = reqwest::get(format!("http://{}/metrics", engine.addr))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .unwrap_or_default();
    assert!(
        metrics.lines().any(|l| l == "tartan_dispatch_deferred_total 1"),
        "{metrics}"
    );

    // Healthy again: called at once, as attempt 1.
    up.store(true, Ordering::SeqCst);
    let flow = wait_for_terminal(&engine, "while-down").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let made = calls();
    assert_eq!(made.len(), 1);
    assert_eq!(attempt_of(&made[0]), 1, "a deferral uses no attempt");

    // Down again; a flow deferred by an engine that is then killed is
    // called by the engine started after the step is healthy.
    up.store(false, Ordering::SeqCst);
    until(&engine, "/engine/health/checked", |h| h["status"] == "unhealthy").await;
    start(&engine, "across-restart").await;
    deferred_item(&engine, "across-restart").await;
    engine.child.kill().await.expect("SIGKILL");
    up.store(true, Ordering::SeqCst);
    let engine = spawn_binary_with(&db, "gate-node", &QUICK).await;
    let flow = wait_for_terminal(&engine, "across-restart").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let made = calls();
    assert_eq!(made.len(), 2, "each flow's item called once");
    assert_eq!(attempt_of(&made[1]), 1);
    let item = flow["executions"]["checked"]["work_items"]
        .as_object()
        .and_then(|items| items.values().next().cloned())
        .unwrap_or_default();
    assert_eq!(item["attempts"].as_array().map(Vec::len), Some(1), "{item}");
    assert!(item.get("deferred_since").is_none(), "{item}");
}

/// Compensation as Argyll gates it: the first call goes out although the
/// step is unhealthy, a retry waits (`compensating`, `deferred_since`), also
/// after its flow failed and across a SIGKILL, and is called once the step
/// is healthy, as the next attempt.
async fn a_compensations_first_call_goes_out_and_its_retry_waits_for_health(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    // Item 2 takes the service down (its health check too) and is declined
    // once the engine's checks have seen it down, so its gate is closed
    // when the compensation of item 1 starts; refunds answer 503 while
    // down.
    let up = Arc::new(AtomicBool::new(true));
    let checks = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (flag, seen) = (up.clone(), checks.clone());
    let svc = crate::helpers::StepServer::start_async(move |r, _| {
        let (flag, seen) = (flag.clone(), seen.clone());
        Box::pin(async move {
            let healthy = flag.load(Ordering::SeqCst);
            match r.path.as_str() {
                "/health" => {
                    seen.fetch_add(1, Ordering::SeqCst);
                    let status = if healthy { 200 } else { 503 };
                    json_reply(status, json!({"status": healthy}))
                }
                "/charge" if r.body["items"] == 2 => {
                    flag.store(false, Ordering::SeqCst);
                    // Two checks begun after the flip: the first has ended.
                    let at = seen.load(Ordering::SeqCst);
                    for _ in 0..500 {
                        if seen.load(Ordering::SeqCst) >= at + 2 {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    json_reply(400, json!({"error": "declined"}))
                }
                "/charge" => json_reply(200, json!({"charge": "ch-1"})),
                _ if healthy => json_reply(200, json!({})),
                _ => json_reply(503, json!({"error": "refunds are down"})),
            }
            .into_response()
        })
    })
    .await;
    let step = json!({"id": "charge", "name": "charge", "type": "sync",
        "http": {"endpoint": svc.url("/charge"), "compensate": svc.url("/refund"),
                 "health_check": svc.url("/health")},
        "attributes": {"items": {"role": "required", "type": "array", "required": {"for_each": true}},
                       "charge": {"role": "output"}},
        "work_config": {"parallelism": 1, "max_retries": 3, "init_backoff": 200, "backoff_type": "fixed"}});
    let mut engine = spawn_binary_with(&db, "gate-node", &QUICK).await;
    register(&engine, vec![step]).await;
    until(&engine, "/engine/health/charge", |h| h["status"] == "healthy").await;
    let body = json!({"id": "undo", "goals": ["charge"], "init": {"items": [[1, 2]]}});
    let (status, reply) = call(&engine, Method::POST, "/engine/flow", Some(body)).await;
    assert_eq!(status, 201, "{reply}");

    let flow = until(&engine, "/engine/flow/undo", |f| {
        f["status"] == "failed"
            && f["executions"]["charge"]["work_items"]
                .as_object()
                .is_some_and(|items| items.values().any(|w| w["deferred_since"].is_string()))
    })
    .await;
    let item = flow["executions"]["charge"]["work_items"]
        .as_object()
        .and_then(|items| items.values().find(|w| w["deferred_since"].is_string()).cloned())
        .unwrap_or_default();
    assert_eq!(item["status"], "compensating", "{item}");
    assert_eq!(item["compensation"].as_array().map(Vec::len), Some(1), "{item}");
    let refunds = || {
        svc.requests()
            .into_iter()
            .filter(|r| r.path == "/refund")
            .collect::<Vec<_>>()
    };
    assert_eq!(refunds().len(), 1, "the first call went out at once");
    let log = events(&engine, "undo").await;
    assert_eq!(of_type(&log, "dispatch_deferred").len(), 1, "{log:?}");

    // Killed while the retry waits; the step comes back; the engine after
    // the restart calls the refund again, once, as attempt 2.
    engine.child.kill().await.expect("SIGKILL");
    up.store(true, Ordering::SeqCst);
    let engine = spawn_binary_with(&db, "gate-node", &QUICK).await;
    let flow = until(&engine, "/engine/flow/undo", |f| {
        f["executions"]["charge"]["work_items"]
            .as_object()
            .is_some_and(|items| items.values().any(|w| w["status"] == "compensated"))
    })
    .await;
    let made = refunds();
    assert_eq!(made.len(), 2, "{flow}");
    assert_eq!(attempt_of(&made[1]), 2, "the wait used no attempt");
    assert_eq!(flow["status"], "failed", "{flow}");
}

/// With `TARTAN_HEALTH_INTERVAL=0` an engine gates nothing, even when the
/// database says a step is unhealthy (a check of before, of an engine
/// gone): no check of its own would open the gate again.
async fn an_engine_with_checks_off_gates_nothing(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let up = Arc::new(AtomicBool::new(false));
    let svc = flipping(up.clone()).await;
    let mut engine = spawn_binary_with(&db, "gate-node", &QUICK).await;
    let mut other = checked_step("other", &svc);
    other["attributes"] = json!({"x": {"role": "output"}});
    register(&engine, vec![checked_step("checked", &svc), other.clone()]).await;
    until(&engine, "/engine/health/checked", |h| h["status"] == "unhealthy").await;
    until(&engine, "/engine/health/other", |h| h["status"] == "unhealthy").await;
    engine.child.kill().await.expect("SIGKILL");
    let engine = spawn_binary_with(&db, "gate-node", &[("TARTAN_HEALTH_INTERVAL", "0")]).await;
    // A catalog change that forgets a recorded health makes the engine
    // read the gate: with checks off it must stay open.
    other["name"] = json!("renamed");
    let (status, body) = call(&engine, Method::PUT, "/engine/step/other", Some(other)).await;
    assert_eq!(status, 200, "{body}");
    start(&engine, "checks-off").await;
    // Called (and failing: the service is down), never deferred.
    let flow = until(&engine, "/engine/flow/checks-off", |f| {
        f["executions"]["checked"]["work_items"]
            .as_object()
            .is_some_and(|w| {
                w.values()
                    .any(|w| w["attempts"].as_array().is_some_and(|a| !a.is_empty()))
            })
    })
    .await;
    // The attempt is recorded as the call goes out: it may reach the
    // service a moment later.
    let called = crate::helpers::wait_until(Duration::from_secs(10), || {
        svc.requests().iter().any(|r| r.path == "/run")
    })
    .await;
    assert!(called, "{flow}");
    let log = events(&engine, "checks-off").await;
    assert!(of_type(&log, "dispatch_deferred").is_empty(), "{log:?}");
}

/// Two engines on one Postgres: the step is checked by one, its work
/// deferred by the other, and started once the checker finds it healthy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_deferred_by_one_engine_runs_once_the_other_finds_its_step_healthy() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let nodes = ["node-a".to_string(), "node-b".to_string()];
    // A step id that node-b checks: node-a only defers its work.
    let step = (0..100)
        .map(|i| format!("checked-{i}"))
        .find(|id| tartan_core::health::checker_of(id, &nodes) == Some("node-b"))
        .expect("some step falls to node-b");
    let a = start_on_with(TestDb::at_url(db.url.clone()), "node-a", super::quick_checks).await;
    let b = start_on_with(TestDb::at_url(db.url.clone()), "node-b", super::quick_checks).await;
    let up = Arc::new(AtomicBool::new(false));
    let svc = flipping(up.clone()).await;
    assert_eq!(
        a.register(&checked_step(&step, &svc)).await.status,
        StatusCode::CREATED
    );
    let health = format!("/engine/health/{step}");
    super::until(&b, &health, |h| {
        h["status"] == "unhealthy" && h["checked_by"] == "node-b"
    })
    .await;

    // Started on node-a: deferred there, at once or at its first retry
    // (had node-a not read the gate yet, its first call fails with 503).
    let r = a
        .start_flow(&json!({"id": "on-a", "goals": [step], "init": {"seed": [1]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    super::until(&a, "/engine/flow/on-a", |f| {
        f["executions"][&step]["work_items"]
            .as_object()
            .is_some_and(|w| w.values().any(|w| w["deferred_since"].is_string()))
    })
    .await;
    let before = svc.requests().into_iter().filter(|r| r.path == "/run").count();
    up.store(true, Ordering::SeqCst);
    let flow = a.wait_for_flow("on-a").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let calls: Vec<_> = svc.requests().into_iter().filter(|r| r.path == "/run").collect();
    assert_eq!(calls.len(), before + 1, "one call once healthy");
    // No attempt went to the wait: the call is the attempt after the last.
    assert_eq!(attempt_of(&calls[before]), before as u64 + 1);
}
