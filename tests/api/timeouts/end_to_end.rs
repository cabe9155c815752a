//! Timeouts and cancellation end to end (docs/timeouts.md): attempt, step
//! total, inactivity and flow timeouts, heartbeats, late results, the
//! cancellation endpoint and a flow deadline that passes while the engine is
//! down, through the real server and real step endpoints on 127.0.0.1.
//!
//! Endpoints that hang or trickle are raw TCP servers, so that a test sees
//! exactly when the engine closed a connection: each connection records the
//! receipt token and attempt it carried, when its request arrived, when the
//! engine closed it (EOF) and how many connections of the same token were
//! open at its arrival.
//!
//! Timeouts are a few hundred ms; assertions on recorded timestamps have a
//! lower bound (never early) and a generous upper one; every wait is bounded.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::helpers::{
    call, events, json_reply, of_type, spawn_app, spawn_binary, sync_step, types, Backend, Reply, StepServer,
    TestApp, TestDb,
};
use tartan_testkit::both_backends;

const TIMEOUT_TYPE: &str = "https://serverlessworkflow.io/spec/1.0.0/errors/timeout";

/// How late a timeout may fire, or a timestamp lag behind what it records.
const SLACK_MS: i64 = 3000;

/// How long a bounded wait for an endpoint's calls or closes lasts.
const WAIT: Duration = Duration::from_secs(10);

both_backends!(
    an_attempt_that_hangs_before_its_headers_is_aborted_at_its_timeout_and_retried_one_at_a_time,
    an_attempt_that_trickles_its_body_is_aborted_at_its_timeout_and_retried_one_at_a_time,
    a_step_total_timeout_aborts_the_running_call_and_fails_the_step_without_retry,
    a_step_total_timeout_with_on_timeout_cancel_cancels_the_step_in_native_and_steep_form,
    a_retry_that_would_start_after_the_total_deadline_is_not_scheduled,
    an_attempt_timeout_is_cut_short_by_the_step_total_deadline,
    when_the_attempt_and_total_timeouts_expire_together_the_total_timeout_wins,
    an_async_step_that_never_calls_back_fails_by_inactivity_and_is_retried,
    heartbeats_keep_an_async_step_alive_until_its_webhook_completes_it,
    two_thousand_heartbeats_append_a_handful_of_events_and_keep_one_timer,
    a_flow_timeout_aborts_the_calls_cancels_the_work_and_fails_the_flow,
    a_flow_timeout_with_on_timeout_cancel_cancels_the_flow,
    a_flow_deadline_at_works_like_a_timeout_and_must_lie_in_the_future,
    a_webhook_after_the_inactivity_timeout_is_a_late_result_and_changes_nothing,
    a_webhook_after_the_flow_was_cancelled_is_a_late_result_and_changes_nothing,
    cancelling_a_running_flow_aborts_its_call_and_cancels_its_work,
    a_flow_deadline_that_passed_while_the_engine_was_down_fires_at_restart,
);

// ---------------------------------------------------------------------------
// Raw step endpoints that hang.

/// How a raw endpoint misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Misbehaviour {
    /// Reads the request and never answers.
    HangBeforeHeaders,
    /// Answers the status line and the headers of a 100-byte body, then one
    /// byte every 50 ms (the body never completes within the test).
    TrickleBody,
}

/// One connection a raw endpoint accepted.
#[derive(Debug, Clone)]
struct Conn {
    token: String,
    attempt: String,
    /// When its request had been read.
    arrived: Instant,
    /// When the client closed it (EOF); `None` while open.
    closed: Option<Instant>,
    /// Connections of the same receipt token open at its arrival, itself included.
    open_for_token: usize,
}

pub(crate) struct RawStep {
    addr: SocketAddr,
    conns: Arc<Mutex<Vec<Conn>>>,
}

impl RawStep {
    pub(crate) async fn start(mode: Misbehaviour) -> RawStep {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let conns: Arc<Mutex<Vec<Conn>>> = Arc::default();
        let shared = conns.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve_raw(stream, mode, shared.clone()));
            }
        });
        RawStep { addr, conns }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/step", self.addr)
    }

    fn conns(&self) -> Vec<Conn> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Wait (bounded) until `n` requests have arrived.
    pub(crate) async fn wait_for_calls(&self, n: usize) {
        let until = Instant::now() + WAIT;
        while self.conns().len() < n {
            assert!(
                Instant::now() < until,
                "only {} of {n} calls arrived",
                self.conns().len()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Wait (bounded) until every connection was closed by the client.
    pub(crate) async fn wait_all_closed(&self) {
        let until = Instant::now() + WAIT;
        while self.conns().iter().any(|c| c.closed.is_none()) {
            assert!(
                Instant::now() < until,
                "the engine never closed a connection: {:?}",
                self.conns()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn serve_raw(stream: TcpStream, mode: Misbehaviour, conns: Arc<Mutex<Vec<Conn>>>) {
    let (mut rd, mut wr) = stream.into_split();
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    let head = loop {
        match rd.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&request).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let head = text[..end].to_string();
            let length = header_of(&head, "content-length")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if request.len() >= end + 4 + length {
                break head;
            }
        }
    };
    let token = header_of(&head, "argyll-receipt-token").unwrap_or_default();
    let index = {
        let mut all = conns.lock().unwrap_or_else(|p| p.into_inner());
        let open = all
            .iter()
            .filter(|c| c.token == token && c.closed.is_none())
            .count();
        all.push(Conn {
            token: token.clone(),
            attempt: header_of(&head, "tartan-attempt").unwrap_or_default(),
            arrived: Instant::now(),
            closed: None,
            open_for_token: open + 1,
        });
        all.len() - 1
    };
    let answer = async move {
        if mode == Misbehaviour::TrickleBody {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{";
            if wr.write_all(head.as_bytes()).await.is_ok() {
                let _ = wr.flush().await;
                for _ in 0..98 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    if wr.write_all(b" ").await.is_err() || wr.flush().await.is_err() {
                        break;
                    }
                }
            }
        }
        // Keep the write half (and so the connection) open.
        std::future::pending::<()>().await;
        drop(wr);
    };
    let eof = async {
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::select! {
        _ = eof => {
            let mut all = conns.lock().unwrap_or_else(|p| p.into_inner());
            all[index].closed = Some(Instant::now());
        }
        _ = answer => {}
        _ = tokio::time::sleep(Duration::from_secs(20)) => {}
    }
}

fn header_of(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

// ---------------------------------------------------------------------------
// Helpers.

fn at(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a time: {v}"))
}

/// `b - a` in ms.
fn ms(a: &Value, b: &Value) -> i64 {
    (at(b) - at(a)).num_milliseconds()
}

/// The step's only work item: its token and state.
fn only_work(flow: &Value, step: &str) -> (String, Value) {
    let items = flow["executions"][step]["work_items"]
        .as_object()
        .unwrap_or_else(|| panic!("no work items for {step}: {flow}"));
    assert_eq!(items.len(), 1, "{step}: {flow}");
    let (token, work) = items.iter().next().unwrap();
    (token.clone(), work.clone())
}

/// The timeout problem of docs/timeouts.md.
fn assert_timeout_problem(problem: &Value, scope: &str, limit_ms: i64, instance: &str) {
    assert_eq!(problem["type"], TIMEOUT_TYPE, "{problem}");
    assert_eq!(problem["status"], 408, "{problem}");
    assert_eq!(problem["title"], "Timeout", "{problem}");
    assert_eq!(problem["timeout_scope"], scope, "{problem}");
    assert_eq!(problem["instance"], instance, "{problem}");
    let detail = problem["detail"].as_str().unwrap_or("");
    assert!(
        detail.contains(scope) && detail.contains(&format!("{limit_ms} ms")),
        "the detail names the scope and the duration: {problem}"
    );
    let elapsed = problem["elapsed_ms"]
        .as_i64()
        .unwrap_or_else(|| panic!("elapsed_ms: {problem}"));
    assert!(
        (limit_ms..limit_ms + SLACK_MS).contains(&elapsed),
        "elapsed_ms {elapsed} for a limit of {limit_ms} ms: {problem}"
    );
}

/// A problem+json answer with this status.
fn assert_problem(reply: &Reply, status: u16) {
    assert_eq!(reply.status.as_u16(), status, "{:?}", reply.body);
    assert!(
        reply.content_type.starts_with("application/problem+json"),
        "{reply:?}"
    );
    assert_eq!(reply.body["status"], status, "{:?}", reply.body);
}

fn async_step(id: &str, endpoint: &str, outputs: &[&str]) -> Value {
    let mut step = sync_step(id, endpoint, &[], outputs);
    step["type"] = json!("async");
    step
}

async fn register(app: &TestApp, step: &Value) {
    let r = app.register(step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
}

async fn start(app: &TestApp, body: Value) {
    let r = app.start_flow(&body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{body}: {:?}", r.body);
}

async fn cancel(app: &TestApp, id: &str) -> Reply {
    app.send(Method::POST, &format!("/engine/flow/{id}/cancel"), None)
        .await
}

/// The webhook URL of the first call an async step endpoint received (bounded wait).
async fn hook_of(svc: &StepServer) -> String {
    let until = Instant::now() + WAIT;
    loop {
        if let Some(url) = svc
            .requests()
            .first()
            .and_then(|r| r.headers.get("argyll-webhook-url"))
            .and_then(|v| v.to_str().ok())
        {
            return url.to_string();
        }
        assert!(Instant::now() < until, "the async step was never called");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---------------------------------------------------------------------------
// 1. Attempt timeout.

async fn attempts_time_out_one_at_a_time(backend: Backend, mode: Misbehaviour) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let raw = RawStep::start(mode).await;
    let mut step = sync_step("slow", &raw.url(), &[], &["out"]);
    step["http"]["timeout"] = json!(300);
    step["work_config"] = json!({"max_retries": 2, "init_backoff": 50, "backoff_type": "fixed"});
    register(&app, &step).await;
    start(&app, json!({"id": "f", "goals": ["slow"]})).await;
    let flow = app.wait_for_flow("f").await;

    assert_eq!(flow["status"], "failed", "{flow}");
    assert_eq!(flow["executions"]["slow"]["status"], "failed", "{flow}");
    let (token, work) = only_work(&flow, "slow");
    assert_eq!(work["status"], "failed", "{work}");
    assert_eq!(work["error"], "attempt timeout after 300 ms", "{work}");
    assert_timeout_problem(
        &work["problem"],
        "attempt",
        300,
        &format!("/executions/slow/work_items/{token}"),
    );
    let attempts = work["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3, "{work}");
    for (i, a) in attempts.iter().enumerate() {
        assert_eq!(a["number"], i + 1, "{a}");
        assert_eq!(a["outcome"], "retryable", "{a}");
        assert_eq!(a["error"], "attempt timeout after 300 ms", "{a}");
        assert!(a["http_status"].is_null(), "{a}");
        let took = ms(&a["started_at"], &a["ended_at"]);
        assert!(
            (300..300 + SLACK_MS).contains(&took),
            "attempt {} took {took} ms",
            i + 1
        );
        if i > 0 {
            let waited = ms(&attempts[i - 1]["ended_at"], &a["started_at"]);
            assert!(
                (50..SLACK_MS).contains(&waited),
                "waited {waited} ms before attempt {}",
                i + 1
            );
        }
    }
    let evs = events(&app, "f").await;
    let failed = of_type(&evs, "work_failed");
    assert_eq!(failed.len(), 1, "{:?}", types(&evs));
    assert_eq!(failed[0]["data"]["retry_state"], "max_attempts", "{}", failed[0]);
    assert_eq!(failed[0]["data"]["problem"]["timeout_scope"], "attempt");
    assert_eq!(of_type(&evs, "work_not_completed").len(), 2, "{:?}", types(&evs));
    for nc in of_type(&evs, "work_not_completed") {
        assert_eq!(nc["data"]["problem"]["timeout_scope"], "attempt", "{nc}");
    }
    assert!(of_type(&evs, "work_timed_out").is_empty(), "{:?}", types(&evs));

    // The endpoint: three attempts with the same token, never two at once,
    // and each timed-out connection closed before the next attempt arrived.
    raw.wait_all_closed().await;
    let conns = raw.conns();
    assert_eq!(conns.len(), 3, "{conns:?}");
    for (i, c) in conns.iter().enumerate() {
        assert_eq!(c.token, token, "{conns:?}");
        assert_eq!(c.attempt, (i + 1).to_string(), "{conns:?}");
        assert_eq!(c.open_for_token, 1, "concurrent attempts of one token: {conns:?}");
        let closed = c.closed.unwrap();
        let held = closed.duration_since(c.arrived);
        assert!(
            held >= Duration::from_millis(250),
            "closed after {held:?}: {conns:?}"
        );
        if let Some(next) = conns.get(i + 1) {
            assert!(
                closed <= next.arrived,
                "attempt {} arrived before attempt {}'s connection was closed",
                i + 2,
                i + 1
            );
        }
    }
}

async fn an_attempt_that_hangs_before_its_headers_is_aborted_at_its_timeout_and_retried_one_at_a_time(
    backend: Backend,
) {
    attempts_time_out_one_at_a_time(backend, Misbehaviour::HangBeforeHeaders).await;
}

async fn an_attempt_that_trickles_its_body_is_aborted_at_its_timeout_and_retried_one_at_a_time(
    backend: Backend,
) {
    attempts_time_out_one_at_a_time(backend, Misbehaviour::TrickleBody).await;
}

// ---------------------------------------------------------------------------
// 2. Step total timeout.

async fn a_step_total_timeout_aborts_the_running_call_and_fails_the_step_without_retry(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let raw = RawStep::start(Misbehaviour::HangBeforeHeaders).await;
    let mut step = sync_step("slow", &raw.url(), &[], &["out"]);
    step["timeouts"] = json!({"total": 400});
    step["work_config"] = json!({"max_retries": 5, "init_backoff": 50, "backoff_type": "fixed"});
    register(&app, &step).await;
    start(&app, json!({"id": "f", "goals": ["slow"]})).await;
    let flow = app.wait_for_flow("f").await;

    assert_eq!(flow["status"], "failed", "{flow}");
    let exec = &flow["executions"]["slow"];
    assert_eq!(exec["status"], "failed", "{flow}");
    assert_eq!(exec["error"], "step total timeout after 400 ms", "{exec}");
    assert_timeout_problem(&exec["problem"], "total", 400, "/executions/slow");
    let (token, work) = only_work(&flow, "slow");
    assert_eq!(work["status"], "failed", "{work}");
    assert_eq!(work["error"], "step total timeout after 400 ms", "{work}");
    assert_timeout_problem(
        &work["problem"],
        "total",
        400,
        &format!("/executions/slow/work_items/{token}"),
    );
    let attempts = work["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "no retry after the total timeout: {work}");
    assert_eq!(attempts[0]["outcome"], "timeout", "{work}");
    assert_eq!(
        ms(&attempts[0]["started_at"], &work["deadline_at"]),
        400,
        "the deadline is fixed when the first attempt starts: {work}"
    );
    let took = ms(&attempts[0]["started_at"], &attempts[0]["ended_at"]);
    assert!((400..400 + SLACK_MS).contains(&took), "aborted after {took} ms");
    // The flow shows the problem of the goal that failed.
    assert_eq!(flow["problem"]["timeout_scope"], "total", "{flow}");

    let evs = events(&app, "f").await;
    let kinds = types(&evs);
    for kind in [
        "work_timed_out",
        "step_timed_out",
        "flow_failed",
        "flow_deactivated",
    ] {
        assert_eq!(of_type(&evs, kind).len(), 1, "{kind} in {kinds:?}");
    }
    for kind in [
        "work_retry_scheduled",
        "work_not_completed",
        "work_failed",
        "step_failed",
    ] {
        assert!(of_type(&evs, kind).is_empty(), "{kind} in {kinds:?}");
    }
    let timed_out = of_type(&evs, "work_timed_out")[0];
    assert_eq!(timed_out["data"]["cancelled"], false, "{timed_out}");
    assert_eq!(timed_out["data"]["token"], token.as_str());

    raw.wait_all_closed().await;
    assert_eq!(raw.conns().len(), 1, "called once: {:?}", raw.conns());
}

async fn a_step_total_timeout_with_on_timeout_cancel_cancels_the_step_in_native_and_steep_form(
    backend: Backend,
) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let raw = RawStep::start(Misbehaviour::HangBeforeHeaders).await;
    let mut native = sync_step("native", &raw.url(), &[], &["a"]);
    native["timeouts"] = json!({"total": 300, "on_timeout": "cancel"});
    let mut steep = sync_step("steep", &raw.url(), &[], &["b"]);
    steep["timeouts"] = json!({"deadline": {"timeout": 300, "errorOnTimeout": false}});
    for step in [&native, &steep] {
        register(&app, step).await;
        let id = step["id"].as_str().unwrap();
        let shown = app.get(&format!("/engine/step/{id}")).await;
        assert_eq!(shown.body["effective_timeouts"]["total"], 300, "{:?}", shown.body);
        assert_eq!(
            shown.body["effective_timeouts"]["on_timeout"], "cancel",
            "{:?}",
            shown.body
        );
    }
    start(&app, json!({"id": "n", "goals": ["native"]})).await;
    start(&app, json!({"id": "s", "goals": ["steep"]})).await;
    for (flow_id, step_id) in [("n", "native"), ("s", "steep")] {
        let flow = app.wait_for_flow(flow_id).await;
        let exec = &flow["executions"][step_id];
        assert_eq!(exec["status"], "cancelled", "{flow}");
        assert_timeout_problem(&exec["problem"], "total", 300, &format!("/executions/{step_id}"));
        let (token, work) = only_work(&flow, step_id);
        assert_eq!(work["status"], "cancelled", "{work}");
        assert_timeout_problem(
            &work["problem"],
            "total",
            300,
            &format!("/executions/{step_id}/work_items/{token}"),
        );
        assert_eq!(
            work["attempts"].as_array().map(Vec::len),
            Some(1),
            "not retried: {work}"
        );
        assert_ne!(flow["status"], "completed", "{flow}");
        assert!(!flow["deactivated_at"].is_null(), "{flow}");
        let evs = events(&app, flow_id).await;
        let kinds = types(&evs);
        let work_timed_out = of_type(&evs, "work_timed_out");
        let step_timed_out = of_type(&evs, "step_timed_out");
        assert_eq!(work_timed_out.len(), 1, "{kinds:?}");
        assert_eq!(step_timed_out.len(), 1, "{kinds:?}");
        assert_eq!(work_timed_out[0]["data"]["cancelled"], true);
        assert_eq!(step_timed_out[0]["data"]["cancelled"], true);
        assert!(of_type(&evs, "work_retry_scheduled").is_empty(), "{kinds:?}");
    }
    raw.wait_all_closed().await;
    assert_eq!(raw.conns().len(), 2, "{:?}", raw.conns());
}

async fn a_retry_that_would_start_after_the_total_deadline_is_not_scheduled(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let raw = RawStep::start(Misbehaviour::HangBeforeHeaders).await;
    // The first attempt times out at 150 ms; the retry would start 300 ms
    // later, after the 400 ms total deadline: no pointless wait.
    let mut step = sync_step("slow", &raw.url(), &[], &["out"]);
    step["http"]["timeout"] = json!(150);
    step["timeouts"] = json!({"total": 400});
    step["work_config"] = json!({"max_retries": 5, "init_backoff": 300, "backoff_type": "fixed"});
    register(&app, &step).await;
    start(&app, json!({"id": "f", "goals": ["slow"]})).await;
    let flow = app.wait_for_flow("f").await;

    assert_eq!(flow["status"], "failed", "{flow}");
    assert_eq!(flow["executions"]["slow"]["status"], "failed", "{flow}");
    let (token, work) = only_work(&flow, "slow");
    assert_eq!(work["status"], "failed", "{work}");
    assert_eq!(
        work["error"], "attempt timeout after 150 ms",
        "the last error: {work}"
    );
    assert_timeout_problem(
        &work["problem"],
        "attempt",
        150,
        &format!("/executions/slow/work_items/{token}"),
    );
    let attempts = work["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{work}");
    assert_eq!(attempts[0]["outcome"], "retryable", "{work}");
    assert!(
        at(&work["completed_at"]) < at(&work["deadline_at"]),
        "failed at once, not at the deadline: {work}"
    );
    let evs = events(&app, "f").await;
    let failed = of_type(&evs, "work_failed");
    assert_eq!(failed.len(), 1, "{:?}", types(&evs));
    assert_eq!(failed[0]["data"]["retry_state"], "deadline", "{}", failed[0]);
    assert!(
        of_type(&evs, "work_retry_scheduled").is_empty(),
        "{:?}",
        types(&evs)
    );
    raw.wait_all_closed().await;
    assert_eq!(raw.conns().len(), 1);
}

async fn an_attempt_timeout_is_cut_short_by_the_step_total_deadline(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let raw = RawStep::start(Misbehaviour::HangBeforeHeaders).await;
    // Attempt 1 times out at 400 ms; attempt 2 starts at about 450 ms and
    // would run until 850 ms, but the total deadline (700 ms) cuts it short.
    let mut step = sync_step("slow", &raw.url(), &[], &["out"]);
    step["http"]["timeout"] = json!(400);
    step["timeouts"] = json!({"total": 700});
    step["work_config"] = json!({"max_retries": 5, "init_backoff": 50, "backoff_type": "fixed"});
    register(&app, &step).await;
    start(&app, json!({"id": "f", "goals": ["slow"]})).await;
    let flow = app.wait_for_flow("f").await;

    assert_eq!(flow["status"], "failed", "{flow}");
    let (token, work) = only_work(&flow, "slow");
    let attempts = work["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{work}");
    assert_eq!(attempts[0]["outcome"], "retryable", "{work}");
    assert_eq!(attempts[0]["error"], "attempt timeout after 400 ms", "{work}");
    assert_eq!(attempts[1]["outcome"], "timeout", "{work}");
    assert_eq!(work["status"], "failed", "{work}");
    assert_timeout_problem(
        &work["problem"],
        "total",
        700,
        &format!("/executions/slow/work_items/{token}"),
    );
    let ended = at(&attempts[1]["ended_at"]);
    let deadline = at(&work["deadline_at"]);
    assert!(ended >= deadline, "aborted before the deadline: {work}");
    let late = (ended - deadline).num_milliseconds();
    assert!(late < SLACK_MS, "aborted {late} ms after the deadline");
    let evs = events(&app, "f").await;
    assert_eq!(of_type(&evs, "work_timed_out").len(), 1, "{:?}", types(&evs));
    assert_eq!(of_type(&evs, "step_timed_out").len(), 1, "{:?}", types(&evs));
    raw.wait_all_closed().await;
    assert_eq!(raw.conns().len(), 2);
}

/// Timers firing together: an attempt timeout equal to the total timeout
/// expires at the same instant on the first attempt; the outer scope (total)
/// speaks.
async fn when_the_attempt_and_total_timeouts_expire_together_the_total_timeout_wins(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let raw = RawStep::start(Misbehaviour::HangBeforeHeaders).await;
    let mut step = sync_step("slow", &raw.url(), &[], &["out"]);
    step["http"]["timeout"] = json!(400);
    step["timeouts"] = json!({"total": 400});
    step["work_config"] = json!({"max_retries": 5, "init_backoff": 50, "backoff_type": "fixed"});
    register(&app, &step).await;
    start(&app, json!({"id": "f", "goals": ["slow"]})).await;
    let flow = app.wait_for_flow("f").await;

    assert_eq!(flow["status"], "failed", "{flow}");
    let (token, work) = only_work(&flow, "slow");
    assert_eq!(work["attempts"].as_array().map(Vec::len), Some(1), "{work}");
    let evs = events(&app, "f").await;
    assert_eq!(
        of_type(&evs, "work_timed_out").len(),
        1,
        "the total timeout speaks: {:?}; work_failed {:?}; work item {work}",
        types(&evs),
        of_type(&evs, "work_failed")
            .first()
            .map(|e| &e["data"]["retry_state"])
    );
    assert_timeout_problem(
        &work["problem"],
        "total",
        400,
        &format!("/executions/slow/work_items/{token}"),
    );
    assert_timeout_problem(
        &flow["executions"]["slow"]["problem"],
        "total",
        400,
        "/executions/slow",
    );
}

// ---------------------------------------------------------------------------
// 3. Inactivity.

async fn an_async_step_that_never_calls_back_fails_by_inactivity_and_is_retried(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // Accepts every call and never calls back.
    let svc = StepServer::start(|_, _| json_reply(200, json!({}))).await;
    let mut step = async_step("quiet", &svc.url("/quiet"), &["out"]);
    step["timeouts"] = json!({"inactivity": 300});
    step["work_config"] = json!({"max_retries": 1, "init_backoff": 50, "backoff_type": "fixed"});
    register(&app, &step).await;
    start(&app, json!({"id": "f", "goals": ["quiet"]})).await;
    let flow = app.wait_for_flow("f").await;

    assert_eq!(flow["status"], "failed", "{flow}");
    let (token, work) = only_work(&flow, "quiet");
    assert_eq!(work["status"], "failed", "{work}");
    assert_eq!(work["error"], "inactivity timeout after 300 ms", "{work}");
    assert_timeout_problem(
        &work["problem"],
        "inactivity",
        300,
        &format!("/executions/quiet/work_items/{token}"),
    );
    let attempts = work["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "retried per policy: {work}");
    let evs = events(&app, "f").await;
    let accepted = of_type(&evs, "work_accepted");
    assert_eq!(accepted.len(), 2, "{:?}", types(&evs));
    for (a, acc) in attempts.iter().zip(&accepted) {
        assert_eq!(a["outcome"], "retryable", "{a}");
        assert_eq!(a["error"], "inactivity timeout after 300 ms", "{a}");
        assert_eq!(acc["data"]["attempt"], a["number"], "{acc}");
        // The window starts at acceptance; the attempt ends when it closes.
        assert_eq!(
            ms(&acc["timestamp"], &acc["data"]["inactive_until"]),
            300,
            "{acc}"
        );
        let after = ms(&acc["data"]["inactive_until"], &a["ended_at"]);
        assert!(
            (0..SLACK_MS).contains(&after),
            "failed {after} ms after the window closed"
        );
    }
    assert_eq!(of_type(&evs, "work_not_completed").len(), 1, "{:?}", types(&evs));
    let failed = of_type(&evs, "work_failed");
    assert_eq!(failed.len(), 1, "{:?}", types(&evs));
    assert_eq!(failed[0]["data"]["retry_state"], "max_attempts", "{}", failed[0]);
    let calls = svc.requests();
    assert_eq!(calls.len(), 2);
    assert!(calls[0].headers.contains_key("argyll-webhook-url"));
}

async fn heartbeats_keep_an_async_step_alive_until_its_webhook_completes_it(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // Accepts the call, then sends a heartbeat every 100 ms for a second
    // (a 300 ms window), then delivers its result by webhook.
    let answers: Arc<Mutex<Vec<u16>>> = Arc::default();
    let recorded = answers.clone();
    let client = reqwest::Client::new();
    let svc = StepServer::start_async(move |r, _| {
        let hook = r
            .headers
            .get("argyll-webhook-url")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let (client, recorded) = (client.clone(), recorded.clone());
        Box::pin(async move {
            if let Some(hook) = hook {
                tokio::spawn(async move {
                    for _ in 0..10 {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let status = match client
                            .post(format!("{hook}/heartbeat"))
                            .header("Content-Type", "application/json")
                            .send()
                            .await
                        {
                            Ok(resp) => resp.status().as_u16(),
                            Err(_) => 0,
                        };
                        recorded.lock().unwrap_or_else(|p| p.into_inner()).push(status);
                    }
                    let status = match client.post(&hook).json(&json!({"out": "done"})).send().await {
                        Ok(resp) => resp.status().as_u16(),
                        Err(_) => 0,
                    };
                    recorded.lock().unwrap_or_else(|p| p.into_inner()).push(status);
                });
            }
            json_reply(202, json!({}))
        })
    })
    .await;
    let mut step = async_step("busy", &svc.url("/busy"), &["out"]);
    step["timeouts"] = json!({"inactivity": 300});
    step["work_config"] = json!({"max_retries": 1, "init_backoff": 50, "backoff_type": "fixed"});
    register(&app, &step).await;
    start(&app, json!({"id": "f", "goals": ["busy"]})).await;
    let flow = app.wait_for_flow("f").await;

    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(
        flow["executions"]["busy"]["outputs"],
        json!({"out": "done"}),
        "{flow}"
    );
    let (token, work) = only_work(&flow, "busy");
    assert_eq!(work["status"], "succeeded", "{work}");
    assert_eq!(work["attempts"].as_array().map(Vec::len), Some(1), "{work}");
    let took = ms(&flow["created_at"], &flow["completed_at"]);
    assert!(
        took >= 1000,
        "the step worked for {took} ms, more than three windows"
    );
    assert_eq!(
        crate::helpers::noted(&answers, 11).await,
        vec![200; 11],
        "heartbeats and the result"
    );
    let evs = events(&app, "f").await;
    let kinds = types(&evs);
    assert_eq!(of_type(&evs, "work_accepted").len(), 1, "{kinds:?}");
    // A heartbeat is recorded only once the recorded window is half used:
    // about every other one here.
    let recorded = of_type(&evs, "work_heartbeat").len();
    assert!(
        (1..10).contains(&recorded),
        "{recorded} of 10 recorded: {kinds:?}"
    );
    for kind in [
        "work_not_completed",
        "work_failed",
        "work_timed_out",
        "work_late_result",
    ] {
        assert!(of_type(&evs, kind).is_empty(), "{kind} in {kinds:?}");
    }
    for hb in of_type(&evs, "work_heartbeat") {
        // Recorded as it came (300 ms on), or when the recorded window
        // ended (what was left of the heartbeat's window).
        let left = ms(&hb["timestamp"], &hb["data"]["inactive_until"]);
        assert!((1..=300).contains(&left), "{hb}");
    }
    assert_eq!(svc.requests().len(), 1);

    // A correctly signed heartbeat for a token, step or flow the engine
    // does not know: 400.
    for (flow, step, token) in [
        ("f", "busy", "no-such-token"),
        ("f", "no-such-step", token.as_str()),
        ("no-such-flow", "busy", token.as_str()),
    ] {
        let path = format!("{}/heartbeat", app.webhook_path(flow, step, token));
        let r = app.send(Method::POST, &path, None).await;
        assert_problem(&r, 400);
    }
}

/// The value of an unlabelled gauge in `GET /metrics`.
async fn gauge(app: &TestApp, name: &str) -> f64 {
    let text = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
}

async fn two_thousand_heartbeats_append_a_handful_of_events_and_keep_one_timer(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    const WINDOW_MS: i64 = 2000;
    let svc = StepServer::start(|_, _| json_reply(202, json!({}))).await;
    let mut step = async_step("chatty", &svc.url("/chatty"), &["out"]);
    step["timeouts"] = json!({"inactivity": WINDOW_MS});
    step["work_config"] = json!({"max_attempts": 1});
    register(&app, &step).await;
    start(&app, json!({"id": "f", "goals": ["chatty"]})).await;
    let hook = hook_of(&svc).await;
    let beat = format!("{hook}/heartbeat");
    // Heartbeats count once the call is accepted; its window is then armed.
    let until = Instant::now() + WAIT;
    while only_work(&app.flow("f").await, "chatty").1["accepted_at"].is_null() {
        assert!(Instant::now() < until, "the call was never accepted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let timers_before = gauge(&app, "tartan_timers_armed").await;
    assert!(timers_before >= 1.0, "the window's timer");

    // 2,000 heartbeats as fast as they are answered, then one every 200 ms
    // until three windows have passed: the window never closes meanwhile.
    let began = Instant::now();
    let mut sent = 0;
    let mut last_sent = Utc::now();
    while sent < 2000 || began.elapsed() < Duration::from_millis(3 * WINDOW_MS as u64) {
        if sent >= 2000 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        last_sent = Utc::now();
        let r = app
            .client
            .post(&beat)
            .header("Content-Type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "heartbeat {sent}");
        sent += 1;
        if sent % 500 == 0 {
            assert!(
                gauge(&app, "tartan_timers_armed").await <= timers_before,
                "one timer for the item"
            );
        }
    }
    let beating = began.elapsed();
    let flow = app.flow("f").await;
    assert_eq!(
        flow["status"], "active",
        "timed out while heartbeats came: {flow}"
    );
    let (_, work) = only_work(&flow, "chatty");
    assert_eq!(work["status"], "active", "{work}");
    let evs = events(&app, "f").await;
    let recorded = of_type(&evs, "work_heartbeat").len();
    // At most about two per window the heartbeats spanned, not one each.
    let windows = beating.as_millis() as usize / WINDOW_MS as usize + 1;
    assert!(
        recorded <= 2 * windows + 2,
        "{recorded} heartbeat events for {sent} heartbeats over {beating:?}"
    );
    assert!(evs.len() <= recorded + 10, "{:?}", types(&evs));
    assert!(gauge(&app, "tartan_timers_armed").await <= timers_before);

    // Heartbeats stop: the window closes a full window after the last one
    // (not earlier, though that one may not have been recorded), and the
    // attempt fails by inactivity.
    let flow = app.wait_for_flow("f").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let (_, work) = only_work(&flow, "chatty");
    assert_eq!(work["problem"]["timeout_scope"], "inactivity", "{work}");
    let last = Value::String(last_sent.to_rfc3339_opts(SecondsFormat::Micros, true));
    let after = ms(&last, &work["attempts"][0]["ended_at"]);
    assert!(
        (WINDOW_MS..WINDOW_MS + SLACK_MS).contains(&after),
        "timed out {after} ms after the last heartbeat, with a {WINDOW_MS} ms window"
    );
    let evs = events(&app, "f").await;
    assert!(
        of_type(&evs, "work_heartbeat").len() <= recorded + 1,
        "{:?}",
        types(&evs)
    );
    assert_eq!(gauge(&app, "tartan_timers_armed").await, 0.0);
}

// ---------------------------------------------------------------------------
// 4. Flow timeout.

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
    let closed = raw.conns()[0].closed.unwrap();
    let held = closed.duration_since(raw.conns()[0].arrived);
    assert!(held >= Duration::from_millis(250), "closed after {held:?}");
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
// 6. Late results.

async fn a_webhook_after_the_inactivity_timeout_is_a_late_result_and_changes_nothing(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(202, json!({}))).await;
    let mut step = async_step("slowpoke", &svc.url("/slowpoke"), &["out"]);
    step["timeouts"] = json!({"inactivity": 300});
    step["work_config"] = json!({"max_attempts": 1});
    register(&app, &step).await;
    start(&app, json!({"id": "f", "goals": ["slowpoke"]})).await;
    let hook = hook_of(&svc).await;
    let flow = app.wait_for_flow("f").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let (token, work) = only_work(&flow, "slowpoke");
    assert_eq!(work["problem"]["timeout_scope"], "inactivity", "{work}");

    let r = app
        .client
        .post(&hook)
        .json(&json!({"out": "too late"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "a late result is accepted");
    let after = app.flow("f").await;
    assert_eq!(
        crate::helpers::without_late_notes(&after),
        flow,
        "the state did not change"
    );
    let evs = events(&app, "f").await;
    let late = of_type(&evs, "work_late_result");
    assert_eq!(late.len(), 1, "{:?}", types(&evs));
    assert_eq!(late[0]["data"]["token"], token.as_str());
    assert_eq!(late[0]["data"]["attempt"], 1);
    assert!(of_type(&evs, "work_succeeded").is_empty(), "{:?}", types(&evs));
    assert!(of_type(&evs, "attribute_set").is_empty(), "{:?}", types(&evs));
}

async fn a_webhook_after_the_flow_was_cancelled_is_a_late_result_and_changes_nothing(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(202, json!({}))).await;
    register(&app, &async_step("charge", &svc.url("/charge"), &["receipt"])).await;
    start(&app, json!({"id": "f", "goals": ["charge"]})).await;
    let hook = hook_of(&svc).await;
    let r = cancel(&app, "f").await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    let flow = app.wait_for_flow("f").await;
    assert_eq!(flow["status"], "cancelled", "{flow}");

    let r = app
        .client
        .post(&hook)
        .json(&json!({"receipt": "r-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "a late result is accepted");
    let after = app.flow("f").await;
    assert_eq!(
        crate::helpers::without_late_notes(&after),
        flow,
        "the state did not change"
    );
    assert!(after["attributes"].get("receipt").is_none(), "{after}");
    let evs = events(&app, "f").await;
    assert_eq!(of_type(&evs, "work_late_result").len(), 1, "{:?}", types(&evs));
    assert!(of_type(&evs, "work_succeeded").is_empty(), "{:?}", types(&evs));
}

// ---------------------------------------------------------------------------
// 7. Cancellation.

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
// 5. A flow deadline across a restart of the real binary.

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
