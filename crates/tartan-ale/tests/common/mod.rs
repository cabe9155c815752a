//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value as Json;
use tartan_ale::{compile_lambda, CompileError, EvalError, Limits};

pub fn limits() -> Limits {
    Limits {
        max_steps: 5_000_000,
        max_memory_bytes: 256 * 1024 * 1024,
        max_duration: std::time::Duration::from_secs(20),
    }
}

/// Evaluates a script without parameters.
pub fn eval(src: &str) -> Result<Json, EvalError> {
    let p = compile_lambda(&[], src).unwrap_or_else(|e| panic!("compile {src:?}: {e}"));
    p.call(&[], &limits())
}

pub fn ok(src: &str) -> Json {
    eval(src).unwrap_or_else(|e| panic!("eval {src:?}: {e}"))
}

pub fn truth(src: &str) -> bool {
    let p = compile_lambda(&[], src).unwrap_or_else(|e| panic!("compile {src:?}: {e}"));
    p.call_truth(&[], &limits())
        .unwrap_or_else(|e| panic!("eval {src:?}: {e}"))
}

pub fn runtime_err(src: &str) -> String {
    match eval(src) {
        Err(EvalError::Runtime(m)) => m,
        other => panic!("expected a runtime error from {src:?}, got {other:?}"),
    }
}

pub fn compile_err(src: &str) -> CompileError {
    match compile_lambda(&[], src) {
        Err(e) => e,
        Ok(_) => panic!("expected a compile error from {src:?}"),
    }
}
