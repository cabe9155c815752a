//! Script steps and script compilation at registration.

use axum::http::StatusCode;
use serde_json::json;
use tartan_testkit::both_backends;

use super::{script, script_step};
use crate::helpers::{json_reply, spawn_app, sync_step, Backend, StepServer};

both_backends!(
    script_steps_run_in_each_language_between_http_steps,
    a_script_that_does_not_compile_is_refused_naming_its_field,
    a_script_that_fails_or_runs_away_fails_its_step_for_good,
    script_steps_fan_out_over_for_each,
    a_script_step_sees_its_inputs_under_their_mapped_names,
    a_failed_script_step_between_http_steps_fails_what_needs_it,
);

/// Argyll's TestMixedStepTypes and TestScriptWorkExecutes: HTTP → script →
/// HTTP, a map answer is the outputs, any other answer is `result`.
async fn script_steps_run_in_each_language_between_http_steps(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/a" => json_reply(200, json!({"valueA": "data"})),
        _ => json_reply(
            200,
            json!({"valueC": format!("got {}", r.body["valueB"].as_str().unwrap_or("?"))}),
        ),
    })
    .await;
    app.register(&sync_step("a", &svc.url("/a"), &[], &["valueA"]))
        .await;
    let mut ale = script_step(
        "b",
        "ale",
        r#"{:valueB (str "transformed-" valueA)}"#,
        &["valueA"],
        &["valueB"],
    );
    ale["attributes"]["valueA"]["type"] = json!("string");
    ale["attributes"]["valueB"]["type"] = json!("string");
    let r = app.register(&ale).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    app.register(&sync_step("c", &svc.url("/c"), &["valueB"], &["valueC"]))
        .await;
    app.start_flow(&json!({"id": "mixed", "goals": ["c"]})).await;
    let flow = app.wait_for_flow("mixed").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["attributes"]["valueB"][0]["value"], "transformed-data");
    assert_eq!(flow["attributes"]["valueC"][0]["value"], "got transformed-data");
    // The script is not an HTTP call.
    assert_eq!(svc.requests().len(), 2);
    let item = flow["executions"]["b"]["work_items"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    assert_eq!(item["status"], "succeeded");
    assert_eq!(item["attempts"].as_array().map(Vec::len), Some(1));

    // Lua: a table with integral numbers; a bare value becomes `result`.
    let lua = script_step(
        "triple",
        "lua",
        "return { result = (x or 0) * 3 }",
        &["x"],
        &["result"],
    );
    assert_eq!(app.register(&lua).await.status, StatusCode::CREATED);
    app.start_flow(&json!({"id": "lua", "goals": ["triple"], "init": {"x": [2]}}))
        .await;
    let flow = app.wait_for_flow("lua").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["executions"]["triple"]["outputs"]["result"], json!(6));
    let bare = script_step("bare", "lua", "return 'plain'", &[], &["result"]);
    app.register(&bare).await;
    app.start_flow(&json!({"id": "bare", "goals": ["bare"]})).await;
    let flow = app.wait_for_flow("bare").await;
    assert_eq!(flow["executions"]["bare"]["outputs"]["result"], "plain", "{flow}");
}

/// Argyll's TestStepValidation and TestJPathNotValidForScripts, with the
/// compiler's message and the field named.
async fn a_script_that_does_not_compile_is_refused_naming_its_field(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let cases = [
        (
            script_step("s", "lua", "return (", &[], &["out"]),
            "script.script",
            "line 1",
        ),
        (
            script_step("s", "ale", "(+ 1", &[], &["out"]),
            "script.script",
            "line 1",
        ),
        (
            script_step("s", "ale", "(no-such-function 1)", &[], &["out"]),
            "script.script",
            "no-such-function",
        ),
        (
            script_step("s", "jpath", "$.x", &[], &["out"]),
            "script.language",
            "jpath",
        ),
        (
            script_step("s", "python", "1", &[], &["out"]),
            "script.language",
            "python",
        ),
        (
            script_step("s", "", "1", &[], &["out"]),
            "script.language",
            "empty",
        ),
        (
            script_step("s", "lua", "", &[], &["out"]),
            "script.script",
            "empty",
        ),
        (
            json!({"id": "s", "name": "s", "type": "script", "attributes": {}}),
            "script",
            "script required",
        ),
        (
            json!({"id": "s", "name": "s", "type": "sync", "http": {"endpoint": "http://127.0.0.1:9/x"},
                   "predicate": script("jpath", "$..["), "attributes": {}}),
            "predicate.script",
            "",
        ),
        (
            json!({"id": "s", "name": "s", "type": "sync", "http": {"endpoint": "http://127.0.0.1:9/x"},
                   "attributes": {"in": {"role": "required", "required": {"match": script("lua", "return value ==")}}}}),
            "attributes.in.required.match.script",
            "",
        ),
        (
            json!({"id": "s", "name": "s", "type": "sync", "http": {"endpoint": "http://127.0.0.1:9/x"},
                   "attributes": {"in": {"role": "required", "required": {"mapping": {"script": script("jpath", "$..[")}}}}}),
            "attributes.in.required.mapping.script.script",
            "",
        ),
        (
            json!({"id": "s", "name": "s", "type": "sync", "http": {"endpoint": "http://127.0.0.1:9/x"},
                   "attributes": {"in": {"role": "optional", "optional": {"match": script("lua", "return true")}}}}),
            "attributes.in.optional.match",
            "only required",
        ),
    ];
    for (step, field, says) in cases {
        let r = app.register(&step).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{step}: {:?}", r.body);
        let detail = r.body["detail"].as_str().unwrap_or_default();
        assert!(detail.starts_with(&format!("{field}: ")), "{field} in {detail}");
        assert!(detail.contains(says), "{says:?} in {detail}");
        // Nothing is stored.
        assert_eq!(app.get("/engine/step/s").await.status, StatusCode::NOT_FOUND);
    }
}

/// Argyll's TestScriptStepErrorAle / TestScriptStepErrorLua, and the
/// sandbox's bounds: the step fails at once, for good, with the reason.
async fn a_script_that_fails_or_runs_away_fails_its_step_for_good(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let cases = [
        (
            "lua-error",
            "lua",
            "error('Lua error message')",
            "Lua error message",
        ),
        ("ale-error", "ale", "(/ 1 0)", "ale script failed"),
        ("spin", "lua", "while true do end", "limit of"),
        (
            "hog",
            "lua",
            "return string.rep('x', 1024 * 1024 * 1024)",
            "memory limit",
        ),
        (
            "escape",
            "lua",
            "return os.execute('true')",
            "attempt to index nil with 'execute'",
        ),
        (
            "ale-spin",
            "ale",
            "(let-rec [spin (lambda (n) (spin (+ n 1)))] (spin 0))",
            "ale script",
        ),
    ];
    for (id, language, source, says) in cases {
        let mut step = script_step(id, language, source, &[], &["out"]);
        step["work_config"] = json!({"max_retries": 5, "init_backoff": 10});
        let r = app.register(&step).await;
        if r.status != StatusCode::CREATED {
            panic!("{id}: {:?}", r.body);
        }
        app.start_flow(&json!({"id": id, "goals": [id]})).await;
        let flow = app.wait_for_flow(id).await;
        assert_eq!(flow["status"], "failed", "{flow}");
        let item = flow["executions"][id]["work_items"]
            .as_object()
            .unwrap()
            .values()
            .next()
            .unwrap()
            .clone();
        // Permanent: one attempt, whatever the retry policy.
        assert_eq!(item["attempts"].as_array().map(Vec::len), Some(1), "{id}: {item}");
        assert_eq!(item["attempts"][0]["outcome"], "permanent", "{id}: {item}");
        let error = item["error"].as_str().unwrap_or_default();
        assert!(error.contains(says), "{id}: {says:?} in {error}");
    }
}

/// A script step takes part in for_each like any step.
async fn script_steps_fan_out_over_for_each(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let step = json!({
        "id": "double", "name": "double", "type": "script",
        "script": script("lua", "return { doubled = n * 2 }"),
        "attributes": {
            "n": {"role": "required", "type": "array", "required": {"for_each": true}},
            "doubled": {"role": "output"}
        },
        "work_config": {"parallelism": 2}
    });
    assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    app.start_flow(&json!({"id": "fan", "goals": ["double"], "init": {"n": [[1, 2, 3]]}}))
        .await;
    let flow = app.wait_for_flow("fan").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(
        flow["executions"]["double"]["outputs"]["doubled"],
        json!([{"n": 1, "doubled": 2}, {"n": 2, "doubled": 4}, {"n": 3, "doubled": 6}])
    );
}

/// Argyll's TestScriptWorkUsesMappedInputName: the flow's `amount` reaches
/// the script as `inner_amount`, and the step's inputs say so.
async fn a_script_step_sees_its_inputs_under_their_mapped_names(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let mut step = script_step(
        "triple",
        "lua",
        "return { result = (inner_amount or 0) * 3 }",
        &[],
        &["result"],
    );
    step["attributes"]["amount"] =
        json!({"role": "required", "required": {"mapping": {"name": "inner_amount"}}});
    let r = app.register(&step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    app.start_flow(&json!({"id": "mapped", "goals": ["triple"], "init": {"amount": [2]}}))
        .await;
    let flow = app.wait_for_flow("mapped").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let exec = &flow["executions"]["triple"];
    assert_eq!(exec["inputs"], json!({"inner_amount": 2}), "{flow}");
    assert_eq!(exec["outputs"]["result"], json!(6), "{flow}");
}

/// Argyll's TestScriptStepErrorAle and TestScriptStepErrorLua as written:
/// A (HTTP) → B (a script that fails) → C (HTTP, needs B's output). A
/// completes, B fails with its script's error, C fails without a call, and
/// the flow fails.
async fn a_failed_script_step_between_http_steps_fails_what_needs_it(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/a" => json_reply(200, json!({"value_a_ale": "from-a", "value_a_lua": "from-a"})),
        _ => json_reply(200, json!({"result": "from-c"})),
    })
    .await;
    for (language, source, says) in [
        ("ale", "(/ 1 0)", "ale script failed"),
        ("lua", "error(\"Lua error message\")", "Lua error message"),
    ] {
        let (a, b, c) = (
            format!("a-{language}"),
            format!("b-{language}"),
            format!("c-{language}"),
        );
        let value_a = format!("value_a_{language}");
        let value_b = format!("value_b_{language}");
        let step_a = sync_step(&a, &svc.url("/a"), &[], &[&value_a]);
        let mut step_b = script_step(&b, language, source, &[&value_a], &[&value_b]);
        step_b["attributes"][&value_a]["type"] = json!("string");
        step_b["attributes"][&value_b]["type"] = json!("string");
        let step_c = sync_step(&c, &svc.url("/c"), &[&value_b], &["result"]);
        for s in [step_a, step_b, step_c] {
            let r = app.register(&s).await;
            assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
        }
        let id = format!("chain-{language}");
        app.start_flow(&json!({"id": id, "goals": [c]})).await;
        let flow = app.wait_for_flow(&id).await;
        assert_eq!(flow["status"], "failed", "{flow}");
        assert_eq!(flow["executions"][&a]["status"], "completed", "{flow}");
        assert_eq!(flow["executions"][&b]["status"], "failed", "{flow}");
        let error = flow["executions"][&b]["error"].as_str().unwrap_or_default();
        assert!(error.contains(says), "{says:?} in {flow}");
        assert_eq!(flow["executions"][&c]["status"], "failed", "{flow}");
    }
    let called: Vec<String> = svc.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(called, ["/a", "/a"], "only A is called");
}
