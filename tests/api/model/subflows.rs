//! Sub-flows (`type: flow`): each work item of a flow step runs a child
//! flow for the step's `flow.goals`; inputs and outputs map by
//! `mapping.name`; the child's end decides the item (docs/steps.md,
//! "Sub-flows"). Ported from Argyll's flow-start and flow-stop tests where
//! noted.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use tartan_testkit::{both_backends, TestDb};

use crate::helpers::{
    call, json_reply, spawn_app, spawn_binary, sync_step, wait_for_terminal, Backend, StepServer, TestApp,
};

both_backends!(
    a_flow_step_runs_its_child_with_mapped_inputs_and_outputs,
    a_failed_child_fails_the_item_and_the_retry_policy_runs_a_new_child,
    a_mapped_output_the_child_lacks_fails_the_item_for_good,
    a_cycle_through_flow_goals_is_refused_at_registration,
    flow_steps_are_validated_at_registration,
    a_sub_flow_that_needs_inputs_its_step_never_passes_is_refused_at_start,
    cancelling_the_parent_cancels_its_child,
    a_failing_parent_stops_its_children,
    a_child_is_durable_across_a_kill,
    a_flow_steps_attempt_timeout_bounds_its_child,
    sub_flows_fan_out_and_nest,
    retrying_a_failed_parent_runs_a_new_child,
);

/// A flow step running `goals`, its inputs and outputs given as
/// `(attribute, name in the child)`.
fn flow_step(id: &str, goals: &[&str], inputs: &[(&str, &str)], outputs: &[(&str, &str)]) -> Value {
    let mut attributes = serde_json::Map::new();
    for (attr, inner) in inputs {
        attributes.insert(
            (*attr).into(),
            json!({"role": "required", "required": {"mapping": {"name": inner}}}),
        );
    }
    for (attr, inner) in outputs {
        attributes.insert(
            (*attr).into(),
            json!({"role": "output", "output": {"mapping": {"name": inner}}}),
        );
    }
    json!({
        "id": id, "name": id, "type": "flow",
        "flow": {"goals": goals},
        "attributes": attributes,
        "work_config": {"max_retries": -1, "init_backoff": 10, "backoff_type": "fixed"},
    })
}

/// `sub`: a flow step running `double` on its `amount`, its `result` the
/// child's `doubled`.
fn sub_step() -> Value {
    flow_step("sub", &["double"], &[("amount", "n")], &[("result", "doubled")])
}

/// A start of `sub` as flow `id`.
fn sub_flow(id: &str, amount: i64) -> Value {
    json!({"id": id, "goals": ["sub"], "init": {"amount": [amount]}})
}

/// A child step answering `{"doubled": n * 2}`, and echoing the parent meta
/// values it asks for.
fn doubler(svc: &StepServer) -> Value {
    json!({
        "id": "double", "name": "double", "type": "sync",
        "http": {"endpoint": svc.url("/double")},
        "attributes": {
            "n": {"role": "required", "type": "number"},
            "doubled": {"role": "output", "type": "number"},
            "parent": {"role": "meta", "meta": {"key": "parent_flow_id"}},
        },
        "work_config": {"max_attempts": 1},
    })
}

/// Start a flow, which must be accepted.
async fn started(app: &TestApp, body: &Value) {
    let r = app.start_flow(body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{body}: {:?}", r.body);
}

async fn registered(app: &TestApp, steps: &[Value]) {
    for step in steps {
        let r = app.register(step).await;
        assert_eq!(r.status, StatusCode::CREATED, "{step}: {:?}", r.body);
    }
}

/// The child flow ids of the parent's item of `step` (there is one item).
fn children(flow: &Value, step: &str) -> Vec<String> {
    let items = flow["executions"][step]["work_items"]
        .as_object()
        .unwrap_or_else(|| panic!("no items of {step}: {flow}"));
    assert_eq!(items.len(), 1, "{flow}");
    items
        .values()
        .flat_map(|w| w["children"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c.as_str().map(String::from))
        .collect()
}

async fn listed_ids(app: &TestApp, query: Value) -> Vec<String> {
    let r = app.post("/engine/flow/query", &query).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    r.body["flows"]
        .as_array()
        .unwrap_or_else(|| panic!("{:?}", r.body))
        .iter()
        .filter_map(|f| f["id"].as_str().map(String::from))
        .collect()
}

// Argyll: TestStartChildFlow, TestCompleteParentWorkFromChild.
async fn a_flow_step_runs_its_child_with_mapped_inputs_and_outputs(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| {
        let n = r.body["n"].as_i64().unwrap_or(0);
        json_reply(200, json!({"doubled": n * 2}))
    })
    .await;
    registered(&app, &[doubler(&svc), sub_step()]).await;
    // The plan holds the child's plan.
    let plan = app
        .post(
            "/engine/plan",
            &json!({"goals": ["sub"], "init": {"amount": [21]}}),
        )
        .await;
    assert_eq!(plan.status, StatusCode::OK, "{:?}", plan.body);
    assert_eq!(
        plan.body["children"]["sub"]["goals"],
        json!(["double"]),
        "{:?}",
        plan.body
    );
    assert!(
        plan.body["children"]["sub"]["steps"]["double"].is_object(),
        "{:?}",
        plan.body
    );

    started(&app, &sub_flow("p1", 21)).await;
    let parent = app.wait_for_flow("p1").await;
    assert_eq!(parent["status"], "completed", "{parent}");
    assert_eq!(parent["attributes"]["result"][0]["value"], json!(42), "{parent}");

    let kids = children(&parent, "sub");
    assert_eq!(kids.len(), 1, "one child for one attempt: {parent}");
    let token = parent["executions"]["sub"]["work_items"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .unwrap_or_default();
    assert_eq!(kids[0], format!("p1:sub:{token}"), "Argyll's child id");
    let child = app.flow(&kids[0]).await;
    assert_eq!(child["status"], "completed", "{child}");
    assert_eq!(
        child["metadata"],
        json!({"parent_flow_id": "p1", "parent_step_id": "sub", "parent_work_item_token": token})
    );
    // The child's step got the mapped input and the parent's id as meta.
    let calls = svc.requests();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].body["n"], json!(21));
    assert_eq!(calls[0].body["parent"], json!("p1"));

    // Hidden from listings unless asked for.
    assert_eq!(listed_ids(&app, json!({})).await, vec!["p1".to_string()]);
    let all = listed_ids(&app, json!({"children": true})).await;
    assert!(
        all.contains(&kids[0]) && all.contains(&"p1".to_string()),
        "{all:?}"
    );
    let bare = app.get("/engine/flow").await;
    assert_eq!(bare.body.as_array().map(Vec::len), Some(1), "{:?}", bare.body);
}

// Argyll fails the parent's item for good when its child fails; Tartan
// applies the step's retry policy, each retry a new child.
async fn a_failed_child_fails_the_item_and_the_retry_policy_runs_a_new_child(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(500, json!({"error": "down"}))).await;
    let mut sub = sub_step();
    sub["work_config"] = json!({"max_retries": 1, "init_backoff": 10, "backoff_type": "fixed"});
    registered(&app, &[doubler(&svc), sub]).await;
    started(&app, &sub_flow("p2", 1)).await;
    let parent = app.wait_for_flow("p2").await;
    assert_eq!(parent["status"], "failed", "{parent}");
    let kids = children(&parent, "sub");
    assert_eq!(kids.len(), 2, "a new child per attempt: {parent}");
    assert!(kids[1].ends_with(":2"), "{kids:?}");
    assert_eq!(svc.requests().len(), 2, "each child called its step once");
    let item = parent["executions"]["sub"]["work_items"]
        .as_object()
        .and_then(|m| m.values().next().cloned())
        .unwrap_or_default();
    assert_eq!(item["retry_state"], "max_attempts", "{item}");
    let error = item["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("child flow") && error.contains("failed"),
        "{error}"
    );
    for kid in &kids {
        assert_eq!(app.flow(kid).await["status"], "failed");
    }
}

// Argyll: TestCompleteParentWorkMissingOutput ("flow output missing").
async fn a_mapped_output_the_child_lacks_fails_the_item_for_good(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"doubled": 2}))).await;
    registered(
        &app,
        &[
            doubler(&svc),
            flow_step("sub", &["double"], &[("amount", "n")], &[("result", "tripled")]),
        ],
    )
    .await;
    started(&app, &sub_flow("p3", 1)).await;
    let parent = app.wait_for_flow("p3").await;
    assert_eq!(parent["status"], "failed", "{parent}");
    assert_eq!(children(&parent, "sub").len(), 1, "not retried: {parent}");
    let item = parent["executions"]["sub"]["work_items"]
        .as_object()
        .and_then(|m| m.values().next().cloned())
        .unwrap_or_default();
    assert_eq!(item["error"], "flow output missing: tripled", "{item}");
    assert_eq!(item["retry_state"], "permanent", "{item}");
}

async fn a_cycle_through_flow_goals_is_refused_at_registration(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // A goal may be registered later; the cycle is found when it closes.
    registered(&app, &[flow_step("outer", &["inner"], &[], &[("x", "y")])]).await;
    let r = app
        .register(&flow_step("inner", &["outer"], &[], &[("y", "x")]))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    let detail = r.body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("circular dependency detected")
            && detail.contains("inner")
            && detail.contains("outer"),
        "{detail}"
    );
    assert_eq!(app.get("/engine/step/inner").await.status, StatusCode::NOT_FOUND);
    // Through a provider of the child's goal too.
    let svc = StepServer::start(|_, _| json_reply(200, json!({}))).await;
    registered(&app, &[sync_step("goal", &svc.url("/g"), &["fed"], &["done"])]).await;
    registered(
        &app,
        &[flow_step("wrapper", &["goal"], &[], &[("wrapped", "done")])],
    )
    .await;
    let feeder = flow_step("feeder", &["wrapper"], &[], &[("fed", "wrapped")]);
    let r = app.register(&feeder).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    // A step that is its own goal.
    let r = app.register(&flow_step("selfish", &["selfish"], &[], &[])).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
}

// Argyll: TestStepValidateFlowConfig.
async fn flow_steps_are_validated_at_registration(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let cases = [
        (json!({"id": "f", "name": "f", "type": "flow"}), "flow"),
        (
            json!({"id": "f", "name": "f", "type": "flow", "flow": {"goals": []}}),
            "flow.goals",
        ),
        (
            json!({"id": "f", "name": "f", "type": "flow", "flow": {"goals": ["a"]}, "http": {"endpoint": "http://127.0.0.1:1/"}}),
            "http",
        ),
        (
            json!({"id": "f", "name": "f", "type": "flow", "flow": {"goals": ["a"]}, "script": {"language": "lua", "script": "return 1"}}),
            "script",
        ),
        (
            json!({"id": "f", "name": "f", "type": "flow", "flow": {"goals": ["a".repeat(300)]}}),
            "flow.goals[0]",
        ),
    ];
    for (step, field) in cases {
        let r = app.register(&step).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{step}: {:?}", r.body);
        let detail = r.body["detail"].as_str().unwrap_or_default();
        assert!(detail.starts_with(field), "{step}: {detail}");
    }
}

async fn a_sub_flow_that_needs_inputs_its_step_never_passes_is_refused_at_start(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"doubled": 2}))).await;
    // The child needs `n`; the flow step passes `amount` as `m`.
    registered(
        &app,
        &[
            doubler(&svc),
            flow_step("sub", &["double"], &[("amount", "m")], &[("result", "doubled")]),
        ],
    )
    .await;
    let r = app.start_flow(&sub_flow("p4", 1)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    let detail = r.body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("n") && detail.contains("sub-flow of step sub"),
        "{detail}"
    );
    assert_eq!(app.get("/engine/flow/p4").await.status, StatusCode::NOT_FOUND);
}

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
    let failing = StepServer::start(|_, _| json_reply(400, json!({"error": "no"}))).await;
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
    let item = parent["executions"]["sub"]["work_items"]
        .as_object()
        .and_then(|m| m.values().next().cloned())
        .unwrap_or_default();
    assert_eq!(item["error"], "attempt timeout after 300 ms", "{item}");
    assert_eq!(item["problem"]["timeout_scope"], "attempt", "{item}");
    let kid = children(&parent, "sub").remove(0);
    let child = app.wait_for_flow(&kid).await;
    assert_eq!(child["status"], "failed", "{child}");
    assert_eq!(child["problem"]["timeout_scope"], "flow", "{child}");
}

async fn sub_flows_fan_out_and_nest(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| {
        let n = r.body["n"].as_i64().unwrap_or(0);
        json_reply(200, json!({"doubled": n * 2}))
    })
    .await;
    // `inner` runs `double`; `outer` runs `inner`, one child per element.
    let inner = flow_step("inner", &["double"], &[("m", "n")], &[("twice", "doubled")]);
    let mut outer = flow_step("outer", &["inner"], &[("each", "m")], &[("all", "twice")]);
    outer["attributes"]["each"] =
        json!({"role": "required", "required": {"for_each": true, "mapping": {"name": "m"}}});
    registered(&app, &[doubler(&svc), inner, outer]).await;
    started(
        &app,
        &json!({"id": "p9", "goals": ["outer"], "init": {"each": [[1, 2, 3]]}}),
    )
    .await;
    let parent = app.wait_for_flow("p9").await;
    assert_eq!(parent["status"], "completed", "{parent}");
    let items = parent["executions"]["outer"]["work_items"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert_eq!(items.len(), 3, "{parent}");
    let mut grandchildren = 0;
    for item in items.values() {
        let kid = item["children"][0].as_str().unwrap_or_default().to_string();
        let child = app.flow(&kid).await;
        assert_eq!(child["status"], "completed", "{child}");
        for grandkid in children(&child, "inner") {
            assert!(grandkid.starts_with(&format!("{kid}:inner:")), "{grandkid}");
            assert_eq!(app.flow(&grandkid).await["status"], "completed");
            grandchildren += 1;
        }
    }
    assert_eq!(grandchildren, 3);
    let mut doubled: Vec<i64> = svc
        .requests()
        .iter()
        .filter_map(|r| r.body["n"].as_i64())
        .collect();
    doubled.sort_unstable();
    assert_eq!(doubled, vec![1, 2, 3]);
    assert_eq!(listed_ids(&app, json!({})).await, vec!["p9".to_string()]);
}

async fn retrying_a_failed_parent_runs_a_new_child(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // The child's step fails its first call for good, then answers.
    let svc = StepServer::start(|r, n| {
        if n == 0 {
            return json_reply(400, json!({"error": "not yet"}));
        }
        json_reply(200, json!({"doubled": r.body["n"].as_i64().unwrap_or(0) * 2}))
    })
    .await;
    let mut sub = sub_step();
    sub["work_config"] = json!({"max_attempts": 1});
    registered(&app, &[doubler(&svc), sub]).await;
    started(&app, &sub_flow("p10", 5)).await;
    assert_eq!(app.wait_for_flow("p10").await["status"], "failed");
    let r = app
        .post("/engine/flow/p10/retry", &json!({"reset_attempts": true}))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    let parent = app.wait_for_flow("p10").await;
    assert_eq!(parent["status"], "completed", "{parent}");
    assert_eq!(parent["attributes"]["result"][0]["value"], json!(10));
    let kids = children(&parent, "sub");
    assert_eq!(kids.len(), 2, "the retry ran a new child: {parent}");
    assert_eq!(app.flow(&kids[0]).await["status"], "failed");
    assert_eq!(app.flow(&kids[1]).await["status"], "completed");
    // A child is retried through its parent, not on its own.
    let r = app
        .post(&format!("/engine/flow/{}/retry", kids[0]), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{:?}", r.body);
    let detail = r.body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("retry the parent"), "{detail}");
}
