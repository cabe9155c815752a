//! `POST /engine/flow/{id}/work/{token}/retry`: an item waiting an hour
//! for its retry starts its next attempt at once; what it refuses and why
//! (docs/retries.md, "Retry now").

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{
    events, held_server, item_attempts, json_reply, of_type, spawn_app, sync_step, Backend, StepServer,
    TestApp,
};
use tartan_testkit::both_backends;

both_backends!(
    an_item_waiting_an_hour_is_retried_at_once_and_the_wait_is_recorded,
    retry_now_refuses_what_does_not_wait_for_a_retry,
);

/// `flaky` fails its first call with a 503 and waits an hour for its retry.
async fn register_flaky(app: &TestApp, svc: &StepServer) {
    let mut flaky = sync_step("flaky", &svc.url("/flaky"), &["x"], &["y"]);
    flaky["work_config"] =
        json!({"max_attempts": 3, "init_backoff": "1h", "max_backoff": "1h", "backoff_type": "fixed"});
    let r = app.register(&flaky).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
}

/// The flow's only item of `step`, once it waits for a retry.
async fn waiting_item(app: &TestApp, id: &str, step: &str) -> Value {
    let mut work = Value::Null;
    for _ in 0..400 {
        work = app.get(&format!("/engine/flow/{id}/work")).await.body;
        let item = work["work_items"]
            .as_array()
            .and_then(|items| items.iter().find(|w| w["step_id"] == step))
            .cloned();
        if let Some(item) = item.filter(|w| !w["next_retry_at"].is_null()) {
            return item;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{step} of {id} never waited for a retry: {work}");
}

async fn an_item_waiting_an_hour_is_retried_at_once_and_the_wait_is_recorded(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, n| match n {
        0 => json_reply(503, json!({"detail": "down for maintenance"})),
        _ => json_reply(200, json!({"y": "up"})),
    })
    .await;
    register_flaky(&app, &svc).await;
    app.start_flow(&json!({"id": "r", "goals": ["flaky"], "init": {"x": ["1"]}}))
        .await;
    let item = waiting_item(&app, "r", "flaky").await;
    let due: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(item["next_retry_at"].clone()).expect("a time");
    let wait = due - chrono::Utc::now();
    assert!(
        wait > chrono::Duration::minutes(50),
        "the retry waits an hour: {item}"
    );
    let token = item["token"].as_str().expect("a token").to_string();

    let r = app
        .post(&format!("/engine/flow/r/work/{token}/retry"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    assert_eq!(r.body["message"], "Retry started");
    assert_eq!(r.body["step_id"], "flaky");
    assert_eq!(r.body["token"], token.as_str());
    assert_eq!(r.body["was_due_at"], item["next_retry_at"], "{:?}", r.body);
    // Running, or already answered by the fast step.
    assert!(
        (r.body["status"] == "active" && r.body["attempt"] == 2) || r.body["status"] == "succeeded",
        "{:?}",
        r.body
    );

    let flow = app.wait_for_flow("r").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["attributes"]["y"][0]["value"], "up", "{flow}");
    let attempts = item_attempts(&flow, "flaky");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(attempts[0]["outcome"], "retryable", "{attempts:?}");
    assert_eq!(
        attempts[0]["delay"]["delay_ms"], 3_600_000,
        "the scheduled wait is kept"
    );
    assert!(attempts[0]["hastened_at"].is_string(), "{attempts:?}");
    assert_eq!(attempts[1]["hastened_at"], Value::Null);
    assert_eq!(svc.requests().len(), 2);
    let all = events(&app, "r").await;
    let hastened = of_type(&all, "work_retry_hastened");
    assert_eq!(hastened.len(), 1, "{all:?}");
    assert_eq!(hastened[0]["data"]["was_due_at"], item["next_retry_at"]);
    assert_eq!(hastened[0]["data"]["token"], token.as_str());

    // The flow has ended: nothing waits any more.
    let r = app
        .post(&format!("/engine/flow/r/work/{token}/retry"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{:?}", r.body);
    assert!(
        r.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("flow r is completed")),
        "{:?}",
        r.body
    );
}

async fn retry_now_refuses_what_does_not_wait_for_a_retry(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let (release, svc) = held_server().await;
    let r = app
        .register(&sync_step("work", &svc.url("/held"), &["x"], &["held"]))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let r = app
        .start_flow(&json!({"id": "h", "goals": ["work"], "init": {"x": ["1"]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let mut token = String::new();
    for _ in 0..400 {
        let work = app.get("/engine/flow/h/work").await.body;
        if let Some(t) = work["work_items"][0]["token"]
            .as_str()
            .filter(|_| !svc.requests().is_empty())
        {
            token = t.to_string();
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(!token.is_empty(), "the held call never went out");

    // Its call is running: nothing to hasten.
    let r = app
        .post(&format!("/engine/flow/h/work/{token}/retry"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{:?}", r.body);
    assert_eq!(r.content_type, "application/problem+json");
    assert!(
        r.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("it is active, not waiting for a retry")),
        "{:?}",
        r.body
    );
    // No such item, no such flow.
    let r = app
        .post("/engine/flow/h/work/no-such-token/retry", &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:?}", r.body);
    assert!(
        r.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("no work item no-such-token")),
        "{:?}",
        r.body
    );
    let r = app
        .post(&format!("/engine/flow/nope/work/{token}/retry"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:?}", r.body);
    let _ = release.send(true);
    let flow = app.wait_for_flow("h").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(svc.requests().len(), 1, "the refused requests called nothing");
}
