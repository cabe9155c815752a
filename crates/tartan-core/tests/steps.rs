//! Step validation and normalisation (`Step::normalize`) and the rules that
//! span the catalog (`Catalog::check_register`, `Catalog::check_update`),
//! after Argyll's rules. Every rejection is checked for the field it names.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{chain_def, normalized, step, sync_def};
use serde_json::{json, Value};
use tartan_core::catalog::{Catalog, Registration};
use tartan_core::error::{CatalogError, ValidationError};
use tartan_core::retry::{BackoffType, RetryDefaults};
use tartan_core::step::{Step, WorkConfig};

fn normalize(def: Value) -> Result<Step, ValidationError> {
    step(def).normalize(&RetryDefaults::default())
}

/// The error a definition is rejected with; fails the test if it is accepted.
fn rejection(def: Value) -> ValidationError {
    match normalize(def.clone()) {
        Ok(_) => panic!("definition was accepted but should not be:\n{def:#}"),
        Err(e) => e,
    }
}

/// Assert that `def` is rejected for `field`, with a message containing `words`.
#[track_caller]
fn assert_rejected(def: Value, field: &str, words: &str) {
    let err = rejection(def);
    assert_eq!(err.field, field, "wrong field in {err}");
    assert!(
        err.message.contains(words),
        "message {:?} should contain {words:?}",
        err.message
    );
}

#[track_caller]
fn assert_accepted(def: Value) -> Step {
    match normalize(def.clone()) {
        Ok(step) => step,
        Err(e) => panic!("definition was rejected ({e}) but should not be:\n{def:#}"),
    }
}

/// A valid step with `patch` merged in at the top level.
fn with(patch: Value) -> Value {
    let mut def = sync_def(
        "s",
        json!({ "in": { "role": "required" }, "out": { "role": "output" } }),
    );
    if let (Value::Object(base), Value::Object(patch)) = (&mut def, patch) {
        for (k, v) in patch {
            base.insert(k, v);
        }
    }
    def
}

/// A valid step whose only attribute is `x` with this spec.
fn with_attr(spec: Value) -> Value {
    sync_def("s", json!({ "x": spec }))
}

fn work(step: &Step) -> &WorkConfig {
    step.work_config
        .as_ref()
        .expect("normalised steps carry a work_config")
}

fn decode_error(def: Value) -> String {
    match serde_json::from_value::<Step>(def) {
        Ok(step) => panic!("definition decoded but should not: {step:?}"),
        Err(e) => e.to_string(),
    }
}

// ---------------------------------------------------------------------------
// Identity and type

#[test]
fn a_valid_sync_step_is_accepted_with_its_id_sanitised_and_method_filled_in() {
    let mut def = chain_def("My Step", &["in"], &["out"]);
    def["id"] = json!("My Step");
    let step = assert_accepted(def);
    assert_eq!(step.id, "my-step");
    assert_eq!(step.http.as_ref().map(|h| h.method.as_str()), Some("POST"));
}

#[test]
fn an_async_step_is_accepted() {
    let step = assert_accepted(with(json!({ "type": "async" })));
    assert!(step.is_async());
}

#[test]
fn a_step_without_an_id_is_rejected() {
    assert_rejected(with(json!({ "id": "" })), "id", "step ID empty");
    assert_rejected(with(json!({ "id": "***" })), "id", "step ID empty");
    let mut def = with(json!({}));
    def.as_object_mut().unwrap().remove("id");
    assert_rejected(def, "id", "step ID empty");
}

#[test]
fn a_step_without_a_name_is_rejected() {
    assert_rejected(with(json!({ "name": "" })), "name", "step name empty");
}

/// Ids, names, attribute names, mapped names and labels are at most
/// `MAX_ID_LEN` bytes: each ends up in URLs, keys and metric labels.
#[test]
fn every_identifier_of_a_step_is_bounded() {
    use tartan_core::ids::MAX_ID_LEN;
    let at_most = "a".repeat(MAX_ID_LEN);
    let over = "a".repeat(MAX_ID_LEN + 1);
    let shown = format!("{}…", "a".repeat(32));
    let mut fits = sync_def(&at_most, json!({ at_most.clone(): { "role": "output" } }));
    fits["name"] = json!(at_most);
    fits["labels"] = json!({ at_most.clone(): at_most });
    assert_eq!(assert_accepted(fits).id, at_most);

    assert_rejected(with(json!({ "id": over })), "id", "more than the 256");
    // Sanitised first: what is stored is what is bounded.
    assert_accepted(with(json!({ "id": format!("{at_most}!!") })));
    assert_rejected(with(json!({ "name": over })), "name", "257 bytes");
    assert_rejected(
        sync_def("s", json!({ over.clone(): { "role": "required" } })),
        &format!("attributes.{shown}"),
        "more than the 256",
    );
    assert_rejected(
        with(json!({ "labels": { over.clone(): "v" } })),
        &format!("labels.{shown}"),
        "257",
    );
    assert_rejected(with(json!({ "labels": { "team": over } })), "labels.team", "257");
    assert_rejected(
        with_attr(json!({ "role": "output", "output": { "mapping": { "name": over } } })),
        "attributes.x.output.mapping.name",
        "257",
    );
}

#[test]
fn an_unknown_step_type_is_rejected() {
    assert_rejected(with(json!({ "type": "batch" })), "type", "invalid step type");
    assert_rejected(with(json!({ "type": "" })), "type", "invalid step type");
    assert_rejected(with(json!({ "type": "SYNC" })), "type", "invalid step type");
}

#[test]
fn flow_and_script_steps_need_their_own_config_alone() {
    assert_rejected(with(json!({ "type": "flow" })), "flow", "flow required");
    assert_rejected(
        with(json!({ "type": "flow", "flow": { "goals": ["a"] } })),
        "http",
        "http not allowed",
    );
    let mut flow = with(json!({ "type": "flow", "flow": { "goals": ["My Goal"] } }));
    flow.as_object_mut().unwrap().remove("http");
    let step = assert_accepted(flow);
    assert_eq!(
        step.child_goals(),
        ["my-goal"],
        "goals are sanitised as a start's"
    );
    assert_rejected(with(json!({ "flow": { "goals": ["a"] } })), "flow", "not allowed");
    // `with` carries `http`: a script step may not.
    assert_rejected(with(json!({ "type": "script" })), "script", "script required");
    assert_rejected(
        with(json!({ "type": "script", "script": { "language": "lua", "script": "return {}" } })),
        "http",
        "http not allowed",
    );
    let mut def = with(json!({ "type": "script", "script": { "language": "lua", "script": "return {}" } }));
    def.as_object_mut().unwrap().remove("http");
    assert_accepted(def);
    assert_rejected(
        with(json!({ "script": { "language": "lua", "script": "return {}" } })),
        "script",
        "not allowed",
    );
}

// ---------------------------------------------------------------------------
// HTTP

#[test]
fn a_sync_step_without_http_is_rejected() {
    let mut def = with(json!({}));
    def.as_object_mut().unwrap().remove("http");
    assert_rejected(def, "http", "http required");
}

#[test]
fn an_empty_endpoint_is_rejected() {
    assert_rejected(
        with(json!({ "http": { "endpoint": "" } })),
        "http.endpoint",
        "endpoint empty",
    );
    assert_rejected(with(json!({ "http": {} })), "http.endpoint", "endpoint empty");
}

#[test]
fn an_endpoint_that_is_not_an_http_url_is_rejected() {
    assert_rejected(
        with(json!({ "http": { "endpoint": "ftp://svc.test/s" } })),
        "http.endpoint",
        "http:// or https://",
    );
}

#[test]
fn an_invalid_http_method_is_rejected() {
    for method in ["PATCH", "FETCH", "get"] {
        let def = with(json!({ "http": { "endpoint": "http://svc.test/s", "method": method } }));
        assert_rejected(def, "http.method", "invalid HTTP method");
    }
}

#[test]
fn every_supported_http_method_is_accepted() {
    for method in ["GET", "POST", "PUT", "DELETE"] {
        let step = assert_accepted(with(
            json!({ "http": { "endpoint": "https://svc.test/s", "method": method } }),
        ));
        assert_eq!(step.method(), method);
    }
}

#[test]
fn an_endpoint_placeholder_naming_a_required_input_is_accepted() {
    assert_accepted(with(
        json!({ "http": { "endpoint": "http://svc.test/orders/{in}" } }),
    ));
}

#[test]
fn an_endpoint_placeholder_naming_no_required_input_is_rejected() {
    let def = with(json!({ "http": { "endpoint": "http://svc.test/orders/{order}" } }));
    assert_rejected(def, "http.endpoint", "unknown parameter: \"order\"");
}

#[test]
fn an_endpoint_placeholder_naming_an_optional_input_or_an_output_is_rejected() {
    let attributes = json!({
        "in": { "role": "required" },
        "maybe": { "role": "optional" },
        "out": { "role": "output" },
    });
    for param in ["maybe", "out"] {
        let mut def = sync_def("s", attributes.clone());
        def["http"]["endpoint"] = json!(format!("http://svc.test/{{{param}}}"));
        assert_rejected(def, "http.endpoint", "unknown parameter");
    }
}

#[test]
fn a_mapped_input_is_named_in_the_endpoint_by_its_mapped_name() {
    let attributes = json!({
        "order_id": { "role": "required", "required": { "mapping": { "name": "orderId" } } },
    });
    let mut def = sync_def("s", attributes.clone());
    def["http"]["endpoint"] = json!("http://svc.test/orders/{orderId}");
    assert_accepted(def);

    let mut def = sync_def("s", attributes);
    def["http"]["endpoint"] = json!("http://svc.test/orders/{order_id}");
    assert_rejected(def, "http.endpoint", "unknown parameter: \"order_id\"");
}

#[test]
fn compensate_placeholders_may_name_inputs_and_outputs() {
    let attributes = json!({
        "order_id": { "role": "required" },
        "note": { "role": "optional" },
        "receipt": { "role": "output", "output": { "mapping": { "name": "receiptNo" } } },
    });
    let mut def = sync_def("s", attributes.clone());
    def["http"]["compensate"] = json!("http://svc.test/undo/{order_id}/{note}/{receiptNo}");
    assert_accepted(def);

    let mut def = sync_def("s", attributes);
    def["http"]["compensate"] = json!("http://svc.test/undo/{payment}");
    assert_rejected(def, "http.compensate", "unknown parameter: \"payment\"");
}

#[test]
fn a_memoizable_step_may_not_compensate() {
    let mut def = with(json!({ "memoizable": true }));
    def["http"]["compensate"] = json!("http://svc.test/undo");
    assert_rejected(def, "http.compensate", "memoizable");
}

// ---------------------------------------------------------------------------
// Attributes

#[test]
fn an_invalid_attribute_role_is_rejected() {
    assert_rejected(
        with_attr(json!({ "role": "input" })),
        "attributes.x.role",
        "invalid attribute role",
    );
    assert_rejected(
        with_attr(json!({})),
        "attributes.x.role",
        "invalid attribute role",
    );
}

#[test]
fn an_invalid_attribute_type_is_rejected() {
    assert_rejected(
        with_attr(json!({ "role": "output", "type": "integer" })),
        "attributes.x.type",
        "invalid attribute type",
    );
}

#[test]
fn a_config_that_does_not_match_the_role_is_rejected() {
    let cases = [
        (
            json!({ "role": "required", "optional": {} }),
            "attributes.x.optional",
        ),
        (
            json!({ "role": "optional", "required": {} }),
            "attributes.x.required",
        ),
        (
            json!({ "role": "output", "required": {} }),
            "attributes.x.required",
        ),
        (
            json!({ "role": "required", "const": { "value": "1" } }),
            "attributes.x.const",
        ),
        (
            json!({ "role": "const", "const": { "value": "1" }, "meta": { "key": "flow_id" } }),
            "attributes.x.meta",
        ),
        (
            json!({ "role": "meta", "meta": { "key": "flow_id" }, "output": {} }),
            "attributes.x.output",
        ),
    ];
    for (spec, field) in cases {
        assert_rejected(with_attr(spec), field, "does not match attribute role");
    }
}

#[test]
fn a_const_attribute_needs_a_value() {
    assert_rejected(
        with_attr(json!({ "role": "const" })),
        "attributes.x.const.value",
        "const value required",
    );
    assert_rejected(
        with_attr(json!({ "role": "const", "const": { "value": "" } })),
        "attributes.x.const.value",
        "const value required",
    );
    assert_accepted(with_attr(
        json!({ "role": "const", "const": { "value": "\"eu\"" } }),
    ));
}

#[test]
fn a_const_value_must_be_json_of_its_type() {
    assert_rejected(
        with_attr(json!({ "role": "const", "type": "number", "const": { "value": "\"ten\"" } })),
        "attributes.x.const.value",
        "valid JSON number",
    );
    assert_rejected(
        with_attr(json!({ "role": "const", "const": { "value": "not json" } })),
        "attributes.x.const.value",
        "must be valid JSON",
    );
}

#[test]
fn a_meta_attribute_needs_a_known_key() {
    assert_rejected(
        with_attr(json!({ "role": "meta" })),
        "attributes.x.meta.key",
        "meta key required",
    );
    assert_rejected(
        with_attr(json!({ "role": "meta", "meta": { "key": "" } })),
        "attributes.x.meta.key",
        "meta key required",
    );
    assert_rejected(
        with_attr(json!({ "role": "meta", "meta": { "key": "tenant" } })),
        "attributes.x.meta.key",
        "unknown meta key",
    );
    for key in ["flow_id", "step_id", "receipt_token", "webhook_url"] {
        assert_accepted(with_attr(json!({ "role": "meta", "meta": { "key": key } })));
    }
}

#[test]
fn only_optional_inputs_have_a_default() {
    assert_rejected(
        with_attr(json!({ "role": "required", "required": { "default": "1" } })),
        "attributes.x.required.default",
        "only optional inputs",
    );
    assert_accepted(with_attr(
        json!({ "role": "optional", "optional": { "default": "1" } }),
    ));
}

#[test]
fn an_optional_default_must_fit_its_type() {
    assert_rejected(
        with_attr(json!({ "role": "optional", "type": "boolean", "optional": { "default": "1" } })),
        "attributes.x.optional.default",
        "valid JSON boolean",
    );
}

#[test]
fn an_invalid_collect_mode_is_rejected() {
    assert_rejected(
        with_attr(json!({ "role": "required", "required": { "collect": "any" } })),
        "attributes.x.required.collect",
        "invalid input collect",
    );
}

#[test]
fn two_inputs_mapped_to_the_same_name_are_rejected() {
    let def = sync_def(
        "s",
        json!({
            "first": { "role": "required", "required": { "mapping": { "name": "id" } } },
            "second": { "role": "optional", "optional": { "mapping": { "name": "id" } } },
        }),
    );
    assert_rejected(
        def,
        "attributes.second",
        "duplicate mapped parameter name: \"id\"",
    );
}

#[test]
fn an_input_mapped_onto_another_inputs_name_is_rejected() {
    let def = sync_def(
        "s",
        json!({
            "a": { "role": "required" },
            "b": { "role": "required", "required": { "mapping": { "name": "a" } } },
        }),
    );
    assert_rejected(def, "attributes.b", "duplicate mapped parameter name: \"a\"");
}

#[test]
fn two_outputs_mapped_to_the_same_name_are_rejected() {
    let def = sync_def(
        "s",
        json!({
            "x": { "role": "output", "output": { "mapping": { "name": "value" } } },
            "y": { "role": "output", "output": { "mapping": { "name": "value" } } },
        }),
    );
    assert_rejected(def, "attributes.y", "duplicate mapped parameter name");
}

#[test]
fn an_input_and_an_output_may_share_a_wire_name() {
    assert_accepted(sync_def(
        "s",
        json!({
            "request_id": { "role": "required", "required": { "mapping": { "name": "id" } } },
            "created_id": { "role": "output", "output": { "mapping": { "name": "id" } } },
        }),
    ));
}

#[test]
fn a_mapping_without_a_name_or_a_script_is_rejected() {
    assert_rejected(
        with_attr(json!({ "role": "required", "required": { "mapping": {} } })),
        "attributes.x.required.mapping",
        "name or script required",
    );
    assert_rejected(
        with_attr(json!({ "role": "output", "output": { "mapping": { "name": "" } } })),
        "attributes.x.output.mapping",
        "name or script required",
    );
}

#[test]
fn scripts_are_compiled_at_registration_and_refused_by_field() {
    assert_accepted(with(
        json!({ "predicate": { "language": "lua", "script": "return true" } }),
    ));
    assert_accepted(with_attr(
        json!({ "role": "required", "required": { "match": { "language": "jpath", "script": "$.a" } } }),
    ));
    assert_accepted(with_attr(
        json!({ "role": "optional", "optional": { "deadline": 1000 } }),
    ));
    assert_accepted(with_attr(
        json!({ "role": "output", "output": { "mapping": { "name": "y", "script": { "language": "ale", "script": "x" } } } }),
    ));
    let cases = [
        (
            with(json!({ "predicate": { "language": "lua", "script": "return (" } })),
            "predicate.script",
            "line 1",
        ),
        (
            with_attr(json!({ "role": "required", "required": { "match": { "script": "x" } } })),
            "attributes.x.required.match.language",
            "empty",
        ),
        (
            with_attr(json!({ "role": "required", "required": { "deadline": 1000 } })),
            "attributes.x.required.deadline",
            "only optional",
        ),
        (
            with_attr(
                json!({ "role": "output", "output": { "mapping": { "script": { "language": "ale", "script": "(undefined-fn x)" } } } }),
            ),
            "attributes.x.output.mapping.script.script",
            "undefined-fn",
        ),
    ];
    for (def, field, says) in cases {
        assert_rejected(def, field, says);
    }
}

// ---------------------------------------------------------------------------
// Work config

#[test]
fn global_work_defaults_are_filled_in() {
    let step = assert_accepted(with(json!({})));
    let w = work(&step);
    let d = RetryDefaults::default();
    assert_eq!(w.max_retries, d.max_retries);
    assert_eq!(w.init_backoff, d.init_backoff_ms);
    assert_eq!(w.max_backoff, d.max_backoff_ms);
    assert_eq!(w.backoff_type, d.backoff_type.as_str());
}

#[test]
fn zero_work_values_inherit_the_defaults() {
    let def = with(json!({
        "work_config": { "max_retries": 0, "init_backoff": 0, "max_backoff": 0, "backoff_type": "" }
    }));
    let step = assert_accepted(def);
    let defaults = assert_accepted(with(json!({})));
    assert_eq!(work(&step), work(&defaults));
}

#[test]
fn given_work_values_are_kept() {
    let def = with(json!({
        "work_config": {
            "max_retries": -1, "init_backoff": 250, "max_backoff": 4000,
            "backoff_type": "linear", "parallelism": 3
        }
    }));
    let step = assert_accepted(def);
    let w = work(&step);
    assert_eq!(
        (
            w.max_retries,
            w.init_backoff,
            w.max_backoff,
            w.backoff_type.as_str(),
            w.parallelism
        ),
        (-1, 250, 4000, "linear", 3)
    );
}

#[test]
fn the_configured_defaults_are_the_ones_filled_in() {
    let defaults = RetryDefaults {
        max_retries: 3,
        init_backoff_ms: 200,
        max_backoff_ms: 5000,
        backoff_type: BackoffType::Fixed,
    };
    let step = step(with(json!({}))).normalize(&defaults).unwrap();
    let w = work(&step);
    assert_eq!(
        (
            w.max_retries,
            w.init_backoff,
            w.max_backoff,
            w.backoff_type.as_str()
        ),
        (3, 200, 5000, "fixed")
    );
}

#[test]
fn an_init_backoff_above_the_default_max_backoff_is_rejected() {
    // Checked after the defaults are filled in (conformance case B35).
    assert_rejected(
        with(json!({ "work_config": { "init_backoff": 120_000 } })),
        "work_config.max_backoff",
        "max_backoff",
    );
}

#[test]
fn a_max_backoff_below_the_init_backoff_is_rejected() {
    assert_rejected(
        with(json!({ "work_config": { "init_backoff": 5000, "max_backoff": 1000 } })),
        "work_config.max_backoff",
        "max_backoff must be >= init_backoff",
    );
    // Also when the init backoff is the default one (1 s).
    assert_rejected(
        with(json!({ "work_config": { "max_backoff": 500 } })),
        "work_config.max_backoff",
        "max_backoff must be >= init_backoff",
    );
}

#[test]
fn invalid_work_values_are_rejected() {
    assert_rejected(
        with(json!({ "work_config": { "backoff_type": "random" } })),
        "work_config.backoff_type",
        "fixed, linear or exponential",
    );
    assert_rejected(
        with(json!({ "work_config": { "parallelism": -1 } })),
        "work_config.parallelism",
        "negative",
    );
    assert_rejected(
        with(json!({ "work_config": { "max_retries": -2 } })),
        "work_config.max_retries",
        "-1",
    );
}

// ---------------------------------------------------------------------------
// Durations

#[test]
fn work_config_backoffs_accept_duration_strings() {
    let step = assert_accepted(with(json!({
        "work_config": { "init_backoff": "1s", "max_backoff": "PT2M" }
    })));
    assert_eq!(work(&step).init_backoff, 1000);
    assert_eq!(work(&step).max_backoff, 120_000);

    let step = assert_accepted(with(json!({
        "work_config": { "init_backoff": "1500", "max_backoff": "1m30s" }
    })));
    assert_eq!(work(&step).init_backoff, 1500);
    assert_eq!(work(&step).max_backoff, 90_000);
}

#[test]
fn http_timeout_accepts_milliseconds_and_duration_strings() {
    let cases = [
        (json!("1s"), 1000),
        (json!("2m30s"), 150_000),
        (json!("PT0.5S"), 500),
        (json!(250), 250),
        (json!(0), 0),
        (json!(null), 0),
    ];
    for (timeout, ms) in cases {
        let def = with(json!({ "http": { "endpoint": "http://svc.test/s", "timeout": timeout } }));
        let step = assert_accepted(def);
        assert_eq!(step.http.map(|h| h.timeout), Some(ms), "timeout {timeout}");
    }
}

#[test]
fn a_negative_http_timeout_is_rejected() {
    for timeout in [json!(-1), json!("-1s")] {
        let def = with(json!({ "http": { "endpoint": "http://svc.test/s", "timeout": timeout } }));
        let err = decode_error(def);
        assert!(err.contains("negative"), "error {err:?} for timeout {timeout}");
    }
}

#[test]
fn negative_or_malformed_backoffs_are_rejected() {
    for value in [json!(-5), json!("-1s"), json!("soon"), json!(true)] {
        let err = decode_error(with(json!({ "work_config": { "init_backoff": value } })));
        assert!(!err.is_empty(), "init_backoff {value}");
    }
}

// ---------------------------------------------------------------------------
// Catalog

fn register(catalog: &Catalog, def: Value) -> Result<(Step, Registration), CatalogError> {
    catalog.check_register(step(def), &RetryDefaults::default())
}

fn update(catalog: &Catalog, def: Value) -> Result<Step, CatalogError> {
    catalog.check_update(step(def), &RetryDefaults::default())
}

#[track_caller]
fn assert_invalid(result: Result<impl std::fmt::Debug, CatalogError>, field: &str, words: &str) {
    match result {
        Err(CatalogError::Invalid(e)) => {
            assert_eq!(e.field, field, "wrong field in {e}");
            assert!(
                e.message.contains(words),
                "message {:?} should contain {words:?}",
                e.message
            );
        }
        other => panic!("expected CatalogError::Invalid on {field}, got {other:?}"),
    }
}

#[test]
fn a_new_step_is_added_normalised() {
    let (step, registration) = register(&Catalog::default(), chain_def("A", &["in"], &["out"])).unwrap();
    assert_eq!(registration, Registration::Added);
    assert_eq!(step.id, "a");
    assert!(step.work_config.is_some());
}

#[test]
fn an_invalid_step_is_not_registered() {
    let mut def = chain_def("a", &[], &["out"]);
    def["name"] = json!("");
    assert_invalid(register(&Catalog::default(), def), "name", "step name empty");
}

#[test]
fn an_identical_re_registration_is_unchanged() {
    let def = chain_def("a", &["in"], &["out"]);
    let catalog = Catalog::new([normalized(def.clone())]);
    let (step, registration) = register(&catalog, def).unwrap();
    assert_eq!(registration, Registration::Unchanged);
    assert_eq!(Some(&step), catalog.get("a"));
}

#[test]
fn a_re_registration_that_only_spells_out_the_defaults_is_unchanged() {
    let catalog = Catalog::new([normalized(chain_def("a", &["in"], &["out"]))]);
    let mut def = chain_def("a", &["in"], &["out"]);
    def["id"] = json!(" A ");
    def["http"]["method"] = json!("POST");
    def["work_config"] = json!({
        "max_retries": 10, "init_backoff": "1s", "max_backoff": "1m", "backoff_type": "exponential"
    });
    let (_, registration) = register(&catalog, def).unwrap();
    assert_eq!(registration, Registration::Unchanged);
}

#[test]
fn a_different_definition_under_the_same_id_is_rejected() {
    let catalog = Catalog::new([normalized(chain_def("a", &["in"], &["out"]))]);
    let result = register(&catalog, chain_def("a", &["in"], &["other"]));
    assert_eq!(result.unwrap_err(), CatalogError::Exists("a".into()));

    let mut def = chain_def("a", &["in"], &["out"]);
    def["work_config"] = json!({ "max_retries": 2 });
    assert_eq!(
        register(&catalog, def).unwrap_err(),
        CatalogError::Exists("a".into())
    );
}

#[test]
fn conflicting_attribute_types_across_the_catalog_are_rejected() {
    let catalog = Catalog::new([normalized(sync_def(
        "a",
        json!({ "amount": { "role": "output", "type": "number" } }),
    ))]);
    let def = sync_def("b", json!({ "amount": { "role": "required", "type": "string" } }));
    assert_invalid(
        register(&catalog, def),
        "attributes.amount.type",
        "attribute type conflict",
    );
}

#[test]
fn attributes_of_the_same_type_may_be_shared() {
    let catalog = Catalog::new([normalized(sync_def(
        "a",
        json!({ "amount": { "role": "output", "type": "number" } }),
    ))]);
    let def = sync_def("b", json!({ "amount": { "role": "required", "type": "number" } }));
    let (_, registration) = register(&catalog, def).unwrap();
    assert_eq!(registration, Registration::Added);
}

#[test]
fn a_dependency_cycle_is_rejected() {
    // A needs x and gives y; B needs y and gives x.
    let catalog = Catalog::new([normalized(chain_def("a", &["x"], &["y"]))]);
    assert_invalid(
        register(&catalog, chain_def("b", &["y"], &["x"])),
        "attributes",
        "circular dependency",
    );
}

#[test]
fn a_longer_dependency_cycle_is_rejected() {
    let catalog = Catalog::new([
        normalized(chain_def("a", &["x"], &["y"])),
        normalized(chain_def("b", &["y"], &["z"])),
    ]);
    assert_invalid(
        register(&catalog, chain_def("c", &["z"], &["x"])),
        "attributes",
        "circular dependency",
    );
}

#[test]
fn a_chain_without_a_cycle_is_accepted() {
    let catalog = Catalog::new([
        normalized(chain_def("a", &["x"], &["y"])),
        normalized(chain_def("b", &["y"], &["z"])),
    ]);
    let (_, registration) = register(&catalog, chain_def("c", &["z"], &["w"])).unwrap();
    assert_eq!(registration, Registration::Added);
}

#[test]
fn updating_a_step_that_is_not_registered_is_not_found() {
    let result = update(&Catalog::default(), chain_def("Ghost", &[], &["out"]));
    assert_eq!(
        result.unwrap_err(),
        CatalogError::NotFound(tartan_core::suggest::Missing::alone("ghost"))
    );
}

#[test]
fn an_update_replaces_a_definition() {
    let catalog = Catalog::new([normalized(chain_def("a", &["in"], &["out"]))]);
    let step = update(&catalog, chain_def("a", &["in"], &["other"])).unwrap();
    assert!(step.attributes.contains_key("other"));
}

#[test]
fn an_update_may_change_the_type_of_the_steps_own_attribute() {
    let catalog = Catalog::new([normalized(sync_def(
        "a",
        json!({ "amount": { "role": "output", "type": "number" } }),
    ))]);
    let def = sync_def("a", json!({ "amount": { "role": "output", "type": "string" } }));
    assert!(update(&catalog, def).is_ok());
}

#[test]
fn an_update_is_checked_against_the_other_steps() {
    let catalog = Catalog::new([
        normalized(chain_def("a", &["x"], &["y"])),
        normalized(chain_def("b", &["y"], &["z"])),
        normalized(sync_def(
            "c",
            json!({ "amount": { "role": "output", "type": "number" } }),
        )),
    ]);
    assert_invalid(
        update(&catalog, chain_def("b", &["y"], &["x"])),
        "attributes",
        "circular dependency",
    );
    let def = sync_def(
        "b",
        json!({ "amount": { "role": "required", "type": "boolean" } }),
    );
    assert_invalid(
        update(&catalog, def),
        "attributes.amount.type",
        "attribute type conflict",
    );
    let mut def = chain_def("b", &["y"], &["z"]);
    def["http"]["method"] = json!("PATCH");
    assert_invalid(update(&catalog, def), "http.method", "invalid HTTP method");
}

#[test]
fn max_attempts_alone_sets_the_retries() {
    for (attempts, retries) in [(3, 2), (-1, -1), (1, 0)] {
        let step = assert_accepted(with(json!({ "work_config": { "max_attempts": attempts } })));
        assert_eq!(work(&step).max_retries, retries, "max_attempts {attempts}");
        let policy = &step.policies().unwrap().retry;
        let expected = if attempts < 0 { None } else { Some(attempts as u32) };
        assert_eq!(policy.max_attempts, expected, "max_attempts {attempts}");
    }
}
