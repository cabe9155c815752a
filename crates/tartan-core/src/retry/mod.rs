//! The retry policy of a step (docs/retries.md): every retry dialect
//! normalised into one [`RetryPolicy`], and the exact delay math.
//!
//! Inputs:
//! - Argyll's `work_config` fields (`max_retries`, `init_backoff`,
//!   `max_backoff`, `backoff_type`) with Tartan's additions (`max_attempts`,
//!   `backoff_coefficient`, `jitter`, `retry_on`, `honor_retry_after`,
//!   `max_retry_duration`). Zero or absent values take the global defaults, as
//!   in Argyll; validation runs after the defaults are filled.
//! - Or a `retry` object in one of three dialects, recognised by its keys:
//!   Steep (`maxAttempts`, `delay`, `exponentialBackoff`, `maxDelay`),
//!   OpenWorkflow / Temporal (`initialInterval`, `backoffCoefficient`,
//!   `maximumInterval`, `maximumAttempts`) and Serverless Workflow (`delay`,
//!   `backoff`, `limit`, `jitter`). Each dialect keeps its own defaults.
//!
//! Delay before retry `r + 1` (`r` = retries already scheduled, from 0):
//! the base (fixed `init`, linear `init × (r+1)`, exponential
//! `init × coefficient^r`), then the cap `min(·, max_backoff)`, then jitter
//! (full `u·d`, equal `d/2 + u·d/2`), then Serverless Workflow's extra jitter
//! `from + u·(to−from)`, then the `Retry-After` floor `max(d, retry_after)`,
//! which `max_backoff` does not cap. All arithmetic saturates.
//!
//! A policy with no cap (Steep without `maxDelay`, Serverless Workflow) has
//! `max_backoff_ms == NO_CAP`; `effective_retry` shows it as `null`.
//!
//! # Layout
//! - this file: the policy's types, the defaults and `RetryPolicy::from_step`,
//!   which reads `work_config` or a dialect.
//! - `fields`: reading one field, with errors that name it.
//! - `work_config`: Argyll's fields and Tartan's additions.
//! - `dialects`: Steep, OpenWorkflow / Temporal, Serverless Workflow.
//! - `delay`: the delay math and `Retry-After`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::error::ValidationError;
use crate::json::json_kind;

/// `max_backoff_ms` of a policy whose delays are not capped.
pub const NO_CAP: u64 = u64::MAX;

/// The exponential factor when none is given (Tartan, OpenWorkflow/Temporal,
/// Serverless Workflow).
pub const DEFAULT_COEFFICIENT: f64 = 2.0;

/// The statuses retried when `retry_on` is not given: any 5xx, 408, 425, 429.
pub const DEFAULT_RETRY_ON: [RetryOn; 4] = [
    RetryOn::Class(5),
    RetryOn::Status(408),
    RetryOn::Status(425),
    RetryOn::Status(429),
];

/// The retry fields of `work_config`; only `parallelism` may stand beside a
/// `retry` dialect object.
pub const WORK_CONFIG_RETRY_FIELDS: [&str; 10] = [
    "max_retries",
    "max_attempts",
    "init_backoff",
    "max_backoff",
    "backoff_type",
    "backoff_coefficient",
    "jitter",
    "retry_on",
    "honor_retry_after",
    "max_retry_duration",
];

/// How the base delay grows with the retry index (exponential unless a
/// step or the engine's defaults say otherwise).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
// `as_str` (and `parse`, where there is one) uses serde's names, by the
// same rule; tests/names.rs holds the two equal.
#[derive(strum::IntoStaticStr, strum::EnumIter)]
#[strum(serialize_all = "lowercase")]
pub enum BackoffType {
    /// `init` every time.
    Fixed,
    /// `init × (r + 1)`.
    Linear,
    /// `init × coefficient^r`.
    #[default]
    Exponential,
}

impl BackoffType {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl fmt::Display for BackoffType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BackoffType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fixed" => Ok(BackoffType::Fixed),
            "linear" => Ok(BackoffType::Linear),
            "exponential" => Ok(BackoffType::Exponential),
            other => Err(format!(
                "unknown backoff_type {other:?}: must be fixed, linear or exponential"
            )),
        }
    }
}

/// Randomisation of the capped delay `d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
// `as_str` (and `parse`, where there is one) uses serde's names, by the
// same rule; tests/names.rs holds the two equal.
#[derive(strum::IntoStaticStr, strum::EnumIter)]
#[strum(serialize_all = "lowercase")]
pub enum Jitter {
    /// `d`.
    None,
    /// Uniform in `[0, d]`.
    Full,
    /// `d/2` plus uniform in `[0, d/2]`.
    Equal,
}

impl Jitter {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl fmt::Display for Jitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Jitter {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Jitter::None),
            "full" => Ok(Jitter::Full),
            "equal" => Ok(Jitter::Equal),
            other => Err(format!("unknown jitter {other:?}: must be none, full or equal")),
        }
    }
}

/// One entry of `retry_on`: an exact status (`503`) or a class (`"5xx"` is
/// `Class(5)`). On the wire a number or a `"Nxx"` string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetryOn {
    Status(u16),
    Class(u16),
}

impl RetryOn {
    /// Whether HTTP status `s` matches this entry.
    pub fn matches(self, s: u16) -> bool {
        match self {
            RetryOn::Status(n) => n == s,
            RetryOn::Class(c) => s / 100 == c,
        }
    }

    /// Parse one JSON entry: a status number 100-599 (not 2xx) or a class
    /// string `"1xx"`, `"3xx"`, `"4xx"`, `"5xx"`. The error says what is wrong.
    pub fn from_json(value: &Value) -> Result<RetryOn, String> {
        match value {
            Value::Number(n) => {
                let status = n
                    .as_u64()
                    .and_then(|s| u16::try_from(s).ok())
                    .filter(|s| (100..600).contains(s))
                    .ok_or_else(|| format!("{n} is not an HTTP status (an integer from 100 to 599)"))?;
                if (200..300).contains(&status) {
                    return Err(format!("{status} is a success and is never retried"));
                }
                Ok(RetryOn::Status(status))
            }
            Value::String(text) => text.parse(),
            other => Err(format!(
                "{other} is neither an HTTP status number nor a class such as \"5xx\""
            )),
        }
    }
}

impl FromStr for RetryOn {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let bytes = text.as_bytes();
        match bytes {
            [d @ b'1'..=b'5', b'x', b'x'] if *d != b'2' => Ok(RetryOn::Class(u16::from(*d - b'0'))),
            [b'2', b'x', b'x'] => Err("\"2xx\" are successes and are never retried".to_owned()),
            _ if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => Err(format!(
                "{text:?} is a string: write HTTP statuses as numbers ({text})"
            )),
            _ => Err(format!(
                "{text:?} is not a status class: classes are \"1xx\", \"3xx\", \"4xx\" or \"5xx\" \
                 (lowercase x)"
            )),
        }
    }
}

impl fmt::Display for RetryOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryOn::Status(s) => write!(f, "{s}"),
            RetryOn::Class(c) => write!(f, "{c}xx"),
        }
    }
}

impl Serialize for RetryOn {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            RetryOn::Status(s) => serializer.serialize_u16(*s),
            RetryOn::Class(_) => serializer.serialize_str(&self.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for RetryOn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        RetryOn::from_json(&value).map_err(serde::de::Error::custom)
    }
}

/// The global defaults filled into zero or absent `work_config` fields
/// (`TARTAN_RETRY_*`): 10 retries, 1000 ms, 60000 ms, exponential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryDefaults {
    /// Retries after the first attempt; `-1` unlimited.
    pub max_retries: i64,
    pub init_backoff_ms: u64,
    pub max_backoff_ms: u64,
    pub backoff_type: BackoffType,
}

impl Default for RetryDefaults {
    fn default() -> Self {
        Self {
            max_retries: 10,
            init_backoff_ms: 1_000,
            max_backoff_ms: 60_000,
            backoff_type: BackoffType::default(),
        }
    }
}

impl RetryDefaults {
    /// The policy of a step that gives no retry fields.
    pub fn policy(&self) -> Result<RetryPolicy, ValidationError> {
        from_work_config(None, self)
    }
}

/// Why a failed work item was not retried (docs/retries.md, "Why it
/// stopped"); the wire strings are the snake_case names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
// `as_str` (and `parse`, where there is one) uses serde's names, by the
// same rule; tests/names.rs holds the two equal.
#[derive(strum::IntoStaticStr, strum::EnumIter)]
#[strum(serialize_all = "snake_case")]
pub enum RetryState {
    /// The failure was permanent.
    Permanent,
    /// The step's attempts were used up.
    MaxAttempts,
    /// The next attempt would start after a budget or deadline.
    Deadline,
    /// The flow's `max_step_attempts` was reached.
    StepLimit,
    /// The flow had already failed or been cancelled when the attempt
    /// failed: nothing of it is retried.
    FlowEnded,
}

impl RetryState {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The normalised policy: every value explicit. Serialize gives the
/// read-only `effective_retry` JSON; Deserialize reads it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "EffectiveRetry", try_from = "EffectiveRetry")]
pub struct RetryPolicy {
    /// Total attempts including the first. `None` = unlimited (bounded only by
    /// the flow's attempt cap); `Some(0)` = the step is skipped (Steep
    /// `maxAttempts: 0`).
    pub max_attempts: Option<u32>,
    pub init_backoff_ms: u64,
    /// Cap on the computed delay; [`NO_CAP`] when there is none.
    pub max_backoff_ms: u64,
    pub backoff_type: BackoffType,
    /// Exponential factor, ≥ 1 (unused by fixed and linear).
    pub backoff_coefficient: f64,
    pub jitter: Jitter,
    /// Serverless Workflow `jitter {from, to}`: adds `from + u·(to−from)` ms.
    pub extra_jitter_ms: Option<(u64, u64)>,
    pub retry_on: Vec<RetryOn>,
    pub honor_retry_after: bool,
    /// Budget: no attempt starts this long or later after the first started.
    pub max_retry_duration_ms: Option<u64>,
    /// Serverless Workflow `limit.attempt.duration` (per-attempt timeout).
    pub attempt_timeout_ms: Option<u64>,
}

/// The delay before retry `r + 1` and how it was made, for explainability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DelayParts {
    /// The backoff formula's value, before the cap.
    pub computed_ms: u64,
    /// `min(computed_ms, max_backoff)`.
    pub capped_ms: u64,
    /// Whether the cap lowered the value.
    pub cap_applied: bool,
    /// The change made by jitter: ≤ 0 for full/equal, ≥ 0 for Serverless
    /// Workflow's extra jitter.
    pub jitter_ms: i64,
    /// The response's `Retry-After`, as given.
    pub retry_after_ms: Option<u64>,
    /// Whether `Retry-After` raised the delay.
    pub retry_after_applied: bool,
    /// The wait to schedule.
    pub delay_ms: u64,
}

/// The `effective_retry` JSON shape.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct EffectiveRetry {
    max_attempts: i64,
    #[serde(default)]
    max_retries: i64,
    init_backoff: u64,
    /// `null` = no cap.
    #[serde(default)]
    max_backoff: Option<u64>,
    backoff_type: BackoffType,
    backoff_coefficient: f64,
    jitter: Jitter,
    retry_on: Vec<RetryOn>,
    honor_retry_after: bool,
    #[serde(default)]
    max_retry_duration: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    jitter_range: Option<JitterRange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    attempt_timeout: Option<u64>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct JitterRange {
    from: u64,
    to: u64,
}

impl From<RetryPolicy> for EffectiveRetry {
    fn from(p: RetryPolicy) -> Self {
        let (max_attempts, max_retries) = match p.max_attempts {
            None => (-1, -1),
            Some(n) => (i64::from(n), i64::from(n.saturating_sub(1))),
        };
        EffectiveRetry {
            max_attempts,
            max_retries,
            init_backoff: p.init_backoff_ms,
            max_backoff: (p.max_backoff_ms != NO_CAP).then_some(p.max_backoff_ms),
            backoff_type: p.backoff_type,
            backoff_coefficient: p.backoff_coefficient,
            jitter: p.jitter,
            retry_on: p.retry_on,
            honor_retry_after: p.honor_retry_after,
            max_retry_duration: p.max_retry_duration_ms,
            jitter_range: p.extra_jitter_ms.map(|(from, to)| JitterRange { from, to }),
            attempt_timeout: p.attempt_timeout_ms,
        }
    }
}

impl TryFrom<EffectiveRetry> for RetryPolicy {
    type Error = String;
    fn try_from(e: EffectiveRetry) -> Result<Self, String> {
        let max_attempts = match e.max_attempts {
            -1 => None,
            n => Some(u32::try_from(n).map_err(|_| format!("max_attempts {n} out of range"))?),
        };
        Ok(RetryPolicy {
            max_attempts,
            init_backoff_ms: e.init_backoff,
            max_backoff_ms: e.max_backoff.unwrap_or(NO_CAP),
            backoff_type: e.backoff_type,
            backoff_coefficient: e.backoff_coefficient,
            jitter: e.jitter,
            extra_jitter_ms: e.jitter_range.map(|r| (r.from, r.to)),
            retry_on: e.retry_on,
            honor_retry_after: e.honor_retry_after,
            max_retry_duration_ms: e.max_retry_duration,
            attempt_timeout_ms: e.attempt_timeout,
        })
    }
}

impl RetryPolicy {
    /// The normalised policy of a step from its raw `work_config` object
    /// (Argyll fields plus Tartan's; `parallelism` and unknown keys are ignored
    /// here) and its optional `retry` dialect object (docs/retries.md).
    ///
    /// `null` stands for absent. Errors name the JSON path of the offending
    /// field (`work_config.max_backoff`, `retry.maxAttempts`, `retry`).
    pub fn from_step(
        work_config: Option<&Value>,
        retry: Option<&Value>,
        defaults: &RetryDefaults,
    ) -> Result<RetryPolicy, ValidationError> {
        let work_config = match work_config {
            None | Some(Value::Null) => None,
            Some(Value::Object(map)) => Some(map),
            Some(other) => {
                return Err(ValidationError::new(
                    "work_config",
                    format!("must be an object, got {}", json_kind(other)),
                ))
            }
        };
        let retry = match retry {
            None | Some(Value::Null) => None,
            Some(Value::Object(map)) => Some(map),
            Some(other) => {
                return Err(ValidationError::new(
                    "retry",
                    format!("must be a retry policy object, got {}", json_kind(other)),
                ))
            }
        };
        match retry {
            None => from_work_config(work_config, defaults),
            Some(retry) => {
                if let Some(wc) = work_config {
                    let beside: Vec<&str> = WORK_CONFIG_RETRY_FIELDS
                        .iter()
                        .copied()
                        .filter(|k| wc.get(*k).is_some_and(is_set))
                        .collect();
                    if !beside.is_empty() {
                        return Err(ValidationError::new(
                            "retry",
                            format!(
                                "a retry policy object cannot stand beside retry fields in work_config \
                                 ({}); give the policy in one place (only work_config.parallelism may \
                                 stand beside retry)",
                                beside.join(", ")
                            ),
                        ));
                    }
                }
                from_dialect(retry)
            }
        }
    }

    /// Whether HTTP status `s` is retryable under `retry_on`.
    pub fn retries_status(&self, s: u16) -> bool {
        self.retry_on.iter().any(|r| r.matches(s))
    }

    /// May attempt number `n` (1-based) start, by count alone?
    pub fn allows_attempt(&self, n: u32) -> bool {
        self.max_attempts.is_none_or(|max| n <= max)
    }

    /// Whether the step is skipped without any attempt (`max_attempts` 0).
    pub fn is_skipped(&self) -> bool {
        self.max_attempts == Some(0)
    }

    /// Retries after the first attempt; `None` = unlimited.
    pub fn max_retries(&self) -> Option<u32> {
        self.max_attempts.map(|n| n.saturating_sub(1))
    }
}

mod delay;
mod dialects;
mod fields;
mod words;
mod work_config;

pub use delay::{delay, parse_retry_after};
use dialects::from_dialect;
use work_config::from_work_config;
pub(crate) use work_config::is_set;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};
    use serde_json::json;

    fn policy(wc: Value) -> RetryPolicy {
        match RetryPolicy::from_step(Some(&wc), None, &RetryDefaults::default()) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn defaults_give_the_worked_example() {
        let p = policy(json!({}));
        let waits: Vec<u64> = (0..10)
            .map(|r| delay(&p, r, None, &mut || 0.5).delay_ms)
            .collect();
        assert_eq!(
            waits,
            [1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000, 60000]
        );
        assert_eq!(p.max_attempts, Some(11));
    }

    #[test]
    fn fractional_coefficient_rounds_to_whole_ms() {
        let p = policy(json!({"backoff_coefficient": 1.5, "init_backoff": 1000}));
        let waits: Vec<u64> = (0..4).map(|r| delay(&p, r, None, &mut || 0.0).delay_ms).collect();
        assert_eq!(waits, [1000, 1500, 2250, 3375]);
    }

    #[test]
    fn extreme_indices_saturate() {
        let p = RetryPolicy {
            max_backoff_ms: NO_CAP,
            ..policy(json!({}))
        };
        assert_eq!(delay(&p, u32::MAX, None, &mut || 0.5).delay_ms, u64::MAX);
        let p = RetryPolicy {
            backoff_coefficient: 1.5,
            ..p
        };
        assert_eq!(delay(&p, u32::MAX, None, &mut || 0.5).delay_ms, u64::MAX);
    }

    #[test]
    fn retry_after_edge_values_never_panic() {
        let now = DateTime::parse_from_rfc3339("2025-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        // Huge delay-seconds saturate instead of overflowing.
        assert_eq!(parse_retry_after("99999999999", now), Some(99_999_999_999_000));
        assert_eq!(parse_retry_after("99999999999999999999999", now), Some(u64::MAX));
        assert_eq!(parse_retry_after(" 120 ", now), Some(120_000));
        assert_eq!(parse_retry_after("0", now), Some(0));
        // The last representable date is far, not an overflow.
        let far = parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", now).unwrap();
        assert!(far > 200_000_000_000_000, "{far}");
        // Past dates, garbage and negative or fractional numbers are ignored.
        for ignored in [
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "garbage",
            "",
            "   ",
            "-5",
            "1.5",
            "Fri, 31 Dec 99999 23:59:59 GMT",
            "Fri, 32 Dec 9999 23:59:59 GMT",
            "\u{0}\u{ffff}",
        ] {
            assert_eq!(parse_retry_after(ignored, now), None, "{ignored:?}");
        }
    }
}
