//! Operators see every lane and pause and resume one.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;

use crate::helpers::{json_reply, spawn_app, sync_step, Backend, StepServer};
use tartan_testkit::both_backends;

both_backends!(
    a_paused_lane_holds_its_calls_until_resumed,
    unknown_lanes_and_bad_pauses_are_refused,
);

async fn a_paused_lane_holds_its_calls_until_resumed(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"y": "ok"}))).await;
    let mut step = sync_step("held", &svc.url("/h"), &["x"], &["y"]);
    step["limits"] = json!({"concurrency": 3});
    app.register(&step).await;
    let listed = app.get("/engine/lanes").await;
    assert_eq!(
        listed.body["count"], 1,
        "a declared lane is listed before any call: {}",
        listed.body
    );
    assert_eq!(listed.body["lanes"][0]["paused"], false);

    let paused = app.post("/engine/lanes/step:held/pause", &json!({})).await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.body);
    assert_eq!(paused.body["paused"], true);
    assert!(
        paused.body.get("paused_until").is_none(),
        "until resumed: {}",
        paused.body
    );
    app.start_flow(&json!({"id": "waits", "goals": ["held"], "init": {"x": ["1"]}}))
        .await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(svc.requests().is_empty(), "no call while the lane is paused");
    let work = app.get("/engine/flow/waits/work").await;
    assert_eq!(
        work.body["work_items"][0]["lane"]["id"], "step:held",
        "{}",
        work.body
    );
    assert_eq!(work.body["work_items"][0]["status"], "active");

    let resumed = app.post("/engine/lanes/step:held/resume", &json!({})).await;
    assert_eq!(resumed.status, StatusCode::OK, "{}", resumed.body);
    assert_eq!(resumed.body["paused"], false);
    let flow = app.wait_for_flow("waits").await;
    assert_eq!(flow["status"], "completed", "{flow}");

    // A timed pause ends by itself.
    let timed = app
        .post("/engine/lanes/step:held/pause", &json!({"for": "300ms"}))
        .await;
    assert_eq!(timed.status, StatusCode::OK, "{}", timed.body);
    assert!(timed.body["paused_until"].is_string(), "{}", timed.body);
    app.start_flow(&json!({"id": "later", "goals": ["held"], "init": {"x": ["1"]}}))
        .await;
    assert_eq!(app.wait_for_flow("later").await["status"], "completed");
}

async fn unknown_lanes_and_bad_pauses_are_refused(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let r = app.post("/engine/lanes/step:nothing/pause", &json!({})).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert_eq!(r.content_type, "application/problem+json");
    let r = app.post("/engine/lanes/host:nowhere/resume", &json!({})).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let mut step = sync_step("s", "http://127.0.0.1:9/x", &["x"], &["y"]);
    step["limits"] = json!({"rate": "1/s"});
    app.register(&step).await;
    for (body, says) in [
        (json!({"for": "soon"}), "for:"),
        (json!({"for": -5}), "for:"),
        (json!({"for": "100000d"}), "366 days"),
        (json!({"for": "0s"}), "for:"),
        (json!({"until": "1s"}), "until"),
        (json!([1]), "JSON object"),
    ] {
        let r = app.post("/engine/lanes/step:s/pause", &body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.body);
        let detail = r.body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(says), "{body}: {detail}");
    }
}
