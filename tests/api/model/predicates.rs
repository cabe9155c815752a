//! Predicates: evaluated before a step starts; false skips it, an error
//! fails it.

use serde_json::{json, Value};
use tartan_testkit::both_backends;

use super::script;
use crate::helpers::{events, json_reply, of_type, spawn_app, sync_step, Backend, StepServer};

both_backends!(
    a_false_predicate_skips_the_step_and_its_dependents_fail,
    a_predicate_in_each_language_sees_the_inputs,
    a_predicate_that_errors_fails_the_step_without_calling_it,
    a_predicate_judges_each_for_each_element,
    a_predicate_that_needs_more_than_a_small_budget_still_decides,
);

fn with_predicate(mut step: Value, language: &str, source: &str) -> Value {
    step["predicate"] = script(language, source);
    step
}

/// Argyll's TestPredicateSkipping, TestSkipStep and TestSkippedProviderCascade.
async fn a_false_predicate_skips_the_step_and_its_dependents_fail(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc =
        StepServer::start(|_, _| json_reply(200, json!({"valueA": "a", "valueB": "b", "valueC": "c"}))).await;
    app.register(&sync_step("a", &svc.url("/a"), &[], &["valueA"]))
        .await;
    app.register(&with_predicate(
        sync_step("b", &svc.url("/b"), &["valueA"], &["valueB"]),
        "ale",
        "false",
    ))
    .await;
    // A goal skipped by its predicate: the flow still completes.
    app.start_flow(&json!({"id": "skip", "goals": ["b"]})).await;
    let flow = app.wait_for_flow("skip").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["executions"]["b"]["status"], "skipped");
    assert_eq!(flow["executions"]["b"]["reason"], "predicate returned false");
    // Where Argyll (and its UI) has it.
    assert_eq!(flow["executions"]["b"]["error"], "predicate returned false");
    assert_eq!(flow["executions"]["b"]["inputs"], json!({"valueA": "a"}));
    assert!(flow["attributes"].get("valueB").is_none());
    assert_eq!(
        svc.requests().iter().map(|r| r.path.as_str()).collect::<Vec<_>>(),
        ["/a"]
    );
    let skipped = events(&app, "skip").await;
    let skipped = of_type(&skipped, "step_skipped");
    assert_eq!(skipped[0]["data"]["reason"], "predicate returned false");
    assert_eq!(skipped[0]["data"]["inputs"], json!({"valueA": "a"}));
    assert!(of_type(&events(&app, "skip").await, "step_started")
        .iter()
        .all(|e| e["data"]["step_id"] != "b"));

    // What needed its output can no longer run: it fails, and the flow.
    app.register(&sync_step("c", &svc.url("/c"), &["valueB"], &["valueC"]))
        .await;
    app.start_flow(&json!({"id": "cascade", "goals": ["c"]})).await;
    let flow = app.wait_for_flow("cascade").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    assert_eq!(flow["executions"]["c"]["status"], "failed");
    assert_eq!(
        flow["executions"]["c"]["error"],
        "required input no longer available"
    );
    assert!(svc.requests().iter().all(|r| r.path != "/c"));
}

/// The same predicate in Ale, Lua and jpath; jpath counts an explicit null
/// (Argyll's TestJPathNullMatch); Ale counts anything but false.
async fn a_predicate_in_each_language_sees_the_inputs(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| json_reply(200, json!({"out": r.path.clone()}))).await;
    let cases = [
        ("ale-big", "ale", "(> amount 100)"),
        ("lua-big", "lua", "return amount > 100"),
        ("jpath-big", "jpath", "$.amount > 100"),
        ("jpath-flag", "jpath", "$.flag"),
        ("ale-nil", "ale", "flag"),
        ("lua-nil", "lua", "return flag"),
    ];
    for (id, language, source) in cases {
        let step = json!({
            "id": id, "name": id, "type": "sync", "http": {"endpoint": svc.url(&format!("/{id}"))},
            "predicate": script(language, source),
            "attributes": {
                "amount": {"role": "required", "type": "number"},
                "flag": {"role": "optional"},
                "out": {"role": "output"}
            }
        });
        let r = app.register(&step).await;
        assert_eq!(r.status, axum::http::StatusCode::CREATED, "{id}: {:?}", r.body);
    }
    let run = |id: &'static str, amount: i64, flag: Value| {
        let app = &app;
        async move {
            let flow_id = format!("{id}-{amount}-{}", flag.is_null());
            let mut init = json!({"amount": [amount]});
            if !flag.is_null() || id.ends_with("flag") {
                init["flag"] = json!([flag]);
            }
            app.start_flow(&json!({"id": flow_id, "goals": [id], "init": init}))
                .await;
            app.wait_for_flow(&flow_id).await["executions"][id]["status"].clone()
        }
    };
    for id in ["ale-big", "lua-big", "jpath-big"] {
        assert_eq!(run(id, 500, Value::Null).await, "completed", "{id}");
        assert_eq!(run(id, 5, Value::Null).await, "skipped", "{id}");
    }
    // jpath: a null that is there matches.
    assert_eq!(run("jpath-flag", 1, Value::Null).await, "completed");
    // Ale: nil is not false; Lua: nil is.
    assert_eq!(run("ale-nil", 1, Value::Null).await, "completed");
    assert_eq!(run("lua-nil", 1, Value::Null).await, "skipped");
    assert_eq!(run("lua-nil", 2, json!(true)).await, "completed");
}

/// Argyll's TestPredicateFailure / TestPredicateError.
async fn a_predicate_that_errors_fails_the_step_without_calling_it(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": 1}))).await;
    let step = with_predicate(
        sync_step("p", &svc.url("/p"), &[], &["out"]),
        "lua",
        "error('boom')",
    );
    app.register(&step).await;
    app.start_flow(&json!({"id": "perr", "goals": ["p"]})).await;
    let flow = app.wait_for_flow("perr").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let error = flow["executions"]["p"]["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("predicate evaluation failed: "), "{error}");
    assert!(error.contains("boom"), "{error}");
    assert!(svc.requests().is_empty());
}

fn per_item(svc: &StepServer, id: &str, language: &str, source: &str) -> Value {
    json!({
        "id": id, "name": id, "type": "sync", "http": {"endpoint": svc.url("/item")},
        "predicate": script(language, source),
        "attributes": {
            "n": {"role": "required", "required": {"for_each": true}},
            "out": {"role": "output"}
        },
        "work_config": {"parallelism": 2}
    })
}

/// Each element is judged with its own value: false skips that item
/// (`work_skipped`), every item skipped skips the step; an error fails it
/// (Argyll's TestPredicateFailurePerWorkItem).
async fn a_predicate_judges_each_for_each_element(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| json_reply(200, json!({"out": r.body["n"].clone()}))).await;
    // At the step's start `n` is the whole array (a table): true.
    let evens = "return type(n) == 'table' or n % 2 == 0";
    app.register(&per_item(&svc, "evens", "lua", evens)).await;
    app.start_flow(&json!({"id": "evens", "goals": ["evens"], "init": {"n": [[1, 2, 3, 4, 5]]}}))
        .await;
    let flow = app.wait_for_flow("evens").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(
        flow["executions"]["evens"]["outputs"]["out"],
        json!([{"n": 2, "out": 2}, {"n": 4, "out": 4}])
    );
    let called: Vec<Value> = svc.requests().iter().map(|r| r.body["n"].clone()).collect();
    assert_eq!(called.len(), 2, "{called:?}");
    let all = events(&app, "evens").await;
    assert_eq!(of_type(&all, "work_skipped").len(), 3);
    let items = flow["executions"]["evens"]["work_items"].as_object().unwrap();
    assert_eq!(items.values().filter(|w| w["status"] == "skipped").count(), 3);

    app.register(&per_item(&svc, "none", "lua", "return type(n) == 'table'"))
        .await;
    app.start_flow(&json!({"id": "none", "goals": ["none"], "init": {"n": [[1, 2]]}}))
        .await;
    let flow = app.wait_for_flow("none").await;
    assert_eq!(flow["executions"]["none"]["status"], "skipped", "{flow}");
    assert_eq!(flow["executions"]["none"]["reason"], "predicate returned false");

    let fails = "if type(n) == 'table' then return true end error('not a table')";
    app.register(&per_item(&svc, "fails", "lua", fails)).await;
    app.start_flow(&json!({"id": "fails", "goals": ["fails"], "init": {"n": [["a", "b"]]}}))
        .await;
    let flow = app.wait_for_flow("fails").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let error = flow["executions"]["fails"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("predicate evaluation failed") && error.contains("not a table"),
        "{error}"
    );
    assert_eq!(svc.requests().len(), 2, "nothing more was called");
}

/// A decision first evaluates its scripts with a small budget on the
/// runtime's worker, and again with the whole one when a script runs out
/// (docs/steps.md, "The sandbox"): a predicate that takes a few million
/// instructions still decides, as it would have with the whole budget, and
/// one that never ends still fails with the whole budget's limit.
async fn a_predicate_that_needs_more_than_a_small_budget_still_decides(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| json_reply(200, json!({"out": r.path.clone()}))).await;
    let heavy = "local n = 0\nfor i = 1, 500000 do n = n + i end\nreturn n > tonumber(amount)";
    let cases = [("heavy", heavy), ("endless", "while true do end")];
    for (id, source) in cases {
        let step = with_predicate(
            sync_step(id, &svc.url(&format!("/{id}")), &["amount"], &["out"]),
            "lua",
            source,
        );
        let r = app.register(&step).await;
        assert_eq!(r.status, axum::http::StatusCode::CREATED, "{id}: {:?}", r.body);
        app.start_flow(&json!({"id": id, "goals": [id], "init": {"amount": ["7"]}}))
            .await;
    }
    let heavy = app.wait_for_flow("heavy").await;
    assert_eq!(heavy["executions"]["heavy"]["status"], "completed", "{heavy}");
    let endless = app.wait_for_flow("endless").await;
    let error = endless["executions"]["endless"]["error"]
        .as_str()
        .unwrap_or_default();
    // The whole budget's limit, whichever of its two comes first (a
    // safepoint costs more unoptimised), never the small one's.
    assert!(
        error.contains("limit of 10000000 instructions") || error.contains("time limit of 1000 ms"),
        "{endless}"
    );
}
