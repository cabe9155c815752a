//! Sub-flows (`type: flow`): each work item of a flow step runs a child
//! flow for the step's `flow.goals`; inputs and outputs map by
//! `mapping.name`; the child's end decides the item (docs/steps.md,
//! "Sub-flows"). Here: a child's inputs, outputs and failures, retries of
//! its item and of its parent, what registration and flow start refuse,
//! and children that fan out and nest. Ported from Argyll's flow-start and
//! flow-stop tests where noted. How long a child lives is tested in
//! `subflow_lifetimes.rs`, trees under the limit of active flows in
//! `subflow_limits.rs`, both with the helpers here.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{json_reply, only_item, spawn_app, sync_step, Backend, StepServer, TestApp};
use tartan_testkit::both_backends;

both_backends!(
    a_flow_step_runs_its_child_with_mapped_inputs_and_outputs,
    a_failed_child_fails_the_item_and_the_retry_policy_runs_a_new_child,
    without_a_retry_policy_of_its_own_a_flow_step_fails_for_good_when_its_child_fails,
    a_mapped_output_the_child_lacks_fails_the_item_for_good,
    a_cycle_through_flow_goals_is_refused_at_registration,
    flow_steps_are_validated_at_registration,
    a_sub_flow_that_needs_inputs_its_step_never_passes_is_refused_at_start,
    sub_flows_fan_out_and_nest,
    retrying_a_failed_parent_runs_a_new_child,
);

/// A flow step running `goals`, its inputs and outputs given as
/// `(attribute, name in the child)`.
pub(super) fn flow_step(
    id: &str,
    goals: &[&str],
    inputs: &[(&str, &str)],
    outputs: &[(&str, &str)],
) -> Value {
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
pub(super) fn sub_step() -> Value {
    flow_step("sub", &["double"], &[("amount", "n")], &[("result", "doubled")])
}

/// A start of `sub` as flow `id`.
pub(super) fn sub_flow(id: &str, amount: i64) -> Value {
    json!({"id": id, "goals": ["sub"], "init": {"amount": [amount]}})
}

/// A child step answering `{"doubled": n * 2}`, and echoing the parent meta
/// values it asks for.
pub(super) fn doubler(svc: &StepServer) -> Value {
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
pub(super) async fn started(app: &TestApp, body: &Value) {
    let r = app.start_flow(body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{body}: {:?}", r.body);
}

pub(super) async fn registered(app: &TestApp, steps: &[Value]) {
    for step in steps {
        let r = app.register(step).await;
        assert_eq!(r.status, StatusCode::CREATED, "{step}: {:?}", r.body);
    }
}

/// The child flow ids of the parent's item of `step` (there is one item).
pub(super) fn children(flow: &Value, step: &str) -> Vec<String> {
    only_item(flow, step)["children"]
        .as_array()
        .into_iter()
        .flatten()
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
    let item = only_item(&parent, "sub");
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

/// Argyll's rule for a flow step registered without a retry policy of its
/// own (`parallelism` is not one): stored with one attempt, its item fails
/// for good when its child fails; a step with one retries (above).
async fn without_a_retry_policy_of_its_own_a_flow_step_fails_for_good_when_its_child_fails(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(500, json!({"error": "down"}))).await;
    let mut sub = sub_step();
    sub["work_config"] = json!({"parallelism": 2});
    registered(&app, &[doubler(&svc), sub]).await;
    let stored = app.get("/engine/step/sub").await;
    assert_eq!(stored.body["work_config"]["max_attempts"], 1, "{:?}", stored.body);
    assert_eq!(stored.body["work_config"]["parallelism"], 2, "{:?}", stored.body);
    started(&app, &sub_flow("p9", 1)).await;
    let parent = app.wait_for_flow("p9").await;
    assert_eq!(parent["status"], "failed", "{parent}");
    assert_eq!(children(&parent, "sub").len(), 1, "not retried: {parent}");
    let item = only_item(&parent, "sub");
    let error = item["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("child flow") && error.contains("failed"),
        "{error}"
    );
    assert_ne!(item["retry_state"], "scheduled", "{item}");
}

// Argyll: TestCompleteParentWorkMissingOutput ("flow output missing") and
// TestFlowStepMissingOutput.
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
    let item = only_item(&parent, "sub");
    assert_eq!(item["error"], "flow output missing: tripled", "{item}");
    assert_eq!(item["retry_state"], "permanent", "{item}");

    // Argyll's TestFlowStepMissingOutput: the child's goal is a script
    // step that answers nothing of what it declares.
    registered(
        &app,
        &[
            super::script_step("empty", "lua", "return {}", &[], &["child_out"]),
            flow_step("wrap", &["empty"], &[], &[("output", "child_out")]),
        ],
    )
    .await;
    started(&app, &json!({"id": "p4", "goals": ["wrap"]})).await;
    let parent = app.wait_for_flow("p4").await;
    assert_eq!(parent["status"], "failed", "{parent}");
    let item = only_item(&parent, "wrap");
    assert_eq!(item["error"], "flow output missing: child_out", "{item}");
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
