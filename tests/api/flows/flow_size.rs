//! A flow's size is bounded (docs/errors.md, "A flow's size"): the bytes of
//! its initial inputs and of every output its steps returned stay within
//! `TARTAN_MAX_FLOW_BYTES`. The output that would pass it fails its work item
//! for good, with a problem naming the limit; a start that alone passes it
//! is refused.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{json_reply, start_on_with, sync_step, Backend, StepServer, TestDb};
use tartan_testkit::both_backends;

both_backends!(
    an_output_past_the_flows_size_fails_its_item_for_good_naming_the_limit,
    a_start_whose_inputs_pass_the_flows_size_is_refused,
);

const LIMIT: u64 = 100_000;

async fn an_output_past_the_flows_size_fails_its_item_for_good_naming_the_limit(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let app = start_on_with(db, "flow-size", |c| c.max_flow_bytes = LIMIT).await;
    // Each step answers 60 KB: the first fits, the second would not.
    let svc = StepServer::start(|r, _| {
        let key = if r.path == "/a" { "x" } else { "y" };
        json_reply(200, json!({ key: "z".repeat(60_000) }))
    })
    .await;
    let mut b = sync_step("b", &svc.url("/b"), &["x"], &["y"]);
    b["work_config"] = json!({"max_retries": 3, "init_backoff": 10, "backoff_type": "fixed"});
    for step in [sync_step("a", &svc.url("/a"), &["in"], &["x"]), b] {
        assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    }
    let start = json!({"id": "big", "goals": ["b"], "init": {"in": [1]}});
    assert_eq!(app.start_flow(&start).await.status, StatusCode::CREATED);
    let flow = app.wait_for_flow("big").await;
    assert_eq!(flow["status"], "failed", "{}", flow["error"]);
    let held = flow["data_bytes"].as_u64().unwrap_or(0);
    assert!((60_000..LIMIT).contains(&held), "data_bytes {held}");
    assert_eq!(flow["executions"]["a"]["status"], "completed");

    let items = flow["executions"]["b"]["work_items"].as_object().unwrap();
    let item = items.values().next().unwrap();
    assert_eq!(item["status"], "failed", "{item}");
    assert_eq!(item["retry_state"], "permanent", "{item}");
    assert_eq!(
        item["attempts"].as_array().map(Vec::len),
        Some(1),
        "not retried: {item}"
    );
    assert!(
        item.get("outputs").is_none() || item["outputs"].is_null(),
        "nothing of it kept: {item}"
    );
    let problem = &item["problem"];
    assert_eq!(problem["type"], "urn:tartan:problem:flow-too-large", "{item}");
    assert_eq!(problem["limit"], LIMIT);
    let error = item["error"].as_str().unwrap_or_default();
    assert!(error.contains("TARTAN_MAX_FLOW_BYTES"), "{error}");
    assert!(flow["error"]
        .as_str()
        .unwrap_or_default()
        .contains("TARTAN_MAX_FLOW_BYTES"));
    assert!(
        flow["attributes"].get("y").is_none(),
        "the refused output is not set"
    );
}

async fn a_start_whose_inputs_pass_the_flows_size_is_refused(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let app = start_on_with(db, "flow-size-start", |c| c.max_flow_bytes = LIMIT).await;
    let svc = StepServer::start(|_, _| json_reply(200, json!({"x": 1}))).await;
    let step = sync_step("a", &svc.url("/a"), &["in"], &["x"]);
    assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    let start = json!({"id": "too-big", "goals": ["a"], "init": {"in": ["w".repeat(120_000)]}});
    let reply = app.start_flow(&start).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{:?}", reply.body);
    assert!(
        reply.body["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("TARTAN_MAX_FLOW_BYTES"),
        "{:?}",
        reply.body
    );
    assert_eq!(
        app.get("/engine/flow/too-big").await.status,
        StatusCode::NOT_FOUND
    );
    assert!(svc.requests().is_empty());
}
