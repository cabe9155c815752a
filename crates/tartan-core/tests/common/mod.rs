//! Helpers shared by the integration tests: steps from JSON, catalogs, init
//! arguments and goal lists. Each test binary uses only some of them.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod machine;

use serde_json::{json, Value};
use tartan_core::catalog::Catalog;
use tartan_core::plan::InitArgs;
use tartan_core::retry::RetryDefaults;
use tartan_core::step::Step;

/// A step from its JSON definition, as the API would decode it.
pub fn step(def: Value) -> Step {
    match serde_json::from_value(def.clone()) {
        Ok(step) => step,
        Err(e) => panic!("step definition does not decode: {e}\n{def:#}"),
    }
}

/// The JSON of a valid sync step with the given attributes.
pub fn sync_def(id: &str, attributes: Value) -> Value {
    json!({
        "id": id,
        "name": format!("Step {id}"),
        "type": "sync",
        "http": { "endpoint": format!("http://svc.test/{id}") },
        "attributes": attributes,
    })
}

/// The JSON of a valid sync step that needs `inputs` and gives `outputs`.
pub fn chain_def(id: &str, inputs: &[&str], outputs: &[&str]) -> Value {
    let mut attributes = serde_json::Map::new();
    for name in inputs {
        attributes.insert((*name).to_string(), json!({ "role": "required" }));
    }
    for name in outputs {
        attributes.insert((*name).to_string(), json!({ "role": "output" }));
    }
    sync_def(id, Value::Object(attributes))
}

/// A step as the catalog stores it (normalised with the default settings).
pub fn normalized(def: Value) -> Step {
    let raw = step(def);
    let id = raw.id.clone();
    match raw.normalize(&RetryDefaults::default()) {
        Ok(step) => step,
        Err(e) => panic!("step {id} is not valid: {e}"),
    }
}

/// A catalog of normalised steps.
pub fn catalog(defs: Vec<Value>) -> Catalog {
    Catalog::new(defs.into_iter().map(normalized))
}

/// Initial inputs with one value per attribute.
pub fn init(pairs: &[(&str, Value)]) -> InitArgs {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), vec![v.clone()]))
        .collect()
}

pub fn goals(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| (*s).to_string()).collect()
}

pub fn names(items: &[&str]) -> Vec<String> {
    goals(items)
}
