//! How long a sub-flow's child lives (docs/steps.md, "Sub-flows"): it is
//! cancelled with its parent, and stopped when its parent fails; its flow
//! step's attempt timeout bounds it; it is durable across a kill of the
//! engine, waited for again rather than started anew.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;
use tartan_testkit::{both_backends, TestDb};

use super::subflows::{children, doubler, registered, started, sub_flow, sub_step};
use crate::helpers::{
    call, json_reply, only_item, spawn_app, spawn_binary, sync_step, wait_for_terminal, Backend, StepServer,
};

both_backends!(
    cancelling_the_parent_cancels_its_child,
    a_failing_parent_stops_its_children,
    a_child_is_durable_across_a_kill,
    a_flow_steps_attempt_timeout_bounds_its_child,
);

/// A child step that never answers.
async fn hanging() -> StepServer {
    StepServer::start_async(|_, _| {
        Box::pin(async move {
            std::future::pending::<()>().await;
            json_reply(200, json!({}))
        })
    })
    .await
}

async fn called(svc: &StepServer, n: usize) {
    for _ in 0..400 {
        if svc.requests().len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the child's step was not called");
}

async fn cancelling_the_parent_cancels_its_child(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = hanging().await;
    registered(&app, &[doubler(&svc), sub_step()]).await;
    started(&app, &sub_flow("p5", 1)).await;
    called(&svc, 1).await;
    let r = app.post("/engine/flow/p5/cancel", &json!({})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    let parent = app.wait_for_flow("p5").await;
    assert_eq!(parent["status"], "cancelled", "{parent}");
    let kid = children(&parent, "sub").remove(0);
    let child = app.wait_for_flow(&kid).await;
    assert_eq!(child["status"], "cancelled", "{child}");
    assert!(
        child["error"]
            .as_str()
            .unwrap_or_default()
            .contains("parent flow p5"),
        "{child}"
    );
}

async fn a_failing_parent_stops_its_children(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = hanging().await;
    // `bad` fails while p7's child runs: only once that child's step has
    // been called (the second call the hanging service gets), else the
    // parent could fail before its child had a place to start.
    let seen = svc.received.clone();
    let failing = StepServer::start_async(move |_, _| {
        let seen = seen.clone();
        Box::pin(async move {
            for _ in 0..1000 {
                if seen.lock().map(|r| r.len()).unwrap_or(0) >= 2 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            json_reply(400, json!({"error": "no"}))
        })
    })
    .await;
    let mut bad = sync_step("bad", &failing.url("/bad"), &["go"], &["nope"]);
    bad["work_config"] = json!({"max_attempts": 1});
    registered(&app, &[doubler(&svc), sub_step(), bad]).await;
    // Killed (cancelled without compensation): the child is killed too.
    started(&app, &sub_flow("p6", 1)).await;
    called(&svc, 1).await;
    let r = app
        .post("/engine/flow/p6/cancel?compensate=false", &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    let parent = app.wait_for_flow("p6").await;
    let kid = children(&parent, "sub").remove(0);
    assert_eq!(app.wait_for_flow(&kid).await["status"], "cancelled");

    // Failing: one goal fails for good while the child still runs.
    started(
        &app,
        &json!({"id": "p7", "goals": ["sub", "bad"], "init": {"amount": [1], "go": ["x"]}}),
    )
    .await;
    let parent = app.wait_for_flow("p7").await;
    assert_eq!(parent["status"], "failed", "{parent}");
    assert_eq!(parent["executions"]["sub"]["status"], "cancelled", "{parent}");
    let kid = children(&parent, "sub").remove(0);
    let child = app.wait_for_flow(&kid).await;
    assert_eq!(child["status"], "cancelled", "{child}");
}

/// The child's step hangs on its first call and answers the second.
async fn hangs_once() -> StepServer {
    StepServer::start_async(|r, n| {
        Box::pin(async move {
            if n == 0 {
                std::future::pending::<()>().await;
            }
            let v = r.body["n"].as_i64().unwrap_or(0);
            json_reply(200, json!({"doubled": v * 2}))
        })
    })
    .await
}

async fn a_child_is_durable_across_a_kill(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let svc = hangs_once().await;
    let engine = spawn_binary(&db, "subflow-kill").await;
    // The child's step is called again after the kill, as any cut-off call.
    let mut double = doubler(&svc);
    double["work_config"] = json!({"max_retries": 2, "init_backoff": 10, "backoff_type": "fixed"});
    for step in [double, sub_step()] {
        let (status, body) = call(&engine, reqwest::Method::POST, "/engine/step", Some(step)).await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(json!({"id": "k", "goals": ["sub"], "init": {"amount": [4]}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    called(&svc, 1).await;
    let mut engine = engine;
    engine.child.kill().await.expect("SIGKILL");

    let engine = spawn_binary(&db, "subflow-kill").await;
    let parent = wait_for_terminal(&engine, "k").await;
    assert_eq!(parent["status"], "completed", "{parent}");
    assert_eq!(parent["attributes"]["result"][0]["value"], json!(8), "{parent}");
    let kids = children(&parent, "sub");
    assert_eq!(kids.len(), 1, "the same child was waited for again: {parent}");
    let (_, child) = call(
        &engine,
        reqwest::Method::GET,
        &format!("/engine/flow/{}", kids[0]),
        None,
    )
    .await;
    assert_eq!(child["status"], "completed", "{child}");
    assert_eq!(svc.requests().len(), 2, "the child's cut-off call was made again");
    let (_, events) = call(&engine, reqwest::Method::GET, "/engine/flow/k/events", None).await;
    let started = events["events"]
        .as_array()
        .map(|a| a.iter().filter(|e| e["type"] == "work_started").count())
        .unwrap_or(0);
    assert_eq!(started, 1, "no new attempt of the flow step: {events}");
}

async fn a_flow_steps_attempt_timeout_bounds_its_child(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = hanging().await;
    let mut sub = sub_step();
    sub["timeouts"] = json!({"attempt": "300ms"});
    sub["work_config"] = json!({"max_attempts": 1});
    registered(&app, &[doubler(&svc), sub]).await;
    started(&app, &sub_flow("p8", 1)).await;
    let parent = app.wait_for_flow("p8").await;
    assert_eq!(parent["status"], "failed", "{parent}");
    let item = only_item(&parent, "sub");
    assert_eq!(item["error"], "attempt timeout after 300 ms", "{item}");
    assert_eq!(item["problem"]["timeout_scope"], "attempt", "{item}");
    let kid = children(&parent, "sub").remove(0);
    let child = app.wait_for_flow(&kid).await;
    assert_eq!(child["status"], "failed", "{child}");
    assert_eq!(child["problem"]["timeout_scope"], "flow", "{child}");
}
