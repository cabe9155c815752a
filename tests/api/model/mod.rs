//! Argyll's step model (docs/steps.md): scripts in three languages,
//! predicates, `required.match`, mappings, optional inputs and their
//! deadlines, run-time skipping. Cases ported from Argyll's own engine
//! tests keep their names in a comment.

mod example;
mod mappings;
mod matches;
mod memo;
mod optional;
mod optional_deadlines;
mod predicates;
mod scripts;
mod subflow_lifetimes;
mod subflow_limits;
mod subflows;

use serde_json::{json, Value};

/// A script config.
pub fn script(language: &str, source: &str) -> Value {
    json!({"language": language, "script": source})
}

/// A script step.
pub fn script_step(id: &str, language: &str, source: &str, inputs: &[&str], outputs: &[&str]) -> Value {
    let mut attributes = serde_json::Map::new();
    for i in inputs {
        attributes.insert((*i).into(), json!({"role": "required"}));
    }
    for o in outputs {
        attributes.insert((*o).into(), json!({"role": "output"}));
    }
    json!({
        "id": id, "name": id, "type": "script",
        "script": script(language, source),
        "attributes": attributes,
    })
}
