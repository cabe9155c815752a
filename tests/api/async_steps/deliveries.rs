//! What an async step's webhook delivers, end to end (docs/api.md, "Async
//! steps and webhooks"): outputs complete the step and duplicates change
//! nothing; deliveries for unknown flows, steps or tokens, or with bodies
//! that are not objects, are refused; a problem fails the step unless its
//! status is retryable per `retry_on`; and a step service written like
//! Argyll's Python SDK runs sync and async steps. The real server and real
//! step servers on 127.0.0.1.
//!
//! Every wait is bounded; delays are tens of milliseconds.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{Method, StatusCode};
use axum::response::IntoResponse;
use serde_json::{json, Value};

use super::support::{
    assert_deactivated_last, assert_problem, async_step, at, header, post_raw, problem, register, start,
    wait_for_requests, work_items,
};
use crate::helpers::{
    events, json_reply, of_type, spawn_app, sync_step, types, Backend, Received, StepServer,
};
use tartan_testkit::both_backends;

both_backends!(
    a_webhook_completes_an_async_step_and_duplicate_deliveries_change_nothing,
    webhooks_for_unknown_flows_steps_or_tokens_or_with_non_object_bodies_are_refused,
    a_problem_delivered_by_webhook_fails_the_step_unless_its_status_is_retryable_per_retry_on,
    a_step_server_written_like_argylls_python_sdk_runs_sync_and_async_steps,
);

// ---------------------------------------------------------------------------
// Async steps and webhooks (docs/api.md, "Async steps and webhooks").

async fn a_webhook_completes_an_async_step_and_duplicate_deliveries_change_nothing(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // Accepts at once (202, no body), delivers its result 200 ms later and
    // records how the webhook answered.
    let answers: Arc<Mutex<Vec<(u16, usize)>>> = Arc::default();
    let recorded = answers.clone();
    let svc = StepServer::start_async(move |r, _| {
        let hook = header(&r, "argyll-webhook-url");
        let seed = r.body["seed"].as_str().unwrap_or("?").to_string();
        let recorded = recorded.clone();
        Box::pin(async move {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let body = json!({"out": format!("done {seed}"), "extra": 1}).to_string();
                let (reply, len) = post_raw(&hook, "application/json", &body).await;
                recorded
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((reply.status.as_u16(), len));
            });
            StatusCode::ACCEPTED.into_response()
        })
    })
    .await;
    register(&app, &async_step("job", &svc.url("/job"), &["seed"], &["out"])).await;
    start(
        &app,
        json!({"id": "a", "goals": ["job"], "init": {"seed": ["s1"]}}),
    )
    .await;
    let flow = app.wait_for_flow("a").await;

    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(
        flow["executions"]["job"]["outputs"],
        json!({"out": "done s1"}),
        "the webhook's object is the outputs"
    );
    assert_eq!(flow["attributes"]["out"][0]["value"], "done s1");
    let took = (at(&flow["completed_at"]) - at(&flow["created_at"])).num_milliseconds();
    assert!(
        took >= 200,
        "completed {took} ms after the start, before the webhook"
    );
    let reqs = svc.requests();
    assert_eq!(reqs.len(), 1);
    let token = header(&reqs[0], "argyll-receipt-token");
    let hook = header(&reqs[0], "argyll-webhook-url");
    assert_eq!(hook, app.url(&app.webhook_path("a", "job", &token)));
    assert!(
        hook.starts_with(&app.url(&format!("/webhook/a/job/{token}/"))),
        "the URL is the flow, step and token plus a signature: {hook}"
    );
    assert_eq!(reqs[0].body, json!({"seed": "s1"}));
    assert_eq!(header(&reqs[0], "argyll-flow-id"), "a");
    assert_eq!(header(&reqs[0], "argyll-step-id"), "job");
    let work = &flow["executions"]["job"]["work_items"][&token];
    assert_eq!(work["status"], "succeeded", "{flow}");
    assert_eq!(work["attempts"].as_array().map(Vec::len), Some(1), "{work}");
    assert_eq!(work["attempts"][0]["outcome"], "success", "{work}");
    assert_eq!(
        crate::helpers::noted(&answers, 1).await,
        vec![(200, 0)],
        "the webhook answers 200 with an empty body"
    );
    assert_deactivated_last(&app, "a", "completed").await;

    // Duplicates, also with other outputs or a problem: 200, empty, no change.
    for (ct, body) in [
        ("application/json", json!({"out": "done s1", "extra": 1})),
        ("application/json", json!({"out": "something else"})),
        (
            "application/problem+json",
            json!({"type": "about:blank", "title": "Unprocessable Entity", "status": 422, "detail": "late"}),
        ),
    ] {
        let (reply, len) = post_raw(&hook, ct, &body.to_string()).await;
        assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
        assert_eq!(len, 0, "empty body: {reply:?}");
    }
    let after = app.flow("a").await;
    assert_eq!(
        crate::helpers::without_late_notes(&after),
        flow,
        "duplicates change nothing"
    );
    assert_eq!(
        after["executions"]["job"]["work_items"][&token]["late_results"],
        json!([1])
    );
    let evs = events(&app, "a").await;
    assert_eq!(of_type(&evs, "work_succeeded").len(), 1, "{:?}", types(&evs));
    // Once per attempt, however many deliveries.
    assert_eq!(of_type(&evs, "work_late_result").len(), 1, "{:?}", types(&evs));
    for kind in ["work_failed", "step_failed", "flow_failed"] {
        assert!(of_type(&evs, kind).is_empty(), "{kind} in {:?}", types(&evs));
    }
    for late in of_type(&evs, "work_late_result") {
        assert_eq!(late["data"]["token"], token.as_str(), "{late}");
    }
}

async fn webhooks_for_unknown_flows_steps_or_tokens_or_with_non_object_bodies_are_refused(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // Accepts and never calls back: the test delivers.
    let svc = StepServer::start(|_, _| json_reply(200, json!({}))).await;
    register(&app, &async_step("wait", &svc.url("/wait"), &[], &["out"])).await;
    start(&app, json!({"id": "w", "goals": ["wait"]})).await;
    let reqs = wait_for_requests(&svc, "/wait", 1).await;
    let token = header(&reqs[0], "argyll-receipt-token");
    let hook = header(&reqs[0], "argyll-webhook-url");
    // Let the 2xx (acceptance) be handled first, so the state is quiet.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = app.flow("w").await;
    assert_eq!(
        before["status"], "active",
        "the 2xx only accepted the call: {before}"
    );
    assert_eq!(
        before["executions"]["wait"]["work_items"][&token]["status"],
        "active"
    );

    let ok = json!({"out": "x"}).to_string();
    // Correctly signed URLs of work the engine does not know.
    for (path, what) in [
        (app.webhook_path("w", "wait", "no-such-token"), "no-such-token"),
        (app.webhook_path("w", "no-such-step", &token), "no-such-step"),
        (app.webhook_path("no-such-flow", "wait", &token), "no-such-flow"),
    ] {
        let (reply, _) = post_raw(&app.url(&path), "application/json", &ok).await;
        assert_problem(&reply, 400);
        assert!(
            reply.body["detail"].as_str().unwrap_or("").contains(what),
            "the detail names {what}: {reply:?}"
        );
    }
    for body in ["[1, 2]", "\"done\"", "42", "null", "{not json", ""] {
        let (reply, _) = post_raw(&hook, "application/json", body).await;
        assert_problem(&reply, 400);
    }
    let (reply, _) = post_raw(&hook, "application/problem+json", "[\"x\"]").await;
    assert_problem(&reply, 400);
    assert_eq!(app.flow("w").await, before, "refused deliveries change nothing");

    // The real delivery still completes the step.
    let (reply, len) = post_raw(&hook, "application/json", &ok).await;
    assert_eq!((reply.status, len), (StatusCode::OK, 0), "{reply:?}");
    let flow = app.wait_for_flow("w").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["attributes"]["out"][0]["value"], "x");
}

async fn a_problem_delivered_by_webhook_fails_the_step_unless_its_status_is_retryable_per_retry_on(
    backend: Backend,
) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // Each endpoint accepts, then delivers by webhook 50 ms later:
    // /reject a 422 problem; /busy a 503 problem first, then outputs;
    // /strict a 503 problem (its step retries only 429); /classified a 422
    // problem first, then outputs (its step classifies 422 as retryable).
    let answers: Arc<Mutex<Vec<u16>>> = Arc::default();
    let recorded = answers.clone();
    let svc = StepServer::start_async(move |r, n| {
        let hook = header(&r, "argyll-webhook-url");
        let recorded = recorded.clone();
        let (ct, body) = match (r.path.as_str(), n) {
            ("/reject", _) => (
                "application/problem+json",
                json!({"type": "about:blank", "title": "Unprocessable Entity", "status": 422, "detail": "item rejected"}),
            ),
            ("/classified", 0) => (
                "application/problem+json",
                json!({"type": "about:blank", "title": "Unprocessable Entity", "status": 422, "detail": "not yet"}),
            ),
            ("/busy", 0) | ("/strict", _) => (
                "application/problem+json",
                json!({"type": "about:blank", "title": "Service Unavailable", "status": 503, "detail": "try later"}),
            ),
            _ => ("application/json", json!({"out": "ok"})),
        };
        Box::pin(async move {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let (reply, _) = post_raw(&hook, ct, &body.to_string()).await;
                recorded.lock().unwrap_or_else(|p| p.into_inner()).push(reply.status.as_u16());
            });
            json_reply(202, json!({}))
        })
    })
    .await;
    let policy = json!({"max_retries": 3, "init_backoff": 20, "backoff_type": "fixed"});
    for (id, retry_on) in [
        ("reject", None),
        ("busy", None),
        ("strict", Some(json!([429]))),
        ("classified", None),
    ] {
        let mut step = async_step(id, &svc.url(&format!("/{id}")), &[], &["out"]);
        step["work_config"] = policy.clone();
        if let Some(r) = retry_on {
            step["work_config"]["retry_on"] = r;
        }
        if id == "classified" {
            step["http"]["classify"] = json!({"422": "retryable"});
        }
        register(&app, &step).await;
        start(&app, json!({"id": id, "goals": [id]})).await;
    }

    // A 422 problem: permanent, no retry.
    let flow = app.wait_for_flow("reject").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    assert!(
        flow["error"].as_str().unwrap_or("").contains("item rejected"),
        "{flow}"
    );
    assert_eq!(flow["executions"]["reject"]["status"], "failed");
    let (_, work) = work_items(&flow, "reject").into_iter().next().unwrap();
    assert_eq!(work["status"], "failed", "{work}");
    assert_eq!(work["error"], "item rejected", "{work}");
    assert_eq!(work["attempts"].as_array().map(Vec::len), Some(1), "{work}");
    assert_eq!(work["attempts"][0]["outcome"], "permanent", "{work}");
    assert_eq!(work["attempts"][0]["http_status"], 422, "{work}");
    let evs = events(&app, "reject").await;
    assert!(
        of_type(&evs, "work_retry_scheduled").is_empty(),
        "{:?}",
        types(&evs)
    );
    assert_eq!(of_type(&evs, "work_failed").len(), 1, "{:?}", types(&evs));
    assert_deactivated_last(&app, "reject", "failed").await;

    // A 503 problem: retried with the same token, then the outputs complete it.
    let flow = app.wait_for_flow("busy").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["attributes"]["out"][0]["value"], "ok");
    let busy: Vec<Received> = svc.requests().into_iter().filter(|r| r.path == "/busy").collect();
    assert_eq!(busy.len(), 2, "called again after the 503 problem");
    assert_eq!(
        header(&busy[0], "argyll-receipt-token"),
        header(&busy[1], "argyll-receipt-token")
    );
    assert_eq!(header(&busy[1], "tartan-attempt"), "2");
    // Each attempt has its own webhook URL (signed for that attempt), for
    // the same work item.
    let (first, second) = (
        header(&busy[0], "argyll-webhook-url"),
        header(&busy[1], "argyll-webhook-url"),
    );
    assert_ne!(first, second);
    assert_eq!(
        first.rsplit_once('/').map(|p| p.0),
        second.rsplit_once('/').map(|p| p.0)
    );
    let (_, work) = work_items(&flow, "busy").into_iter().next().unwrap();
    assert_eq!(work["attempts"][0]["outcome"], "retryable", "{work}");
    assert_eq!(work["attempts"][0]["http_status"], 503, "{work}");
    assert_eq!(work["attempts"][0]["error"], "try later", "{work}");
    assert_eq!(work["attempts"][1]["outcome"], "success", "{work}");
    assert_eq!(work["retry_count"], 1, "{work}");
    let evs = events(&app, "busy").await;
    assert_eq!(of_type(&evs, "work_not_completed").len(), 1, "{:?}", types(&evs));
    assert_eq!(
        of_type(&evs, "work_retry_scheduled").len(),
        1,
        "{:?}",
        types(&evs)
    );

    // A 503 problem for a step whose retry_on leaves 503 out: permanent.
    let flow = app.wait_for_flow("strict").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let (_, work) = work_items(&flow, "strict").into_iter().next().unwrap();
    assert_eq!(work["attempts"].as_array().map(Vec::len), Some(1), "{work}");
    assert_eq!(work["attempts"][0]["outcome"], "permanent", "{work}");
    assert_eq!(work["attempts"][0]["http_status"], 503, "{work}");
    assert_eq!(svc.requests().iter().filter(|r| r.path == "/strict").count(), 1);

    // A 422 problem for a step whose own classes make 422 retryable
    // (docs/retries.md, "A step's own classes"): retried, then completed.
    let flow = app.wait_for_flow("classified").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let (_, work) = work_items(&flow, "classified").into_iter().next().unwrap();
    assert_eq!(work["attempts"][0]["outcome"], "retryable", "{work}");
    assert_eq!(work["attempts"][0]["http_status"], 422, "{work}");
    assert_eq!(
        svc.requests().iter().filter(|r| r.path == "/classified").count(),
        2
    );

    let answers = crate::helpers::noted(&answers, 6).await;
    assert_eq!(answers, vec![200; 6], "every delivery is answered 200");
}

// ---------------------------------------------------------------------------
// A step service written like Argyll's Python SDK (Flask).

/// Behaves like `argyll.handlers.create_step_server`: one route per step id;
/// Flask's `request.get_json()` refuses a body that is not
/// `application/json` (415) and the SDK one that is not a JSON object (400);
/// errors are problem+json; metadata comes from the `Argyll-*` headers; an
/// async handler answers `{"status": "started"}` and later posts the outputs
/// (or, on failure, a 422 problem) to `Argyll-Webhook-URL`, raising for a
/// non-2xx answer (recorded here).
async fn python_sdk_like_server(webhook_answers: Arc<Mutex<Vec<u16>>>) -> StepServer {
    StepServer::start_async(move |r, _| {
        let answers = webhook_answers.clone();
        Box::pin(async move {
            if r.method != Method::POST {
                return problem(405, "Method Not Allowed");
            }
            let ct = header(&r, "content-type");
            if ct.split(';').next().map(str::trim) != Some("application/json") {
                return problem(
                    415,
                    "Did not attempt to load JSON data because the request Content-Type was not 'application/json'.",
                );
            }
            let Value::Object(args) = &r.body else {
                return problem(400, "Invalid JSON");
            };
            let flow_id = header(&r, "argyll-flow-id");
            let step_id = header(&r, "argyll-step-id");
            let receipt = header(&r, "argyll-receipt-token");
            if flow_id.is_empty() || receipt.is_empty() || format!("/{step_id}") != r.path {
                return problem(400, "missing or wrong Argyll metadata");
            }
            let name = args.get("name").and_then(Value::as_str).unwrap_or("").to_string();
            match r.path.as_str() {
                "/greet" => json_reply(200, json!({"greeting": format!("hello {name}")})),
                "/refuse" => problem(400, "name is not allowed"),
                "/greet-later" | "/fail-later" => {
                    let hook = header(&r, "argyll-webhook-url");
                    if hook.is_empty() {
                        return problem(400, "No webhook URL");
                    }
                    let (ct, body) = if r.path == "/greet-later" {
                        (
                            "application/json",
                            json!({"greeting": format!("hello {name}, later"), "status": "completed"}),
                        )
                    } else {
                        (
                            "application/problem+json",
                            json!({"type": "about:blank", "title": "Unprocessable Entity", "status": 422, "detail": "could not greet"}),
                        )
                    };
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let (reply, _) = post_raw(&hook, ct, &body.to_string()).await;
                        answers.lock().unwrap_or_else(|p| p.into_inner()).push(reply.status.as_u16());
                    });
                    json_reply(200, json!({"status": "started"}))
                }
                _ => problem(404, "Not Found"),
            }
        })
    })
    .await
}

async fn a_step_server_written_like_argylls_python_sdk_runs_sync_and_async_steps(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let answers: Arc<Mutex<Vec<u16>>> = Arc::default();
    let svc = python_sdk_like_server(answers.clone()).await;
    // The fake is as strict as Flask: no JSON content type, no service.
    let (reply, _) = post_raw(&svc.url("/greet"), "text/plain", "{\"name\": \"x\"}").await;
    assert_eq!(reply.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (reply, _) = post_raw(&svc.url("/greet"), "application/json", "[1]").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);

    register(
        &app,
        &sync_step("greet", &svc.url("/greet"), &["name"], &["greeting"]),
    )
    .await;
    register(
        &app,
        &sync_step("refuse", &svc.url("/refuse"), &["name"], &["refusal"]),
    )
    .await;
    // `later` is the SDK's `greeting` key under another attribute name.
    let later = json!({
        "id": "greet-later", "name": "Greet later", "type": "async",
        "http": {"endpoint": svc.url("/greet-later")},
        "attributes": {
            "name": {"role": "required", "type": "string"},
            "later": {"role": "output", "type": "string", "output": {"mapping": {"name": "greeting"}}},
            "status": {"role": "output", "type": "string"}
        }
    });
    register(&app, &later).await;
    register(
        &app,
        &async_step("fail-later", &svc.url("/fail-later"), &["name"], &["never"]),
    )
    .await;
    for (id, goal) in [
        ("sync", "greet"),
        ("no", "refuse"),
        ("async", "greet-later"),
        ("async-fail", "fail-later"),
    ] {
        start(
            &app,
            json!({"id": id, "goals": [goal], "init": {"name": ["ada"]}}),
        )
        .await;
    }

    let flow = app.wait_for_flow("sync").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["attributes"]["greeting"][0]["value"], "hello ada");

    let flow = app.wait_for_flow("no").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let (_, work) = work_items(&flow, "refuse").into_iter().next().unwrap();
    assert_eq!(
        work["error"], "name is not allowed",
        "the problem's detail: {work}"
    );
    assert_eq!(work["attempts"][0]["http_status"], 400, "{work}");
    assert_eq!(work["attempts"][0]["outcome"], "permanent", "{work}");

    let flow = app.wait_for_flow("async").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(
        flow["attributes"]["later"][0]["value"], "hello ada, later",
        "{flow}"
    );
    assert_eq!(
        flow["attributes"]["status"][0]["value"], "completed",
        "the webhook's outputs, not the acceptance's {{\"status\": \"started\"}}: {flow}"
    );
    assert_eq!(flow["attributes"]["status"].as_array().map(Vec::len), Some(1));

    let flow = app.wait_for_flow("async-fail").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let (_, work) = work_items(&flow, "fail-later").into_iter().next().unwrap();
    assert_eq!(work["status"], "failed", "{work}");
    assert_eq!(work["error"], "could not greet", "{work}");
    assert_eq!(work["attempts"][0]["http_status"], 422, "{work}");
    assert!(
        flow["error"].as_str().unwrap_or("").contains("could not greet"),
        "{flow}"
    );

    // Every call the engine made was one the SDK accepts.
    let engine_calls: Vec<Received> = svc.requests().into_iter().skip(2).collect();
    assert_eq!(engine_calls.len(), 4);
    for r in &engine_calls {
        assert_eq!(header(r, "content-type"), "application/json", "{r:?}");
        assert!(r.body.is_object(), "{r:?}");
        assert_eq!(r.body["name"], "ada", "{r:?}");
    }
    assert_eq!(
        crate::helpers::noted(&answers, 2).await,
        vec![200, 200],
        "raise_for_status passes"
    );
}
