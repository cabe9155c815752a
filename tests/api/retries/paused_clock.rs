//! Retries and timeouts in paused time (docs/architecture.md, "Time"): the
//! engine runs on a clock that stands still until the test moves it, so
//! hours of backoff, inactivity windows and deadlines take no wall time
//! and every recorded time is exact. The steps are still real servers on
//! 127.0.0.1; only the engine's clock is paused.

use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use serde_json::{json, Value};
use tartan_engine::Clock;

use crate::helpers::{json_reply, start_on_with, sync_step, Backend, StepServer, TestApp, TestDb};
use tartan_testkit::both_backends;

both_backends!(
    hours_of_exponential_backoff_are_waited_exactly,
    an_attempt_timeout_stops_a_hanging_call_when_the_clock_reaches_it,
    a_quiet_async_call_fails_when_its_inactivity_window_passes,
    a_flow_deadline_ends_the_flow_at_its_time,
);

const HOUR: Duration = Duration::from_secs(3600);
const MINUTE: Duration = Duration::from_secs(60);

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z")
        .unwrap_or_else(|e| panic!("{e}"))
        .to_utc()
}

fn at(offset: Duration) -> DateTime<Utc> {
    t0() + chrono::Duration::from_std(offset).unwrap_or_else(|e| panic!("{e}"))
}

async fn paused_app(backend: Backend) -> Option<(TestApp, Clock)> {
    let db = TestDb::create(backend).await?;
    let clock = Clock::paused_at(t0());
    let app = start_on_with(db, "paused", |c| c.clock = clock.clone()).await;
    Some((app, clock))
}

/// Poll (in wall time, bounded) until `ready` holds for the flow.
async fn flow_when(app: &TestApp, id: &str, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..1000 {
        let flow = app.flow(id).await;
        if ready(&flow) {
            return flow;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("flow {id}: {what} never happened: {}", app.flow(id).await);
}

/// The attempts of the flow's only work item of `step`.
fn attempts(flow: &Value, step: &str) -> Vec<Value> {
    flow["executions"][step]["work_items"]
        .as_object()
        .and_then(|items| items.values().next())
        .and_then(|w| w["attempts"].as_array())
        .cloned()
        .unwrap_or_default()
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.to_utc())
        .unwrap_or_else(|| panic!("not a time: {v}"))
}

/// Every attempt ended, and the item is waiting for its retry (or done).
fn settled(flow: &Value, step: &str, n: usize) -> bool {
    let tried = attempts(flow, step);
    tried.len() == n && tried.iter().all(|a| !a["ended_at"].is_null())
}

/// A step server whose calls never answer.
async fn hanging() -> StepServer {
    StepServer::start_async(|_, _| -> BoxFuture<'static, Response> {
        Box::pin(async {
            std::future::pending::<()>().await;
            StatusCode::OK.into_response()
        })
    })
    .await
}

async fn hours_of_exponential_backoff_are_waited_exactly(backend: Backend) {
    let Some((app, clock)) = paused_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(503, json!({"error": "busy"}))).await;
    let mut step = sync_step("busy", &svc.url("/busy"), &[], &["out"]);
    step["work_config"] = json!({
        "max_retries": 3, "init_backoff": "1h", "max_backoff": "1d", "backoff_type": "exponential"
    });
    let registered = app.register(&step).await;
    assert_eq!(registered.status, StatusCode::CREATED, "{:?}", registered.body);
    let started = app.start_flow(&json!({"id": "b", "goals": ["busy"]})).await;
    assert_eq!(started.status, StatusCode::CREATED, "{:?}", started.body);
    // Each wait is moved through exactly: the retry is due at once, and not
    // a microsecond before.
    for (n, wait) in [(1, HOUR), (2, 2 * HOUR), (3, 4 * HOUR)] {
        let flow = flow_when(&app, "b", "an attempt ended", |f| settled(f, "busy", n)).await;
        let last = &attempts(&flow, "busy")[n - 1];
        assert_eq!(
            last["delay"]["delay_ms"],
            json!(wait.as_millis() as u64),
            "{last}"
        );
        clock.advance(wait - Duration::from_micros(1));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            attempts(&app.flow("b").await, "busy").len(),
            n,
            "a retry came early"
        );
        clock.advance(Duration::from_micros(1));
    }
    let flow = app.wait_for_flow("b").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let tried = attempts(&flow, "busy");
    let starts: Vec<DateTime<Utc>> = tried.iter().map(|a| time(&a["started_at"])).collect();
    assert_eq!(
        starts,
        vec![at(Duration::ZERO), at(HOUR), at(3 * HOUR), at(7 * HOUR)]
    );
    assert_eq!(svc.requests().len(), 4);
}

async fn an_attempt_timeout_stops_a_hanging_call_when_the_clock_reaches_it(backend: Backend) {
    let Some((app, clock)) = paused_app(backend).await else {
        return;
    };
    let svc = hanging().await;
    let mut step = sync_step("slow", &svc.url("/slow"), &[], &["out"]);
    step["http"]["timeout"] = json!("10m");
    step["work_config"] = json!({"max_attempts": 1});
    let registered = app.register(&step).await;
    assert_eq!(registered.status, StatusCode::CREATED, "{:?}", registered.body);
    let started = app.start_flow(&json!({"id": "a", "goals": ["slow"]})).await;
    assert_eq!(started.status, StatusCode::CREATED, "{:?}", started.body);
    flow_when(&app, "a", "the call went out", |_| !svc.requests().is_empty()).await;
    // Wall time passes, the clock does not: the call keeps waiting.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(app.flow("a").await["status"], "active");
    clock.advance(10 * MINUTE);
    let flow = app.wait_for_flow("a").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let tried = attempts(&flow, "slow");
    assert_eq!(tried.len(), 1, "{flow}");
    assert_eq!(tried[0]["outcome"], "retryable", "{flow}");
    let problem = &flow["executions"]["slow"]["problem"];
    assert_eq!(problem["timeout_scope"], "attempt", "{flow}");
    assert_eq!(problem["elapsed_ms"], 600_000, "{flow}");
    assert_eq!(time(&tried[0]["ended_at"]), at(10 * MINUTE), "{flow}");
}

async fn a_quiet_async_call_fails_when_its_inactivity_window_passes(backend: Backend) {
    let Some((app, clock)) = paused_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(202, json!({}))).await;
    let mut step = sync_step("quiet", &svc.url("/quiet"), &[], &["out"]);
    step["type"] = json!("async");
    step["timeouts"] = json!({"inactivity": "10m"});
    step["work_config"] =
        json!({"max_retries": 1, "init_backoff": "30m", "max_backoff": "1h", "backoff_type": "fixed"});
    let registered = app.register(&step).await;
    assert_eq!(registered.status, StatusCode::CREATED, "{:?}", registered.body);
    let started = app.start_flow(&json!({"id": "q", "goals": ["quiet"]})).await;
    assert_eq!(started.status, StatusCode::CREATED, "{:?}", started.body);
    // Accepted: the window runs. Quiet: the attempt fails, the retry waits.
    // Accepted again, quiet again: the item has no retries left.
    let stages = [
        ("inactive_until", at(10 * MINUTE), 10 * MINUTE),
        ("next_retry_at", at(40 * MINUTE), 30 * MINUTE),
        ("inactive_until", at(50 * MINUTE), 10 * MINUTE),
    ];
    for (field, due, wait) in stages {
        flow_when(&app, "q", field, |f| {
            let item = f["executions"]["quiet"]["work_items"]
                .as_object()
                .and_then(|items| items.values().next().cloned())
                .unwrap_or_default();
            item[field].as_str().is_some() && time(&item[field]) == due
        })
        .await;
        clock.advance(wait);
    }
    let flow = app.wait_for_flow("q").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let tried = attempts(&flow, "quiet");
    let spans: Vec<(DateTime<Utc>, DateTime<Utc>)> = tried
        .iter()
        .map(|a| (time(&a["started_at"]), time(&a["ended_at"])))
        .collect();
    assert_eq!(
        spans,
        vec![
            (at(Duration::ZERO), at(10 * MINUTE)),
            (at(40 * MINUTE), at(50 * MINUTE))
        ],
        "{flow}"
    );
    for a in &tried {
        let error = a["error"].as_str().unwrap_or_default();
        assert!(error.contains("inactivity"), "{a}");
    }
}

async fn a_flow_deadline_ends_the_flow_at_its_time(backend: Backend) {
    let Some((app, clock)) = paused_app(backend).await else {
        return;
    };
    let svc = hanging().await;
    let mut step = sync_step("long", &svc.url("/long"), &[], &["out"]);
    step["http"]["timeout"] = json!("1d");
    let registered = app.register(&step).await;
    assert_eq!(registered.status, StatusCode::CREATED, "{:?}", registered.body);
    let started = app
        .start_flow(&json!({"id": "d", "goals": ["long"], "timeout": "1h"}))
        .await;
    assert_eq!(started.status, StatusCode::CREATED, "{:?}", started.body);
    flow_when(&app, "d", "the call went out", |_| !svc.requests().is_empty()).await;
    clock.advance(HOUR - MINUTE);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(app.flow("d").await["status"], "active");
    clock.advance(MINUTE);
    let flow = app.wait_for_flow("d").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    assert_eq!(time(&flow["deactivated_at"]), at(HOUR), "{flow}");
    let detail = flow["error"].to_string();
    assert!(detail.contains("flow timeout"), "{flow}");
}
