//! jpath (src/jpath/) against the cases of Argyll, the Go engine whose
//! scripts these are: its tests, docs and examples; expected answers are
//! kode4food/jpath's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use tartan_script::jpath::JPath;

mod jpath_support;

use jpath_support::check;

#[test]
fn argyll_predicate_and_mapping_semantics() {
    // engine/internal/engine/script/jpath.go: a predicate holds when
    // something matched (null too); a mapping of one input queries that
    // input's value.
    let predicate = JPath::compile("$.flag").unwrap();
    assert!(predicate.try_matches(&json!({ "flag": null })).unwrap());
    assert!(predicate.try_matches(&json!({ "flag": false })).unwrap());
    assert!(!predicate.try_matches(&json!({})).unwrap());
    let top = JPath::compile(r#"$.kind == "email""#).unwrap();
    assert!(top.try_matches(&json!({ "kind": "email" })).unwrap());
    assert!(!top.try_matches(&json!({ "kind": "postal" })).unwrap());
}

/// Cases from argyll engine/internal/engine/script/jpath_test.go; expected answers are kode4food/jpath's.
#[test]
fn argyll_script_jpath_test() {
    check(&[
        // TestJPathCompileAndValidate / TestJPathExecuteScriptSingleMatch (single input: its value is the document)
        (r#"$.foo"#, json!({"foo": "bar"}), Some(json!(["bar"]))),
        // TestJPathCompileInvalid
        (r#"$..["#, json!({}), None),
        // TestJPathEvaluatePredicate: true
        (r#"$.flag"#, json!({"flag": true}), Some(json!([true]))),
        // TestJPathEvaluatePredicate: false
        (r#"$.flag"#, json!({}), Some(json!([]))),
        // TestJPathPredicateTopLevel: true
        (
            r#"$.product_info.name == "Professional Laptop""#,
            json!({"product_info": {"name": "Professional Laptop", "sku": "123"}}),
            Some(json!([{"name": "Professional Laptop", "sku": "123"}])),
        ),
        // TestJPathPredicateTopLevel: false
        (
            r#"$.product_info.name == "Professional Laptop""#,
            json!({"product_info": {"name": "Basic Laptop", "sku": "123"}}),
            Some(json!([])),
        ),
        // TestJPathEvaluatePredicateNullMatch
        (r#"$.flag"#, json!({"flag": null}), Some(json!([null]))),
        // TestJPathEvaluateMatch: true
        (
            r#"$.kind == "email""#,
            json!({"kind": "email"}),
            Some(json!(["email"])),
        ),
        // TestJPathEvaluateMatch: false
        (r#"$.kind == "email""#, json!({"kind": "postal"}), Some(json!([]))),
        // TestJPathEvaluateMatchNullMatch
        (r#"$.optional"#, json!({"optional": null}), Some(json!([null]))),
        // TestJPathExecuteScriptMultiMatch (single input: its value)
        (
            r#"$..book"#,
            json!({"books": [{"book": "A"}, {"book": "B"}]}),
            Some(json!(["A", "B"])),
        ),
        // TestJPathExecuteScriptNoMatch
        (r#"$.missing"#, json!({"foo": "bar"}), Some(json!([]))),
    ]);
}

/// Cases from argyll engine/internal/engine/mapper_test.go; expected answers are kode4food/jpath's.
#[test]
fn argyll_mapper_test() {
    check(&[
        // returns no value when jpath finds nothing
        (r#"$.missing"#, json!({"foo": "bar"}), Some(json!([]))),
        // returns slice when jpath finds many values
        (
            r#"$..book"#,
            json!({"payload": {"sections": [{"book": "A"}, {"book": "B"}]}}),
            Some(json!(["A", "B"])),
        ),
        // TestMapperJPathMarshaling
        (
            r#"$.args.inner"#,
            json!({"args": {"inner": "value"}, "named": {"namedKey": "namedValue"}, "plain": {"plainKey": "plainValue"}, "list": [{"listNamed": "x"}, {"listArgs": "y"}, 123], "scalar": 42}),
            Some(json!(["value"])),
        ),
        // TestMapperJPathMarshaling
        (
            r#"$.named.namedKey"#,
            json!({"args": {"inner": "value"}, "named": {"namedKey": "namedValue"}, "plain": {"plainKey": "plainValue"}, "list": [{"listNamed": "x"}, {"listArgs": "y"}, 123], "scalar": 42}),
            Some(json!(["namedValue"])),
        ),
        // TestMapperJPathMarshaling
        (
            r#"$.plain.plainKey"#,
            json!({"args": {"inner": "value"}, "named": {"namedKey": "namedValue"}, "plain": {"plainKey": "plainValue"}, "list": [{"listNamed": "x"}, {"listArgs": "y"}, 123], "scalar": 42}),
            Some(json!(["plainValue"])),
        ),
        // TestMapperJPathMarshaling
        (
            r#"$.list[0].listNamed"#,
            json!({"args": {"inner": "value"}, "named": {"namedKey": "namedValue"}, "plain": {"plainKey": "plainValue"}, "list": [{"listNamed": "x"}, {"listArgs": "y"}, 123], "scalar": 42}),
            Some(json!(["x"])),
        ),
        // TestMapperJPathMarshaling
        (
            r#"$.list[1].listArgs"#,
            json!({"args": {"inner": "value"}, "named": {"namedKey": "namedValue"}, "plain": {"plainKey": "plainValue"}, "list": [{"listNamed": "x"}, {"listArgs": "y"}, 123], "scalar": 42}),
            Some(json!(["y"])),
        ),
        // TestMapperJPathMarshaling
        (
            r#"$.list[2]"#,
            json!({"args": {"inner": "value"}, "named": {"namedKey": "namedValue"}, "plain": {"plainKey": "plainValue"}, "list": [{"listNamed": "x"}, {"listArgs": "y"}, 123], "scalar": 42}),
            Some(json!([123])),
        ),
        // TestMapperJPathMarshaling
        (
            r#"$.scalar"#,
            json!({"args": {"inner": "value"}, "named": {"namedKey": "namedValue"}, "plain": {"plainKey": "plainValue"}, "list": [{"listNamed": "x"}, {"listArgs": "y"}, 123], "scalar": 42}),
            Some(json!([42])),
        ),
        // TestMapInput: maps value with jpath
        (r#"$.key"#, json!({"key": "mapped"}), Some(json!(["mapped"]))),
        // TestMapInput: returns original on failed mapping
        (r#"$.missing"#, json!({"key": "value"}), Some(json!([]))),
    ]);
}

/// Cases from argyll engine tests; expected answers are kode4food/jpath's.
#[test]
fn argyll_engine_tests() {
    check(&[
        // step-start_test.go TestJPathNullMatch (predicate over the inputs)
        (r#"$.flag"#, json!({"flag": null}), Some(json!([null]))),
        // step-stop_test.go output mapping
        (
            r#"$.payload.value"#,
            json!({"payload": {"value": 7}}),
            Some(json!([7])),
        ),
        // work-items_test.go descendant output mapping
        (
            r#"$..book"#,
            json!({"payload": {"sections": [{"book": "A"}, {"book": "B"}]}}),
            Some(json!(["A", "B"])),
        ),
        // policy/match_test.go required.match
        (r#"$.kind"#, json!({"kind": "email"}), Some(json!(["email"]))),
        // pkg/api/attribute_test.go: invalid mapping syntax
        (r#"$[?"#, json!({}), None),
        // pkg/api/attribute_test.go
        (r#"$.data.value"#, json!({"data": {"value": 1}}), Some(json!([1]))),
        // pkg/api/step_test.go
        (r#"$.input"#, json!({"input": "x"}), Some(json!(["x"]))),
    ]);
}

/// Cases from argyll docs and examples; expected answers are kode4food/jpath's.
#[test]
fn argyll_docs_and_examples() {
    check(&[
        // docs/guides/predicates.md (false still matches)
        (
            r#"$.customer.active"#,
            json!({"customer": {"active": false}}),
            Some(json!([false])),
        ),
        // docs/guides/predicates.md
        (
            r#"$.items[?(@.status=="ready")]"#,
            json!({"items": [{"status": "ready", "id": 1}, {"status": "new", "id": 2}]}),
            Some(json!([{"id": 1, "status": "ready"}])),
        ),
        // docs/concepts/steps.md
        (
            r#"$.data.order.total"#,
            json!({"data": {"order": {"total": 99.5}}}),
            Some(json!([99.5])),
        ),
        // docs/concepts/steps.md
        (r#"$.user.id"#, json!({"user": {"id": "u1"}}), Some(json!(["u1"]))),
        // docs/api/engine-api.yaml, mcp guidance
        (
            r#"$.response.data"#,
            json!({"response": {"data": {"a": 1}}}),
            Some(json!([{"a": 1}])),
        ),
        // docs/api/engine-api.yaml
        (
            r#"$.user.email"#,
            json!({"user": {"email": "a@b.c"}}),
            Some(json!(["a@b.c"])),
        ),
        // docs/api/engine-api.yaml
        (
            r#"$.data[0].value"#,
            json!({"data": [{"value": 3}, {"value": 4}]}),
            Some(json!([3])),
        ),
        // web i18n mapping placeholder
        (r#"$.value"#, json!({"value": 1}), Some(json!([1]))),
        // sdks/python tests
        (
            r#"$.product_type"#,
            json!({"product_type": "book"}),
            Some(json!(["book"])),
        ),
    ]);
}
