//! `required.match`: which values of an attribute a step takes; a match
//! that can no longer be met skips the step.

use axum::http::StatusCode;
use serde_json::{json, Value};
use tartan_testkit::both_backends;

use super::script;
use crate::helpers::{events, json_reply, of_type, spawn_app, Backend, StepServer};

both_backends!(
    a_match_routes_a_flow_to_the_step_it_fits,
    a_match_filters_the_values_collected,
    an_unmet_match_skips_with_the_inputs_and_what_was_unsatisfied,
    a_match_that_fails_leaves_its_step_waiting,
    a_match_that_collects_all_is_skipped_when_one_value_fails_it,
    a_match_the_init_cannot_meet_plans_no_provider_for_its_step,
);

fn step(id: &str, endpoint: &str, attributes: Value) -> Value {
    json!({"id": id, "name": id, "type": "sync", "http": {"endpoint": endpoint}, "attributes": attributes})
}

fn matching(collect: &str, language: &str, source: &str) -> Value {
    json!({"role": "required", "required": {"collect": collect, "match": script(language, source)}})
}

/// Argyll's TestMatchRoutes: one router, two senders gated by a match on
/// the route; only the chosen one and its own providers run.
async fn a_match_routes_a_flow_to_the_step_it_fits(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/route" => json_reply(200, json!({"notification_type": r.body["kind"].clone()})),
        "/lookup" => json_reply(200, json!({"customer": {"id": r.body["customer_id"].clone()}})),
        p => json_reply(200, json!({"sent": p})),
    })
    .await;
    let steps = [
        step(
            "route",
            &svc.url("/route"),
            json!({"kind": {"role": "required"}, "notification_type": {"role": "output"}}),
        ),
        step(
            "send-email",
            &svc.url("/email"),
            json!({"notification_type": matching("first", "lua", "return value == 'email'"),
                   "email_address": {"role": "required"}, "email_sent": {"role": "output", "output": {"mapping": {"name": "sent"}}}}),
        ),
        step(
            "send-postal",
            &svc.url("/postal"),
            json!({"notification_type": matching("first", "ale", r#"(eq value "postal")"#),
                   "customer": {"role": "required"}, "postal_sent": {"role": "output", "output": {"mapping": {"name": "sent"}}}}),
        ),
        step(
            "customer-lookup",
            &svc.url("/lookup"),
            json!({"customer_id": {"role": "required"}, "customer": {"role": "output"}}),
        ),
    ];
    for s in &steps {
        let r = app.register(s).await;
        assert_eq!(r.status, StatusCode::CREATED, "{s}: {:?}", r.body);
    }
    let goals = json!(["send-email", "send-postal"]);
    let r = app
        .start_flow(
            &json!({"id": "email", "goals": goals, "init": {"kind": ["email"], "email_address": ["a@b"]}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let flow = app.wait_for_flow("email").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["executions"]["send-email"]["status"], "completed");
    assert_eq!(flow["executions"]["send-postal"]["status"], "skipped");
    assert_eq!(
        flow["executions"]["send-postal"]["reason"],
        "required match did not match"
    );
    let paths: Vec<String> = svc.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, ["/route", "/email"]);

    app.start_flow(
        &json!({"id": "postal", "goals": goals, "init": {"kind": ["postal"], "customer_id": ["c-1"]}}),
    )
    .await;
    let flow = app.wait_for_flow("postal").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["executions"]["send-postal"]["status"], "completed");
    assert_eq!(flow["executions"]["send-email"]["status"], "skipped");
    assert_eq!(flow["attributes"]["postal_sent"][0]["value"], "/postal");
}

/// Argyll's TestMatchFilters and TestMatchFirstPending: `some` takes the
/// matching values only; `first` waits for the first that matches. (A
/// jpath match reads an object's members: a bare string has none, so it
/// matches nothing, in Argyll as here.)
async fn a_match_filters_the_values_collected(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/a" => json_reply(200, json!({"data": "b"})),
        "/b" => json_reply(200, json!({"data": "a"})),
        _ => json_reply(200, json!({"got": r.body["data"].clone()})),
    })
    .await;
    app.register(&step("pa", &svc.url("/a"), json!({"data": {"role": "output"}})))
        .await;
    app.register(&step("pb", &svc.url("/b"), json!({"data": {"role": "output"}})))
        .await;
    for (id, collect, language, source) in [
        ("some", "some", "lua", "return value == 'a'"),
        ("first", "first", "ale", r#"(eq value "a")"#),
    ] {
        let s = step(
            id,
            &svc.url("/consume"),
            json!({"data": matching(collect, language, source), "got": {"role": "output"}}),
        );
        let r = app.register(&s).await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
        app.start_flow(&json!({"id": id, "goals": [id]})).await;
        let flow = app.wait_for_flow(id).await;
        assert_eq!(flow["status"], "completed", "{flow}");
        let want = if collect == "some" {
            json!(["a"])
        } else {
            json!("a")
        };
        assert_eq!(flow["executions"][id]["outputs"]["got"], want, "{collect}");
    }
}

/// Argyll's TestMatchSkipInputs.
async fn an_unmet_match_skips_with_the_inputs_and_what_was_unsatisfied(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"done": true}))).await;
    let s = step(
        "charge",
        &svc.url("/charge"),
        json!({"payment_result": matching("first", "lua", "return value == 'paid'"),
               "user_info": {"role": "required"}, "done": {"role": "output"}}),
    );
    assert_eq!(app.register(&s).await.status, StatusCode::CREATED);
    app.start_flow(&json!({"id": "declined", "goals": ["charge"],
        "init": {"user_info": ["resolved-user"], "payment_result": ["declined"]}}))
        .await;
    let flow = app.wait_for_flow("declined").await;
    // Every goal skipped by its match: the flow did nothing it was asked.
    assert_eq!(flow["status"], "failed", "{flow}");
    let exec = &flow["executions"]["charge"];
    assert_eq!(exec["status"], "skipped");
    assert_eq!(exec["reason"], "required match did not match");
    assert_eq!(exec["unsatisfied"], json!(["payment_result"]));
    assert_eq!(exec["inputs"], json!({"user_info": "resolved-user"}));
    let all = events(&app, "declined").await;
    let skipped = of_type(&all, "step_skipped");
    assert_eq!(skipped[0]["data"]["unsatisfied"], json!(["payment_result"]));
    assert!(svc.requests().is_empty());
}

/// A match that fails at run time decides nothing, as in Argyll: its step
/// waits, neither called, skipped nor failed, and its flow stays active
/// until something ends it (here a cancel); docs/argyll.md, "Scripts that
/// fail".
async fn a_match_that_fails_leaves_its_step_waiting(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"done": true}))).await;
    let s = step(
        "charge",
        &svc.url("/charge"),
        json!({"payment_result": matching("first", "lua", "error('no verdict')"), "done": {"role": "output"}}),
    );
    assert_eq!(app.register(&s).await.status, StatusCode::CREATED);
    let started = app
        .start_flow(&json!({"id": "undecided", "goals": ["charge"], "init": {"payment_result": ["paid"]}}))
        .await;
    assert_eq!(started.status, StatusCode::CREATED, "{:?}", started.body);
    // The start decided the step already: it waits.
    let flow = app.flow("undecided").await;
    assert_eq!(flow["status"], "active", "{flow}");
    assert_eq!(flow["executions"]["charge"]["status"], "pending", "{flow}");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let flow = app.flow("undecided").await;
    assert_eq!(flow["status"], "active", "{flow}");
    assert_eq!(flow["executions"]["charge"]["status"], "pending", "{flow}");
    assert!(svc.requests().is_empty());
    let cancelled = app.post("/engine/flow/undecided/cancel", &json!({})).await;
    assert!(cancelled.status.is_success(), "{:?}", cancelled.body);
    let flow = app.wait_for_flow("undecided").await;
    assert_eq!(flow["status"], "cancelled", "{flow}");
}

/// Argyll's TestMatchAllPrunes: with `collect: all`, a value the match
/// refuses (b, beside a) means the step can never have all it takes: it is
/// skipped, naming the attribute, never called, and the flow fails.
async fn a_match_that_collects_all_is_skipped_when_one_value_fails_it(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/a" => json_reply(200, json!({"data": "a"})),
        "/b" => json_reply(200, json!({"data": "b"})),
        _ => json_reply(200, json!({"got": true})),
    })
    .await;
    for s in [
        step("provide-a", &svc.url("/a"), json!({"data": {"role": "output"}})),
        step("provide-b", &svc.url("/b"), json!({"data": {"role": "output"}})),
        step(
            "consumer",
            &svc.url("/consume"),
            json!({"data": matching("all", "lua", "return value == 'a'"), "got": {"role": "output"}}),
        ),
    ] {
        let r = app.register(&s).await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    }
    app.start_flow(&json!({"id": "prunes", "goals": ["consumer"]}))
        .await;
    let flow = app.wait_for_flow("prunes").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let exec = &flow["executions"]["consumer"];
    assert_eq!(exec["status"], "skipped", "{flow}");
    assert_eq!(exec["unsatisfied"], json!(["data"]), "{flow}");
    assert!(
        svc.requests().iter().all(|r| r.path != "/consume"),
        "the consumer was called"
    );
}

/// Argyll's TestRequiredMatchInitMismatchPrunesNormalInputs,
/// ...KeepsGateProviders and TestRequiredMatchUnknownOnlyRequiresGate, through
/// the plan preview: an init value the match refuses means the step will not
/// run, so the providers of its other inputs are left out and nothing is
/// required of the caller; a provider of the gated attribute itself stays.
async fn a_match_the_init_cannot_meet_plans_no_provider_for_its_step(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({}))).await;
    let postal = |with_customer: bool| {
        let mut attributes = json!({"notification_type": matching("first", "lua", "return value == 'postal'"),
                                    "result": {"role": "output"}});
        if with_customer {
            attributes["customer"] = json!({"role": "required"});
        }
        attributes
    };
    let steps = [
        step("send-postal", &svc.url("/postal"), postal(true)),
        step(
            "customer-lookup",
            &svc.url("/lookup"),
            json!({"customer_id": {"role": "required"}, "customer": {"role": "output"}}),
        ),
        step("send-postal-2", &svc.url("/postal"), postal(false)),
        step(
            "route",
            &svc.url("/route"),
            json!({"notification_type": {"role": "output"}}),
        ),
    ];
    for s in &steps[..2] {
        assert_eq!(app.register(s).await.status, StatusCode::CREATED);
    }
    let plan = |goal: &str, init: Value| {
        let body = json!({"goals": [goal], "init": init});
        let app = &app;
        async move {
            let r = app.post("/engine/plan", &body).await;
            assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
            r.body
        }
    };
    let steps_of = |plan: &Value| -> Vec<String> {
        let mut ids: Vec<String> = plan["steps"]
            .as_object()
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default();
        ids.sort();
        ids
    };
    // Email, for a step that only takes postal: its customer is not looked up.
    let p = plan("send-postal", json!({"notification_type": ["email"]})).await;
    assert_eq!(steps_of(&p), ["send-postal"], "{p}");
    assert_eq!(p["required"], json!([]), "{p}");

    // A provider of the gated attribute stays, with the init or without.
    for s in &steps[2..] {
        assert_eq!(app.register(s).await.status, StatusCode::CREATED);
    }
    for init in [json!({"notification_type": ["email"]}), json!({})] {
        let p = plan("send-postal-2", init.clone()).await;
        assert_eq!(steps_of(&p), ["route", "send-postal-2"], "{init}: {p}");
        assert_eq!(p["required"], json!([]), "{init}: {p}");
    }
}
