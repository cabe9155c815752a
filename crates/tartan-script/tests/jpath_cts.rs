//! The JSONPath Compliance Test Suite (github.com/jsonpath-standard/
//! jsonpath-compliance-test-suite, the `cts.json` it builds; kode4food/jpath
//! carries a copy in testdata/) run against jpath (src/jpath/). jpath
//! passes all of it, so must we: every valid selector gives the suite's
//! result (or one of its `results` where member order is free), every
//! invalid one fails to compile.
//!
//! The suite is not vendored here; point `JSONPATH_CTS` at a copy:
//! `JSONPATH_CTS=/path/to/cts.json cargo test -p tartan-script --test jpath_cts -- --ignored`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use tartan_script::jpath::JPath;

/// Numbers as floats, so `1` and `1.0` are the same JSON number.
fn normalize(value: &Value) -> Value {
    match value {
        Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number),
        Value::Array(items) => Value::Array(items.iter().map(normalize).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), normalize(v))).collect()),
        other => other.clone(),
    }
}

#[test]
#[ignore = "needs JSONPATH_CTS=/path/to/cts.json"]
fn compliance_test_suite() {
    let path = std::env::var("JSONPATH_CTS").expect("JSONPATH_CTS names the suite's cts.json");
    let text = std::fs::read_to_string(&path).expect("the suite is readable");
    let suite: Value = serde_json::from_str(&text).expect("the suite is JSON");
    let tests = suite["tests"].as_array().expect("the suite has tests");
    let mut failures = Vec::new();
    for test in tests {
        let name = test["name"].as_str().unwrap_or("?");
        let selector = test["selector"].as_str().expect("a selector");
        let compiled = JPath::compile(selector);
        if test["invalid_selector"].as_bool() == Some(true) {
            if compiled.is_ok() {
                failures.push(format!("{name}: {selector:?} compiled, but is invalid"));
            }
            continue;
        }
        let path = match compiled {
            Ok(path) => path,
            Err(e) => {
                failures.push(format!("{name}: {selector:?} did not compile: {e}"));
                continue;
            }
        };
        let got = normalize(&Value::Array(
            path.try_query(&test["document"]).expect("within limits"),
        ));
        let expected: Vec<Value> = match test.get("results") {
            Some(Value::Array(alternatives)) => alternatives.iter().map(normalize).collect(),
            _ => vec![normalize(&test["result"])],
        };
        if !expected.contains(&got) {
            failures.push(format!("{name}: {selector:?} gave {got}, expected {expected:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        tests.len(),
        failures.join("\n")
    );
    eprintln!("{} compliance tests passed", tests.len());
}
