//! A step's own classes (`http.classify`) and the `Tartan-Retry: no`
//! header, end to end (docs/retries.md, "A step's own classes").

use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::json;

use crate::helpers::{item_attempts, json_reply, spawn_app, sync_step, Backend, StepServer};
use tartan_testkit::both_backends;

both_backends!(
    a_step_may_make_a_404_retryable_and_a_503_permanent,
    tartan_retry_no_makes_one_failure_permanent,
    rate_limited_honours_retry_after_when_the_policy_does_not,
    a_bad_table_is_refused_naming_the_entry,
);

fn with(
    mut step: serde_json::Value,
    classify: serde_json::Value,
    work: serde_json::Value,
) -> serde_json::Value {
    step["http"]["classify"] = classify;
    step["work_config"] = work;
    step
}

async fn a_step_may_make_a_404_retryable_and_a_503_permanent(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, n| match (r.path.as_str(), n) {
        ("/missing", 0 | 1) => json_reply(404, json!({"detail": "not there yet"})),
        ("/missing", _) => json_reply(200, json!({"found": "yes"})),
        _ => json_reply(503, json!({"detail": "down for good"})),
    })
    .await;
    let fast = json!({"init_backoff": 10, "backoff_type": "fixed", "max_retries": 5});
    let r = app
        .register(&with(
            sync_step("find", &svc.url("/missing"), &["x"], &["found"]),
            json!({"404": "retryable"}),
            fast.clone(),
        ))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(r.body["step"]["http"]["classify"], json!({"404": "retryable"}));
    app.register(&with(
        sync_step("down", &svc.url("/down"), &["x"], &["up"]),
        json!({"5xx": "permanent"}),
        fast,
    ))
    .await;

    app.start_flow(&json!({"id": "found", "goals": ["find"], "init": {"x": ["1"]}}))
        .await;
    let flow = app.wait_for_flow("found").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let found: Vec<_> = item_attempts(&flow, "find")
        .iter()
        .map(|a| a["http_status"].clone())
        .collect();
    assert_eq!(found, [json!(404), json!(404), json!(200)]);

    app.start_flow(&json!({"id": "down", "goals": ["down"], "init": {"x": ["1"]}}))
        .await;
    let flow = app.wait_for_flow("down").await;
    assert_eq!(flow["status"], "failed");
    let tried = item_attempts(&flow, "down");
    assert_eq!(
        tried.len(),
        1,
        "a 5xx the step calls permanent is not retried: {tried:?}"
    );
    assert_eq!(tried[0]["outcome"], "permanent");
    assert_eq!(svc.requests().iter().filter(|r| r.path == "/down").count(), 1);
}

async fn tartan_retry_no_makes_one_failure_permanent(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, n| match n {
        0 => (
            StatusCode::SERVICE_UNAVAILABLE,
            [("content-type", "application/json"), ("tartan-retry", "No")],
            json!({"detail": "this one will not get better"}).to_string(),
        )
            .into_response(),
        _ => json_reply(200, json!({"out": "late"})),
    })
    .await;
    app.register(&with(
        sync_step("once", &svc.url("/once"), &["x"], &["out"]),
        json!({}),
        json!({"init_backoff": 10, "backoff_type": "fixed", "max_retries": 5}),
    ))
    .await;
    app.start_flow(&json!({"id": "once", "goals": ["once"], "init": {"x": ["1"]}}))
        .await;
    let flow = app.wait_for_flow("once").await;
    assert_eq!(flow["status"], "failed");
    let tried = item_attempts(&flow, "once");
    assert_eq!(tried.len(), 1, "{tried:?}");
    assert_eq!(
        (tried[0]["outcome"].clone(), tried[0]["http_status"].clone()),
        (json!("permanent"), json!(503))
    );
    let item = flow["executions"]["once"]["work_items"]
        .as_object()
        .and_then(|i| i.values().next().cloned());
    assert_eq!(item.map(|i| i["retry_state"].clone()), Some(json!("permanent")));
}

async fn rate_limited_honours_retry_after_when_the_policy_does_not(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, n| match (r.path.as_str(), n) {
        (_, 0) => (
            StatusCode::TOO_MANY_REQUESTS,
            [("content-type", "application/json"), ("retry-after", "1")],
            json!({"detail": "slow down"}).to_string(),
        )
            .into_response(),
        _ => json_reply(200, json!({"out": "ok"})),
    })
    .await;
    let policy =
        json!({"init_backoff": 10, "backoff_type": "fixed", "max_retries": 3, "honor_retry_after": false});
    for (id, classify) in [("plain", json!({})), ("limited", json!({"429": "rate_limited"}))] {
        app.register(&with(
            sync_step(id, &svc.url(&format!("/{id}")), &["x"], &["out"]),
            classify,
            policy.clone(),
        ))
        .await;
        app.start_flow(&json!({"id": id, "goals": [id], "init": {"x": ["1"]}}))
            .await;
    }
    for (id, applied, at_least) in [("plain", false, 0), ("limited", true, 1000)] {
        let flow = app.wait_for_flow(id).await;
        assert_eq!(flow["status"], "completed", "{id}: {flow}");
        let tried = item_attempts(&flow, id);
        let delay = &tried[0]["delay"];
        assert_eq!(delay["retry_after_applied"], applied, "{id}: {delay}");
        assert!(
            delay["delay_ms"].as_u64().unwrap_or(0) >= at_least,
            "{id}: {delay}"
        );
        assert_eq!(tried[0]["outcome"], "retryable", "{id}");
    }
}

async fn a_bad_table_is_refused_naming_the_entry(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    for (classify, says) in [
        (json!({"4xx": "sometimes"}), "4xx: unknown class \"sometimes\""),
        (json!({"abc": "retryable"}), "abc: not a status"),
        (json!({"204": "retryable"}), "204 is a success"),
        (json!(["404"]), "http.classify"),
    ] {
        let step = with(
            sync_step("bad", "http://127.0.0.1:9/x", &["x"], &["y"]),
            classify.clone(),
            json!({}),
        );
        let r = app.register(&step).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{classify}: {:?}", r.body);
        let detail = r.body["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains("http.classify") && detail.contains(says),
            "{classify}: {detail}"
        );
    }
    assert_eq!(app.get("/engine/step/bad").await.status, StatusCode::NOT_FOUND);
}
