//! Helpers shared by the unit tests of jpath's submodules.

use serde_json::{json, Value};

use super::JPath;

/// The error compiling `source` gives (it must not compile).
pub(super) fn compile_error(source: &str) -> String {
    match JPath::compile(source) {
        Ok(_) => panic!("{source} compiled"),
        Err(e) => e,
    }
}

/// A chain of `depth` single-member objects ending in `leaf`.
pub(super) fn deep(depth: usize, leaf: Value) -> Value {
    (0..depth).fold(leaf, |inner, _| json!({ "x": inner }))
}
