//! The step catalog over the API.

use axum::http::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{spawn_app, sync_step, Backend};
use tartan_testkit::both_backends;

both_backends!(
    registering_a_step_stores_it_with_the_global_defaults_filled_in,
    identical_reregistration_is_accepted_and_a_different_one_conflicts,
    a_step_can_be_read_updated_and_removed,
    an_unknown_step_id_names_the_registered_one_it_is_a_slip_of,
);

/// Every `404` for a step id (read, update, remove, a goal of a flow or a
/// plan) names the registered id nearest to it when it is a slip; a name
/// far from all, or one a client made long, gets none.
async fn an_unknown_step_id_names_the_registered_one_it_is_a_slip_of(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    for id in ["charge-card", "greet", "ship"] {
        app.register(&sync_step(id, "http://127.0.0.1:9/a", &["x"], &["y"]))
            .await;
    }
    let greet = sync_step("greeet", "http://127.0.0.1:9/a", &["x"], &["y"]);
    let answers = [
        app.get("/engine/step/gret").await,
        app.send(Method::DELETE, "/engine/step/greett", None).await,
        app.send(Method::PUT, "/engine/step/greeet", Some(greet.to_string()))
            .await,
        app.start_flow(&json!({"id": "f", "goals": ["ship", "gerte"], "init": {"x": [1]}}))
            .await,
        app.post("/engine/plan", &json!({"goals": ["grete"]})).await,
    ];
    for r in answers {
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{:?}", r.body);
        let detail = r.body["detail"].as_str().unwrap_or_default();
        assert!(detail.ends_with("(did you mean \"greet\"?)"), "{detail}");
    }
    let r = app
        .post("/engine/plan", &json!({"goals": ["chrage_card", "payment"]}))
        .await;
    assert_eq!(
        r.body["detail"],
        "step not found: chrage_card (did you mean \"charge-card\"?), payment"
    );
    let r = app.get(&format!("/engine/step/{}", "g".repeat(100))).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:?}", r.body);
    assert!(
        !r.body["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("did you mean"),
        "{:?}",
        r.body
    );
    // Nothing was started by the refused flow.
    assert_eq!(app.get("/engine/flow/f").await.status, StatusCode::NOT_FOUND);
}

async fn registering_a_step_stores_it_with_the_global_defaults_filled_in(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let step = sync_step("Greet Step", "http://127.0.0.1:9/greet", &["name"], &["greeting"]);
    let r = app.register(&step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(r.body["step"]["id"], "greet-step", "ids are sanitised");
    assert_eq!(r.body["message"], "Step registered");
    // And says so, beside Argyll's body: `Greet Step` and `greet-step` are one step.
    let note = |r: &reqwest::Response| {
        r.headers()
            .get("tartan-id-rewritten")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let client = reqwest::Client::new();
    let again = client
        .post(app.url("/engine/step"))
        .json(&step)
        .send()
        .await
        .unwrap();
    assert_eq!(
        note(&again).as_deref(),
        Some("step id \"Greet Step\" is stored as \"greet-step\"")
    );
    let start = |id: &str| {
        client
            .post(app.url("/engine/flow"))
            .json(&serde_json::json!({"id": id, "goals": ["greet-step"], "init": {"name": ["x"]}}))
            .send()
    };
    let rewritten = start("Order:42é").await.unwrap();
    assert_eq!(
        note(&rewritten).as_deref(),
        Some("flow id \"Order:42\\u{e9}\" is stored as \"order42\"")
    );
    let body: serde_json::Value = rewritten.json().await.unwrap();
    assert_eq!(body, serde_json::json!({"message": "", "flow_id": "order42"}));
    assert_eq!(note(&start("plain").await.unwrap()), None);
    let wc = &r.body["step"]["work_config"];
    assert_eq!(wc["max_retries"], 10);
    assert_eq!(wc["init_backoff"], 1000);
    assert_eq!(wc["max_backoff"], 60000);
    assert_eq!(wc["backoff_type"], "exponential");
    assert_eq!(r.body["step"]["http"]["method"], "POST");

    let got = app.get("/engine/step/greet-step").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.body, r.body["step"]);
    let list = app.get("/engine/step").await;
    assert_eq!(list.body["count"], 1);
    assert_eq!(list.body["steps"][0]["id"], "greet-step");

    let engine = app.get("/engine").await;
    assert_eq!(engine.status, StatusCode::OK);
    assert_eq!(engine.body["steps"]["greet-step"]["name"], "Greet Step");
    assert_eq!(
        engine.body["attributes"]["greeting"]["providers"],
        json!(["greet-step"])
    );
    assert_eq!(
        engine.body["attributes"]["name"]["consumers"],
        json!(["greet-step"])
    );
    let catalog = app.get("/engine/catalog").await;
    assert_eq!(catalog.body["steps"]["greet-step"]["id"], "greet-step");
    let events = app.get("/engine/catalog/events").await;
    assert_eq!(events.body["count"], 1);
    assert_eq!(events.body["events"][0]["type"], "step_registered");
    assert_eq!(events.body["events"][0]["sequence"], 1);
}

async fn identical_reregistration_is_accepted_and_a_different_one_conflicts(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let step = sync_step("a", "http://127.0.0.1:9/a", &["x"], &["y"]);
    assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    let mut changed = step.clone();
    changed["http"]["endpoint"] = json!("http://127.0.0.1:9/other");
    let r = app.register(&changed).await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(r.content_type, "application/problem+json");
    assert!(
        r.body["error"].as_str().unwrap().contains("step exists"),
        "{:?}",
        r.body
    );
    // One registration event: the identical repeat changed nothing.
    assert_eq!(app.get("/engine/catalog/events").await.body["count"], 1);
    assert_eq!(
        app.get("/engine/step/a").await.body["http"]["endpoint"],
        "http://127.0.0.1:9/a"
    );
}

async fn a_step_can_be_read_updated_and_removed(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    assert_eq!(app.get("/engine/step/a").await.status, StatusCode::NOT_FOUND);
    let step = sync_step("a", "http://127.0.0.1:9/a", &["x"], &["y"]);
    app.register(&step).await;
    let mut changed = step.clone();
    changed["http"]["endpoint"] = json!("http://127.0.0.1:9/b");
    let r = app
        .send(Method::PUT, "/engine/step/a", Some(changed.to_string()))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body["message"], "Step updated");
    assert_eq!(
        app.get("/engine/step/a").await.body["http"]["endpoint"],
        "http://127.0.0.1:9/b"
    );

    let mismatch = app
        .send(Method::PUT, "/engine/step/other", Some(changed.to_string()))
        .await;
    assert_eq!(mismatch.status, StatusCode::BAD_REQUEST);
    let mut unknown = changed.clone();
    unknown["id"] = json!("nope");
    let missing = app
        .send(Method::PUT, "/engine/step/nope", Some(unknown.to_string()))
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    let del = app.send(Method::DELETE, "/engine/step/a", None).await;
    assert_eq!(del.status, StatusCode::OK);
    assert_eq!(del.body["message"], "Step unregistered");
    assert_eq!(app.get("/engine/step/a").await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.send(Method::DELETE, "/engine/step/a", None).await.status,
        StatusCode::NOT_FOUND
    );
    let types: Vec<String> = app.get("/engine/catalog/events").await.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(types, ["step_registered", "step_updated", "step_unregistered"]);
}

/// Each invalid definition is a 400 problem naming what is wrong.
#[tokio::test]
async fn invalid_steps_are_rejected_naming_the_field() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let base = sync_step("s", "http://127.0.0.1:9/s/{id}", &["id"], &["out"]);
    let cases: Vec<(serde_json::Value, &str)> = vec![
        (
            json!({"id": "", "name": "x", "type": "sync", "http": {"endpoint": "http://h/"}}),
            "id: step ID empty",
        ),
        (
            json!({"id": "x", "type": "sync", "http": {"endpoint": "http://h/"}}),
            "name: step name empty",
        ),
        (
            json!({"id": "x", "name": "x", "type": "teleport", "http": {"endpoint": "http://h/"}}),
            "type: invalid step type",
        ),
        (
            json!({"id": "x", "name": "x", "type": "flow", "flow": {"goals": []}}),
            "flow.goals: at least one goal step is required",
        ),
        (
            json!({"id": "x", "name": "x", "type": "sync"}),
            "http: http required",
        ),
        (
            json!({"id": "x", "name": "x", "type": "sync", "http": {"endpoint": ""}}),
            "http.endpoint: step endpoint empty",
        ),
        (
            json!({"id": "x", "name": "x", "type": "sync", "http": {"endpoint": "http://h/", "method": "PATCH"}}),
            "http.method: invalid HTTP method",
        ),
        (
            json!({"id": "x", "name": "x", "type": "sync", "http": {"endpoint": "http://h/{nope}"}}),
            "unknown parameter",
        ),
        (
            json!({"id": "x", "name": "x", "type": "sync", "http": {"endpoint": "http://h/"}, "attributes": {"a": {"role": "boss"}}}),
            "attributes.a.role",
        ),
        (
            json!({"id": "x", "name": "x", "type": "sync", "http": {"endpoint": "http://h/"}, "attributes": {"a": {"role": "output", "required": {}}}}),
            "config type does not match",
        ),
        (
            json!({"id": "x", "name": "x", "type": "sync", "http": {"endpoint": "http://h/"}, "attributes": {"a": {"role": "const"}}}),
            "const value required",
        ),
        (
            json!({"id": "x", "name": "x", "type": "sync", "http": {"endpoint": "http://h/"}, "attributes": {"a": {"role": "meta"}}}),
            "meta key required",
        ),
        (
            json!({"id": "x", "name": "x", "type": "sync", "http": {"endpoint": "http://h/"}, "attributes": {
            "a": {"role": "required", "required": {"mapping": {"name": "z"}}},
            "b": {"role": "required", "required": {"mapping": {"name": "z"}}}}}),
            "duplicate mapped parameter name",
        ),
        (
            json!({"id": "x", "name": "x", "type": "sync", "http": {"endpoint": "http://h/"}, "work_config": {"backoff_type": "random"}}),
            "work_config.backoff_type: must be fixed, linear or exponential",
        ),
        (
            json!({"id": "x", "name": "x", "type": "sync", "http": {"endpoint": "http://h/"}, "work_config": {"init_backoff": 5000, "max_backoff": 10}}),
            "work_config.max_backoff",
        ),
        (
            json!({"id": "x", "name": "x", "type": "sync", "http": {"endpoint": "http://h/", "timeout": -5}}),
            "http.timeout",
        ),
        (
            json!({"id": "x", "name": "x", "type": "sync", "http": {"endpoint": "http://h/", "timeout": "5 parsecs"}}),
            "http.timeout",
        ),
    ];
    for (step, expected) in cases {
        let r = app.register(&step).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{step} -> {:?}", r.body);
        assert_eq!(r.content_type, "application/problem+json");
        let detail = r.body["detail"].as_str().unwrap();
        assert!(
            detail.contains(expected),
            "{step}: {detail:?} should contain {expected:?}"
        );
        assert_eq!(r.body["error"], r.body["detail"]);
    }
    // Nothing was stored by any of them.
    assert_eq!(app.get("/engine/step").await.body["count"], 0);

    // Catalog-wide rules: attribute type conflicts and cycles.
    assert_eq!(app.register(&base).await.status, StatusCode::CREATED);
    let mut conflict = sync_step("t", "http://127.0.0.1:9/t", &["out"], &[]);
    conflict["attributes"]["out"]["type"] = json!("number");
    let r = app.register(&conflict).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.body["detail"]
            .as_str()
            .unwrap()
            .contains("attribute type conflict"),
        "{:?}",
        r.body
    );
    let cyclic = sync_step("back", "http://127.0.0.1:9/b", &["out"], &["id"]);
    let r = app.register(&cyclic).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.body["detail"].as_str().unwrap().contains("circular dependency"),
        "{:?}",
        r.body
    );
    assert_eq!(app.get("/engine/step").await.body["count"], 1);
}

#[tokio::test]
async fn durations_in_any_format_are_stored_as_milliseconds() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let mut step = sync_step("d", "http://127.0.0.1:9/d", &[], &["o"]);
    step["http"]["timeout"] = json!("PT1.5S");
    step["work_config"] = json!({"init_backoff": "250ms", "max_backoff": "1m", "max_retries": 3});
    let r = app.register(&step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(r.body["step"]["http"]["timeout"], 1500);
    assert_eq!(r.body["step"]["work_config"]["init_backoff"], 250);
    assert_eq!(r.body["step"]["work_config"]["max_backoff"], 60000);
    assert_eq!(r.body["step"]["work_config"]["max_retries"], 3);
}

#[tokio::test]
async fn a_retry_dialect_is_kept_as_given_and_shown_normalised() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let mut step = sync_step("steep", "http://127.0.0.1:9/s", &[], &["o"]);
    step["retry"] = json!({"maxAttempts": 5, "delay": "1s", "exponentialBackoff": 2, "maxDelay": "10s"});
    step["work_config"] = json!({"parallelism": 2});
    let r = app.register(&step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let got = app.get("/engine/step/steep").await.body;
    assert_eq!(got["retry"], step["retry"], "retry as given");
    let eff = &got["effective_retry"];
    assert_eq!(eff["max_attempts"], 5);
    assert_eq!(eff["max_retries"], 4);
    assert_eq!(eff["init_backoff"], 1000);
    assert_eq!(eff["max_backoff"], 10000);
    assert_eq!(eff["backoff_type"], "exponential");
    assert_eq!(eff["backoff_coefficient"], 2.0);
    assert_eq!(eff["jitter"], "none");
    assert_eq!(eff["retry_on"], json!(["5xx", 408, 425, 429]));
    // In words too (docs/retries.md, "In words"), in every step answer (the
    // 10 s cap is above every wait of the four retries: not named).
    let words = "up to 5 attempts, waiting 1s, 2s, 4s, 8s; \
                 retried on 5xx, 408, 425, 429, timeouts and transport errors, honouring Retry-After";
    assert_eq!(eff["in_words"], words);
    assert_eq!(r.body["step"]["effective_retry"]["in_words"], words);
    let listed = app.get("/engine/step").await.body;
    assert_eq!(
        listed["steps"][0]["effective_retry"]["in_words"], words,
        "{listed}"
    );
    // Re-posting what GET returned (in_words included) registers the same
    // policy: effective_retry is read-only and ignored on input.
    assert_eq!(app.register(&got).await.status, StatusCode::CREATED);
    let mut again = got.clone();
    again["effective_retry"] = json!({"max_attempts": 99});
    assert_eq!(app.register(&again).await.status, StatusCode::CREATED);
    assert_eq!(
        app.get("/engine/catalog/events").await.body["count"],
        1,
        "nothing changed"
    );

    let mut mixed = sync_step("mixed", "http://127.0.0.1:9/m", &[], &["p"]);
    mixed["retry"] = json!({"maxAttempts": 3});
    mixed["work_config"] = json!({"max_retries": 2});
    let r = app.register(&mixed).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.body["detail"].as_str().unwrap().starts_with("retry"),
        "{:?}",
        r.body
    );
}

#[tokio::test]
async fn invalid_retry_defaults_stop_the_server_naming_the_variable() {
    for (var, value) in [
        ("TARTAN_RETRY_BACKOFF_TYPE", "random"),
        ("TARTAN_RETRY_MAX_RETRIES", "-5"),
        ("RETRY_INITIAL_BACKOFF", "5 parsecs"),
        ("TARTAN_STEP_TIMEOUT", "0"),
    ] {
        let (ok, _, text) =
            crate::helpers::serve_refusing(&crate::helpers::UNUSED_SERVER, &[(var, value)]).await;
        assert!(!ok, "{var}={value} must stop the server");
        assert!(text.contains(var), "{var}: {text}");
    }
}
