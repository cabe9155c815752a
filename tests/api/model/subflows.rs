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
    call, finished, json_reply, only_item, spawn_app, spawn_binary, sync_step, wait_for_terminal, Backend,
    StepServer, TestApp,
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
    a_sub_flow_tree_wider_than_the_limit_waits_for_room,
    a_three_level_tree_finishes_under_a_limit_its_parents_would_fill,
    child_calls_beyond_the_queue_are_left_to_their_lease,
    a_parent_that_ends_while_its_children_wait_for_a_place_lists_none_of_them,
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
    let item = only_item(&parent, "sub");
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

/// The steps of a tree of sub-flows `levels` deep: `lvl0` runs one child
/// per element of its `a0` (`for_each`, all at once), each child's `lvl1`
/// one per element of its `a1`, and so on; the last level's children run `double`
/// on their `n`. Each level's output `r<k>` is its children's.
fn tree_steps(levels: usize, svc: &StepServer) -> Vec<Value> {
    let mut steps = vec![doubler(svc)];
    for k in 0..levels {
        let last = k + 1 == levels;
        let (goal, inner_in, inner_out) = if last {
            ("double".to_string(), "n".to_string(), "doubled".to_string())
        } else {
            (
                format!("lvl{}", k + 1),
                format!("a{}", k + 1),
                format!("r{}", k + 1),
            )
        };
        let attr = format!("a{k}");
        let out = format!("r{k}");
        let mut step = flow_step(
            &format!("lvl{k}"),
            &[&goal],
            &[(&attr, &inner_in)],
            &[(&out, &inner_out)],
        );
        step["attributes"][&attr] =
            json!({"role": "required", "required": {"for_each": true, "mapping": {"name": inner_in}}});
        // Every item at once, as the attacker's tree had it.
        step["work_config"]["parallelism"] = json!(1000);
        steps.push(step);
    }
    steps
}

/// A start of the tree `tree_steps(widths.len())` runs as flow `id`:
/// `widths[k]` children per flow at level `k`, each leaf with its own `n`
/// (0, 1, ...). How many leaves it has.
fn tree_start(id: &str, widths: &[usize]) -> (Value, usize) {
    fn level(widths: &[usize], next: &mut usize) -> Value {
        match widths.split_first() {
            None => {
                *next += 1;
                json!(*next - 1)
            }
            Some((&w, rest)) => Value::Array((0..w).map(|_| level(rest, next)).collect()),
        }
    }
    let mut leaves = 0;
    let a0 = level(widths, &mut leaves);
    (json!({"id": id, "goals": ["lvl0"], "init": {"a0": [a0]}}), leaves)
}

/// What was seen of the engine while a tree ran.
#[derive(Debug, Default)]
struct Watched {
    max_active: u64,
    max_waiting: u64,
    /// `/health` answers that were not `200`, or no answer.
    unhealthy: usize,
    looks: usize,
}

/// Look at `/health` (its `active_flows`) and `/metrics` (flow steps'
/// calls waiting for a place) every few milliseconds until `stop`.
fn watch(addr: String, stop: tokio_util::sync::CancellationToken) -> tokio::task::JoinHandle<Watched> {
    tokio::spawn(async move {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .expect("client");
        let mut seen = Watched::default();
        while !stop.is_cancelled() {
            seen.looks += 1;
            match client.get(format!("http://{addr}/health")).send().await {
                Ok(r) if r.status() == 200 => {
                    let body: Value = r.json().await.unwrap_or(Value::Null);
                    let active = body["details"]["active_flows"].as_u64().unwrap_or(0);
                    seen.max_active = seen.max_active.max(active);
                }
                _ => seen.unhealthy += 1,
            }
            if seen.looks % 5 == 0 {
                if let Ok(r) = client.get(format!("http://{addr}/metrics")).send().await {
                    let text = r.text().await.unwrap_or_default();
                    let waiting = text
                        .lines()
                        .find_map(|l| l.strip_prefix("tartan_child_calls_waiting "))
                        .and_then(|v| v.trim().parse::<f64>().ok())
                        .unwrap_or(0.0);
                    seen.max_waiting = seen.max_waiting.max(waiting as u64);
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        seen
    })
}

/// Every leaf `0..leaves` was called, each once (other flows' calls have
/// a negative `n`).
fn each_leaf_called_once(svc: &StepServer, leaves: usize) {
    let mut called: Vec<i64> = svc
        .requests()
        .iter()
        .filter_map(|r| r.body["n"].as_i64())
        .filter(|n| *n >= 0)
        .collect();
    called.sort_unstable();
    let expected: Vec<i64> = (0..leaves as i64).collect();
    assert!(called == expected, "{} calls for {leaves} leaves", called.len());
}

/// A quick leaf step.
async fn quick_doubler() -> StepServer {
    StepServer::start(|r, _| {
        let n = r.body["n"].as_i64().unwrap_or(0);
        json_reply(200, json!({"doubled": n * 2}))
    })
    .await
}

/// The engine's peak resident memory during the tree may not pass this
/// (about 150 MiB measured; unadmitted, the same tree took 520 to 690 MiB,
/// and issue 45's took 1.4 GB).
const TREE_RSS_LIMIT_KIB: u64 = 200 * 1024;

/// Issue 45: one start of a two-level for_each over sub-flows made 10,101
/// active flows under `TARTAN_MAX_ACTIVE_FLOWS=50`. Scaled: 60 x 60
/// leaves under a limit of 20. Children count against the limit, and
/// never pass it; their parents wait for room; the tree completes; the
/// process answers throughout; a client's start meanwhile is taken or
/// refused `503` with `Retry-After` (docs/steps.md, "Sub-flows").
async fn a_sub_flow_tree_wider_than_the_limit_waits_for_room(backend: Backend) {
    const LIMIT: u64 = 20;
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let svc = quick_doubler().await;
    let engine =
        crate::helpers::spawn_binary_with(&db, "subflow-tree", &[("TARTAN_MAX_ACTIVE_FLOWS", "20")]).await;
    crate::helpers::register(&engine, tree_steps(2, &svc)).await;
    let pid = engine.child.id().unwrap_or(0);
    let (idle, _) = crate::helpers::memory_kib(pid);
    let (start, leaves) = tree_start("tree", &[60, 60]);
    assert_eq!(leaves, 3600);
    let stop = tokio_util::sync::CancellationToken::new();
    let watcher = watch(engine.addr.clone(), stop.clone());
    let began = std::time::Instant::now();
    let (status, body) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
    assert_eq!(status, 201, "{body}");

    // A client's start while the tree holds the places.
    while svc.requests().len() < 200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let client = reqwest::Client::new();
    let reply = client
        .post(format!("http://{}/engine/flow", engine.addr))
        .json(&json!({"id": "bystander", "goals": ["double"], "init": {"n": [-1]}}))
        .send()
        .await
        .expect("POST /engine/flow");
    let bystander = reply.status().as_u16();
    let retry_after = reply.headers().get("retry-after").cloned();
    let problem: Value = reply.json().await.unwrap_or(Value::Null);
    match bystander {
        201 => {}
        503 => {
            assert_eq!(problem["type"], "urn:tartan:problem:overloaded", "{problem}");
            assert!(retry_after.is_some(), "a 503 says when to try again");
        }
        other => panic!("a client's start during the tree: {other} {problem}"),
    }

    let root = finished(&engine, "tree", Duration::from_secs(240)).await;
    let took = began.elapsed();
    stop.cancel();
    let seen = watcher.await.expect("watcher");
    let (peak, _) = crate::helpers::memory_kib(pid);
    eprintln!(
        "{leaves} leaves in {took:?}: active flows at most {} (limit {LIMIT}), calls waiting for a place at most {}, \
         {} looks, peak RSS {peak} KiB (before the tree {idle} KiB); bystander {bystander}",
        seen.max_active, seen.max_waiting, seen.looks
    );
    assert_eq!(root["status"], "completed", "{root}");
    if bystander == 201 {
        let done = finished(&engine, "bystander", Duration::from_secs(30)).await;
        assert_eq!(done["status"], "completed", "{done}");
    }
    each_leaf_called_once(&svc, leaves);
    assert!(
        seen.max_active <= LIMIT,
        "{} flows active, limit {LIMIT}",
        seen.max_active
    );
    assert!(
        seen.max_active >= LIMIT / 2,
        "the watcher saw the tree run: {seen:?}"
    );
    assert_eq!(seen.unhealthy, 0, "/health answered throughout: {seen:?}");
    assert!(peak > 0, "no memory figure for pid {pid}");
    assert!(peak < TREE_RSS_LIMIT_KIB, "peak RSS {peak} KiB");
}

/// Three levels (6 x 6 x 6) under a limit of 4: were a parent waiting for
/// its children to hold a place, the root and three of its children would
/// hold all four while their own children waited for one, for ever. The
/// tree completes, within the limit.
async fn a_three_level_tree_finishes_under_a_limit_its_parents_would_fill(backend: Backend) {
    const LIMIT: u64 = 4;
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let svc = quick_doubler().await;
    let engine =
        crate::helpers::spawn_binary_with(&db, "subflow-three", &[("TARTAN_MAX_ACTIVE_FLOWS", "4")]).await;
    crate::helpers::register(&engine, tree_steps(3, &svc)).await;
    let (start, leaves) = tree_start("deep", &[6, 6, 6]);
    let stop = tokio_util::sync::CancellationToken::new();
    let watcher = watch(engine.addr.clone(), stop.clone());
    let (status, body) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
    assert_eq!(status, 201, "{body}");
    let root = finished(&engine, "deep", Duration::from_secs(120)).await;
    stop.cancel();
    let seen = watcher.await.expect("watcher");
    eprintln!("{leaves} leaves, three levels: {seen:?}");
    assert_eq!(root["status"], "completed", "{root}");
    each_leaf_called_once(&svc, leaves);
    assert!(
        seen.max_active <= LIMIT,
        "{} flows active, limit {LIMIT}",
        seen.max_active
    );
    assert_eq!(seen.unhealthy, 0, "{seen:?}");
}

/// Flow steps' calls waiting for a place are bounded too
/// (`TARTAN_MAX_QUEUED_CALLS`, here 8): one beyond, or one a more urgent
/// call pushes out, is left to its lease (2 s here) and taken up again
/// when it runs out, starting no second child. The tree still completes,
/// every leaf called once.
async fn child_calls_beyond_the_queue_are_left_to_their_lease(backend: Backend) {
    const LIMIT: u64 = 4;
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let svc = quick_doubler().await;
    let engine = crate::helpers::spawn_binary_with(
        &db,
        "subflow-queue",
        &[
            ("TARTAN_MAX_ACTIVE_FLOWS", "4"),
            ("TARTAN_MAX_QUEUED_CALLS", "8"),
            ("TARTAN_STEP_TIMEOUT", "1s"),
            ("TARTAN_LEASE", "1s"),
        ],
    )
    .await;
    crate::helpers::register(&engine, tree_steps(2, &svc)).await;
    let (start, leaves) = tree_start("queued", &[6, 10]);
    let stop = tokio_util::sync::CancellationToken::new();
    let watcher = watch(engine.addr.clone(), stop.clone());
    let (status, body) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
    assert_eq!(status, 201, "{body}");
    let root = finished(&engine, "queued", Duration::from_secs(120)).await;
    stop.cancel();
    let seen = watcher.await.expect("watcher");
    let (_, health) = call(&engine, reqwest::Method::GET, "/health", None).await;
    let deferred = health["details"]["calls_deferred"].as_u64().unwrap_or(0);
    eprintln!("{leaves} leaves, queue of 8: {seen:?}, {deferred} calls left to their lease");
    assert_eq!(root["status"], "completed", "{root}");
    each_leaf_called_once(&svc, leaves);
    // The sweep takes the calls over one at a time, each in a decision on
    // its parent, which holds a slot while it is made, limit or not
    // (docs/operating.md, `max_active_flows`).
    assert!(
        seen.max_active <= LIMIT + 1,
        "{} flows active, limit {LIMIT} and the sweep's one decision",
        seen.max_active
    );
    assert!(
        seen.max_waiting <= 8,
        "{} calls waiting for a place",
        seen.max_waiting
    );
    assert!(deferred > 0, "some calls found the queue full: {health}");
    // The root's items each ran one child: none started twice.
    let (_, flow) = call(&engine, reqwest::Method::GET, "/engine/flow/queued", None).await;
    let items = flow["executions"]["lvl0"]["work_items"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert_eq!(items.len(), 6, "{flow}");
    for item in items.values() {
        assert_eq!(item["children"].as_array().map(Vec::len), Some(1), "{item}");
    }
}

/// `sub` with one item per element of its `amount`, all run at once.
fn fanned_sub_step() -> Value {
    let mut step = sub_step();
    step["attributes"]["amount"] =
        json!({"role": "required", "required": {"for_each": true, "mapping": {"name": "n"}}});
    step["work_config"]["parallelism"] = json!(10);
    step
}

/// Flow steps' calls of `engine` waiting for a place (its metric).
async fn waiting_for_places(engine: &crate::helpers::Binary) -> u64 {
    let text = reqwest::get(format!("http://{}/metrics", engine.addr))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("tartan_child_calls_waiting "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

/// The ids a parent's `sub` items list as their children, and those they
/// list as never started.
fn listed_children(parent: &Value) -> (Vec<String>, Vec<String>) {
    let ids = |w: &Value, field: &str| -> Vec<String> {
        w[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str().map(String::from))
            .collect()
    };
    let items = parent["executions"]["sub"]["work_items"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut started = Vec::new();
    let mut not_started = Vec::new();
    for item in items.values() {
        let (ran, never) = (ids(item, "children"), ids(item, "children_not_started"));
        assert_eq!(ran.len() + never.len(), 1, "one child per item: {item}");
        started.extend(ran);
        not_started.extend(never);
    }
    (started, not_started)
}

/// A parent that ends (cancelled, failed, past its deadline) while its
/// flow step's calls wait for a place in `TARTAN_MAX_ACTIVE_FLOWS` (it
/// holds the one place itself, with a call of its own) starts none of
/// their children, and lists none as a child: a client that follows an
/// id in `children` never finds a 404. The ids the items were given are
/// listed as `children_not_started` (docs/steps.md, "Sub-flows").
async fn a_parent_that_ends_while_its_children_wait_for_a_place_lists_none_of_them(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let svc = quick_doubler().await;
    // The parent's own call: it hangs, or fails after a moment.
    let holder = StepServer::start_async(|r, _| {
        Box::pin(async move {
            if r.body["go"] == "fail" {
                tokio::time::sleep(Duration::from_millis(500)).await;
                return json_reply(400, json!({"error": "no"}));
            }
            std::future::pending::<()>().await;
            json_reply(200, json!({}))
        })
    })
    .await;
    let mut hold = sync_step("hold", &holder.url("/hold"), &["go"], &["held"]);
    hold["work_config"] = json!({"max_attempts": 1});
    let engine =
        crate::helpers::spawn_binary_with(&db, "subflow-unstarted", &[("TARTAN_MAX_ACTIVE_FLOWS", "1")])
            .await;
    crate::helpers::register(&engine, vec![doubler(&svc), fanned_sub_step(), hold]).await;

    let endings = [
        ("u-cancelled", json!({"go": ["hang"]}), None),
        ("u-failed", json!({"go": ["fail"]}), None),
        ("u-deadline", json!({"go": ["hang"]}), Some("1s")),
    ];
    for (id, init, timeout) in endings {
        let mut start = json!({"id": id, "goals": ["sub", "hold"], "init": init});
        start["init"]["amount"] = json!([[1, 2, 3]]);
        if let Some(t) = timeout {
            start["timeout"] = json!(t);
        }
        // The place the last parent held may take a moment to free.
        let mut answer = (0, Value::Null);
        for _ in 0..200 {
            answer = call(
                &engine,
                reqwest::Method::POST,
                "/engine/flow",
                Some(start.clone()),
            )
            .await;
            if answer.0 != 503 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(answer.0, 201, "{id}: {}", answer.1);
        let mut queued = 0;
        for _ in 0..200 {
            queued = waiting_for_places(&engine).await;
            if queued >= 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(queued, 3, "{id}: its three children wait for the place it holds");
        if timeout.is_none() && init["go"][0] == "hang" {
            let (status, body) = call(
                &engine,
                reqwest::Method::POST,
                &format!("/engine/flow/{id}/cancel"),
                Some(json!({})),
            )
            .await;
            assert_eq!(status, 202, "{body}");
        }
        let parent = wait_for_terminal(&engine, id).await;
        assert_ne!(parent["status"], "active", "{parent}");

        // The items' children are noted as never started just after the
        // parent ends.
        let mut seen = (Vec::new(), Vec::new());
        let mut missing = Vec::new();
        for _ in 0..200 {
            let (_, parent) = call(&engine, reqwest::Method::GET, &format!("/engine/flow/{id}"), None).await;
            seen = listed_children(&parent);
            missing.clear();
            for kid in &seen.0 {
                let path = format!("/engine/flow/{kid}");
                if call(&engine, reqwest::Method::GET, &path, None).await.0 == 404 {
                    missing.push(kid.clone());
                }
            }
            if missing.is_empty() && seen.1.len() == 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(
            missing.is_empty(),
            "{id} lists children that do not exist: {missing:?}"
        );
        assert_eq!(seen.0, Vec::<String>::new(), "{id}: no child started");
        assert_eq!(
            seen.1.len(),
            3,
            "{id}: each item's child is listed as not started: {seen:?}"
        );
        for kid in &seen.1 {
            let path = format!("/engine/flow/{kid}");
            assert_eq!(
                call(&engine, reqwest::Method::GET, &path, None).await.0,
                404,
                "{kid}"
            );
        }
    }
    assert!(svc.requests().is_empty(), "no child ran a step");
}
