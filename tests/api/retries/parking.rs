//! `work_config.on_exhausted: "park"`: an item whose retries run out waits
//! for an operator instead of failing its step; resuming it calls it again
//! and nothing that succeeded (docs/retries.md, "Parking").

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{
    item_attempts, json_reply, spawn_app, sync_step, wait_until, Backend, StepServer, TestApp,
};
use tartan_testkit::both_backends;

both_backends!(
    an_exhausted_item_parks_the_flow_goes_on_and_a_resume_finishes_it,
    a_resume_may_reset_the_attempts,
    a_flow_deadline_still_ends_parked_work,
    resume_refusals_and_bad_settings,
    a_bulk_job_resumes_every_matching_flow,
);

/// `first` gives `a` at once; `flaky` needs `a` and fails its first
/// `failures` calls; `other` is independent and succeeds.
async fn register(app: &TestApp, svc: &StepServer, max_attempts: i64) {
    app.register(&sync_step("first", &svc.url("/first"), &["x"], &["a"]))
        .await;
    let mut flaky = sync_step("flaky", &svc.url("/flaky"), &["a"], &["b"]);
    flaky["work_config"] = json!({"max_attempts": max_attempts, "init_backoff": 10, "backoff_type": "fixed",
        "on_exhausted": "park"});
    let r = app.register(&flaky).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    app.register(&sync_step("other", &svc.url("/other"), &["x"], &["c"]))
        .await;
}

fn server(failures: usize) -> impl Fn(&crate::helpers::Received, usize) -> axum::response::Response {
    move |r, n| match r.path.as_str() {
        "/flaky" if n < failures => json_reply(503, json!({"detail": format!("down {n}")})),
        "/flaky" => json_reply(200, json!({"b": "up"})),
        "/first" => json_reply(200, json!({"a": "1"})),
        _ => json_reply(200, json!({"c": "1"})),
    }
}

async fn parked(app: &TestApp, id: &str) -> Value {
    let mut work = Value::Null;
    for _ in 0..400 {
        work = app.get(&format!("/engine/flow/{id}/work")).await.body;
        let items = work["work_items"].as_array().cloned().unwrap_or_default();
        if items.iter().any(|w| w["status"] == "parked") {
            return work;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("nothing parked in {id}: {work}");
}

/// The `flaky` step's item in a flow's work list.
fn flaky_item(work: &Value) -> Value {
    work["work_items"]
        .as_array()
        .and_then(|items| items.iter().find(|w| w["step_id"] == "flaky"))
        .cloned()
        .unwrap_or_else(|| panic!("no flaky item: {work}"))
}

fn calls(svc: &StepServer, path: &str) -> usize {
    svc.requests().iter().filter(|r| r.path == path).count()
}

async fn an_exhausted_item_parks_the_flow_goes_on_and_a_resume_finishes_it(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(server(2)).await;
    register(&app, &svc, 2).await;
    app.start_flow(&json!({"id": "p", "goals": ["flaky", "other"], "init": {"x": ["1"]}}))
        .await;
    let work = parked(&app, "p").await;
    let item = flaky_item(&work);
    assert_eq!(item["status"], "parked", "{item}");
    assert_eq!(item["retry_state"], "max_attempts");
    // The flow stays active; the independent step went on and completed.
    let other = wait_until(Duration::from_secs(10), || calls(&svc, "/other") == 1).await;
    assert!(other);
    let flow = app.flow("p").await;
    assert_eq!(flow["status"], "active", "{flow}");
    assert_eq!(flow["executions"]["flaky"]["status"], "active");
    let events = app.event_types("p").await;
    assert!(events.contains(&"work_parked".to_string()), "{events:?}");
    assert!(!events.contains(&"work_failed".to_string()), "{events:?}");
    let metrics = app.get("/metrics").await;
    let text = metrics.body.as_str().map(str::to_string).unwrap_or_default();
    assert!(text.contains("tartan_work_parked_total 1"), "{text}");

    let r = app.post("/engine/flow/p/resume", &json!({})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    assert_eq!(r.body["resumed"], 1);
    assert_eq!(r.body["reset_attempts"], false);
    let flow = app.wait_for_flow("p").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    // One more attempt, numbered on; what succeeded was not called again.
    let numbers: Vec<Value> = item_attempts(&flow, "flaky")
        .iter()
        .map(|a| a["number"].clone())
        .collect();
    assert_eq!(numbers, [json!(1), json!(2), json!(3)]);
    assert_eq!(calls(&svc, "/first"), 1);
    assert_eq!(calls(&svc, "/other"), 1);
    assert!(app.event_types("p").await.contains(&"work_resumed".to_string()));
}

async fn a_resume_may_reset_the_attempts(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // Three failures: two attempts park it, the reset gives two more.
    let svc = StepServer::start(server(3)).await;
    register(&app, &svc, 2).await;
    app.start_flow(&json!({"id": "r", "goals": ["flaky"], "init": {"x": ["1"]}}))
        .await;
    parked(&app, "r").await;
    let r = app
        .post("/engine/flow/r/resume", &json!({"reset_attempts": true}))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    let flow = app.wait_for_flow("r").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let numbers: Vec<Value> = item_attempts(&flow, "flaky")
        .iter()
        .map(|a| a["number"].clone())
        .collect();
    assert_eq!(
        numbers,
        [json!(1), json!(2)],
        "attempts counted from 1 again: {flow}"
    );
    assert_eq!(calls(&svc, "/flaky"), 4);
}

async fn a_flow_deadline_still_ends_parked_work(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(server(100)).await;
    register(&app, &svc, 1).await;
    app.start_flow(&json!({"id": "d", "goals": ["flaky"], "init": {"x": ["1"]}, "timeout": "800ms"}))
        .await;
    parked(&app, "d").await;
    let flow = app.wait_for_flow("d").await;
    assert_ne!(flow["status"], "active", "{flow}");
    let work = app.get("/engine/flow/d/work").await.body;
    let item = flaky_item(&work);
    assert_eq!(item["status"], "cancelled", "{item}");
}

async fn resume_refusals_and_bad_settings(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(server(0)).await;
    register(&app, &svc, 2).await;
    let r = app.post("/engine/flow/nothing/resume", &json!({})).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    app.start_flow(&json!({"id": "done", "goals": ["flaky"], "init": {"x": ["1"]}}))
        .await;
    assert_eq!(app.wait_for_flow("done").await["status"], "completed");
    let r = app.post("/engine/flow/done/resume", &json!({})).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{:?}", r.body);
    assert!(r.body["detail"]
        .as_str()
        .unwrap_or_default()
        .contains("completed"));
    let r = app
        .post("/engine/flow/done/resume", &json!({"reset": true}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    let r = app.post("/engine/flow/done/resume", &json!([true])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    let mut bad = sync_step("bad", "http://127.0.0.1:9/x", &["x"], &["y"]);
    bad["work_config"] = json!({"on_exhausted": "retry_forever"});
    let r = app.register(&bad).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    assert!(r.body["detail"]
        .as_str()
        .unwrap_or_default()
        .contains("work_config.on_exhausted"));
}

async fn a_bulk_job_resumes_every_matching_flow(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(server(4)).await;
    register(&app, &svc, 1).await;
    for i in 0..3 {
        app.start_flow(&json!({"id": format!("bp-{i}"), "goals": ["flaky"], "init": {"x": ["1"]}}))
            .await;
    }
    for i in 0..3 {
        parked(&app, &format!("bp-{i}")).await;
    }
    // Three calls failed; one more fails, then each succeeds.
    let r = app
        .post(
            "/engine/bulk/resume",
            &json!({"filter": {"id_prefix": "bp-"}, "dry_run": true}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body["matched"], 3);
    let r = app
        .post(
            "/engine/bulk/resume",
            &json!({"filter": {"id_prefix": "bp-"}, "rate": 100}),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    assert_eq!(r.body["kind"], "resume");
    let job = r.body["id"].as_str().unwrap().to_string();
    let mut done = Value::Null;
    for _ in 0..400 {
        done = app.get(&format!("/engine/bulk/{job}")).await.body;
        if !matches!(done["status"].as_str(), Some("queued" | "running")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["done"], 3, "{done}");
    // One flow's resumed call fails again and parks it; resume it by hand.
    let mut statuses = Vec::new();
    for i in 0..3 {
        let id = format!("bp-{i}");
        for _ in 0..400 {
            let work = app.get(&format!("/engine/flow/{id}/work")).await.body;
            let items = work["work_items"].as_array().cloned().unwrap_or_default();
            if items.iter().any(|w| w["status"] == "parked") {
                app.post(&format!("/engine/flow/{id}/resume"), &json!({})).await;
            }
            let flow = app.flow(&id).await;
            if flow["status"] == "completed" {
                statuses.push(flow["status"].clone());
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
    assert_eq!(statuses.len(), 3, "every flow completed");
}
