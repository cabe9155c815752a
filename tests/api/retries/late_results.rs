//! Late results end to end (docs/api.md, "Async steps and webhooks"): a
//! webhook delivered again after its step completed, with the same result
//! or another, is accepted and changes nothing but one `work_late_result`
//! event per attempt. The real server and a real async step endpoint on
//! 127.0.0.1.

use std::time::{Duration, Instant};

use serde_json::json;

use super::support::{events_of, reply, Api, FLOW_BOUND};
use crate::helpers::{spawn_app, Backend, StepServer};
use tartan_testkit::both_backends;

both_backends!(a_late_result_changes_nothing);

// ---------------------------------------------------------------------------
// Late results.

async fn a_late_result_changes_nothing(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let api = Api::of(&app);
    // An async endpoint that accepts the call and answers later, by webhook.
    let svc = StepServer::start(|_, _| reply(202, None, "", &[])).await;
    let step = json!({
        "id": "charge", "name": "Charge", "type": "async",
        "http": {"endpoint": svc.url("/charge")},
        "attributes": {"receipt": {"role": "output", "type": "string"}},
    });
    let (status, body) = api.post("/engine/step", &step).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = api
        .post("/engine/flow", &json!({"id": "late", "goals": ["charge"]}))
        .await;
    assert_eq!(status, 201, "{body}");

    let until = Instant::now() + FLOW_BOUND;
    let hook = loop {
        let calls = svc.requests();
        if let Some(url) = calls
            .first()
            .and_then(|r| r.headers.get("argyll-webhook-url"))
            .and_then(|v| v.to_str().ok())
        {
            break url.to_string();
        }
        assert!(Instant::now() < until, "the async step was never called");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let result = json!({"receipt": "r-1"});
    let (status, _) = api.post(&hook, &result).await;
    assert_eq!(status, 200, "the result");
    let flow = api.wait_for_flow("late").await.expect("the flow finishes");
    assert_eq!(flow["status"], "completed", "{flow}");

    let (status, _) = api.post(&hook, &result).await;
    assert_eq!(status, 200, "a duplicate is accepted");
    let (status, _) = api.post(&hook, &json!({"receipt": "r-2"})).await;
    assert_eq!(status, 200, "a different late result is accepted too");

    let after = api.flow("late").await;
    assert_eq!(after["status"], "completed");
    assert_eq!(
        after["attributes"]["receipt"].as_array().map(Vec::len),
        Some(1),
        "{after}"
    );
    assert_eq!(after["attributes"]["receipt"][0]["value"], "r-1");
    assert_eq!(
        after["executions"]["charge"]["outputs"],
        json!({"receipt": "r-1"})
    );
    assert_eq!(
        crate::helpers::without_late_notes(&after)["executions"],
        flow["executions"],
        "the executions did not change"
    );

    let events = api.events("late").await;
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let count = |t: &str| types.iter().filter(|x| **x == t).count();
    assert_eq!(count("work_succeeded"), 1, "{types:?}");
    assert_eq!(count("attribute_set"), 1, "{types:?}");
    // Once per attempt, however many deliveries.
    assert_eq!(count("work_late_result"), 1, "{types:?}");
    let late = events_of(&events, "work_late_result");
    let token = svc.requests()[0].headers["argyll-receipt-token"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(late[0]["data"]["token"], token.as_str());
    assert_eq!(late[0]["data"]["step_id"], "charge");
    assert_eq!(late[0]["data"]["attempt"], 1);
    assert_eq!(svc.requests().len(), 1, "nothing was called again");
}
