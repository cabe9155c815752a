//! Flows over the API: planning, dispatch, completion and failure.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::{json, Value};
use tokio::sync::Barrier;

use crate::helpers::{json_reply, spawn_app, sync_step, waiting_status, Backend, StepServer};
use tartan_testkit::both_backends;

both_backends!(
    a_chain_of_steps_runs_in_order_and_completes_the_flow,
    only_the_steps_the_goals_need_are_run,
    independent_steps_run_concurrently,
    a_failing_step_fails_the_flow_with_its_error,
    a_flow_is_started_once_per_id,
    flows_can_be_listed_and_queried,
    a_status_request_that_waits_answers_when_the_flow_finishes,
);

/// A step server that upper-cases or greets, echoing what it was sent.
async fn greeter() -> StepServer {
    StepServer::start(|r, _| match r.path.as_str() {
        p if p.starts_with("/greet") => json_reply(
            200,
            json!({"greeting": format!("hello {}", r.body["who"].as_str().unwrap_or("?")), "extra": 1}),
        ),
        "/shout" => json_reply(
            200,
            json!({"loud": r.body["greeting"].as_str().unwrap_or("").to_uppercase()}),
        ),
        _ => json_reply(404, json!({})),
    })
    .await
}

async fn a_chain_of_steps_runs_in_order_and_completes_the_flow(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = greeter().await;
    // `name` is sent as `who` (mapping) and fills the path placeholder.
    let greet = json!({
        "id": "greet", "name": "Greet", "type": "sync",
        "http": {"endpoint": svc.url("/greet/{who}")},
        "attributes": {
            "name": {"role": "required", "type": "string", "required": {"mapping": {"name": "who"}}},
            "greeting": {"role": "output", "type": "string"},
            "flow": {"role": "meta", "meta": {"key": "flow_id"}}
        }
    });
    assert_eq!(app.register(&greet).await.status, StatusCode::CREATED);
    app.register(&sync_step("shout", &svc.url("/shout"), &["greeting"], &["loud"]))
        .await;

    let r = app
        .start_flow(&json!({"id": "F1", "goals": ["shout"], "init": {"name": ["Ada Lovelace/1"]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(r.body, json!({"message": "", "flow_id": "f1"}));

    let flow = app.wait_for_flow("f1").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["attributes"]["loud"][0]["value"], "HELLO ADA LOVELACE/1");
    assert_eq!(flow["attributes"]["loud"][0]["step"], "shout");
    assert_eq!(flow["attributes"]["greeting"][0]["step"], "greet");
    assert!(
        flow["attributes"]["name"][0]["step"].is_null(),
        "init values have no step"
    );
    assert!(
        flow["attributes"].get("extra").is_none(),
        "undeclared outputs are not attributes"
    );
    assert_eq!(flow["executions"]["greet"]["status"], "completed");
    assert_eq!(
        flow["executions"]["shout"]["outputs"]["loud"],
        "HELLO ADA LOVELACE/1"
    );
    assert!(flow["completed_at"].is_string() && flow["deactivated_at"].is_string());

    let reqs = svc.requests();
    assert_eq!(reqs.len(), 2);
    let g = &reqs[0];
    assert_eq!(g.method, axum::http::Method::POST);
    assert_eq!(
        g.path, "/greet/Ada%20Lovelace%2F1",
        "placeholders are path-escaped"
    );
    assert_eq!(
        g.body,
        json!({"who": "Ada Lovelace/1", "flow": "f1"}),
        "inputs by inner name"
    );
    assert_eq!(g.headers["argyll-flow-id"], "f1");
    assert_eq!(g.headers["argyll-step-id"], "greet");
    assert_eq!(g.headers["content-type"], "application/json");
    assert_eq!(g.headers["accept"], "application/json");
    assert_eq!(g.headers["tartan-attempt"], "1");
    assert!(
        g.headers.get("argyll-webhook-url").is_none(),
        "sync steps get no webhook"
    );
    // As Argyll sends them: its engine's product first, a hyphenated UUID.
    let agent = g.headers["user-agent"].to_str().unwrap();
    assert!(agent.starts_with("Argyll-Engine/0.1 Tartan/"), "{agent}");
    let token = g.headers["argyll-receipt-token"].to_str().unwrap();
    assert!(
        uuid::Uuid::try_parse(token).is_ok() && token.len() == 36,
        "{token}"
    );
    let work = &flow["executions"]["greet"]["work_items"][token];
    assert_eq!(
        work["status"], "succeeded",
        "the token sent is the work item's: {flow}"
    );
    assert_eq!(work["attempts"][0]["number"], 1);
    assert_eq!(work["attempts"][0]["outcome"], "success");
    assert_eq!(work["attempts"][0]["http_status"], 200);
    assert!(g.headers["traceparent"].to_str().unwrap().starts_with("00-"));

    assert_eq!(
        app.event_types("f1").await,
        [
            "flow_started",
            "step_started",
            "work_started",
            "work_succeeded",
            "attribute_set",
            "step_completed",
            "step_started",
            "work_started",
            "work_succeeded",
            "attribute_set",
            "step_completed",
            "flow_completed",
            "flow_deactivated"
        ]
    );
    let status = app.get("/engine/flow/f1/status").await;
    assert_eq!(status.body, json!({"id": "f1", "status": "completed"}));
    let work = app.get("/engine/flow/f1/work").await;
    assert_eq!(work.body["count"], 2);
    assert!(work.body["work_items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|w| w["status"] == "succeeded"));
}

async fn only_the_steps_the_goals_need_are_run(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = greeter().await;
    app.register(&sync_step("greet", &svc.url("/greet"), &["who"], &["greeting"]))
        .await;
    app.register(&sync_step("shout", &svc.url("/shout"), &["greeting"], &["loud"]))
        .await;
    app.register(&sync_step(
        "unrelated",
        &svc.url("/unrelated"),
        &["who"],
        &["other"],
    ))
    .await;

    let plan = app
        .post(
            "/engine/plan",
            &json!({"goals": ["shout"], "init": {"who": ["x"]}}),
        )
        .await;
    assert_eq!(plan.status, StatusCode::OK);
    let steps: Vec<&String> = plan.body["steps"].as_object().unwrap().keys().collect();
    assert_eq!(steps, ["greet", "shout"]);
    assert_eq!(plan.body["required"], json!([]));

    // The greeting is given, so `greet` is not needed at all.
    let r = app
        .start_flow(&json!({"id": "f", "goals": ["shout"], "init": {"greeting": ["hi"]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let flow = app.wait_for_flow("f").await;
    assert_eq!(flow["status"], "completed");
    let planned: Vec<&String> = flow["plan"]["steps"].as_object().unwrap().keys().collect();
    assert_eq!(planned, ["shout"]);
    let paths: Vec<String> = svc.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, ["/shout"]);

    let preview = app.post("/engine/plan", &json!({"goals": ["shout"]})).await;
    assert_eq!(
        preview.body["required"],
        json!(["who"]),
        "preview names the missing root input"
    );
    let missing = app.start_flow(&json!({"id": "g", "goals": ["shout"]})).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert!(
        missing.body["detail"].as_str().unwrap().contains("who"),
        "{:?}",
        missing.body
    );
    assert_eq!(
        app.get("/engine/flow/g").await.status,
        StatusCode::NOT_FOUND,
        "no partial state"
    );
    let unknown = app.start_flow(&json!({"id": "h", "goals": ["nope"]})).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.content_type, "application/problem+json");
}

async fn independent_steps_run_concurrently(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // Each call waits until both have arrived: run one after the other, they
    // would both time out.
    let barrier = Arc::new(Barrier::new(2));
    let svc = StepServer::start_async(move |r, _| {
        let barrier = barrier.clone();
        Box::pin(async move {
            let met = tokio::time::timeout(Duration::from_secs(3), barrier.wait())
                .await
                .is_ok();
            let key = r.path.trim_start_matches('/').to_string();
            if met {
                json_reply(200, json!({ key: "done" }))
            } else {
                json_reply(500, json!({}))
            }
        })
    })
    .await;
    app.register(&sync_step("left", &svc.url("/left"), &["seed"], &["left"]))
        .await;
    app.register(&sync_step("right", &svc.url("/right"), &["seed"], &["right"]))
        .await;
    app.register(&sync_step(
        "join",
        &svc.url("/join"),
        &["left", "right"],
        &["joined"],
    ))
    .await;
    let barrier2 = app
        .start_flow(&json!({"id": "c", "goals": ["left", "right"], "init": {"seed": ["s"]}}))
        .await;
    assert_eq!(barrier2.status, StatusCode::CREATED);
    let flow = app.wait_for_flow("c").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(svc.requests().len(), 2);
}

async fn a_failing_step_fails_the_flow_with_its_error(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/ok" => json_reply(200, json!({"mid": "m"})),
        _ => (
            StatusCode::NOT_FOUND,
            [("content-type", "application/problem+json")],
            json!({"title": "Not Found", "status": 404, "detail": "no such order"}).to_string(),
        )
            .into_response(),
    })
    .await;
    app.register(&sync_step("first", &svc.url("/ok"), &["seed"], &["mid"]))
        .await;
    app.register(&sync_step("second", &svc.url("/fail"), &["mid"], &["out"]))
        .await;
    app.register(&sync_step("third", &svc.url("/ok"), &["out"], &["final"]))
        .await;
    app.start_flow(&json!({"id": "x", "goals": ["third"], "init": {"seed": ["s"]}}))
        .await;
    let flow = app.wait_for_flow("x").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    assert_eq!(flow["executions"]["second"]["status"], "failed");
    assert_eq!(flow["executions"]["second"]["error"], "no such order");
    // Its input can no longer arrive: it fails too (as Argyll).
    assert_eq!(flow["executions"]["third"]["status"], "failed");
    assert_eq!(
        flow["executions"]["third"]["error"],
        "required input no longer available"
    );
    assert!(flow["error"].as_str().unwrap().contains("third"), "{flow}");
    let work: Vec<&Value> = flow["executions"]["second"]["work_items"]
        .as_object()
        .unwrap()
        .values()
        .collect();
    assert_eq!(work[0]["status"], "failed");
    assert_eq!(work[0]["attempts"][0]["outcome"], "permanent");
    assert_eq!(work[0]["attempts"][0]["http_status"], 404);
    let types = app.event_types("x").await;
    assert!(types.contains(&"work_failed".to_string()));
    assert_eq!(
        types.iter().filter(|t| *t == "step_failed").count(),
        2,
        "{types:?}"
    );
    assert_eq!(types.last().map(String::as_str), Some("flow_deactivated"));
    let failed = app.get("/engine/work?status=failed").await;
    assert_eq!(failed.body["count"], 1);
    assert_eq!(failed.body["work_items"][0]["step_id"], "second");
    assert_eq!(failed.body["work_items"][0]["last_error"], "no such order");
}

async fn a_flow_is_started_once_per_id(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = greeter().await;
    app.register(&sync_step("greet", &svc.url("/greet"), &["who"], &["greeting"]))
        .await;
    let body = json!({"id": "once", "goals": ["greet"], "init": {"who": ["a"]}, "labels": {"team": "x"}});
    assert_eq!(app.start_flow(&body).await.status, StatusCode::CREATED);
    assert_eq!(
        app.start_flow(&body).await.status,
        StatusCode::CREATED,
        "identical repeat"
    );
    let mut other = body.clone();
    other["init"]["who"] = json!(["b"]);
    let r = app.start_flow(&other).await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(r.content_type, "application/problem+json");
    app.wait_for_flow("once").await;
    assert_eq!(svc.requests().len(), 1, "the repeat started nothing");
}

async fn flows_can_be_listed_and_queried(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = greeter().await;
    app.register(&sync_step("greet", &svc.url("/greet"), &["who"], &["greeting"]))
        .await;
    for i in 0..5 {
        let team = if i % 2 == 0 { "even" } else { "odd" };
        let r = app
            .start_flow(&json!({"id": format!("q_{i}"), "goals": ["greet"], "init": {"who": ["a"]}, "labels": {"team": team}}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED);
        app.wait_for_flow(&format!("q_{i}")).await;
    }
    let list = app.get("/engine/flow").await;
    let ids: Vec<&str> = list
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["q_4", "q_3", "q_2", "q_1", "q_0"], "most recent first");
    assert!(list.body[0]["timestamp"].is_string() && list.body[0]["status"] == "completed");

    let q = app
        .post(
            "/engine/flow/query",
            &json!({"labels": {"team": "even"}, "sort": "recent_asc"}),
        )
        .await;
    let ids: Vec<&str> = q.body["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["q_0", "q_2", "q_4"]);
    assert_eq!(q.body["count"], 3);

    let mut seen = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = app
            .post(
                "/engine/flow/query",
                &json!({"id_prefix": "q_", "limit": 2, "cursor": cursor}),
            )
            .await;
        assert_eq!(page.status, StatusCode::OK, "{:?}", page.body);
        for f in page.body["flows"].as_array().unwrap() {
            seen.push(f["id"].as_str().unwrap().to_string());
        }
        // Every page counts every match.
        assert_eq!(page.body["total"], 5, "{:?}", page.body);
        match page.body["next_cursor"].as_str() {
            Some(c) => {
                assert_eq!(page.body["has_more"], true);
                cursor = c.to_string();
            }
            None => break,
        }
    }
    assert_eq!(
        seen,
        ["q_0", "q_1", "q_2", "q_3", "q_4"],
        "oldest first, as Argyll's default"
    );
    let none = app
        .post("/engine/flow/query", &json!({"statuses": ["failed"]}))
        .await;
    assert_eq!(none.body["flows"], json!([]));
    let bad = app
        .post("/engine/flow/query", &json!({"statuses": ["sleeping"]}))
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let bad = app.post("/engine/flow/query", &json!({"limit": 5000})).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

/// `GET /engine/flow/{id}/status?wait=D` answers as soon as the flow is no
/// longer active, and no later than `D` while it is; bad waits are 400s.
async fn a_status_request_that_waits_answers_when_the_flow_finishes(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let release = Arc::new(tokio::sync::Notify::new());
    let gate = release.clone();
    let svc = StepServer::start_async(move |_, _| {
        let gate = gate.clone();
        Box::pin(async move {
            gate.notified().await;
            json_reply(200, json!({"greeting": "hi"})).into_response()
        })
    })
    .await;
    app.register(&sync_step("greet", &svc.url("/greet"), &["who"], &["greeting"]))
        .await;
    let r = app
        .start_flow(&json!({"id": "waited", "goals": ["greet"], "init": {"who": ["a"]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED);

    // A wait that runs out while the flow runs answers `active`.
    let r = app.get("/engine/flow/waited/status?wait=100").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["status"], "active");

    // A long wait is still waiting while the step holds its answer ...
    let waiting = waiting_status(&app, "waited");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "answered before the flow finished");
    // ... and answers once it finishes, long before its 30 s.
    while svc.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    release.notify_waiters();
    let r = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .unwrap_or_else(|_| panic!("the waiting request did not answer when the flow finished"))
        .unwrap_or_else(|e| panic!("waiting task: {e}"));
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body, json!({"id": "waited", "status": "completed"}));

    // A finished flow answers at once; what cannot be waited for is refused.
    let r = app.get("/engine/flow/waited/status?wait=30s").await;
    assert_eq!(r.body["status"], "completed");
    let r = app.get("/engine/flow/nope/status?wait=1s").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    for (wait, says) in [("soon", "wait:"), ("61s", "at most 60 s"), ("-5s", "wait:")] {
        let r = app.get(&format!("/engine/flow/waited/status?wait={wait}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "wait={wait}");
        assert_eq!(r.content_type, "application/problem+json");
        let detail = r.body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(says), "wait={wait}: {detail}");
    }
}
