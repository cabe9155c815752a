//! Partial failure, compensation and deactivation end to end
//! (docs/work-items.md, "Compensation"; docs/api.md, "Flows"): a failing
//! item fails its step, cancels the items not started and compensates the
//! succeeded ones, also those still running when the step failed; a
//! compensation that is refused or keeps failing ends
//! `compensation_failed`; compensate URL placeholders come from inputs and
//! outputs; a compensation in flight survives a SIGKILL of the real binary;
//! and a terminal flow ends with `flow_deactivated` (after its
//! compensation, if any) and reports its status. The real server and real
//! step servers on 127.0.0.1.
//!
//! Every wait is bounded; delays are tens of milliseconds.

use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use super::support::{
    assert_deactivated_last, assert_problem, async_step, at, for_each_step, header, post_raw, problem,
    register, start, wait_for_requests, work_items, WAIT,
};
use crate::helpers::{
    call, events, json_reply, of_type, spawn_app, spawn_binary, sync_step, types, Backend, Received,
    StepServer, TestDb,
};
use tartan_testkit::both_backends;

both_backends!(
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

/// The work item (token, state) whose input `name` is `value`.
fn item_with(flow: &Value, step: &str, name: &str, value: &Value) -> (String, Value) {
    work_items(flow, step)
        .into_iter()
        .find(|(_, w)| &w["inputs"][name] == value)
        .unwrap_or_else(|| panic!("no item of {step} with {name} = {value}: {flow}"))
}

// ---------------------------------------------------------------------------
// Partial failure and compensation (docs/work-items.md, "Compensation").

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
// Deactivation (docs/api.md, "Flows").

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
// A compensation in flight across a SIGKILL of the real binary.

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
