//! Step definitions as registered over the API, in Argyll's JSON shape;
//! their validation (rules and wording after Argyll's `engine/pkg/api/step.go`)
//! is in `normalize`.
//!
//! Duration fields accept milliseconds or any format of `crate::duration`;
//! they are stored as integer milliseconds because Argyll clients decode them
//! as integers.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::duration::{parse_duration, DurationKind};
use crate::retry::RetryPolicy;
use crate::timeouts::TimeoutPolicy;

pub use crate::json::Args;
pub use attribute::*;
pub use scripts::{
    body_outputs, mapping_value, script_limits_hit, under_cancel, ScriptCancel, ScriptConfig, ScriptLimits,
    StepScripts,
};
pub use subflow::FlowConfig;

mod attribute;
mod normalize;
mod scripts;
mod subflow;

/// A registered step: an HTTP endpoint with declared inputs and outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Step {
    // `id`, `name` and `type` are required: an absent one is refused by the
    // validation, with a 400 naming it, rather than by the JSON's shape, so
    // `serde(default)` stays and the document marks them required.
    /// Sanitised, unique id; required.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required, max_length = 256))]
    pub id: String,
    /// Human name, required.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required, max_length = 256))]
    pub name: String,
    /// `sync`, `async`, `script` or `flow`; required.
    #[serde(rename = "type", default)]
    #[cfg_attr(feature = "openapi", schema(required))]
    pub step_type: String,
    /// Inputs and outputs by attribute name.
    #[serde(default)]
    pub attributes: BTreeMap<String, AttributeSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpConfig>,
    /// A script step's body (`type: script`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<ScriptConfig>,
    /// Decides, before the step and each of its work items starts, whether
    /// it runs at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicate: Option<ScriptConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<FlowConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_config: Option<WorkConfig>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// A call's answer is reused for an identical call (docs/steps.md,
    /// "Memoization").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub memoizable: bool,
    /// How long a memoized answer is reused, in ms; 0 or absent: until the
    /// memo's bound evicts it.
    #[serde(
        default,
        deserialize_with = "de_delay_ms",
        skip_serializing_if = "is_zero_u64"
    )]
    #[cfg_attr(feature = "openapi", schema(schema_with = openapi::memo_ttl))]
    pub memo_ttl: u64,
    /// A retry policy in another system's dialect (Steep, OpenWorkflow /
    /// Temporal, Serverless Workflow), kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Value>,
    /// The normalised retry policy, every value explicit. Read-only: what a
    /// client sends is replaced when the step is normalised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_retry: Option<Value>,
    /// Limits the step's calls share across flows and processes
    /// (`concurrency`, `rate`, `burst`, `breaker`; docs/lanes.md), kept as
    /// given; parsed into `StepPolicies::lane`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub limits: Option<Value>,
    /// Timeouts (`attempt`, `inactivity`, `total`, `on_timeout`, or Steep's
    /// `maxRuntime`, `maxInactivity`, `deadline`), kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<Value>,
    /// The normalised timeouts, every value explicit. Read-only, like
    /// `effective_retry`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_timeouts: Option<Value>,
    /// The retry and timeout policies as typed values, parsed once when
    /// the step is normalised or read back (`with_effective_retry`), never
    /// per decision. Not part of the JSON.
    #[serde(skip)]
    policies: Parsed,
    /// The step's scripts, compiled with its policies. Not part of the JSON.
    #[serde(skip)]
    compiled: scripts::Compiled,
}

/// A step's policies, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct StepPolicies {
    pub retry: RetryPolicy,
    pub timeouts: TimeoutPolicy,
    /// The step's own classes of statuses (`http.classify`), consulted
    /// before `retry.retry_on`.
    pub classes: crate::classes::StatusClasses,
    /// The step's own lane (`limits`), when it declares one.
    pub lane: Option<crate::lanes::LaneLimits>,
    /// What happens to an item whose retries run out
    /// (`work_config.on_exhausted`).
    pub on_exhausted: OnExhausted,
}

/// `work_config.on_exhausted`: an item whose retries, retry budget or the
/// flow's attempt cap ran out fails its step (`fail`, the default) or
/// waits, `parked`, for an operator's resume (`park`; docs/retries.md,
/// "Parking").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnExhausted {
    #[default]
    Fail,
    Park,
}

impl OnExhausted {
    /// Read `work_config.on_exhausted`: absent is `fail`.
    pub fn parse(v: Option<&Value>) -> Result<OnExhausted, crate::error::ValidationError> {
        match v {
            None | Some(Value::Null) => Ok(OnExhausted::Fail),
            Some(Value::String(s)) if s == "fail" => Ok(OnExhausted::Fail),
            Some(Value::String(s)) if s == "park" => Ok(OnExhausted::Park),
            Some(other) => Err(crate::error::ValidationError::new(
                "work_config.on_exhausted",
                format!("must be \"fail\" or \"park\", got {other}"),
            )),
        }
    }
}

/// The parsed policies beside the JSON they come from. Equal whenever the
/// JSON is: two steps compare by what they say, not by what was derived.
#[derive(Debug, Clone, Default)]
struct Parsed(Option<Arc<StepPolicies>>);

impl PartialEq for Parsed {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// How a step is called over HTTP.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HttpConfig {
    /// `GET`, `POST`, `PUT` or `DELETE`; `POST` when absent.
    #[serde(default)]
    pub method: String,
    /// An `http://` or `https://` URL; `{name}` placeholders name required
    /// inputs. Required.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required))]
    pub endpoint: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub compensate: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub health_check: String,
    /// Per-attempt timeout in ms; 0 means the engine default (as Argyll).
    #[serde(default, deserialize_with = "de_timeout_ms")]
    #[cfg_attr(feature = "openapi", schema(schema_with = openapi::timeout))]
    pub timeout: u64,
    /// Statuses, ranges (`500-504`) or classes (`5xx`) mapped to
    /// `retryable`, `permanent` or `rate_limited`, over the retry policy's
    /// `retry_on` (docs/retries.md, "A step's own classes").
    #[serde(default, skip_serializing_if = "crate::classes::StatusClasses::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, String>))]
    pub classify: crate::classes::StatusClasses,
}

/// Retry and parallelism settings; zero or absent values take the global
/// defaults when the step is registered, and those are stored with it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkConfig {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub backoff_type: String,
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub max_retries: i64,
    #[serde(
        default,
        deserialize_with = "de_delay_ms",
        skip_serializing_if = "is_zero_u64"
    )]
    #[cfg_attr(feature = "openapi", schema(schema_with = openapi::init_backoff))]
    pub init_backoff: u64,
    #[serde(
        default,
        deserialize_with = "de_delay_ms",
        skip_serializing_if = "is_zero_u64"
    )]
    #[cfg_attr(feature = "openapi", schema(schema_with = openapi::max_backoff))]
    pub max_backoff: u64,
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub parallelism: i64,
    /// Tartan's additions (`max_attempts`, `backoff_coefficient`, `jitter`,
    /// `retry_on`, `honor_retry_after`, `max_retry_duration`), kept as given;
    /// `crate::retry` reads and validates them.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

pub const STEP_SYNC: &str = "sync";
pub const STEP_ASYNC: &str = "async";
pub const STEP_SCRIPT: &str = "script";
pub const STEP_FLOW: &str = "flow";
const METHODS: [&str; 4] = ["GET", "POST", "PUT", "DELETE"];
const ATTRIBUTE_TYPES: [&str; 7] = ["string", "number", "boolean", "object", "array", "null", "any"];
const BACKOFF_TYPES: [&str; 3] = ["fixed", "linear", "exponential"];

fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}
fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

fn de_ms<'de, D: Deserializer<'de>>(d: D, kind: DurationKind) -> Result<u64, D::Error> {
    let value = Value::deserialize(d)?;
    if value.is_null() {
        return Ok(0);
    }
    if let Some(n) = value.as_i64() {
        if n < 0 {
            return Err(serde::de::Error::custom(format!("must not be negative, got {n}")));
        }
    }
    let parsed = parse_duration(&value, kind).map_err(serde::de::Error::custom)?;
    u64::try_from(parsed.as_millis()).map_err(|_| serde::de::Error::custom("duration too large"))
}

fn de_delay_ms<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    de_ms(d, DurationKind::Delay)
}

/// The schemas of the duration fields: a request may give integer
/// milliseconds or text (`5s`, `1h30m`, `PT1M`; docs/durations.md), the
/// answers show integer milliseconds. (`schema_with` replaces a field's
/// whole schema, its doc comment included, so each says what it is here.)
#[cfg(feature = "openapi")]
mod openapi {
    use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, OneOfBuilder, Schema, SchemaFormat, Type};

    fn duration(description: &str) -> Schema {
        let one_of = OneOfBuilder::new()
            .description(Some(format!(
                "{description} Milliseconds, or a duration such as `5s` (docs/durations.md); \
                 shown as milliseconds."
            )))
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
                    .minimum(Some(0)),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .examples([serde_json::json!("5s")]),
            )
            .build();
        Schema::OneOf(one_of)
    }

    pub(super) fn timeout() -> Schema {
        duration("The attempt timeout; 0 or absent: the engine default (as Argyll).")
    }

    pub(super) fn memo_ttl() -> Schema {
        duration("How long a memoized answer is reused; 0 or absent: until the memo's bound evicts it.")
    }

    pub(super) fn init_backoff() -> Schema {
        duration("The first retry's delay; 0 or absent: the engine default.")
    }

    pub(super) fn max_backoff() -> Schema {
        duration("The longest delay between retries; 0 or absent: the engine default.")
    }
}

/// `http.timeout`: 0 means "the default", so zero is allowed here.
fn de_timeout_ms<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    de_ms(d, DurationKind::Delay)
}

/// The names inside `{...}` of an endpoint template.
pub fn endpoint_params(template: &str) -> Vec<String> {
    crate::endpoint::params(template)
}

impl Step {
    /// The HTTP method, `POST` when unset.
    pub fn method(&self) -> &str {
        match &self.http {
            Some(h) if !h.method.is_empty() => &h.method,
            _ => "POST",
        }
    }

    pub fn is_async(&self) -> bool {
        self.step_type == STEP_ASYNC
    }

    /// Run by the engine itself, not called over HTTP.
    pub fn is_script(&self) -> bool {
        self.step_type == STEP_SCRIPT
    }

    /// Runs a flow of its own (a sub-flow) per work item.
    pub fn is_flow(&self) -> bool {
        self.step_type == STEP_FLOW
    }

    /// The step's compiled scripts (none for a step that was neither
    /// normalised nor read back).
    pub fn scripts(&self) -> &StepScripts {
        static NONE: std::sync::OnceLock<StepScripts> = std::sync::OnceLock::new();
        match &self.compiled.0 {
            Some(scripts) => scripts,
            None => NONE.get_or_init(StepScripts::default),
        }
    }

    /// The names the step receives its meta values by (a flow id, a step
    /// id, a receipt token, a webhook URL: what differs from call to call).
    pub fn meta_names(&self) -> Vec<&str> {
        self.attributes
            .iter()
            .filter(|(_, a)| a.is_meta())
            .map(|(n, _)| self.inner_name(n))
            .collect()
    }

    /// The names the step receives its inputs, consts and meta values by,
    /// sorted: what its scripts are given.
    pub fn runtime_input_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .attributes
            .iter()
            .filter(|(_, a)| a.is_runtime_input())
            .map(|(n, _)| self.inner_name(n).to_string())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The name the step endpoint uses for attribute `name`.
    pub fn inner_name<'a>(&'a self, name: &'a str) -> &'a str {
        match self.attributes.get(name).and_then(|a| a.mapping()) {
            Some(m) if !m.name.is_empty() => &m.name,
            _ => name,
        }
    }

    pub fn inputs(&self) -> impl Iterator<Item = (&String, &AttributeSpec)> {
        self.attributes.iter().filter(|(_, a)| a.is_input())
    }

    pub fn outputs(&self) -> impl Iterator<Item = (&String, &AttributeSpec)> {
        self.attributes.iter().filter(|(_, a)| a.is_output())
    }

    /// The step's typed policies: parsed when it was normalised or read
    /// back. `None` for a step that went through neither.
    pub fn policies(&self) -> Option<&StepPolicies> {
        self.policies.0.as_deref()
    }

    /// What of the step decides its answer, for the memo identity of its
    /// calls (docs/steps.md, "Memoization"): its whole definition, its id
    /// included, but its name, labels and memo settings. Everything else
    /// is kept, so that a field added later counts unless it is taken out
    /// here: a definition that may answer differently is never served an
    /// answer of another. `None` when it cannot be written as JSON (such a
    /// step's calls are not memoized).
    pub fn memo_definition(&self) -> Option<Value> {
        const NOT_DECIDING: [&str; 4] = ["name", "labels", "memoizable", "memo_ttl"];
        let mut definition = serde_json::to_value(self).ok()?;
        definition
            .as_object_mut()?
            .retain(|field, _| !NOT_DECIDING.contains(&field.as_str()));
        Some(definition)
    }
}
