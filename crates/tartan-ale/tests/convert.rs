//! JSON <-> Ale conversions (Argyll's `jsonToAle` and `aleToJSON`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{ok, runtime_err};
use serde_json::json;
use tartan_ale::{compile_lambda, Limits};

fn with_arg(src: &str, arg: serde_json::Value) -> serde_json::Value {
    compile_lambda(&["x"], src)
        .unwrap()
        .call(&[arg], &Limits::default())
        .unwrap()
}

#[test]
fn json_becomes_ale_values() {
    let probe = "[(object? x) (:a x) (vector? (:b x)) (null? (:c x)) (string? (:d x)) (boolean? (:e x))]";
    assert_eq!(
        with_arg(probe, json!({"a": 1, "b": [1], "c": null, "d": "s", "e": false})),
        json!([true, 1, true, true, true, true])
    );
    // Integers stay integers; other numbers are floats.
    assert_eq!(
        with_arg(
            "[(eq (0 x) 1) (eq (1 x) 1) (eq (1 x) 1.0) (= (1 x) 1)]",
            json!([1, 1.0])
        ),
        json!([true, false, true, true])
    );
    assert_eq!(with_arg("(number? x)", json!(u64::MAX)), json!(true));
    // Keys become keywords, whatever their text.
    assert_eq!(
        with_arg(
            "[(str (car (first x))) (cdr (first x)) (keyword? (car (first x)))]",
            json!({"weird key": 1})
        ),
        json!([":weird key", 1, true])
    );
    assert_eq!(
        with_arg("(seq->vector x)", json!({"b": 2, "a": 1})),
        json!(["(:a . 1)", "(:b . 2)"])
    );
}

#[test]
fn ale_values_become_json() {
    assert_eq!(
        ok("[:kw 1 1.5 \"s\" true null '() (list 1) [] {} 'sym]"),
        json!(["kw", 1, 1.5, "s", true, null, null, [1], [], {}, "sym"])
    );
    assert_eq!(
        ok("[(/ 1 3) (cons 1 2) (cons 1 \"a\")]"),
        json!(["1/3", "(1 . 2)", "(1 . \"a\")"])
    );
    assert_eq!(
        ok("{:nested {:list '(1 (2)) :empty '()}}"),
        json!({"nested": {"list": [1, [2]], "empty": null}})
    );
}

#[test]
fn object_keys_print_as_go_would() {
    assert_eq!(
        ok("{:a 1 \"b\" 2 3 :three 1.5 :f true :t 'sym :s (/ 1 2) :r '() :n}"),
        json!({"a": 1, "b": 2, "3": "three", "1.5": "f", "true": "t", "sym": "s", "1/2": "r", "<nil>": "n"})
    );
    assert_eq!(ok("{1e7 :big}"), json!({"1e+07": "big"}));
    assert!(runtime_err("{:a 1 \"a\" 2}").contains("collide"));
}

#[test]
fn unprintable_results_are_errors() {
    // Ale prints these as memory addresses: no stable JSON.
    assert!(runtime_err("(map inc [1 2])").contains("lazy sequence"));
    assert!(runtime_err("[(range 3)]").contains("lazy sequence"));
    assert!(runtime_err("(lambda (x) x)").contains("procedure"));
    assert!(runtime_err("inc").contains("procedure"));
    assert!(runtime_err("(/ 0.0 0)").contains("NaN"));
    assert!(runtime_err("{:inf +inf}").contains("+Inf"));
    // Realized, they convert.
    assert_eq!(ok("(seq->vector (map inc [1 2]))"), json!([2, 3]));
    // An empty range is a vector in Ale.
    assert_eq!(ok("(range 0)"), json!([]));
}

#[test]
fn predicate_truth_is_anything_but_false() {
    let p = compile_lambda(&["x"], "x").unwrap();
    let truth = |v| p.call_truth(&[v], &Limits::default()).unwrap();
    assert!(!truth(json!(false)));
    for v in [
        json!(true),
        json!(null),
        json!(0),
        json!(""),
        json!([]),
        json!({}),
    ] {
        assert!(truth(v.clone()), "{v}");
    }
    // No JSON conversion is needed for truth: a lazy result is true.
    let p = compile_lambda(&[], "(map inc [1])").unwrap();
    assert_eq!(p.call_truth(&[], &Limits::default()), Ok(true));
}
