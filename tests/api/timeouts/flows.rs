//! A flow's timeout and cancellation end to end (docs/timeouts.md, "A
//! flow's timeout"): a flow timeout aborts the calls, cancels the work and
//! fails (or, with `on_timeout: cancel`, cancels) the flow; `deadline_at`
//! works like a timeout and must lie in the future; the cancellation
//! endpoint aborts a running call and cancels its work; a flow deadline
//! that passed while the engine was down fires at restart. Through the
//! real server (or the real binary) and raw step endpoints on 127.0.0.1
//! (`support.rs`).
//!
//! Timeouts are a few hundred ms; assertions on recorded timestamps have a
//! lower bound (never early) and a generous upper one; every wait is bounded.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use chrono::{SecondsFormat, Utc};
use serde_json::{json, Value};

use super::support::{
    assert_problem, assert_timeout_problem, at, cancel, ms, only_work, register, start, Misbehaviour,
    RawStep, SLACK_MS, TIMEOUT_TYPE, WAIT,
};
use crate::helpers::{
    call, events, json_reply, of_type, spawn_app, spawn_binary, sync_step, types, Backend, StepServer,
    TestApp, TestDb,
};
use tartan_testkit::both_backends;

both_backends!(
    a_flow_timeout_aborts_the_calls_cancels_the_work_and_fails_the_flow,
    a_flow_timeout_with_on_timeout_cancel_cancels_the_flow,
    a_flow_deadline_at_works_like_a_timeout_and_must_lie_in_the_future,
    cancelling_a_running_flow_aborts_its_call_and_cancels_its_work,
    a_flow_deadline_that_passed_while_the_engine_was_down_fires_at_restart,
);

// ---------------------------------------------------------------------------
// Flow timeout.

/// Register a step that hangs and one that fails with 503 and waits 10 s
/// before its retry.
async fn hanging_and_waiting_steps(app: &TestApp) -> (RawStep, StepServer) {
    let raw = RawStep::start(Misbehaviour::HangBeforeHeaders).await;
    let flaky = StepServer::start(|_, _| json_reply(503, json!({"detail": "busy"}))).await;
    register(app, &sync_step("hang", &raw.url(), &[], &["a"])).await;
    let mut waiting = sync_step("flaky", &flaky.url("/flaky"), &[], &["b"]);
    waiting["work_config"] = json!({"max_retries": 3, "init_backoff": 10000, "backoff_type": "fixed"});
    register(app, &waiting).await;
    (raw, flaky)
}

/// The state a flow deadline leaves: every item cancelled, calls aborted,
/// the problem on the flow.
async fn assert_timed_out_flow(app: &TestApp, flow: &Value, raw: &RawStep, flaky: &StepServer) {
    let limit = ms(&flow["created_at"], &flow["deadline_at"]);
    assert_timeout_problem(&flow["problem"], "flow", limit, "/");
    assert!(!flow["deactivated_at"].is_null(), "{flow}");
    let done = at(&flow["completed_at"]);
    let deadline = at(&flow["deadline_at"]);
    assert!(done >= deadline, "timed out before its deadline: {flow}");
    assert!((done - deadline).num_milliseconds() < SLACK_MS, "{flow}");
    for step in ["hang", "flaky"] {
        assert_eq!(flow["executions"][step]["status"], "cancelled", "{flow}");
        let (_, work) = only_work(flow, step);
        assert_eq!(work["status"], "cancelled", "{work}");
    }
    let (_, hang) = only_work(flow, "hang");
    assert_eq!(
        hang["attempts"][0]["outcome"], "cancelled",
        "the call was aborted: {hang}"
    );
    let (_, waiting) = only_work(flow, "flaky");
    assert_eq!(waiting["attempts"].as_array().map(Vec::len), Some(1), "{waiting}");
    assert_eq!(waiting["attempts"][0]["outcome"], "retryable", "{waiting}");
    assert!(waiting["next_retry_at"].is_null(), "{waiting}");

    let evs = events(app, flow["id"].as_str().unwrap()).await;
    let kinds = types(&evs);
    assert_eq!(of_type(&evs, "flow_timed_out").len(), 1, "{kinds:?}");
    assert_eq!(of_type(&evs, "work_cancelled").len(), 2, "{kinds:?}");
    assert_eq!(of_type(&evs, "step_cancelled").len(), 2, "{kinds:?}");
    assert_eq!(of_type(&evs, "flow_deactivated").len(), 1, "{kinds:?}");
    assert_eq!(
        of_type(&evs, "flow_timed_out")[0]["data"]["problem"],
        flow["problem"],
        "{kinds:?}"
    );

    // The hanging call was aborted: the endpoint saw its connection close.
    raw.wait_all_closed().await;
    assert_eq!(raw.conns().len(), 1);
    // Held open until the flow's deadline, however late the call went out.
    let closed = raw.conns()[0].closed_at.unwrap();
    assert!(
        closed >= deadline,
        "closed at {closed}, before the deadline {deadline}"
    );
    // The retry that was waiting never happens.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(flaky.requests().len(), 1);
}

async fn a_flow_timeout_aborts_the_calls_cancels_the_work_and_fails_the_flow(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let (raw, flaky) = hanging_and_waiting_steps(&app).await;
    start(
        &app,
        json!({"id": "f", "goals": ["hang", "flaky"], "timeout": "400ms"}),
    )
    .await;
    let flow = app.wait_for_flow("f").await;

    assert_eq!(flow["status"], "failed", "{flow}");
    assert_timed_out_flow(&app, &flow, &raw, &flaky).await;
    let evs = events(&app, "f").await;
    assert_eq!(of_type(&evs, "flow_failed").len(), 1, "{:?}", types(&evs));
    assert!(of_type(&evs, "flow_cancelled").is_empty(), "{:?}", types(&evs));
    let kinds = types(&evs);
    let pos = |k: &str| kinds.iter().position(|x| x == k).unwrap();
    assert!(pos("flow_timed_out") < pos("flow_failed"), "{kinds:?}");
    assert_flow_timeout_of(&flow, 400);
}

/// The flow's deadline lies exactly `limit_ms` after its start, and its
/// error and problem name that duration.
fn assert_flow_timeout_of(flow: &Value, limit_ms: i64) {
    let error = format!("flow timeout of {limit_ms} ms exceeded");
    assert_eq!(
        (
            ms(&flow["created_at"], &flow["deadline_at"]),
            flow["error"].as_str(),
            flow["problem"]["detail"].as_str()
        ),
        (limit_ms, Some(error.as_str()), Some(error.as_str())),
        "deadline_at - created_at, error and problem detail: {flow}"
    );
}

async fn a_flow_timeout_with_on_timeout_cancel_cancels_the_flow(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let (raw, flaky) = hanging_and_waiting_steps(&app).await;
    let timeout = json!({"after": "400ms", "on_timeout": "cancel"});
    start(
        &app,
        json!({"id": "f", "goals": ["hang", "flaky"], "timeout": timeout}),
    )
    .await;
    let flow = app.wait_for_flow("f").await;

    assert_eq!(flow["status"], "cancelled", "{flow}");
    assert_timed_out_flow(&app, &flow, &raw, &flaky).await;
    let evs = events(&app, "f").await;
    assert_eq!(of_type(&evs, "flow_cancelled").len(), 1, "{:?}", types(&evs));
    assert!(of_type(&evs, "flow_failed").is_empty(), "{:?}", types(&evs));
    assert_eq!(
        (
            ms(&flow["created_at"], &flow["deadline_at"]),
            flow["problem"]["detail"].as_str()
        ),
        (400, Some("flow timeout of 400 ms exceeded")),
        "deadline_at - created_at and problem detail: {flow}"
    );
}

async fn a_flow_deadline_at_works_like_a_timeout_and_must_lie_in_the_future(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let (raw, flaky) = hanging_and_waiting_steps(&app).await;
    let deadline =
        (Utc::now() + chrono::Duration::milliseconds(400)).to_rfc3339_opts(SecondsFormat::Millis, true);
    start(
        &app,
        json!({"id": "f", "goals": ["hang", "flaky"], "deadline_at": deadline}),
    )
    .await;
    let flow = app.wait_for_flow("f").await;

    assert_eq!(flow["status"], "failed", "{flow}");
    assert_eq!(at(&flow["deadline_at"]), at(&json!(deadline)), "{flow}");
    assert_timed_out_flow(&app, &flow, &raw, &flaky).await;
    let evs = events(&app, "f").await;
    assert_eq!(of_type(&evs, "flow_failed").len(), 1, "{:?}", types(&evs));

    // A deadline that has passed is refused, and no flow is started.
    let past = (Utc::now() - chrono::Duration::seconds(1)).to_rfc3339_opts(SecondsFormat::Millis, true);
    let r = app
        .start_flow(&json!({"id": "late", "goals": ["hang"], "deadline_at": past}))
        .await;
    assert_problem(&r, 400);
    assert!(
        r.body["detail"].as_str().unwrap_or("").contains("deadline_at"),
        "names the field: {:?}",
        r.body
    );
    assert_eq!(app.get("/engine/flow/late").await.status, StatusCode::NOT_FOUND);
    assert_eq!(raw.conns().len(), 1, "nothing was called for the refused flow");
}

// ---------------------------------------------------------------------------
// Cancellation.

async fn cancelling_a_running_flow_aborts_its_call_and_cancels_its_work(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let raw = RawStep::start(Misbehaviour::HangBeforeHeaders).await;
    register(&app, &sync_step("hang", &raw.url(), &[], &["a"])).await;
    start(&app, json!({"id": "f", "goals": ["hang"]})).await;
    raw.wait_for_calls(1).await;

    let r = cancel(&app, "f").await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    assert_eq!(r.body["flow_id"], "f", "{:?}", r.body);
    let flow = app.wait_for_flow("f").await;
    assert_eq!(flow["status"], "cancelled", "{flow}");
    assert!(!flow["deactivated_at"].is_null(), "{flow}");
    assert!(!flow["completed_at"].is_null(), "{flow}");
    assert_eq!(flow["executions"]["hang"]["status"], "cancelled", "{flow}");
    let (token, work) = only_work(&flow, "hang");
    assert_eq!(work["status"], "cancelled", "{work}");
    assert_eq!(work["attempts"][0]["outcome"], "cancelled", "{work}");
    let evs = events(&app, "f").await;
    let kinds = types(&evs);
    for kind in [
        "work_cancelled",
        "step_cancelled",
        "flow_cancelled",
        "flow_deactivated",
    ] {
        assert_eq!(of_type(&evs, kind).len(), 1, "{kind} in {kinds:?}");
    }
    assert_eq!(
        of_type(&evs, "work_cancelled")[0]["data"]["token"],
        token.as_str()
    );
    assert!(of_type(&evs, "flow_failed").is_empty(), "{kinds:?}");

    // The call in flight was aborted: its connection was closed.
    raw.wait_all_closed().await;
    assert_eq!(raw.conns().len(), 1);

    // Cancelling again is a conflict; an unknown flow is not found.
    assert_problem(&cancel(&app, "f").await, 409);
    assert_problem(&cancel(&app, "no-such-flow").await, 404);
    assert_eq!(app.flow("f").await, flow, "nothing changed");
}

// ---------------------------------------------------------------------------
// A flow deadline across a restart of the real binary.

async fn a_flow_deadline_that_passed_while_the_engine_was_down_fires_at_restart(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let raw = RawStep::start(Misbehaviour::HangBeforeHeaders).await;
    let engine = spawn_binary(&db, "timeout-test").await;
    let step = sync_step("hang", &raw.url(), &[], &["a"]);
    let (status, body) = call(&engine, reqwest::Method::POST, "/engine/step", Some(step)).await;
    assert_eq!(status, 201, "{body}");
    let started = Instant::now();
    let start = json!({"id": "d", "goals": ["hang"], "timeout": "2s"});
    let (status, body) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
    assert_eq!(status, 201, "{body}");
    raw.wait_for_calls(1).await;
    let mut engine = engine;
    engine.child.kill().await.expect("SIGKILL");

    // Down past the deadline, then up again.
    tokio::time::sleep(Duration::from_secs(3).saturating_sub(started.elapsed())).await;
    let restarted = Utc::now();
    let engine = spawn_binary(&db, "timeout-test").await;
    let mut flow = Value::Null;
    let until = Instant::now() + WAIT;
    while Instant::now() < until {
        flow = call(&engine, reqwest::Method::GET, "/engine/flow/d", None)
            .await
            .1;
        if flow["status"] != "active" && !flow["deactivated_at"].is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(flow["status"], "failed", "{flow}");
    let limit = ms(&flow["created_at"], &flow["deadline_at"]);
    assert_eq!(flow["problem"]["timeout_scope"], "flow", "{flow}");
    assert_eq!(flow["problem"]["instance"], "/", "{flow}");
    assert_eq!(flow["problem"]["status"], 408, "{flow}");
    assert_eq!(flow["problem"]["type"], TIMEOUT_TYPE, "{flow}");
    let elapsed = flow["problem"]["elapsed_ms"].as_i64().unwrap_or(0);
    assert!(
        elapsed >= 2500 && elapsed >= limit,
        "elapsed_ms {elapsed}: {flow}"
    );
    let done = at(&flow["completed_at"]);
    let after_restart = (done - restarted).num_milliseconds();
    assert!(
        (0..5000).contains(&after_restart),
        "timed out {after_restart} ms after the restart began: {flow}"
    );
    assert_eq!(flow["executions"]["hang"]["status"], "cancelled", "{flow}");
    let (_, work) = only_work(&flow, "hang");
    assert_eq!(work["status"], "cancelled", "{work}");
    let (_, evs) = call(&engine, reqwest::Method::GET, "/engine/flow/d/events", None).await;
    let evs = evs["events"].as_array().cloned().unwrap_or_default();
    assert_eq!(of_type(&evs, "flow_timed_out").len(), 1, "{:?}", types(&evs));
    assert_eq!(of_type(&evs, "flow_failed").len(), 1, "{:?}", types(&evs));
    raw.wait_all_closed().await;
    assert_flow_timeout_of(&flow, 2000);
}
