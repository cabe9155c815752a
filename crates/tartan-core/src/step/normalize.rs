//! A step's normalisation and validation: what registering it checks and
//! fills in, and its typed policies parsed once (`Step::with_policies`).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use crate::endpoint::Template;
use crate::error::{check_key, check_labels, check_len, ValidationError};
use crate::hosts::StepHosts;
use crate::ids::{is_dot_id, sanitize_id};
use crate::retry::{RetryDefaults, RetryPolicy};
use crate::timeouts::TimeoutPolicy;

use super::*;

impl Step {
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
        if self.is_flow() && !has_own_retry(&work) {
            // Argyll's rule for a flow step without a retry policy of its
            // own: its item fails for good when its child fails (a retry
            // would run the child's steps again under new receipt tokens).
            // Said in the stored definition: one attempt.
            work.other.insert("max_attempts".into(), Value::from(1));
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
        let lane = match self.limits.as_ref().filter(|v| !v.is_null()) {
            Some(v) => Some(crate::lanes::LaneLimits::parse("limits", v)?),
            None => None,
        };
        let on_exhausted = OnExhausted::parse(work.as_ref().and_then(|w| w.get("on_exhausted")))?;
        self.policies = Parsed(Some(Arc::new(StepPolicies {
            retry,
            timeouts,
            classes,
            lane,
            on_exhausted,
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
        if self.limits.as_ref().is_some_and(|v| !v.is_null()) && self.http.is_none() {
            return Err(ValidationError::new(
                "limits",
                "limits are for steps called over HTTP (sync and async)",
            ));
        }
        if self.memo_ttl > 0 && !self.memoizable {
            return Err(ValidationError::new(
                "memo_ttl",
                "memo_ttl is for memoizable steps",
            ));
        }
        self.validate_work_config()
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

/// Whether `work` sets any retry field (`parallelism` is not one): a step
/// author's own retry policy, as opposed to the process's defaults.
fn has_own_retry(work: &WorkConfig) -> bool {
    work.max_retries != 0
        || work.init_backoff != 0
        || work.max_backoff != 0
        || !work.backoff_type.is_empty()
        || crate::retry::WORK_CONFIG_RETRY_FIELDS
            .iter()
            .any(|k| work.other.get(*k).is_some_and(crate::retry::is_set))
}
