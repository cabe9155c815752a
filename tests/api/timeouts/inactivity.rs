//! An async step's inactivity timeout end to end (docs/timeouts.md, "What
//! each one does" and "Heartbeats"): a step that never calls back fails by
//! inactivity and is retried; heartbeats keep it alive until its webhook
//! completes it, two thousand of them appending a handful of events and
//! keeping one timer; a webhook after the inactivity timeout, or after the
//! flow was cancelled, is a late result and changes nothing. Through the
//! real server and real step servers on 127.0.0.1.
//!
//! Timeouts are a few hundred ms; assertions on recorded timestamps have a
//! lower bound (never early) and a generous upper one; every wait is bounded.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use chrono::{SecondsFormat, Utc};
use serde_json::{json, Value};

use super::support::{
    assert_problem, assert_timeout_problem, cancel, ms, only_work, register, start, SLACK_MS, WAIT,
};
use crate::helpers::{
    events, json_reply, of_type, spawn_app, sync_step, types, Backend, StepServer, TestApp,
};
use tartan_testkit::both_backends;

both_backends!(
    an_async_step_that_never_calls_back_fails_by_inactivity_and_is_retried,
    heartbeats_keep_an_async_step_alive_until_its_webhook_completes_it,
    two_thousand_heartbeats_append_a_handful_of_events_and_keep_one_timer,
    a_webhook_after_the_inactivity_timeout_is_a_late_result_and_changes_nothing,
    a_webhook_after_the_flow_was_cancelled_is_a_late_result_and_changes_nothing,
);

// ---------------------------------------------------------------------------
// Helpers.

fn async_step(id: &str, endpoint: &str, outputs: &[&str]) -> Value {
    let mut step = sync_step(id, endpoint, &[], outputs);
    step["type"] = json!("async");
    step
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
// Inactivity.

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
    // Accepts the call, then sends a heartbeat every 100 ms for two seconds
    // (a 600 ms window: a heartbeat held up by a loaded machine still
    // lands in it), then delivers its result by webhook.
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
                    for _ in 0..20 {
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
    step["timeouts"] = json!({"inactivity": 600});
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
        took >= 2000,
        "the step worked for {took} ms, more than three windows"
    );
    assert_eq!(
        crate::helpers::noted(&answers, 21).await,
        vec![200; 21],
        "heartbeats and the result"
    );
    let evs = events(&app, "f").await;
    let kinds = types(&evs);
    assert_eq!(of_type(&evs, "work_accepted").len(), 1, "{kinds:?}");
    // A heartbeat is recorded only once the recorded window is half used:
    // about every other one here.
    let recorded = of_type(&evs, "work_heartbeat").len();
    assert!(
        (1..20).contains(&recorded),
        "{recorded} of 20 recorded: {kinds:?}"
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
        // Recorded as it came (600 ms on), or when the recorded window
        // ended (what was left of the heartbeat's window).
        let left = ms(&hb["timestamp"], &hb["data"]["inactive_until"]);
        assert!((1..=600).contains(&left), "{hb}");
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
// Late results.

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
