//! Every Ale script found in Argyll's repository (github.com/kode4food/argyll),
//! compiled and called as Argyll does: `(lambda (<sorted arg names>) script)`
//! called with the step's inputs.
//!
//! Each case names its source (file:line in the Argyll repository), the
//! parameters (the step's sorted runtime input names, mapped names where a
//! mapping renames), the arguments, and what Argyll gets. `A` marks results an
//! Argyll test or document asserts; `R` marks results reasoned from Ale's
//! semantics where nothing asserts them (the note says why). Numbers are
//! passed as the Argyll test passes them (Go `int` -> integer, `float64` ->
//! float; inputs decoded from JSON are floats in Argyll).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "argyll/docs.rs"]
mod docs;
#[path = "argyll/engine.rs"]
mod engine;
#[path = "argyll/sdk_web.rs"]
mod sdk_web;

use serde_json::{json, Value as Json};
use tartan_ale::{compile_lambda, EvalError};

enum Expect {
    /// `Program::call` result (`aleToJSON` of the script's value).
    Val(Json),
    /// `Program::call_truth` (predicates and matches).
    Truth(bool),
    /// A compile error whose message contains this text.
    Compile(&'static str),
    /// A runtime error.
    Fails,
}

use Expect::{Compile, Fails, Truth, Val};

struct Case {
    src: &'static str,
    params: &'static [&'static str],
    script: &'static str,
    args: Json,
    expect: Expect,
    /// `A`: asserted by Argyll; `R: why`: reasoned.
    basis: &'static str,
}

fn c(
    src: &'static str,
    params: &'static [&'static str],
    script: &'static str,
    args: Json,
    expect: Expect,
    basis: &'static str,
) -> Case {
    Case {
        src,
        params,
        script,
        args,
        expect,
        basis,
    }
}

const A: &str = "A";

fn check(case: &Case) {
    let label = format!("{} [{}] {:?}", case.src, case.basis, case.script);
    let args = case.args.as_array().expect("args are an array");
    let limits = common::limits();
    let compiled = compile_lambda(case.params, case.script);
    match (&case.expect, compiled) {
        (Compile(text), Err(e)) => assert!(
            e.message.contains(text),
            "{label}: compile error {e} lacks {text:?}"
        ),
        (Compile(_), Ok(_)) => panic!("{label}: compiled, expected a compile error"),
        (_, Err(e)) => panic!("{label}: compile error {e}"),
        (Val(want), Ok(p)) => assert_eq!(
            &p.call(args, &limits).unwrap_or_else(|e| panic!("{label}: {e}")),
            want,
            "{label}"
        ),
        (Truth(want), Ok(p)) => {
            assert_eq!(
                p.call_truth(args, &limits)
                    .unwrap_or_else(|e| panic!("{label}: {e}")),
                *want,
                "{label}"
            )
        }
        (Fails, Ok(p)) => match p.call(args, &limits) {
            Err(EvalError::Runtime(_)) => {}
            other => panic!("{label}: expected a runtime error, got {other:?}"),
        },
    }
}

#[test]
fn argyll_scripts() {
    let all: Vec<Case> = engine::cases()
        .into_iter()
        .chain(docs::cases())
        .chain(sdk_web::cases())
        .collect();
    for case in &all {
        check(case);
    }
    println!("{} Argyll script cases passed", all.len());
}

/// Numbers exactly as Argyll's JSON decoding gives them (all floats).
#[test]
fn json_inputs_arrive_as_floats_in_argyll() {
    let p = compile_lambda(&["a", "b"], "{:result (+ a b)}").unwrap();
    assert_eq!(
        p.call(&[json!(5.0), json!(10.0)], &common::limits()).unwrap(),
        json!({"result": 15.0})
    );
}
