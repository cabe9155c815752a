//! Timeout policies (docs/timeouts.md): a step's `timeouts` object (native or
//! Steep names) normalised into one [`TimeoutPolicy`], the flow start
//! `timeout`, the scope ordering used when timers fire together, and the
//! timeout problem object with its JSON Pointer `instance`.
//!
//! Scopes, innermost first:
//! - inactivity: an async step's window after the endpoint accepted the call,
//!   restarted by each heartbeat (`timeouts.inactivity`, Steep
//!   `maxInactivity`);
//! - attempt: one HTTP call (`http.timeout`, `timeouts.attempt`, Steep
//!   `maxRuntime`, Serverless Workflow `retry.limit.attempt.duration`; where
//!   several are given they must agree);
//! - total: every attempt and wait of one work item (`timeouts.total`, Steep
//!   `deadline`);
//! - flow: the whole flow (the flow start `timeout`, or `deadline_at`).
//!
//! When timers fire together the outer scope wins ([`TimeoutScope::outer`]).
//!
//! `on_timeout` is one value per step: `error` (the default) or `cancel`.
//! Steep carries it per scope as `errorOnTimeout`; every value given
//! explicitly (Steep's or `on_timeout`) must agree. A Steep timeout without
//! `errorOnTimeout` takes Tartan's default, `error` (Steep's own default is
//! to cancel; docs/timeouts.md makes `error` the default everywhere).
//!
//! Durations go through [`crate::duration::parse_duration`] with
//! [`DurationKind::Timeout`]: zero and negative values are rejected, and the
//! message echoes the offending text. `null` stands for absent, so the
//! read-only `effective_timeouts` JSON posted back as `timeouts` gives the
//! same policy.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::duration::{as_millis_u64, parse_duration, DurationKind};
use crate::error::ValidationError;
use crate::json::json_kind;

/// The problem `type` of every timeout (Serverless Workflow's timeout error).
pub const TIMEOUT_PROBLEM_TYPE: &str = "https://serverlessworkflow.io/spec/1.0.0/errors/timeout";
/// The problem `status` of every timeout (408 Request Timeout).
pub const TIMEOUT_PROBLEM_STATUS: u16 = 408;
/// The problem `title` of every timeout.
pub const TIMEOUT_PROBLEM_TITLE: &str = "Timeout";
/// The `instance` of a flow timeout: the flow itself.
pub const FLOW_POINTER: &str = "/";

/// Tartan's keys of a step's `timeouts` object.
pub const NATIVE_KEYS: [&str; 4] = ["attempt", "inactivity", "total", "on_timeout"];
/// Steep's keys of a step's `timeouts` object (`maxRuntime` = attempt,
/// `maxInactivity` = inactivity, `deadline` = total).
pub const STEEP_KEYS: [&str; 3] = ["maxRuntime", "maxInactivity", "deadline"];

/// Keys of Steep's `{timeout, errorOnTimeout}` object.
const STEEP_OBJECT_KEYS: [&str; 2] = ["timeout", "errorOnTimeout"];
/// Keys of the flow's `{after, on_timeout}` object.
const FLOW_OBJECT_KEYS: [&str; 2] = ["after", "on_timeout"];
/// Keys of the Serverless Workflow duration object (see `duration`).
const DURATION_OBJECT_KEYS: [&str; 5] = ["days", "hours", "minutes", "seconds", "milliseconds"];

/// Field paths of the attempt-timeout sources outside `timeouts`.
const HTTP_TIMEOUT_FIELD: &str = "http.timeout";
const SW_ATTEMPT_FIELD: &str = "retry.limit.attempt.duration";

/// Longest echo of an offending JSON value in a message (in chars).
const MAX_ECHO_CHARS: usize = 200;

/// What a timeout does to its step or flow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
// `as_str` (and `parse`, where there is one) uses serde's names, by the
// same rule; tests/names.rs holds the two equal.
#[derive(strum::IntoStaticStr, strum::EnumIter)]
#[strum(serialize_all = "lowercase")]
pub enum OnTimeout {
    /// Fail with the timeout problem (the default).
    #[default]
    Error,
    /// Cancel instead of failing (Steep's `errorOnTimeout: false`); a
    /// cancelled step is not retried.
    Cancel,
}

impl OnTimeout {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Steep's `errorOnTimeout` flag as an [`OnTimeout`].
    pub fn from_error_on_timeout(error_on_timeout: bool) -> OnTimeout {
        if error_on_timeout {
            OnTimeout::Error
        } else {
            OnTimeout::Cancel
        }
    }
}

impl fmt::Display for OnTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OnTimeout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "error" => Ok(OnTimeout::Error),
            "cancel" => Ok(OnTimeout::Cancel),
            other => Err(format!("unknown on_timeout {other:?}: must be error or cancel")),
        }
    }
}

/// What timed out. Declared innermost first, so the derived order is the
/// precedence when timers fire together: `Flow > Total > Attempt > Inactivity`
/// (`max` is the scope that speaks, see [`TimeoutScope::outer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
// `as_str` (and `parse`, where there is one) uses serde's names, by the
// same rule; tests/names.rs holds the two equal.
#[derive(strum::IntoStaticStr, strum::EnumIter)]
#[strum(serialize_all = "lowercase")]
pub enum TimeoutScope {
    /// No heartbeat or result within the async step's inactivity window.
    Inactivity,
    /// One HTTP call took too long.
    Attempt,
    /// All attempts and waits of one work item took too long.
    Total,
    /// The whole flow took too long.
    Flow,
}

impl TimeoutScope {
    /// Every scope, innermost first.
    pub const ALL: [TimeoutScope; 4] = [
        TimeoutScope::Inactivity,
        TimeoutScope::Attempt,
        TimeoutScope::Total,
        TimeoutScope::Flow,
    ];

    /// The scope that wins when both fire together: the outer one.
    pub fn outer(self, other: TimeoutScope) -> TimeoutScope {
        self.max(other)
    }

    /// The wire name (`timeout_scope` of the problem).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The words naming the timeout in `detail` and in the `error` string.
    fn description(self) -> &'static str {
        match self {
            TimeoutScope::Inactivity => "step inactivity timeout",
            TimeoutScope::Attempt => "step attempt timeout",
            TimeoutScope::Total => "step total timeout",
            TimeoutScope::Flow => "flow timeout",
        }
    }
}

impl fmt::Display for TimeoutScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A step's normalised timeouts, every value explicit.
///
/// Its JSON (Serialize and Deserialize) is the read-only `effective_timeouts`:
/// `{"attempt": ms|null, "inactivity": ms|null, "total": ms|null,
/// "on_timeout": "error"|"cancel"}`. `attempt: null` means the engine default
/// (`TARTAN_STEP_TIMEOUT`, see [`TimeoutPolicy::attempt_or`]); the other
/// `null`s mean no such timeout.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeoutPolicy {
    /// Per-attempt timeout; `None` = the engine default.
    #[serde(rename = "attempt", default)]
    pub attempt_ms: Option<u64>,
    /// Async inactivity window; `None` = none.
    #[serde(rename = "inactivity", default)]
    pub inactivity_ms: Option<u64>,
    /// Budget of one work item over all its attempts and waits; `None` = none.
    #[serde(rename = "total", default)]
    pub total_ms: Option<u64>,
    /// What a timeout of this step does.
    #[serde(default)]
    pub on_timeout: OnTimeout,
}

/// One given value of a scope, with the field path it came from.
struct Source {
    field: String,
    ms: u64,
}

impl TimeoutPolicy {
    /// The normalised policy of a step.
    ///
    /// - `timeouts`: the step's raw `timeouts` object (`None` or `null` =
    ///   absent). Native keys `attempt`, `inactivity`, `total` (durations) and
    ///   `on_timeout` (`"error"`/`"cancel"`); Steep keys `maxRuntime`,
    ///   `maxInactivity`, `deadline`, each a duration or `{timeout,
    ///   errorOnTimeout}`. A native and a Steep name for the same scope must
    ///   agree.
    /// - `http_timeout_ms`: the step's parsed `http.timeout` (0 = not given).
    /// - `sw_attempt_ms`: [`crate::retry::RetryPolicy::attempt_timeout_ms`]
    ///   (Serverless Workflow `retry.limit.attempt.duration`).
    ///
    /// Errors name the field (`timeouts.total`,
    /// `timeouts.maxRuntime.timeout`, `timeouts.<unknown key>`) and echo the
    /// offending text; attempt sources that disagree name every source with
    /// its value.
    pub fn from_step(
        timeouts: Option<&Value>,
        http_timeout_ms: u64,
        sw_attempt_ms: Option<u64>,
    ) -> Result<TimeoutPolicy, ValidationError> {
        let empty = Map::new();
        let map = match timeouts {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(map)) => map,
            Some(other) => {
                return Err(ValidationError::new(
                    "timeouts",
                    format!(
                        "must be an object such as {{\"attempt\": \"30s\", \"total\": \"5m\"}}, got {} ({})",
                        json_kind(other),
                        echo(other)
                    ),
                ))
            }
        };
        if let Some(key) = map
            .keys()
            .find(|k| !NATIVE_KEYS.contains(&k.as_str()) && !STEEP_KEYS.contains(&k.as_str()))
        {
            return Err(ValidationError::new(
                format!("timeouts.{key}"),
                format!(
                    "unknown key {key:?} (allowed: {}, or Steep's {})",
                    NATIVE_KEYS.join(", "),
                    STEEP_KEYS.join(", ")
                ),
            ));
        }
        let get = |key: &str| map.get(key).filter(|v| !v.is_null());

        // Every explicit on_timeout, with where it came from.
        let mut on_timeout_sources: Vec<(String, OnTimeout)> = Vec::new();
        if let Some(v) = get("on_timeout") {
            on_timeout_sources.push((
                "timeouts.on_timeout".to_owned(),
                on_timeout_value("timeouts.on_timeout", v)?,
            ));
        }

        let mut attempt = Vec::new();
        let mut inactivity = Vec::new();
        let mut total = Vec::new();
        if http_timeout_ms > 0 {
            attempt.push(Source {
                field: HTTP_TIMEOUT_FIELD.to_owned(),
                ms: http_timeout_ms,
            });
        }
        for (key, scope) in [
            ("attempt", &mut attempt),
            ("inactivity", &mut inactivity),
            ("total", &mut total),
        ] {
            if let Some(v) = get(key) {
                let field = format!("timeouts.{key}");
                let ms = native_duration(&field, v)?;
                scope.push(Source { field, ms });
            }
        }
        for (key, scope) in [
            ("maxRuntime", &mut attempt),
            ("maxInactivity", &mut inactivity),
            ("deadline", &mut total),
        ] {
            if let Some(v) = get(key) {
                let field = format!("timeouts.{key}");
                let (ms, on_timeout) = steep_timeout(&field, v)?;
                if let Some(on_timeout) = on_timeout {
                    on_timeout_sources.push((format!("{field}.errorOnTimeout"), on_timeout));
                }
                scope.push(Source { field, ms });
            }
        }
        if let Some(ms) = sw_attempt_ms {
            attempt.push(Source {
                field: SW_ATTEMPT_FIELD.to_owned(),
                ms,
            });
        }

        Ok(TimeoutPolicy {
            attempt_ms: agreed("per-attempt timeout", &attempt)?,
            inactivity_ms: agreed("inactivity timeout", &inactivity)?,
            total_ms: agreed("total timeout", &total)?,
            on_timeout: agreed_on_timeout(&on_timeout_sources)?,
        })
    }

    /// The attempt timeout to use: `attempt_ms`, else `default_ms` (the
    /// engine's `TARTAN_STEP_TIMEOUT`).
    pub fn attempt_or(&self, default_ms: u64) -> u64 {
        self.attempt_ms.unwrap_or(default_ms)
    }

    /// The step's limit for `scope`, if any (`Flow` is never a step's).
    pub fn limit(&self, scope: TimeoutScope) -> Option<u64> {
        match scope {
            TimeoutScope::Inactivity => self.inactivity_ms,
            TimeoutScope::Attempt => self.attempt_ms,
            TimeoutScope::Total => self.total_ms,
            TimeoutScope::Flow => None,
        }
    }
}

/// The `detail` of a timeout problem, also the `error` string: e.g.
/// `"step total timeout of 5000 ms exceeded"`.
pub fn timeout_detail(scope: TimeoutScope, limit_ms: u64) -> String {
    format!("{} of {limit_ms} ms exceeded", scope.description())
}

/// The timeout problem (docs/timeouts.md): `type`, `title`, `status` 408,
/// `detail` naming the scope and the limit, `instance` (a JSON Pointer from
/// [`FLOW_POINTER`], [`pointer_for_step`] or [`pointer_for_work`]), plus the
/// extensions `timeout_scope` and `elapsed_ms`.
pub fn timeout_problem(scope: TimeoutScope, limit_ms: u64, elapsed_ms: u64, instance: &str) -> Value {
    json!({
        "type": TIMEOUT_PROBLEM_TYPE,
        "title": TIMEOUT_PROBLEM_TITLE,
        "status": TIMEOUT_PROBLEM_STATUS,
        "detail": timeout_detail(scope, limit_ms),
        "instance": instance,
        "timeout_scope": scope.as_str(),
        "elapsed_ms": elapsed_ms,
    })
}

/// One JSON Pointer reference token (RFC 6901 §3): `~` becomes `~0`, then `/`
/// becomes `~1`.
pub fn escape_pointer_segment(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// `/executions/<step>`: the instance of a step's timeout.
pub fn pointer_for_step(step_id: &str) -> String {
    format!("/executions/{}", escape_pointer_segment(step_id))
}

/// `/executions/<step>/work_items/<token>`: the instance of a work item's
/// attempt, inactivity or total timeout.
pub fn pointer_for_work(step_id: &str, token: &str) -> String {
    format!(
        "{}/work_items/{}",
        pointer_for_step(step_id),
        escape_pointer_segment(token)
    )
}

/// The flow start `timeout`: a duration, or `{"after": duration,
/// "on_timeout": "error"|"cancel"}` (`on_timeout` defaults to `error`).
/// Returns `(after_ms, on_timeout)`. Callers treat an absent or `null`
/// `timeout` as "no flow timeout" and do not call this; `null` here is an
/// error. Errors name `timeout`, `timeout.after` or `timeout.on_timeout`.
pub fn parse_flow_timeout(value: &Value) -> Result<(u64, OnTimeout), ValidationError> {
    match value {
        Value::Object(map) if is_wrapper(map, &FLOW_OBJECT_KEYS) => {
            if let Some(key) = map.keys().find(|k| !FLOW_OBJECT_KEYS.contains(&k.as_str())) {
                return Err(ValidationError::new(
                    format!("timeout.{key}"),
                    format!("unknown key {key:?} (allowed: after, on_timeout; or give a duration)"),
                ));
            }
            let after = match map.get("after").filter(|v| !v.is_null()) {
                Some(v) => duration_ms("timeout.after", v)?,
                None => {
                    return Err(ValidationError::new(
                        "timeout.after",
                        "missing: give the duration after which the flow times out, e.g. \
                         {\"after\": \"10m\"}",
                    ))
                }
            };
            let on_timeout = map
                .get("on_timeout")
                .filter(|v| !v.is_null())
                .map(|v| on_timeout_value("timeout.on_timeout", v))
                .transpose()?
                .unwrap_or_default();
            Ok((after, on_timeout))
        }
        Value::Null | Value::Bool(_) | Value::Array(_) => Err(ValidationError::new(
            "timeout",
            format!(
                "must be a duration or {{\"after\": duration, \"on_timeout\": \"error\"|\"cancel\"}}, \
                 got {} ({})",
                json_kind(value),
                echo(value)
            ),
        )),
        _ => Ok((duration_ms("timeout", value)?, OnTimeout::Error)),
    }
}

// ---------------------------------------------------------------------------
// helpers

/// Whether an object is a wrapper (`{timeout, errorOnTimeout}`,
/// `{after, on_timeout}`) rather than a Serverless Workflow duration object:
/// it has a wrapper key, or a key no duration object has (so a typo is
/// reported against the wrapper's keys).
fn is_wrapper(map: &Map<String, Value>, wrapper_keys: &[&str]) -> bool {
    map.keys()
        .any(|k| wrapper_keys.contains(&k.as_str()) || !DURATION_OBJECT_KEYS.contains(&k.as_str()))
}

/// A timeout duration (zero rejected) in whole milliseconds.
fn duration_ms(field: &str, v: &Value) -> Result<u64, ValidationError> {
    parse_duration(v, DurationKind::Timeout)
        .map(as_millis_u64)
        .map_err(|e| ValidationError::new(field, e.to_string()))
}

/// A native `timeouts.<scope>` value: a duration only.
fn native_duration(field: &str, v: &Value) -> Result<u64, ValidationError> {
    if let Value::Object(map) = v {
        if map.keys().any(|k| STEEP_OBJECT_KEYS.contains(&k.as_str())) {
            return Err(ValidationError::new(
                field,
                format!(
                    "{} is Steep's {{timeout, errorOnTimeout}} form, accepted under maxRuntime, \
                     maxInactivity and deadline; {field} takes a duration, and timeouts.on_timeout \
                     says what a timeout does",
                    echo(v)
                ),
            ));
        }
    }
    duration_ms(field, v)
}

/// A Steep timeout: a duration, or `{timeout, errorOnTimeout}`. Returns the
/// milliseconds and the `on_timeout` when `errorOnTimeout` is given.
fn steep_timeout(field: &str, v: &Value) -> Result<(u64, Option<OnTimeout>), ValidationError> {
    let Value::Object(map) = v else {
        return Ok((duration_ms(field, v)?, None));
    };
    if !is_wrapper(map, &STEEP_OBJECT_KEYS) {
        return Ok((duration_ms(field, v)?, None));
    }
    if let Some(key) = map.keys().find(|k| !STEEP_OBJECT_KEYS.contains(&k.as_str())) {
        return Err(ValidationError::new(
            format!("{field}.{key}"),
            format!("unknown key {key:?} (allowed: timeout, errorOnTimeout; or give a duration)"),
        ));
    }
    let timeout_field = format!("{field}.timeout");
    let ms = match map.get("timeout").filter(|v| !v.is_null()) {
        Some(t) => duration_ms(&timeout_field, t)?,
        None => {
            return Err(ValidationError::new(
                timeout_field,
                "missing: give the duration, e.g. {\"timeout\": \"5m\", \"errorOnTimeout\": true}",
            ))
        }
    };
    let on_timeout = match map.get("errorOnTimeout") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(OnTimeout::from_error_on_timeout(*b)),
        Some(other) => {
            return Err(ValidationError::new(
                format!("{field}.errorOnTimeout"),
                format!(
                    "must be a boolean (true: fail, false: cancel), got {} ({})",
                    json_kind(other),
                    echo(other)
                ),
            ))
        }
    };
    Ok((ms, on_timeout))
}

/// An `on_timeout` value: `"error"` or `"cancel"`.
fn on_timeout_value(field: &str, v: &Value) -> Result<OnTimeout, ValidationError> {
    match v {
        Value::String(s) => s.parse().map_err(|e: String| ValidationError::new(field, e)),
        other => Err(ValidationError::new(
            field,
            format!(
                "must be \"error\" or \"cancel\", got {} ({})",
                json_kind(other),
                echo(other)
            ),
        )),
    }
}

/// The one value of a scope given by several sources, or a 400 naming the
/// first source that disagrees and listing all of them.
fn agreed(what: &str, sources: &[Source]) -> Result<Option<u64>, ValidationError> {
    let Some(first) = sources.first() else {
        return Ok(None);
    };
    if let Some(bad) = sources.iter().find(|s| s.ms != first.ms) {
        let list: Vec<String> = sources
            .iter()
            .map(|s| format!("{} = {} ms", s.field, s.ms))
            .collect();
        return Err(ValidationError::new(
            bad.field.clone(),
            format!(
                "the {what} is given more than once with different values ({}): give it once or make \
                 them equal",
                list.join(", ")
            ),
        ));
    }
    Ok(Some(first.ms))
}

/// The step's `on_timeout`: every explicit value must agree; `error` when
/// none is given.
fn agreed_on_timeout(sources: &[(String, OnTimeout)]) -> Result<OnTimeout, ValidationError> {
    let Some((_, first)) = sources.first() else {
        return Ok(OnTimeout::Error);
    };
    if let Some((field, _)) = sources.iter().find(|(_, o)| o != first) {
        let list: Vec<String> = sources
            .iter()
            .map(|(f, o)| {
                if f.ends_with(".errorOnTimeout") {
                    format!("{f} = {} ({o})", *o == OnTimeout::Error)
                } else {
                    format!("{f} = {o}")
                }
            })
            .collect();
        return Err(ValidationError::new(
            field.clone(),
            format!(
                "on_timeout is one value per step, but the timeouts disagree ({}): make them agree",
                list.join(", ")
            ),
        ));
    }
    Ok(*first)
}

/// The offending value as JSON text, shortened when very long.
fn echo(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() <= MAX_ECHO_CHARS {
        text
    } else {
        let mut short: String = text.chars().take(MAX_ECHO_CHARS).collect();
        short.push('…');
        short
    }
}
