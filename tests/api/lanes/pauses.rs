//! A 429 or 503 with `Retry-After` pauses the whole lane, and the call that
//! got it is sent again with no attempt counted; the breaker opens after
//! its failures, lets one canary through after its cool-down, and closes
//! on its success.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::json;

use crate::helpers::{item_attempts, json_reply, spawn_app, sync_step, wait_until, Backend, StepServer};
use tartan_testkit::both_backends;

both_backends!(
    a_429_with_retry_after_pauses_every_flow_of_the_lane_with_no_attempt_counted,
    the_breaker_opens_lets_a_canary_through_and_closes,
);

async fn a_429_with_retry_after_pauses_every_flow_of_the_lane_with_no_attempt_counted(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let times: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let seen = times.clone();
    let svc = StepServer::start(move |_, n| {
        seen.lock().unwrap().push(Instant::now());
        if n == 0 {
            (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "2")], "slow down").into_response()
        } else {
            json_reply(200, json!({"y": "ok"}))
        }
    })
    .await;
    let mut step = sync_step("limited", &svc.url("/l"), &["x"], &["y"]);
    step["limits"] = json!({"concurrency": 4});
    step["work_config"] = json!({"max_retries": 0});
    app.register(&step).await;
    app.start_flow(&json!({"id": "first", "goals": ["limited"], "init": {"x": ["1"]}}))
        .await;
    // Once the 429 is answered, a second flow's call waits for the lane too.
    assert!(wait_until(Duration::from_secs(10), || !times.lock().unwrap().is_empty()).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    app.start_flow(&json!({"id": "second", "goals": ["limited"], "init": {"x": ["1"]}}))
        .await;
    let lanes = app.get("/engine/lanes").await;
    assert_eq!(lanes.body["lanes"][0]["paused"], true, "{}", lanes.body);
    let reason = lanes.body["lanes"][0]["pause_reason"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains("429"), "{reason}");
    let waiting = app.get("/engine/flow/second/work").await;
    let item = &waiting.body["work_items"][0];
    assert_eq!(item["lane"]["id"], "step:limited", "{}", waiting.body);
    for id in ["first", "second"] {
        let flow = app.wait_for_flow(id).await;
        assert_eq!(flow["status"], "completed", "{flow}");
        let tried = item_attempts(&flow, "limited");
        assert_eq!(tried.len(), 1, "a rate limit is no failed attempt: {flow}");
        assert_eq!(tried[0]["outcome"], "success");
    }
    let times = times.lock().unwrap().clone();
    assert_eq!(times.len(), 3, "the 429, then one call of each flow");
    for later in &times[1..] {
        let waited = *later - times[0];
        assert!(
            waited >= Duration::from_millis(1_900),
            "sent {waited:?} after the 429"
        );
    }
}

async fn the_breaker_opens_lets_a_canary_through_and_closes(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let times: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let seen = times.clone();
    let svc = StepServer::start(move |_, n| {
        seen.lock().unwrap().push(Instant::now());
        match n {
            0..=2 => json_reply(503, json!({"detail": "down"})),
            _ => json_reply(200, json!({"y": "up"})),
        }
    })
    .await;
    let mut step = sync_step("flaky", &svc.url("/f"), &["x"], &["y"]);
    step["limits"] = json!({"breaker": {"failures": 2, "cool_down": "1s"}});
    step["work_config"] = json!({"max_retries": 10, "backoff_type": "fixed", "init_backoff": 10});
    app.register(&step).await;
    app.start_flow(&json!({"id": "b", "goals": ["flaky"], "init": {"x": ["1"]}}))
        .await;
    // After two failures the breaker is open.
    assert!(wait_until(Duration::from_secs(10), || times.lock().unwrap().len() >= 2).await);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut open = false;
    while !open && Instant::now() < deadline {
        let lanes = app.get("/engine/lanes").await;
        open = lanes.body["lanes"][0]["breaker"]["state"] == "open";
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(open, "the breaker opened after two failures");
    let flow = app.wait_for_flow("b").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let times = times.lock().unwrap().clone();
    assert_eq!(times.len(), 4);
    // The canary (third call) waited out the cool-down; it failed, so the
    // breaker opened again and the fourth waited another cool-down.
    assert!(
        times[2] - times[1] >= Duration::from_millis(900),
        "{:?}",
        times[2] - times[1]
    );
    assert!(
        times[3] - times[2] >= Duration::from_millis(900),
        "{:?}",
        times[3] - times[2]
    );
    let lanes = app.get("/engine/lanes").await;
    let breaker = &lanes.body["lanes"][0]["breaker"];
    assert_eq!(breaker["state"], "closed", "{}", lanes.body);
    assert_eq!(breaker["failures"], 0);
}
