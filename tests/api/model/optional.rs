//! Optional inputs, Argyll's way: a default; a deadline in milliseconds,
//! counted from when the required inputs are ready; without one (or 0),
//! no wait for providers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use tartan_testkit::{both_backends, TestDb};

use crate::helpers::{
    call, events, json_reply, of_type, spawn_app, spawn_binary, wait_for_terminal, Backend, StepServer,
};

both_backends!(
    an_optional_input_without_a_deadline_does_not_wait,
    an_optional_input_waits_until_its_deadline_then_takes_the_default,
    a_value_that_arrives_before_the_deadline_is_used,
    an_optional_deadline_survives_a_kill,
);

/// A server whose `/slow` step answers once the gate is open (every call
/// waiting, and every later one); `/fast` at once.
async fn gated(gate: Arc<AtomicBool>) -> StepServer {
    StepServer::start_async(move |r, _| {
        let gate = gate.clone();
        Box::pin(async move {
            while r.path == "/slow" && !gate.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            json_reply(200, json!({"opt": "real", "done": r.body.clone()}))
        })
    })
    .await
}

fn steps(svc: &StepServer, deadline: Option<u64>) -> [Value; 2] {
    let mut optional = json!({"default": "\"fallback\""});
    if let Some(ms) = deadline {
        optional["deadline"] = json!(ms);
    }
    [
        json!({"id": "provider", "name": "provider", "type": "sync", "http": {"endpoint": svc.url("/slow")},
               "attributes": {"opt": {"role": "output"}}}),
        json!({"id": "consumer", "name": "consumer", "type": "sync", "http": {"endpoint": svc.url("/fast")},
               "attributes": {"seed": {"role": "required"}, "opt": {"role": "optional", "optional": optional},
                              "done": {"role": "output"}}}),
    ]
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a time: {v}"))
}

/// Argyll's TestTimeoutZeroFallsBackImmediately and TestOptionalDefaults.
async fn an_optional_input_without_a_deadline_does_not_wait(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let gate = Arc::new(AtomicBool::new(false));
    let svc = gated(gate.clone()).await;
    for s in steps(&svc, None) {
        app.register(&s).await;
    }
    app.start_flow(&json!({"id": "nowait", "goals": ["consumer", "provider"], "init": {"seed": ["s"]}}))
        .await;
    // The consumer runs while the provider is still held.
    for _ in 0..200 {
        if svc.requests().iter().any(|r| r.path == "/fast") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let fast: Vec<_> = svc.requests().into_iter().filter(|r| r.path == "/fast").collect();
    assert_eq!(fast.len(), 1, "the consumer did not wait");
    assert_eq!(fast[0].body, json!({"seed": "s", "opt": "fallback"}));
    gate.store(true, Ordering::SeqCst);
    let flow = app.wait_for_flow("nowait").await;
    assert_eq!(flow["status"], "completed", "{flow}");
}

/// Argyll's TestDefaultTimeoutBeforeProvider: the deadline passes with the
/// provider still running; the consumer starts with the default, no sooner.
async fn an_optional_input_waits_until_its_deadline_then_takes_the_default(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let gate = Arc::new(AtomicBool::new(false));
    let svc = gated(gate.clone()).await;
    for s in steps(&svc, Some(300)) {
        app.register(&s).await;
    }
    app.start_flow(&json!({"id": "deadline", "goals": ["consumer", "provider"], "init": {"seed": ["s"]}}))
        .await;
    for _ in 0..400 {
        if svc.requests().iter().any(|r| r.path == "/fast") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let fast: Vec<_> = svc.requests().into_iter().filter(|r| r.path == "/fast").collect();
    assert_eq!(fast.len(), 1, "the consumer ran at its deadline");
    assert_eq!(fast[0].body["opt"], "fallback");
    gate.store(true, Ordering::SeqCst);
    let flow = app.wait_for_flow("deadline").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let waited = time(&flow["executions"]["consumer"]["started_at"]) - time(&flow["created_at"]);
    assert!(
        waited >= chrono::Duration::milliseconds(300),
        "started after {waited}"
    );
    let all = events(&app, "deadline").await;
    let waiting = of_type(&all, "step_waiting");
    assert_eq!(waiting.len(), 1, "{all:?}");
    assert_eq!(waiting[0]["data"]["step_id"], "consumer");
    assert_eq!(
        time(&waiting[0]["data"]["until"]),
        time(&flow["created_at"]) + chrono::Duration::milliseconds(300)
    );
}

/// The provider answers before the deadline: its value is used at once.
async fn a_value_that_arrives_before_the_deadline_is_used(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let gate = Arc::new(AtomicBool::new(false));
    let svc = gated(gate.clone()).await;
    for s in steps(&svc, Some(60_000)) {
        app.register(&s).await;
    }
    app.start_flow(&json!({"id": "early", "goals": ["consumer"], "init": {"seed": ["s"]}}))
        .await;
    for _ in 0..200 {
        if svc.requests().iter().any(|r| r.path == "/slow") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    gate.store(true, Ordering::SeqCst);
    let flow = app.wait_for_flow("early").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let fast: Vec<_> = svc.requests().into_iter().filter(|r| r.path == "/fast").collect();
    assert_eq!(fast[0].body["opt"], "real");
}

/// The wait is durable: an engine killed while a step waits for its
/// deadline takes it up after a restart and starts the step when it passes.
async fn an_optional_deadline_survives_a_kill(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let gate = Arc::new(AtomicBool::new(false));
    let svc = gated(gate.clone()).await;
    let engine = spawn_binary(&db, "deadline-kill").await;
    for s in steps(&svc, Some(1500)) {
        assert_eq!(
            call(&engine, reqwest::Method::POST, "/engine/step", Some(s))
                .await
                .0,
            201
        );
    }
    let start = json!({"id": "k", "goals": ["consumer"], "init": {"seed": ["s"]}});
    assert_eq!(
        call(&engine, reqwest::Method::POST, "/engine/flow", Some(start))
            .await
            .0,
        201
    );
    // The provider is held; the consumer waits for its deadline.
    for _ in 0..200 {
        if svc.requests().iter().any(|r| r.path == "/slow") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut engine = engine;
    engine.child.kill().await.expect("SIGKILL");
    let engine = spawn_binary(&db, "deadline-kill").await;
    // The provider's call is made again after the restart, and held past
    // the deadline.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    gate.store(true, Ordering::SeqCst);
    let flow = wait_for_terminal(&engine, "k").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["executions"]["consumer"]["status"], "completed");
    let waited = time(&flow["executions"]["consumer"]["started_at"]) - time(&flow["created_at"]);
    assert!(
        waited >= chrono::Duration::milliseconds(1500),
        "started after {waited}"
    );
}
