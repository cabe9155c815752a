//! A step's attempt and total timeouts end to end (docs/timeouts.md, "A
//! step's timeouts" and "What each one does"): an attempt that hangs before
//! its headers or trickles its body is aborted at its timeout and retried,
//! one attempt at a time; a step total timeout aborts the running call and
//! fails (or cancels) the step without retry, schedules no retry that would
//! start past its deadline, and cuts an attempt short; when both expire
//! together the total timeout wins. Through the real server and raw step
//! endpoints on 127.0.0.1 (`support.rs`).
//!
//! Timeouts are a few hundred ms; assertions on recorded timestamps have a
//! lower bound (never early) and a generous upper one; every wait is bounded.

use std::time::Duration;

use serde_json::json;

use super::support::{
    assert_timeout_problem, at, ms, only_work, register, start, Misbehaviour, RawStep, SLACK_MS,
};
use crate::helpers::{events, of_type, spawn_app, sync_step, types, Backend};
use tartan_testkit::both_backends;

both_backends!(
    an_attempt_that_hangs_before_its_headers_is_aborted_at_its_timeout_and_retried_one_at_a_time,
    an_attempt_that_trickles_its_body_is_aborted_at_its_timeout_and_retried_one_at_a_time,
    a_step_total_timeout_aborts_the_running_call_and_fails_the_step_without_retry,
    a_step_total_timeout_with_on_timeout_cancel_cancels_the_step_in_native_and_steep_form,
    a_retry_that_would_start_after_the_total_deadline_is_not_scheduled,
    an_attempt_timeout_is_cut_short_by_the_step_total_deadline,
    when_the_attempt_and_total_timeouts_expire_together_the_total_timeout_wins,
);

// ---------------------------------------------------------------------------
// Attempt timeout.

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
// Step total timeout.

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
