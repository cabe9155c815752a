//! A step's scripts: the predicate, a script step's body, and each
//! attribute's `required.match` and `mapping.script`. Written as Argyll
//! writes them (`{"language": "ale", "script": "..."}`), compiled once
//! when the step is normalised or read back, and kept compiled beside it
//! (docs/steps.md, "Scripts").

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tartan_script::{Language, Limits, Script, ScriptError, MATCH_VALUE};

use super::Step;
use crate::error::ValidationError;

pub use tartan_script::{
    limits_hit as script_limits_hit, under as under_cancel, Cancel as ScriptCancel, Limits as ScriptLimits,
};

/// A script as a step declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScriptConfig {
    /// `ale`, `lua` or `jpath` (`jpath` only where a value is read: not
    /// for a script step's body).
    #[serde(default)]
    pub language: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 65536))]
    pub script: String,
}

/// Where a script sits, which decides the names it is given and the
/// languages it may be written in.
#[derive(Clone, Copy)]
enum Place {
    /// Predicate and script body: the step's inputs by the names it uses.
    Inputs,
    /// A script step's body: as `Inputs`, but a value is computed, which
    /// jpath cannot do.
    Body,
    /// `required.match`: the candidate, as `value`.
    Match,
    /// An output mapping: the inputs, and the step's raw answer under the
    /// output's own name.
    Output,
}

/// The compiled scripts of one step.
#[derive(Debug, Clone, Default)]
pub struct StepScripts {
    pub predicate: Option<Script>,
    /// A script step's body.
    pub body: Option<Script>,
    /// `required.match` by attribute name.
    pub matches: BTreeMap<String, Script>,
    /// `mapping.script` by attribute name (inputs and outputs).
    pub mappings: BTreeMap<String, Script>,
}

impl StepScripts {
    pub fn is_empty(&self) -> bool {
        self.predicate.is_none() && self.body.is_none() && self.matches.is_empty() && self.mappings.is_empty()
    }

    /// Compile every script of `step`; the first that does not compile is
    /// an error naming its field and the compiler's message.
    pub(super) fn compile(step: &Step) -> Result<StepScripts, ValidationError> {
        let inputs = step.runtime_input_names();
        let mut scripts = StepScripts::default();
        if let Some(cfg) = &step.predicate {
            scripts.predicate = Some(compile(cfg, "predicate", Place::Inputs, &inputs, "")?);
        }
        if let Some(cfg) = &step.script {
            scripts.body = Some(compile(cfg, "script", Place::Body, &inputs, "")?);
        }
        for (name, attr) in &step.attributes {
            let field = format!("attributes.{name}.{}", attr.role);
            if let Some(cfg) = attr.required.as_ref().and_then(|c| c.match_.as_ref()) {
                let script = compile(cfg, &format!("{field}.match"), Place::Match, &inputs, name)?;
                scripts.matches.insert(name.clone(), script);
            }
            if let Some(cfg) = attr.mapping().and_then(|m| m.script.as_ref()) {
                let place = if attr.is_output() {
                    Place::Output
                } else {
                    Place::Inputs
                };
                let script = compile(cfg, &format!("{field}.mapping.script"), place, &inputs, name)?;
                scripts.mappings.insert(name.clone(), script);
            }
        }
        Ok(scripts)
    }
}

fn compile(
    cfg: &ScriptConfig,
    field: &str,
    place: Place,
    inputs: &[String],
    attribute: &str,
) -> Result<Script, ValidationError> {
    if cfg.language.is_empty() {
        return Err(ValidationError::new(
            format!("{field}.language"),
            "script language empty (must be ale, jpath or lua)",
        ));
    }
    let language: Language = cfg
        .language
        .parse()
        .map_err(|e: String| ValidationError::new(format!("{field}.language"), e))?;
    if matches!(place, Place::Body) && language == Language::JPath {
        return Err(ValidationError::new(
            format!("{field}.language"),
            "invalid script language: jpath (a script step's body is ale or lua: jpath only reads values)",
        ));
    }
    let params: Vec<String> = match place {
        Place::Inputs | Place::Body => inputs.to_vec(),
        Place::Match => vec![MATCH_VALUE.to_string()],
        Place::Output => inputs.iter().cloned().chain([attribute.to_string()]).collect(),
    };
    Script::compile(language, &cfg.script, &params)
        .map_err(|e| ValidationError::new(format!("{field}.script"), e.message))
}

/// The compiled scripts beside the JSON they come from; equal whenever the
/// JSON is (as `Parsed`).
#[derive(Debug, Clone, Default)]
pub(super) struct Compiled(pub(super) Option<Arc<StepScripts>>);

impl PartialEq for Compiled {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// A mapping script's answer as one value, as Argyll reads it: jpath's
/// match as it is; from Ale or Lua, an object with `value` gives that, an
/// object of one member gives that member, an empty one `null`, any other
/// answer itself.
pub fn mapping_value(
    script: &Script,
    args: &Map<String, Value>,
    limits: &Limits,
) -> Result<Value, ScriptError> {
    let value = script.value(args, limits)?;
    if script.language() == Language::JPath {
        return Ok(value);
    }
    Ok(match value {
        Value::Object(mut fields) => {
            if let Some(v) = fields.remove("value") {
                v
            } else if fields.len() == 1 {
                fields.into_iter().next().map(|(_, v)| v).unwrap_or(Value::Null)
            } else if fields.is_empty() {
                Value::Null
            } else {
                Value::Object(fields)
            }
        }
        other => other,
    })
}

/// A script step's outputs: an object answer is the outputs, any other
/// answer is `{"result": answer}` (as Argyll).
pub fn body_outputs(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(fields) => fields,
        other => {
            let mut outputs = Map::new();
            outputs.insert("result".into(), other);
            outputs
        }
    }
}
