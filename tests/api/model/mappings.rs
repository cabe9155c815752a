//! Mappings: `mapping.name` renames between the flow and the step;
//! `mapping.script` computes a value on the way in and an output from the
//! step's whole answer on the way out.

use axum::http::StatusCode;
use serde_json::{json, Value};
use tartan_testkit::both_backends;

use super::script;
use crate::helpers::{json_reply, spawn_app, Backend, StepServer};

both_backends!(
    names_map_between_the_flow_and_the_step,
    input_mapping_scripts_transform_values_in_each_language,
    output_mapping_scripts_read_the_whole_answer,
    a_mapping_script_that_fails_is_passed_over,
);

fn http(id: &str, endpoint: &str, attributes: Value) -> Value {
    json!({"id": id, "name": id, "type": "sync", "http": {"endpoint": endpoint}, "attributes": attributes})
}

/// Argyll's TestInputRename / TestOutputMappingWithRename: the flow's `uid`
/// is sent as `user_id`; the step's `user_name` fills the flow's `name`.
async fn names_map_between_the_flow_and_the_step(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc =
        StepServer::start(|r, _| json_reply(200, json!({"user_name": format!("n-{}", r.body["user_id"])})))
            .await;
    let step = http(
        "user",
        &svc.url("/user"),
        json!({
            "uid": {"role": "required", "required": {"mapping": {"name": "user_id"}}},
            "name": {"role": "output", "output": {"mapping": {"name": "user_name"}}}
        }),
    );
    assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    app.start_flow(&json!({"id": "rename", "goals": ["user"], "init": {"uid": [7]}}))
        .await;
    let flow = app.wait_for_flow("rename").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(svc.requests()[0].body, json!({"user_id": 7}));
    assert_eq!(flow["attributes"]["name"][0]["value"], "n-7");
    assert!(flow["attributes"].get("user_name").is_none());
}

/// Argyll's TestInputAle, TestScriptUsesMappedName, TestInputMapping and
/// TestMapInput.
async fn input_mapping_scripts_transform_values_in_each_language(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| json_reply(200, json!({"seen": r.body.clone()}))).await;
    let cases = [
        (
            "ale",
            json!({"amount": {"role": "required", "required": {"mapping": {"script": script("ale", "(* amount 2)")}}}}),
            json!(5),
            json!({"amount": 10}),
        ),
        (
            "ale-named",
            json!({"amount": {"role": "required", "required": {"mapping": {"name": "value", "script": script("ale", "(* value 2)")}}}}),
            json!(5),
            json!({"value": 10}),
        ),
        (
            "lua",
            json!({"amount": {"role": "required", "required": {"mapping": {"script": script("lua", "return amount + 1")}}}}),
            json!(5),
            json!({"amount": 6}),
        ),
        (
            "jpath",
            json!({"amount": {"role": "required", "required": {"mapping": {"script": script("jpath", "$.foo")}}}}),
            json!({"foo": "value"}),
            json!({"amount": "value"}),
        ),
        // TestMapInput's "returns original on failed mapping": a jpath that
        // matches nothing leaves the input as it came.
        (
            "jpath-missing",
            json!({"amount": {"role": "required", "required": {"mapping": {"script": script("jpath", "$.missing")}}}}),
            json!({"key": "value"}),
            json!({"amount": {"key": "value"}}),
        ),
    ];
    for (id, mut attributes, init, sent) in cases {
        attributes["seen"] = json!({"role": "output"});
        let r = app
            .register(&http(id, &svc.url(&format!("/{id}")), attributes))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{id}: {:?}", r.body);
        app.start_flow(&json!({"id": id, "goals": [id], "init": {"amount": [init]}}))
            .await;
        let flow = app.wait_for_flow(id).await;
        assert_eq!(flow["status"], "completed", "{id}: {flow}");
        assert_eq!(flow["executions"][id]["outputs"]["seen"], sent, "{id}");
        // The step's inputs are what it was sent (Argyll's ex.Inputs).
        assert_eq!(flow["executions"][id]["inputs"], sent, "{id}: {flow}");
    }
}

/// Argyll's TestOutputMapping and TestOutputMappingDescendants, and the
/// same from Lua and Ale, which see the answer under the output's name.
async fn output_mapping_scripts_read_the_whole_answer(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| {
        json_reply(
            200,
            json!({"payload": {"value": "ok"}, "sections": [{"book": "A"}, {"book": "B"}], "n": 4}),
        )
    })
    .await;
    let step = http(
        "outs",
        &svc.url("/outs"),
        json!({
            "result": {"role": "output", "output": {"mapping": {"script": script("jpath", "$.payload.value")}}},
            "books": {"role": "output", "output": {"mapping": {"script": script("jpath", "$..book")}}},
            "absent": {"role": "output", "output": {"mapping": {"script": script("jpath", "$.nothing")}}},
            "squared": {"role": "output", "output": {"mapping": {"script": script("lua", "return squared.n * squared.n")}}},
            "label": {"role": "output", "output": {"mapping": {"script": script("ale", r#"(str "n=" (:n label))"#)}}}
        }),
    );
    let r = app.register(&step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    app.start_flow(&json!({"id": "outs", "goals": ["outs"]})).await;
    let flow = app.wait_for_flow("outs").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let outputs = &flow["executions"]["outs"]["outputs"];
    assert_eq!(outputs["result"], "ok");
    assert_eq!(outputs["books"], json!(["A", "B"]));
    assert_eq!(outputs["squared"], json!(16));
    // Ale reads JSON numbers as floats, as in Argyll, and prints 4.0 so.
    assert_eq!(outputs["label"], "n=4.0");
    // A jpath that matches nothing leaves the output out.
    assert!(outputs.get("absent").is_none(), "{outputs}");
    // Undeclared keys never become attributes (TestUndeclaredOutputsIgnored).
    assert!(flow["attributes"].get("payload").is_none());
}

/// A mapping that fails at run time is passed over as Argyll passes it
/// over (docs/argyll.md, "Scripts that fail"): an input keeps the value as
/// it came, an output is left out, and the step completes.
async fn a_mapping_script_that_fails_is_passed_over(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": 1, "kept": 2}))).await;
    let step = http(
        "bad-map",
        &svc.url("/x"),
        json!({
            "amount": {"role": "required", "required": {"mapping": {"script": script("lua", "error('no good')")}}},
            "out": {"role": "output", "output": {"mapping": {"script": script("lua", "error('bad out')")}}},
            "kept": {"role": "output"}
        }),
    );
    let r = app.register(&step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    app.start_flow(&json!({"id": "bad-map", "goals": ["bad-map"], "init": {"amount": [1]}}))
        .await;
    let flow = app.wait_for_flow("bad-map").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let requests = svc.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["amount"], 1, "the input as it came");
    let outputs = &flow["executions"]["bad-map"]["outputs"];
    assert!(outputs.get("out").is_none(), "{outputs}");
    assert_eq!(outputs["kept"], 2, "{outputs}");
}
