//! A work item that ends without a retry says why: `retry_state` in its
//! state (flow and `/engine/work`), and the flow's error in words
//! (docs/retries.md, "Why it stopped").

use serde_json::{json, Value};

use crate::helpers::{json_reply, spawn_app, sync_step, Backend, StepServer, TestApp};
use tartan_testkit::both_backends;

both_backends!(each_way_a_work_item_stops_is_named_in_its_state_and_in_the_flows_error,);

/// Start `id` on `goal` with extra request fields; wait for it to end.
async fn run(app: &TestApp, id: &str, goal: &str, extra: Value) -> Value {
    let mut body = json!({"id": id, "goals": [goal]});
    if let (Some(b), Value::Object(extra)) = (body.as_object_mut(), extra) {
        b.extend(extra);
    }
    let r = app.start_flow(&body).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let flow = app.wait_for_flow(id).await;
    assert_eq!(flow["status"], "failed", "{flow}");
    flow
}

/// The only work item of `step` in the flow, and as `/engine/work` lists it.
async fn work_of(app: &TestApp, flow: &Value, step: &str) -> (Value, Value) {
    let items = flow["executions"][step]["work_items"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert_eq!(items.len(), 1, "{flow}");
    let id = flow["id"].as_str().unwrap_or_default();
    let listed = app.get(&format!("/engine/work?flow_id={id}")).await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    let row = listed.body["work_items"][0].clone();
    (items.values().next().cloned().unwrap_or(Value::Null), row)
}

async fn each_way_a_work_item_stops_is_named_in_its_state_and_in_the_flows_error(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/reject" => json_reply(400, json!({"detail": "no such order"})),
        _ => json_reply(503, json!({})),
    })
    .await;
    let step = |id: &str, path: &str, retry: Value| {
        let mut s = sync_step(id, &svc.url(path), &[], &["out"]);
        s["work_config"] = retry;
        s
    };
    let fast = json!({"init_backoff": 1, "max_backoff": 1, "backoff_type": "fixed"});
    let with = |extra: Value| {
        let mut r = fast.clone();
        if let (Some(r), Value::Object(extra)) = (r.as_object_mut(), extra) {
            r.extend(extra);
        }
        r
    };
    for s in [
        step("reject", "/reject", fast.clone()),
        step("three", "/busy", with(json!({"max_attempts": 3}))),
        step("many", "/busy", with(json!({"max_attempts": 50}))),
        step(
            "budget",
            "/busy",
            json!({"init_backoff": "1s", "max_backoff": "1s", "backoff_type": "fixed",
                   "max_attempts": 50, "max_retry_duration": "100ms"}),
        ),
    ] {
        let r = app.register(&s).await;
        assert_eq!(r.status, 201, "{:?}", r.body);
    }

    let cases = [
        ("p", "reject", json!({}), "permanent", "goal step reject failed: no such order", 1),
        (
            "m",
            "three",
            json!({}),
            "max_attempts",
            "goal step three failed: HTTP 503 Service Unavailable; gave up after 3 of the step's 3 attempts",
            3,
        ),
        (
            "s",
            "many",
            json!({"max_step_attempts": 4}),
            "step_limit",
            "goal step many failed: HTTP 503 Service Unavailable; not retried: the flow's cap of 4 attempts was reached",
            4,
        ),
        (
            "d",
            "budget",
            json!({}),
            "deadline",
            "goal step budget failed: HTTP 503 Service Unavailable; not retried: the next attempt would start after the step's retry budget of 100 ms",
            1,
        ),
    ];
    for (id, goal, extra, retry_state, error, attempts) in cases {
        let flow = run(&app, id, goal, extra).await;
        assert_eq!(flow["error"], error, "{flow}");
        let (work, row) = work_of(&app, &flow, goal).await;
        assert_eq!(work["retry_state"], retry_state, "{work}");
        assert_eq!(row["retry_state"], retry_state, "{row}");
        assert_eq!(
            work["attempts"].as_array().map(Vec::len),
            Some(attempts),
            "{work}"
        );
    }
}
