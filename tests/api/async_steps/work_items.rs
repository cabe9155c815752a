//! Async steps and their webhooks, for_each work items and parallelism,
//! compensation and deactivation (docs/api.md, "Async steps and webhooks";
//! docs/work-items.md), end to end: the
//! real server and real step servers on 127.0.0.1.
//!
//! Every wait is bounded; delays are tens of milliseconds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use crate::helpers::{
    call, events, json_reply, of_type, read_reply, spawn_app, spawn_binary, sync_step, types, Backend,
    Received, Reply, StepServer, TestApp, TestDb,
};
use tartan_testkit::both_backends;

/// How long a bounded wait lasts.
const WAIT: Duration = Duration::from_secs(10);

both_backends!(
    a_webhook_completes_an_async_step_and_duplicate_deliveries_change_nothing,
    webhooks_for_unknown_flows_steps_or_tokens_or_with_non_object_bodies_are_refused,
    a_problem_delivered_by_webhook_fails_the_step_unless_its_status_is_retryable_per_retry_on,
    a_step_server_written_like_argylls_python_sdk_runs_sync_and_async_steps,
    a_for_each_step_runs_one_item_per_element_in_order_within_its_parallelism,
    two_for_each_inputs_expand_into_their_cartesian_product_in_order,
    an_empty_for_each_array_completes_the_step_with_an_empty_aggregate,
    a_for_each_over_more_than_ten_thousand_items_is_refused_at_flow_start,
    a_failing_item_fails_the_step_cancels_the_rest_and_compensates_the_succeeded_items,
    a_compensation_that_is_refused_or_keeps_failing_ends_compensation_failed,
    compensate_url_placeholders_come_from_inputs_and_outputs_and_outputs_win,
    a_terminal_flow_ends_with_flow_deactivated_and_reports_its_status,
    a_compensation_in_flight_survives_sigkill_and_is_called_again_with_the_same_token,
    items_still_running_when_their_step_fails_are_compensated_once_they_succeed,
);

// ---------------------------------------------------------------------------
// Helpers.

/// The sequence number of the first (or last) event of a type.
fn seq_of(events: &[Value], kind: &str, last: bool) -> i64 {
    let found = of_type(events, kind);
    let e = if last { found.last() } else { found.first() };
    e.and_then(|e| e["sequence"].as_i64())
        .unwrap_or_else(|| panic!("no {kind} in {:?}", types(events)))
}

fn at(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a time: {v}"))
}

async fn register(app: &TestApp, step: &Value) {
    let r = app.register(step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{step}: {:?}", r.body);
}

async fn start(app: &TestApp, body: Value) {
    let r = app.start_flow(&body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{body}: {:?}", r.body);
}

/// A problem+json answer with this status.
fn assert_problem(reply: &Reply, status: u16) {
    assert_eq!(reply.status.as_u16(), status, "{reply:?}");
    assert!(
        reply.content_type.starts_with("application/problem+json"),
        "{reply:?}"
    );
    assert_eq!(reply.body["status"], status, "{reply:?}");
    assert_eq!(reply.body["error"], reply.body["detail"], "{reply:?}");
}

/// An RFC 9457 problem response, as a step service (or Argyll's SDK) sends it.
fn problem(status: u16, detail: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({
        "type": "about:blank",
        "title": code.canonical_reason().unwrap_or(""),
        "status": status,
        "detail": detail,
    });
    (
        code,
        [("content-type", "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}

fn header(r: &Received, name: &str) -> String {
    r.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// POST a raw body with a content type; the reply and its raw length.
async fn post_raw(url: &str, content_type: &str, body: &str) -> (Reply, usize) {
    let resp = reqwest::Client::new()
        .post(url)
        .header("content-type", content_type)
        .body(body.to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    read_reply(resp).await
}

/// An async step definition.
fn async_step(id: &str, endpoint: &str, inputs: &[&str], outputs: &[&str]) -> Value {
    let mut step = sync_step(id, endpoint, inputs, outputs);
    step["type"] = json!("async");
    step
}

/// A sync step whose `for_each` inputs are arrays, one work item per element
/// (per element of their Cartesian product), with one output.
fn for_each_step(id: &str, endpoint: &str, for_each: &[&str], output: &str, parallelism: i64) -> Value {
    let mut attributes = Map::new();
    for name in for_each {
        attributes.insert(
            (*name).into(),
            json!({"role": "required", "type": "array", "required": {"for_each": true}}),
        );
    }
    attributes.insert(output.into(), json!({"role": "output"}));
    json!({
        "id": id,
        "name": id,
        "type": "sync",
        "http": {"endpoint": endpoint},
        "attributes": attributes,
        "work_config": {"parallelism": parallelism},
    })
}

/// The work items of a step, by token.
fn work_items(flow: &Value, step: &str) -> BTreeMap<String, Value> {
    flow["executions"][step]["work_items"]
        .as_object()
        .unwrap_or_else(|| panic!("no work items for {step}: {flow}"))
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The work item (token, state) whose input `name` is `value`.
fn item_with(flow: &Value, step: &str, name: &str, value: &Value) -> (String, Value) {
    work_items(flow, step)
        .into_iter()
        .find(|(_, w)| &w["inputs"][name] == value)
        .unwrap_or_else(|| panic!("no item of {step} with {name} = {value}: {flow}"))
}

/// Wait (bounded) until the server has received `n` requests on paths
/// starting with `prefix`.
async fn wait_for_requests(svc: &StepServer, prefix: &str, n: usize) -> Vec<Received> {
    let until = Instant::now() + WAIT;
    loop {
        let got: Vec<Received> = svc
            .requests()
            .into_iter()
            .filter(|r| r.path.starts_with(prefix))
            .collect();
        if got.len() >= n {
            return got;
        }
        assert!(
            Instant::now() < until,
            "only {} of {n} requests to {prefix}",
            got.len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A terminal flow is deactivated last: `flow_deactivated` is its last event,
/// carries the final status and the flow's `deactivated_at`; the status view
/// is `{"id","status"}`.
async fn assert_deactivated_last(app: &TestApp, id: &str, status: &str) {
    let flow = app.flow(id).await;
    assert_eq!(flow["status"], status, "{flow}");
    let evs = events(app, id).await;
    let last = evs.last().unwrap_or_else(|| panic!("no events for {id}"));
    assert_eq!(last["type"], "flow_deactivated", "{:?}", types(&evs));
    assert_eq!(of_type(&evs, "flow_deactivated").len(), 1, "{:?}", types(&evs));
    assert_eq!(last["data"]["status"], status, "{last}");
    assert_eq!(at(&last["timestamp"]), at(&flow["deactivated_at"]), "{flow}");
    assert!(at(&flow["completed_at"]) <= at(&flow["deactivated_at"]), "{flow}");
    let view = app.get(&format!("/engine/flow/{id}/status")).await;
    assert_eq!(view.status, StatusCode::OK);
    assert_eq!(view.body, json!({"id": id, "status": status}));
}

// ---------------------------------------------------------------------------
// 1. Async steps and webhooks (docs/api.md, "Async steps and webhooks").

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
// 2. A step service written like Argyll's Python SDK (Flask).

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

// ---------------------------------------------------------------------------
// 3. for_each work items (docs/work-items.md, "for_each").

async fn a_for_each_step_runs_one_item_per_element_in_order_within_its_parallelism(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // 20 ms per request; counts the requests in progress at once.
    let current = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (c, p) = (current.clone(), peak.clone());
    let svc = StepServer::start_async(move |r, _| {
        let (current, peak) = (c.clone(), p.clone());
        Box::pin(async move {
            let now = current.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            current.fetch_sub(1, Ordering::SeqCst);
            let n = r.body["items"].as_i64().unwrap_or(-1000);
            json_reply(200, json!({"doubled": n * 2}))
        })
    })
    .await;
    let mut step = for_each_step("double", &svc.url("/double"), &["items"], "doubled", 5);
    step["attributes"]["doubled"]["type"] = json!("number");
    register(&app, &step).await;
    let elements: Vec<i64> = (0..100).collect();
    start(
        &app,
        json!({"id": "fe", "goals": ["double"], "init": {"items": [elements]}}),
    )
    .await;
    let flow = app.wait_for_flow("fe").await;
    assert_eq!(flow["status"], "completed", "{flow}");

    let reqs = svc.requests();
    assert_eq!(reqs.len(), 100, "one call per element");
    let seen: Vec<i64> = reqs
        .iter()
        .map(|r| {
            let obj = r.body.as_object().unwrap_or_else(|| panic!("{r:?}"));
            assert_eq!(obj.len(), 1, "only the element: {r:?}");
            obj["items"].as_i64().unwrap_or_else(|| panic!("{r:?}"))
        })
        .collect();
    let mut sorted = seen.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, elements, "each element exactly once");
    let mut first: Vec<i64> = seen[..5].to_vec();
    first.sort_unstable();
    assert_eq!(first, [0, 1, 2, 3, 4], "the first five calls: {seen:?}");
    // Element order: element e starts only after 0..e-1 have started and
    // with at most 4 others in flight, so at least e-4 calls came before it.
    for (position, e) in seen.iter().enumerate() {
        assert!(
            *e <= position as i64 + 4,
            "element {e} arrived at position {position}: {seen:?}"
        );
    }
    let peak = peak.load(Ordering::SeqCst);
    assert!(peak <= 5, "{peak} calls at once, parallelism is 5");
    assert!(
        peak >= 2,
        "the items ran one at a time ({peak}) despite parallelism 5"
    );
    let tokens: std::collections::BTreeSet<String> =
        reqs.iter().map(|r| header(r, "argyll-receipt-token")).collect();
    assert_eq!(tokens.len(), 100, "a token per item");

    // Output aggregation: in element order, each element with its for_each
    // input under the attribute's name and the output under its own.
    let expected: Vec<Value> = elements
        .iter()
        .map(|n| json!({"items": n, "doubled": n * 2}))
        .collect();
    assert_eq!(flow["attributes"]["doubled"][0]["value"], json!(expected));
    assert_eq!(flow["attributes"]["doubled"][0]["step"], "double");
    assert_eq!(
        flow["executions"]["double"]["outputs"],
        json!({"doubled": expected})
    );
    let items = work_items(&flow, "double");
    assert_eq!(items.len(), 100);
    for (token, w) in &items {
        assert!(tokens.contains(token));
        assert_eq!(w["status"], "succeeded", "{w}");
        let n = w["inputs"]["items"].as_i64().unwrap();
        assert_eq!(w["outputs"], json!({"doubled": n * 2}), "{w}");
    }
    let evs = events(&app, "fe").await;
    assert_eq!(of_type(&evs, "step_started").len(), 1);
    assert_eq!(of_type(&evs, "work_started").len(), 100);
    assert_eq!(of_type(&evs, "work_succeeded").len(), 100);
    assert_eq!(of_type(&evs, "step_completed").len(), 1);
    assert_deactivated_last(&app, "fe", "completed").await;
}

async fn two_for_each_inputs_expand_into_their_cartesian_product_in_order(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| {
        let label = format!(
            "{}-{}",
            r.body["regions"].as_str().unwrap_or("?"),
            r.body["products"].as_str().unwrap_or("?")
        );
        json_reply(200, json!({"label": label}))
    })
    .await;
    let mut step = for_each_step("label", &svc.url("/label"), &["regions", "products"], "label", 1);
    step["attributes"]["tag"] = json!({"role": "required", "type": "string"});
    register(&app, &step).await;
    start(
        &app,
        json!({
            "id": "cp", "goals": ["label"],
            "init": {"regions": [["US", "EU", "APAC"]], "products": [["A", "B"]], "tag": ["t"]}
        }),
    )
    .await;
    let flow = app.wait_for_flow("cp").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let bodies: Vec<Value> = svc.requests().into_iter().map(|r| r.body).collect();
    // Nested loops, each array in element order. Attributes are keyed by
    // name, so the outer loop is the name that sorts first (`products`);
    // Argyll's guide lists `regions` outer, its declaration order, which
    // Argyll's engine does not keep either (it ranges over a Go map).
    let product = [
        ("US", "A"),
        ("EU", "A"),
        ("APAC", "A"),
        ("US", "B"),
        ("EU", "B"),
        ("APAC", "B"),
    ];
    let expected: Vec<Value> = product
        .iter()
        .map(|(r, p)| json!({"regions": r, "products": p, "tag": "t"}))
        .collect();
    assert_eq!(
        bodies, expected,
        "3 x 2 items, called in product order (parallelism 1)"
    );
    let aggregate: Vec<Value> = product
        .iter()
        .map(|(r, p)| json!({"regions": r, "products": p, "label": format!("{r}-{p}")}))
        .collect();
    assert_eq!(
        flow["attributes"]["label"][0]["value"],
        json!(aggregate),
        "each element carries both for_each inputs, not the plain input"
    );
    assert_eq!(work_items(&flow, "label").len(), 6);
}

async fn an_empty_for_each_array_completes_the_step_with_an_empty_aggregate(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| {
        let n = r.body["doubled"].as_array().map_or(-1, |a| a.len() as i64);
        json_reply(200, json!({"count": n}))
    })
    .await;
    let mut double = for_each_step("double", &svc.url("/double"), &["items"], "doubled", 3);
    double["attributes"]["doubled"]["type"] = json!("array");
    register(&app, &double).await;
    let mut count = sync_step("count", &svc.url("/count"), &["doubled"], &["count"]);
    count["attributes"]["doubled"]["type"] = json!("array");
    count["attributes"]["count"]["type"] = json!("number");
    register(&app, &count).await;
    start(
        &app,
        json!({"id": "empty", "goals": ["count"], "init": {"items": [[]]}}),
    )
    .await;
    let flow = app.wait_for_flow("empty").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["executions"]["double"]["status"], "completed", "{flow}");
    assert_eq!(flow["executions"]["double"]["outputs"], json!({"doubled": []}));
    assert_eq!(flow["attributes"]["doubled"][0]["value"], json!([]));
    assert!(work_items(&flow, "double").is_empty(), "{flow}");
    let paths: Vec<String> = svc.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/count"], "no element, no call");
    assert_eq!(flow["attributes"]["count"][0]["value"], 0);
    let evs = events(&app, "empty").await;
    assert_eq!(
        of_type(&evs, "work_started").len(),
        1,
        "only count: {:?}",
        types(&evs)
    );
    assert_deactivated_last(&app, "empty", "completed").await;
}

async fn a_for_each_over_more_than_ten_thousand_items_is_refused_at_flow_start(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": 1}))).await;
    register(
        &app,
        &for_each_step("one", &svc.url("/one"), &["items"], "out", 10),
    )
    .await;
    register(
        &app,
        &for_each_step("two", &svc.url("/two"), &["xs", "ys"], "pair", 10),
    )
    .await;
    let many: Vec<i64> = (0..10_001).collect();
    let r = app
        .start_flow(&json!({"id": "big", "goals": ["one"], "init": {"items": [many]}}))
        .await;
    assert_problem(&r, 400);
    let detail = r.body["detail"].as_str().unwrap_or("");
    assert!(detail.contains("items"), "names the attribute: {detail}");
    assert!(detail.contains("10001"), "says how many: {detail}");
    assert_eq!(app.get("/engine/flow/big").await.status, StatusCode::NOT_FOUND);

    // 101 x 100 elements of two attributes: 10,100 items.
    let xs: Vec<i64> = (0..101).collect();
    let ys: Vec<i64> = (0..100).collect();
    let r = app
        .start_flow(&json!({"id": "big2", "goals": ["two"], "init": {"xs": [xs], "ys": [ys]}}))
        .await;
    assert_problem(&r, 400);
    let detail = r.body["detail"].as_str().unwrap_or("");
    assert!(
        detail.contains("xs") && detail.contains("ys") && detail.contains("10100"),
        "{detail}"
    );
    assert_eq!(app.get("/engine/flow/big2").await.status, StatusCode::NOT_FOUND);
    assert!(svc.requests().is_empty());
}

// ---------------------------------------------------------------------------
// 4. Partial failure and compensation (docs/work-items.md, "Compensation").

async fn a_failing_item_fails_the_step_cancels_the_rest_and_compensates_the_succeeded_items(
    backend: Backend,
) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // /charge declines element 4; /refund/{charge} answers 503 to its first
    // call for each charge, then 200.
    let svc = StepServer::start(|r, n| {
        if r.path == "/charge" {
            let item = r.body["items"].as_i64().unwrap_or(-1);
            if item == 4 {
                return problem(400, "card declined");
            }
            return json_reply(200, json!({"charge": format!("ch-{item}")}));
        }
        if n == 0 {
            problem(503, "refunds are warming up")
        } else {
            json_reply(200, json!({}))
        }
    })
    .await;
    let mut step = for_each_step("charge", &svc.url("/charge"), &["items"], "charge", 1);
    step["http"]["compensate"] = json!(svc.url("/refund/{charge}"));
    step["work_config"] =
        json!({"parallelism": 1, "max_retries": 2, "init_backoff": 20, "backoff_type": "fixed"});
    register(&app, &step).await;
    start(
        &app,
        json!({"id": "pay", "goals": ["charge"], "init": {"items": [[1, 2, 3, 4, 5, 6]]}}),
    )
    .await;
    let flow = app.wait_for_flow("pay").await;

    assert_eq!(flow["status"], "failed", "{flow}");
    assert!(
        flow["error"].as_str().unwrap_or("").contains("card declined"),
        "{flow}"
    );
    assert_eq!(flow["executions"]["charge"]["status"], "failed");
    assert_eq!(flow["executions"]["charge"]["error"], "card declined");
    assert!(
        flow["attributes"].get("charge").is_none(),
        "a failed step sets no attribute: {flow}"
    );
    let charges: Vec<Received> = svc
        .requests()
        .into_iter()
        .filter(|r| r.path == "/charge")
        .collect();
    let called: Vec<Value> = charges.iter().map(|r| r.body["items"].clone()).collect();
    assert_eq!(
        called,
        [json!(1), json!(2), json!(3), json!(4)],
        "5 and 6 never called"
    );

    // 4 failed; 5 and 6 cancelled, never started.
    let (_, four) = item_with(&flow, "charge", "items", &json!(4));
    assert_eq!(four["status"], "failed", "{four}");
    assert_eq!(four["attempts"].as_array().map(Vec::len), Some(1), "{four}");
    assert_eq!(four["attempts"][0]["http_status"], 400, "{four}");
    assert!(
        four["compensation"].is_null(),
        "a failed item is not compensated: {four}"
    );
    for n in [5, 6] {
        let (_, w) = item_with(&flow, "charge", "items", &json!(n));
        assert_eq!(w["status"], "cancelled", "{w}");
        assert_eq!(w["attempts"], json!([]), "{w}");
    }

    // 1-3 compensated: twice each (503, then 200), same token and headers.
    let refunds: Vec<Received> = svc
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/refund/"))
        .collect();
    assert_eq!(refunds.len(), 6, "{refunds:?}");
    for n in 1..=3 {
        let (token, w) = item_with(&flow, "charge", "items", &json!(n));
        assert_eq!(w["status"], "compensated", "{w}");
        let charge = charges
            .iter()
            .find(|r| r.body["items"] == n)
            .unwrap_or_else(|| panic!("charge {n}"));
        assert_eq!(header(charge, "argyll-receipt-token"), token);
        let calls: Vec<&Received> = refunds
            .iter()
            .filter(|r| r.path == format!("/refund/ch-{n}"))
            .collect();
        assert_eq!(calls.len(), 2, "503 then 200 for item {n}: {refunds:?}");
        for c in &calls {
            assert_eq!(c.method, Method::POST);
            assert_eq!(
                c.body,
                json!({"input": {"items": n}, "output": {"charge": format!("ch-{n}")}}),
                "{c:?}"
            );
            assert_eq!(header(c, "argyll-receipt-token"), token, "the item's token");
            assert_eq!(header(c, "argyll-flow-id"), "pay");
            assert_eq!(header(c, "argyll-step-id"), "charge");
            assert_eq!(header(c, "content-type"), "application/json");
            assert!(c.headers.get("argyll-webhook-url").is_none());
        }
        let comp = w["compensation"].as_array().unwrap_or_else(|| panic!("{w}"));
        assert_eq!(comp.len(), 2, "{w}");
        assert_eq!(comp[0]["outcome"], "retryable", "{w}");
        assert_eq!(comp[0]["http_status"], 503, "{w}");
        assert_eq!(comp[0]["error"], "refunds are warming up", "{w}");
        assert_eq!(comp[1]["outcome"], "success", "{w}");
        assert_eq!(w["outputs"], json!({"charge": format!("ch-{n}")}), "{w}");
    }

    let evs = events(&app, "pay").await;
    let kinds = types(&evs);
    assert_eq!(of_type(&evs, "work_started").len(), 4, "{kinds:?}");
    assert_eq!(of_type(&evs, "work_succeeded").len(), 3, "{kinds:?}");
    assert_eq!(of_type(&evs, "work_failed").len(), 1, "{kinds:?}");
    assert_eq!(of_type(&evs, "work_cancelled").len(), 2, "{kinds:?}");
    assert_eq!(of_type(&evs, "step_failed").len(), 1, "{kinds:?}");
    assert_eq!(of_type(&evs, "comp_started").len(), 6, "{kinds:?}");
    assert_eq!(of_type(&evs, "comp_retry_scheduled").len(), 3, "{kinds:?}");
    assert_eq!(of_type(&evs, "comp_succeeded").len(), 3, "{kinds:?}");
    assert!(of_type(&evs, "comp_failed").is_empty(), "{kinds:?}");
    for e in of_type(&evs, "comp_retry_scheduled") {
        assert_eq!(e["data"]["http_status"], 503, "{e}");
        assert_eq!(e["data"]["delay_ms"], 20, "{e}");
    }
    // The step fails at once: before any compensation, right after item 4.
    let failed = seq_of(&evs, "step_failed", false);
    assert_eq!(
        seq_of(&evs, "work_failed", false) + 1,
        failed,
        "step_failed follows work_failed: {kinds:?}"
    );
    assert!(failed < seq_of(&evs, "comp_started", false), "{kinds:?}");
    assert!(seq_of(&evs, "work_cancelled", true) < seq_of(&evs, "comp_started", false));
    // The flow fails at once too, but is deactivated only after the last
    // compensation succeeded.
    let flow_failed = seq_of(&evs, "flow_failed", false);
    assert!(flow_failed < seq_of(&evs, "comp_succeeded", false), "{kinds:?}");
    let last_comp = of_type(&evs, "comp_succeeded")
        .iter()
        .map(|e| at(&e["timestamp"]))
        .max()
        .unwrap();
    assert!(at(&flow["deactivated_at"]) >= last_comp, "{flow}");
    assert!(
        (at(&flow["deactivated_at"]) - at(&flow["completed_at"])).num_milliseconds() >= 20,
        "compensation (a 20 ms retry) ran after the failure: {flow}"
    );
    assert_eq!(
        seq_of(&evs, "comp_succeeded", true) + 1,
        seq_of(&evs, "flow_deactivated", false),
        "{kinds:?}"
    );
    assert_deactivated_last(&app, "pay", "failed").await;
}

async fn a_compensation_that_is_refused_or_keeps_failing_ends_compensation_failed(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // Element 3 fails; /recall always refuses (400), /unmail always 503.
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/ship" | "/mail" if r.body["items"] == 3 => problem(400, "no such address"),
        "/ship" | "/mail" => json_reply(200, json!({"done": true})),
        "/recall" => problem(400, "too late to recall"),
        _ => problem(503, "post office closed"),
    })
    .await;
    for (id, comp) in [("ship", "/recall"), ("mail", "/unmail")] {
        let mut step = for_each_step(id, &svc.url(&format!("/{id}")), &["items"], "done", 1);
        step["attributes"]["done"]["type"] = json!("boolean");
        step["http"]["compensate"] = json!(svc.url(comp));
        step["work_config"] = json!({"max_retries": 1, "init_backoff": 20, "backoff_type": "fixed"});
        register(&app, &step).await;
        start(
            &app,
            json!({"id": id, "goals": [id], "init": {"items": [[1, 2, 3, 4]]}}),
        )
        .await;
    }

    // 4xx: permanent at once.
    let flow = app.wait_for_flow("ship").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    for n in [1, 2] {
        let (_, w) = item_with(&flow, "ship", "items", &json!(n));
        assert_eq!(w["status"], "compensation_failed", "{w}");
        let comp = w["compensation"].as_array().unwrap_or_else(|| panic!("{w}"));
        assert_eq!(comp.len(), 1, "{w}");
        assert_eq!(comp[0]["outcome"], "permanent", "{w}");
        assert_eq!(comp[0]["http_status"], 400, "{w}");
        assert_eq!(comp[0]["error"], "too late to recall", "{w}");
        assert_eq!(w["error"], "too late to recall", "{w}");
    }
    let (_, four) = item_with(&flow, "ship", "items", &json!(4));
    assert_eq!(four["status"], "cancelled", "{four}");
    assert_eq!(svc.requests().iter().filter(|r| r.path == "/recall").count(), 2);
    let evs = events(&app, "ship").await;
    assert_eq!(of_type(&evs, "comp_started").len(), 2, "{:?}", types(&evs));
    assert_eq!(of_type(&evs, "comp_failed").len(), 2, "{:?}", types(&evs));
    assert!(
        of_type(&evs, "comp_retry_scheduled").is_empty(),
        "{:?}",
        types(&evs)
    );
    assert!(of_type(&evs, "comp_succeeded").is_empty(), "{:?}", types(&evs));
    for e in of_type(&evs, "comp_failed") {
        assert_eq!(e["data"]["http_status"], 400, "{e}");
        assert_eq!(e["data"]["error"], "too late to recall", "{e}");
    }
    assert_deactivated_last(&app, "ship", "failed").await;

    // 5xx: retried per work_config (1 retry), then failed for good.
    let flow = app.wait_for_flow("mail").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    for n in [1, 2] {
        let (_, w) = item_with(&flow, "mail", "items", &json!(n));
        assert_eq!(w["status"], "compensation_failed", "{w}");
        let comp = w["compensation"].as_array().unwrap_or_else(|| panic!("{w}"));
        assert_eq!(comp.len(), 2, "{w}");
        assert!(comp.iter().all(|a| a["http_status"] == 503), "{w}");
    }
    assert_eq!(svc.requests().iter().filter(|r| r.path == "/unmail").count(), 4);
    let evs = events(&app, "mail").await;
    assert_eq!(
        of_type(&evs, "comp_retry_scheduled").len(),
        2,
        "{:?}",
        types(&evs)
    );
    assert_eq!(of_type(&evs, "comp_failed").len(), 2, "{:?}", types(&evs));
    let last_failed = seq_of(&evs, "comp_failed", true);
    assert_eq!(last_failed + 1, seq_of(&evs, "flow_deactivated", false));
    assert_deactivated_last(&app, "mail", "failed").await;
}

async fn compensate_url_placeholders_come_from_inputs_and_outputs_and_outputs_win(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // The input element and the output share the inner name `key`.
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/book" if r.body["key"] == "bad" => problem(400, "sold out"),
        "/book" => json_reply(
            200,
            json!({"key": format!("bk-{}", r.body["key"].as_str().unwrap_or("?"))}),
        ),
        _ => json_reply(200, json!({})),
    })
    .await;
    let step = json!({
        "id": "book", "name": "book", "type": "sync",
        "http": {"endpoint": svc.url("/book"), "compensate": svc.url("/undo/{region}/{key}")},
        "attributes": {
            "items": {"role": "required", "type": "array",
                      "required": {"for_each": true, "mapping": {"name": "key"}}},
            "region": {"role": "required", "type": "string"},
            "booking": {"role": "output", "type": "string", "output": {"mapping": {"name": "key"}}}
        }
    });
    register(&app, &step).await;
    start(
        &app,
        json!({"id": "trip", "goals": ["book"], "init": {"items": [["a b", "bad"]], "region": ["eu/1"]}}),
    )
    .await;
    let flow = app.wait_for_flow("trip").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let (token, w) = item_with(&flow, "book", "key", &json!("a b"));
    assert_eq!(w["status"], "compensated", "{w}");
    let undo: Vec<Received> = svc
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/undo"))
        .collect();
    assert_eq!(undo.len(), 1, "{undo:?}");
    assert_eq!(
        undo[0].path, "/undo/eu%2F1/bk-a%20b",
        "region from the inputs, key from the outputs (they win), path-escaped"
    );
    assert_eq!(
        undo[0].body,
        json!({"input": {"key": "a b", "region": "eu/1"}, "output": {"key": "bk-a b"}})
    );
    assert_eq!(header(&undo[0], "argyll-receipt-token"), token);
}

// ---------------------------------------------------------------------------
// 5. Deactivation (docs/api.md, "Flows").

async fn a_terminal_flow_ends_with_flow_deactivated_and_reports_its_status(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/ok" => json_reply(200, json!({"out": "x"})),
        "/hold" => json_reply(202, json!({})),
        _ => problem(400, "nope"),
    })
    .await;
    register(&app, &sync_step("ok", &svc.url("/ok"), &[], &["out"])).await;
    register(&app, &sync_step("bad", &svc.url("/bad"), &[], &["other"])).await;
    register(&app, &async_step("hold", &svc.url("/hold"), &[], &["held"])).await;
    start(&app, json!({"id": "good", "goals": ["ok"]})).await;
    start(&app, json!({"id": "poor", "goals": ["bad"]})).await;
    start(&app, json!({"id": "open", "goals": ["hold"]})).await;
    app.wait_for_flow("good").await;
    app.wait_for_flow("poor").await;
    assert_deactivated_last(&app, "good", "completed").await;
    assert_deactivated_last(&app, "poor", "failed").await;

    // An active flow: no deactivation yet.
    let reqs = wait_for_requests(&svc, "/hold", 1).await;
    let hook = header(&reqs[0], "argyll-webhook-url");
    let flow = app.flow("open").await;
    assert_eq!(flow["status"], "active", "{flow}");
    assert!(flow["deactivated_at"].is_null(), "{flow}");
    let view = app.get("/engine/flow/open/status").await;
    assert_eq!(view.body, json!({"id": "open", "status": "active"}));
    assert!(of_type(&events(&app, "open").await, "flow_deactivated").is_empty());
    let (reply, _) = post_raw(&hook, "application/json", "{\"held\": 1}").await;
    assert_eq!(reply.status, StatusCode::OK);
    app.wait_for_flow("open").await;
    assert_deactivated_last(&app, "open", "completed").await;

    let missing = app.get("/engine/flow/no-such-flow/status").await;
    assert_problem(&missing, 404);
}

// ---------------------------------------------------------------------------
// 6. A compensation in flight across a SIGKILL of the real binary.

async fn a_compensation_in_flight_survives_sigkill_and_is_called_again_with_the_same_token(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    // Element 2 fails; the first compensation call never answers.
    let svc = StepServer::start_async(|r, n| {
        Box::pin(async move {
            match r.path.as_str() {
                "/reserve" if r.body["items"] == 2 => problem(400, "out of stock"),
                "/reserve" => json_reply(200, json!({"held": true})),
                _ => {
                    if n == 0 {
                        std::future::pending::<()>().await;
                    }
                    json_reply(200, json!({}))
                }
            }
        })
    })
    .await;
    let engine = spawn_binary(&db, "work-items-test").await;
    let mut step = for_each_step("reserve", &svc.url("/reserve"), &["items"], "held", 1);
    step["http"]["compensate"] = json!(svc.url("/release"));
    let (status, body) = call(&engine, reqwest::Method::POST, "/engine/step", Some(step)).await;
    assert_eq!(status, 201, "{body}");
    let start = json!({"id": "k", "goals": ["reserve"], "init": {"items": [[1, 2]]}});
    let (status, body) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
    assert_eq!(status, 201, "{body}");
    wait_for_requests(&svc, "/release", 1).await;
    let (_, before) = call(&engine, reqwest::Method::GET, "/engine/flow/k", None).await;
    assert_eq!(before["status"], "failed", "{before}");
    assert!(
        before["deactivated_at"].is_null(),
        "compensation in flight: {before}"
    );
    let mut engine = engine;
    engine.child.kill().await.expect("SIGKILL");

    let engine = spawn_binary(&db, "work-items-test").await;
    let mut flow = Value::Null;
    let until = Instant::now() + WAIT;
    while Instant::now() < until {
        flow = call(&engine, reqwest::Method::GET, "/engine/flow/k", None)
            .await
            .1;
        if !flow["deactivated_at"].is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(flow["status"], "failed", "{flow}");
    assert!(flow["deactivated_at"].is_string(), "{flow}");
    let releases: Vec<Received> = svc
        .requests()
        .into_iter()
        .filter(|r| r.path == "/release")
        .collect();
    assert_eq!(releases.len(), 2, "called again after the restart");
    let token = header(&releases[0], "argyll-receipt-token");
    assert_eq!(header(&releases[1], "argyll-receipt-token"), token);
    assert_eq!(releases[0].body, releases[1].body);
    assert_eq!(
        releases[1].body,
        json!({"input": {"items": 1}, "output": {"held": true}})
    );
    let w = &flow["executions"]["reserve"]["work_items"][&token];
    assert_eq!(w["inputs"], json!({"items": 1}), "{flow}");
    assert_eq!(w["status"], "compensated", "{w}");
    let comp = w["compensation"].as_array().unwrap_or_else(|| panic!("{w}"));
    assert_eq!(comp.len(), 2, "{w}");
    assert_eq!(comp[0]["outcome"], "abandoned", "{w}");
    assert_eq!(comp[1]["outcome"], "success", "{w}");
    let reserves = svc.requests().iter().filter(|r| r.path == "/reserve").count();
    assert_eq!(reserves, 2, "finished work is not redone");
    let (_, evs) = call(&engine, reqwest::Method::GET, "/engine/flow/k/events", None).await;
    let evs = evs["events"].as_array().cloned().unwrap_or_default();
    assert_eq!(of_type(&evs, "comp_started").len(), 2, "{:?}", types(&evs));
    assert_eq!(of_type(&evs, "comp_succeeded").len(), 1, "{:?}", types(&evs));
    assert_eq!(
        evs.last().map(|e| e["type"].clone()),
        Some(json!("flow_deactivated")),
        "{:?}",
        types(&evs)
    );
}

async fn items_still_running_when_their_step_fails_are_compensated_once_they_succeed(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // Element 2 fails at once; 1 and 3 succeed 300 ms later, after the step
    // has failed.
    let svc = StepServer::start_async(|r, _| {
        Box::pin(async move {
            if r.path.starts_with("/undo") {
                return json_reply(200, json!({}));
            }
            if r.body["items"] == json!(2) {
                return json_reply(400, json!({"detail": "no"}));
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            json_reply(200, json!({"done": r.body["items"]}))
        })
    })
    .await;
    let mut step = for_each_step("each", &svc.url("/each"), &["items"], "done", 3);
    step["http"]["compensate"] = json!(svc.url("/undo"));
    register(&app, &step).await;
    start(
        &app,
        json!({"id": "late", "goals": ["each"], "init": {"items": [[1, 2, 3]]}}),
    )
    .await;
    let flow = app.wait_for_flow("late").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let items = work_items(&flow, "each");
    let statuses: Vec<&str> = items.values().filter_map(|w| w["status"].as_str()).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == "compensated").count(),
        2,
        "{flow}"
    );
    assert_eq!(statuses.iter().filter(|s| **s == "failed").count(), 1, "{flow}");
    let undone = svc.requests().into_iter().filter(|r| r.path == "/undo").count();
    assert_eq!(undone, 2);
    assert_deactivated_last(&app, "late", "failed").await;
}
