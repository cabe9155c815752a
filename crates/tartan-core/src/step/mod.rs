//! Step definitions as registered over the API, in Argyll's JSON shape, and
//! their validation (rules and wording after Argyll's `engine/pkg/api/step.go`).
//!
//! Duration fields accept milliseconds or any format of `crate::duration`;
//! they are stored as integer milliseconds because Argyll clients decode them
//! as integers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::duration::{parse_duration, DurationKind};
use crate::endpoint::Template;
use crate::error::{check_key, check_labels, check_len, ValidationError};
use crate::hosts::StepHosts;
use crate::ids::{is_dot_id, sanitize_id};
use crate::retry::{RetryDefaults, RetryPolicy};
use crate::timeouts::TimeoutPolicy;

pub use crate::json::Args;
pub use attribute::*;
pub use scripts::{body_outputs, mapping_value, script_limits_hit, ScriptConfig, ScriptLimits, StepScripts};
pub use subflow::FlowConfig;

mod attribute;
mod scripts;
mod subflow;

/// A registered step: an HTTP endpoint with declared inputs and outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Step {
    /// Sanitised, unique id.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 256))]
    pub id: String,
    /// Human name, required.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 256))]
    pub name: String,
    /// `sync`, `async`, `script` or `flow`.
    #[serde(rename = "type", default)]
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
    pub memo_ttl: u64,
    /// A retry policy in another system's dialect (Steep, OpenWorkflow /
    /// Temporal, Serverless Workflow), kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Value>,
    /// The normalised retry policy, every value explicit. Read-only: what a
    /// client sends is replaced when the step is normalised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_retry: Option<Value>,
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
    #[serde(default)]
    pub method: String,
    #[serde(default)]
    pub endpoint: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub compensate: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub health_check: String,
    /// Per-attempt timeout in ms; 0 means the engine default (as Argyll).
    #[serde(default, deserialize_with = "de_timeout_ms")]
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
    pub init_backoff: u64,
    #[serde(
        default,
        deserialize_with = "de_delay_ms",
        skip_serializing_if = "is_zero_u64"
    )]
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

    /// Sanitise the id, fill the HTTP method and the global work defaults, then
    /// validate. The result is what gets stored and compared.
    pub fn normalize(mut self, defaults: &RetryDefaults) -> Result<Step, ValidationError> {
        self.id = sanitize_id(&self.id);
        self.normalize_flow()?;
        if let Some(h) = &mut self.http {
            if h.method.is_empty() {
                h.method = "POST".into();
            }
        }
        self.validate()?;
        let mut work = self.work_config.take().unwrap_or_default();
        if self.retry.as_ref().is_some_and(|r| !r.is_null()) {
            // The dialect carries the whole policy: no defaults are mixed in.
            self.work_config = Some(work);
            return self.with_effective_retry(defaults);
        }
        // `max_attempts` given alone fixes the retries too (they must agree);
        // `max_attempts: 1` (no retry) has no `max_retries` form, as 0 there
        // means "the default", so it stays 0.
        let max_attempts = work.other.get("max_attempts").and_then(Value::as_i64);
        if work.max_retries == 0 {
            match max_attempts {
                Some(-1) => work.max_retries = -1,
                Some(n) if n > 1 => work.max_retries = n - 1,
                _ => {}
            }
        }
        if work.max_retries == 0 && max_attempts.is_none() {
            work.max_retries = defaults.max_retries;
        }
        if work.init_backoff == 0 {
            work.init_backoff = defaults.init_backoff_ms;
        }
        if work.max_backoff == 0 {
            work.max_backoff = defaults.max_backoff_ms;
        }
        if work.backoff_type.is_empty() {
            work.backoff_type = defaults.backoff_type.as_str().to_string();
        }
        if work.max_backoff < work.init_backoff {
            return Err(ValidationError::new(
                "work_config.max_backoff",
                "max_backoff must be >= init_backoff",
            ));
        }
        self.work_config = Some(work);
        self.with_effective_retry(defaults)
    }

    /// The step's typed policies: parsed when it was normalised or read
    /// back. `None` for a step that went through neither.
    pub fn policies(&self) -> Option<&StepPolicies> {
        self.policies.0.as_deref()
    }

    /// `work_config` as JSON, the form `crate::retry` reads.
    fn work_config_json(&self) -> Result<Option<Value>, ValidationError> {
        self.work_config
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| ValidationError::new("work_config", e.to_string()))
    }

    /// Parse the retry and timeout policies (the attempt timeout may come
    /// from `http.timeout`, `timeouts` or a Serverless Workflow retry
    /// policy), keep them typed, and show them as `effective_retry` and
    /// `effective_timeouts`. Also used for steps loaded from storage, where
    /// the read-only fields are absent.
    pub fn with_effective_retry(self, defaults: &RetryDefaults) -> Result<Step, ValidationError> {
        let mut step = self.with_policies(defaults)?;
        let Some(parsed) = step.policies.0.clone() else {
            return Ok(step);
        };
        step.effective_retry = Some(
            serde_json::to_value(&parsed.retry)
                .map_err(|e| ValidationError::new("effective_retry", e.to_string()))?,
        );
        step.effective_timeouts = Some(
            serde_json::to_value(&parsed.timeouts)
                .map_err(|e| ValidationError::new("effective_timeouts", e.to_string()))?,
        );
        Ok(step)
    }

    /// Parse the typed policies alone: for a step read back with its
    /// `effective_*` fields already shown (a stored plan's).
    pub fn with_policies(mut self, defaults: &RetryDefaults) -> Result<Step, ValidationError> {
        let work = self.work_config_json()?;
        let retry = RetryPolicy::from_step(work.as_ref(), self.retry.as_ref(), defaults)?;
        let http_ms = self.http.as_ref().map(|h| h.timeout).unwrap_or(0);
        let timeouts = TimeoutPolicy::from_step(self.timeouts.as_ref(), http_ms, retry.attempt_timeout_ms)?;
        let classes = self.http.as_ref().map(|h| h.classify.clone()).unwrap_or_default();
        self.policies = Parsed(Some(Arc::new(StepPolicies {
            retry,
            timeouts,
            classes,
        })));
        let scripts = StepScripts::compile(&self)?;
        self.compiled = scripts::Compiled((!scripts.is_empty()).then(|| Arc::new(scripts)));
        Ok(self)
    }

    fn validate(&self) -> Result<(), ValidationError> {
        if self.id.is_empty() {
            return Err(ValidationError::new("id", "step ID empty"));
        }
        check_len("id", &self.id)?;
        if is_dot_id(&self.id) {
            return Err(ValidationError::new(
                "id",
                format!(
                    "step ID {:?} is refused: it would be a relative path segment",
                    self.id
                ),
            ));
        }
        if self.name.is_empty() {
            return Err(ValidationError::new("name", "step name empty"));
        }
        check_len("name", &self.name)?;
        // Before anything names them in an error.
        for name in self.attributes.keys() {
            check_key("attributes", name)?;
        }
        check_labels("labels", &self.labels)?;
        match self.step_type.as_str() {
            STEP_SYNC | STEP_ASYNC => self.validate_http()?,
            STEP_SCRIPT => self.validate_script()?,
            STEP_FLOW => self.validate_flow()?,
            other => {
                return Err(ValidationError::new(
                    "type",
                    format!("invalid step type: {other:?} (must be sync, async, script or flow)"),
                ))
            }
        }
        for (name, attr) in &self.attributes {
            if name.is_empty() {
                return Err(ValidationError::new("attributes", "argument name empty"));
            }
            attr.validate(name)?;
        }
        self.validate_mapping_names()?;
        if self.memo_ttl > 0 && !self.memoizable {
            return Err(ValidationError::new(
                "memo_ttl",
                "memo_ttl is for memoizable steps",
            ));
        }
        self.validate_work_config()
    }

    /// What makes two calls of this step the same call, with their inputs:
    /// the fields that decide its answer (not its id, name, labels or
    /// policies), as JSON text in a fixed order.
    pub fn memo_identity(&self) -> String {
        serde_json::json!({
            "type": self.step_type,
            "http": self.http.as_ref().map(|h| (&h.method, &h.endpoint)),
            "script": self.script,
            "attributes": self.attributes,
        })
        .to_string()
    }

    fn validate_script(&self) -> Result<(), ValidationError> {
        if self.script.is_none() {
            return Err(ValidationError::new("script", "script required"));
        }
        if self.http.is_some() {
            return Err(ValidationError::new("http", "http not allowed for step type"));
        }
        if self.flow.is_some() {
            return Err(ValidationError::new("flow", "flow not allowed for step type"));
        }
        Ok(())
    }

    fn validate_http(&self) -> Result<(), ValidationError> {
        let Some(http) = &self.http else {
            return Err(ValidationError::new("http", "http required"));
        };
        if self.flow.is_some() {
            return Err(ValidationError::new("flow", "flow not allowed for step type"));
        }
        if self.script.is_some() {
            return Err(ValidationError::new("script", "script not allowed for step type"));
        }
        if http.endpoint.is_empty() {
            return Err(ValidationError::new("http.endpoint", "step endpoint empty"));
        }
        if !http.endpoint.starts_with("http://") && !http.endpoint.starts_with("https://") {
            return Err(ValidationError::new(
                "http.endpoint",
                format!("must be an http:// or https:// URL, got {:?}", http.endpoint),
            ));
        }
        if !METHODS.contains(&self.method()) {
            return Err(ValidationError::new(
                "http.method",
                format!(
                    "invalid HTTP method: {} (must be GET, POST, PUT or DELETE)",
                    self.method()
                ),
            ));
        }
        if !http.compensate.is_empty() && self.memoizable {
            return Err(ValidationError::new(
                "http.compensate",
                "compensate not allowed for memoizable steps",
            ));
        }
        let required: BTreeSet<&str> = self
            .attributes
            .iter()
            .filter(|(_, a)| a.is_required())
            .map(|(n, _)| self.inner_name(n))
            .collect();
        for param in endpoint_params(&http.endpoint) {
            if !required.contains(param.as_str()) {
                return Err(ValidationError::new(
                    "http.endpoint",
                    format!(
                        "URL contains unknown parameter: {param:?} (placeholders must name required inputs)"
                    ),
                ));
            }
        }
        if !http.compensate.is_empty() {
            let known: BTreeSet<&str> = self
                .attributes
                .iter()
                .filter(|(_, a)| a.is_input() || a.is_output())
                .map(|(n, _)| self.inner_name(n))
                .collect();
            for param in endpoint_params(&http.compensate) {
                if !known.contains(param.as_str()) {
                    return Err(ValidationError::new(
                        "http.compensate",
                        format!("compensate URL contains unknown parameter: {param:?}"),
                    ));
                }
            }
        }
        for (field, template) in self.urls() {
            Template::parse(template).map_err(|e| ValidationError::new(field, e))?;
        }
        Ok(())
    }

    /// The step's URLs by field: endpoint, compensate and health check
    /// (those set).
    fn urls(&self) -> Vec<(&'static str, &str)> {
        let Some(http) = &self.http else {
            return Vec::new();
        };
        [
            ("http.endpoint", &http.endpoint),
            ("http.compensate", &http.compensate),
            ("http.health_check", &http.health_check),
        ]
        .into_iter()
        .filter(|(_, url)| !url.is_empty())
        .map(|(field, url)| (field, url.as_str()))
        .collect()
    }

    /// Check the hosts of the step's URLs against where steps may call. A
    /// placeholder in a host stands for one label here; the real value is
    /// checked when the call is made.
    pub fn check_hosts(&self, hosts: &StepHosts) -> Result<(), ValidationError> {
        for (field, template) in self.urls() {
            let template = Template::parse(template).map_err(|e| ValidationError::new(field, e))?;
            if let Some(host) = template.shape().host() {
                hosts
                    .check_host(&host)
                    .map_err(|e| ValidationError::new(field, e.to_string()))?;
            }
        }
        Ok(())
    }

    fn validate_mapping_names(&self) -> Result<(), ValidationError> {
        let mut inputs = BTreeSet::new();
        let mut outputs = BTreeSet::new();
        for (name, attr) in &self.attributes {
            let inner = self.inner_name(name);
            let seen = if attr.is_runtime_input() {
                &mut inputs
            } else {
                &mut outputs
            };
            if !seen.insert(inner.to_string()) {
                return Err(ValidationError::new(
                    format!("attributes.{name}"),
                    format!("duplicate mapped parameter name: {inner:?}"),
                ));
            }
        }
        Ok(())
    }

    fn validate_work_config(&self) -> Result<(), ValidationError> {
        let Some(w) = &self.work_config else {
            return Ok(());
        };
        if w.parallelism < 0 {
            return Err(ValidationError::new(
                "work_config.parallelism",
                "parallelism cannot be negative",
            ));
        }
        if w.max_retries < -1 {
            return Err(ValidationError::new(
                "work_config.max_retries",
                "must be -1 (unlimited) or more",
            ));
        }
        if w.max_backoff != 0 && w.max_backoff < w.init_backoff {
            return Err(ValidationError::new(
                "work_config.max_backoff",
                "max_backoff must be >= init_backoff",
            ));
        }
        if !w.backoff_type.is_empty() && !BACKOFF_TYPES.contains(&w.backoff_type.as_str()) {
            return Err(ValidationError::new(
                "work_config.backoff_type",
                "must be fixed, linear or exponential",
            ));
        }
        Ok(())
    }
}
