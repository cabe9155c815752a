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

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, NaiveDateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::duration::{as_millis_u64, parse_duration, DurationKind};
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

const STEEP_KEYS: [&str; 4] = ["maxAttempts", "delay", "exponentialBackoff", "maxDelay"];
const TEMPORAL_KEYS: [&str; 5] = [
    "initialInterval",
    "backoffCoefficient",
    "maximumInterval",
    "maximumAttempts",
    "nonRetryableErrorTypes",
];
const SW_KEYS: [&str; 6] = ["delay", "backoff", "limit", "jitter", "when", "exceptWhen"];

/// OpenWorkflow / Temporal defaults.
const TEMPORAL_INITIAL_MS: u64 = 1_000;
const TEMPORAL_MAXIMUM_MS: u64 = 100_000;
const TEMPORAL_MAX_ATTEMPTS: u32 = 10;

/// How the base delay grows with the retry index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackoffType {
    /// `init` every time.
    Fixed,
    /// `init × (r + 1)`.
    Linear,
    /// `init × coefficient^r`.
    Exponential,
}

impl BackoffType {
    pub fn as_str(self) -> &'static str {
        match self {
            BackoffType::Fixed => "fixed",
            BackoffType::Linear => "linear",
            BackoffType::Exponential => "exponential",
        }
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
        match self {
            Jitter::None => "none",
            Jitter::Full => "full",
            Jitter::Equal => "equal",
        }
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
            backoff_type: BackoffType::Exponential,
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
#[serde(rename_all = "snake_case")]
pub enum RetryState {
    /// The failure was permanent.
    Permanent,
    /// The step's attempts were used up.
    MaxAttempts,
    /// The next attempt would start after a budget or deadline.
    Deadline,
    /// The flow's `max_step_attempts` was reached.
    StepLimit,
}

impl RetryState {
    pub fn as_str(self) -> &'static str {
        match self {
            RetryState::Permanent => "permanent",
            RetryState::MaxAttempts => "max_attempts",
            RetryState::Deadline => "deadline",
            RetryState::StepLimit => "step_limit",
        }
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

/// The delay before retry `r + 1` (`r` = retries already scheduled, from 0).
///
/// `unit_random` returns a value in `[0, 1)`; it is called once for full or
/// equal jitter and once for Serverless Workflow's extra jitter, never
/// otherwise. Out-of-range or NaN values are clamped into `[0, 1]`. All
/// arithmetic saturates: no overflow, panic or negative delay for any `r`.
pub fn delay(
    policy: &RetryPolicy,
    r: u32,
    retry_after_ms: Option<u64>,
    unit_random: &mut dyn FnMut() -> f64,
) -> DelayParts {
    let init = policy.init_backoff_ms;
    let computed = match policy.backoff_type {
        BackoffType::Fixed => init,
        BackoffType::Linear => init.saturating_mul(u64::from(r).saturating_add(1)),
        BackoffType::Exponential => exponential(init, policy.backoff_coefficient, r),
    };
    let capped = computed.min(policy.max_backoff_ms);
    let jittered = match policy.jitter {
        Jitter::None => capped,
        Jitter::Full => scale(capped, unit(unit_random())),
        Jitter::Equal => {
            let half = capped / 2;
            half.saturating_add(scale(capped - half, unit(unit_random())))
        }
    };
    let jittered = match policy.extra_jitter_ms {
        None => jittered,
        Some((from, to)) => {
            let span = to.saturating_sub(from);
            jittered.saturating_add(from.saturating_add(scale(span, unit(unit_random()))))
        }
    };
    let jitter_ms = i64::try_from(i128::from(jittered) - i128::from(capped))
        .unwrap_or(if jittered >= capped { i64::MAX } else { i64::MIN });
    let floor = retry_after_ms.filter(|_| policy.honor_retry_after);
    let retry_after_applied = floor.is_some_and(|ra| ra > jittered);
    let delay_ms = match floor {
        Some(ra) => jittered.max(ra),
        None => jittered,
    };
    DelayParts {
        computed_ms: computed,
        capped_ms: capped,
        cap_applied: computed > capped,
        jitter_ms,
        retry_after_ms,
        retry_after_applied,
        delay_ms,
    }
}

/// `init × coefficient^r`, saturating, rounded to whole milliseconds.
/// Whole coefficients use exact integer arithmetic.
fn exponential(init: u64, coefficient: f64, r: u32) -> u64 {
    if init == 0 || r == 0 {
        return init;
    }
    // Whole coefficients up to 2^53 (every realistic one): exact integers.
    if coefficient.fract() == 0.0 && (0.0..=9_007_199_254_740_992.0).contains(&coefficient) {
        let factor = coefficient as u64;
        return init.saturating_mul(factor.saturating_pow(r));
    }
    let exponent = i32::try_from(r).unwrap_or(i32::MAX);
    let value = (init as f64) * coefficient.powi(exponent);
    f64_to_ms(value)
}

/// A non-negative float to whole milliseconds, rounded, saturating; NaN is 0.
fn f64_to_ms(value: f64) -> u64 {
    if value.is_nan() || value <= 0.0 {
        0
    } else if value >= 18_446_744_073_709_551_615.0 {
        u64::MAX
    } else {
        value.round() as u64
    }
}

/// `floor(d × u)` for `u` in `[0, 1]`, never above `d`.
fn scale(d: u64, u: f64) -> u64 {
    let value = (d as f64) * u;
    let floored = if value.is_nan() || value <= 0.0 {
        0
    } else if value >= 18_446_744_073_709_551_615.0 {
        u64::MAX
    } else {
        value.floor() as u64
    };
    floored.min(d)
}

/// Clamp a random draw into `[0, 1]` (NaN becomes 0).
fn unit(u: f64) -> f64 {
    if u.is_nan() || u < 0.0 {
        0.0
    } else if u > 1.0 {
        1.0
    } else {
        u
    }
}

/// A `Retry-After` header value in milliseconds: delay-seconds (digits only)
/// or an HTTP-date (IMF-fixdate, also the obsolete RFC 850 and asctime forms)
/// relative to `now`. A date not after `now`, or anything else, is `None`.
/// Huge delay-seconds saturate.
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<u64> {
    let text = value.trim();
    if text.is_empty() {
        return None;
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        let seconds = text.parse::<u64>().unwrap_or(u64::MAX);
        return Some(seconds.saturating_mul(1_000));
    }
    const FORMATS: [&str; 3] = [
        "%a, %d %b %Y %H:%M:%S GMT", // IMF-fixdate
        "%A, %d-%b-%y %H:%M:%S GMT", // RFC 850
        "%a %b %e %H:%M:%S %Y",      // asctime
    ];
    let date = FORMATS
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())?
        .and_utc();
    let ms = date.signed_duration_since(now).num_milliseconds();
    u64::try_from(ms).ok().filter(|ms| *ms > 0)
}

// ---------------------------------------------------------------------------
// work_config

/// A `work_config` retry field that counts as given: not null, not 0, not "".
fn is_set(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

fn from_work_config(
    wc: Option<&Map<String, Value>>,
    defaults: &RetryDefaults,
) -> Result<RetryPolicy, ValidationError> {
    let get = |key: &str| wc.and_then(|m| m.get(key)).filter(|v| !v.is_null());
    let field = |key: &str| format!("work_config.{key}");

    let max_retries = get("max_retries")
        .map(|v| integer(&field("max_retries"), v))
        .transpose()?
        .filter(|n| *n != 0);
    let max_attempts = get("max_attempts")
        .map(|v| integer(&field("max_attempts"), v))
        .transpose()?
        .filter(|n| *n != 0);
    for (key, value) in [("max_retries", max_retries), ("max_attempts", max_attempts)] {
        if let Some(n) = value.filter(|n| *n < -1) {
            return Err(ValidationError::new(
                field(key),
                format!("{key} must be -1 (unlimited) or more, got {n}"),
            ));
        }
    }
    let max_attempts = match (max_attempts, max_retries) {
        (Some(a), Some(r)) => {
            let agree = (a == -1 && r == -1) || (r >= 0 && a == r.saturating_add(1));
            if !agree {
                let expected = if r == -1 {
                    "-1".to_owned()
                } else {
                    r.saturating_add(1).to_string()
                };
                return Err(ValidationError::new(
                    field("max_attempts"),
                    format!(
                        "max_attempts ({a}) and max_retries ({r}) disagree: max_attempts counts the first \
                         attempt, so with max_retries {r} it must be {expected}; give only one of them"
                    ),
                ));
            }
            attempts_from_count(&field("max_attempts"), a)?
        }
        (Some(a), None) => attempts_from_count(&field("max_attempts"), a)?,
        (None, Some(r)) => attempts_from_retries(&field("max_retries"), r)?,
        (None, None) => attempts_from_retries(&field("max_retries"), defaults.max_retries).map_err(|e| {
            ValidationError::new(e.field, format!("the global default is invalid: {}", e.message))
        })?,
    };

    let init_given = get("init_backoff")
        .map(|v| duration_ms(&field("init_backoff"), v, DurationKind::Delay))
        .transpose()?
        .filter(|ms| *ms != 0);
    let max_given = get("max_backoff")
        .map(|v| duration_ms(&field("max_backoff"), v, DurationKind::Delay))
        .transpose()?
        .filter(|ms| *ms != 0);
    let init_backoff_ms = init_given.unwrap_or(defaults.init_backoff_ms);
    let max_backoff_ms = max_given.unwrap_or(defaults.max_backoff_ms);

    let backoff_type = match get("backoff_type") {
        None => defaults.backoff_type,
        Some(v) => match string(&field("backoff_type"), v)? {
            "" => defaults.backoff_type,
            s => s
                .parse()
                .map_err(|e: String| ValidationError::new(field("backoff_type"), e))?,
        },
    };
    let backoff_coefficient = match get("backoff_coefficient") {
        None => DEFAULT_COEFFICIENT,
        Some(v) => coefficient(&field("backoff_coefficient"), "backoff_coefficient", v)?
            .unwrap_or(DEFAULT_COEFFICIENT),
    };
    let jitter = match get("jitter") {
        None => Jitter::None,
        Some(Value::Object(_)) => {
            return Err(ValidationError::new(
                field("jitter"),
                "jitter must be \"none\", \"full\" or \"equal\" (a {from, to} range is Serverless \
                 Workflow's retry.jitter)",
            ))
        }
        Some(v) => match string(&field("jitter"), v)? {
            "" => Jitter::None,
            s => s
                .parse()
                .map_err(|e: String| ValidationError::new(field("jitter"), e))?,
        },
    };
    let retry_on = match get("retry_on") {
        None => DEFAULT_RETRY_ON.to_vec(),
        Some(Value::Array(items)) => {
            let mut out: Vec<RetryOn> = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let entry = RetryOn::from_json(item).map_err(|e| {
                    ValidationError::new(field("retry_on"), format!("bad retry_on entry {i}: {e}"))
                })?;
                if !out.contains(&entry) {
                    out.push(entry);
                }
            }
            out
        }
        Some(other) => {
            return Err(ValidationError::new(
                field("retry_on"),
                format!(
                    "retry_on must be a list of HTTP statuses and classes such as [\"5xx\", 429], got {}",
                    json_kind(other)
                ),
            ))
        }
    };
    let honor_retry_after = match get("honor_retry_after") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(ValidationError::new(
                field("honor_retry_after"),
                format!(
                    "honor_retry_after must be true or false, got {}",
                    json_kind(other)
                ),
            ))
        }
    };
    let max_retry_duration_ms = get("max_retry_duration")
        .map(|v| duration_ms(&field("max_retry_duration"), v, DurationKind::Delay))
        .transpose()?
        .filter(|ms| *ms != 0);

    if max_backoff_ms < init_backoff_ms {
        let max_text = match max_given {
            Some(ms) => format!("{ms} ms"),
            None => format!("{ms} ms, the global default", ms = defaults.max_backoff_ms),
        };
        let init_text = match init_given {
            Some(ms) => format!("{ms} ms"),
            None => format!("{ms} ms, the global default", ms = defaults.init_backoff_ms),
        };
        return Err(ValidationError::new(
            field("max_backoff"),
            format!("max_backoff ({max_text}) must be >= init_backoff ({init_text})"),
        ));
    }

    Ok(RetryPolicy {
        max_attempts,
        init_backoff_ms,
        max_backoff_ms,
        backoff_type,
        backoff_coefficient,
        jitter,
        extra_jitter_ms: None,
        retry_on,
        honor_retry_after,
        max_retry_duration_ms,
        attempt_timeout_ms: None,
    })
}

/// `max_retries` (≥ -1) as total attempts; -1 is unlimited.
fn attempts_from_retries(field: &str, retries: i64) -> Result<Option<u32>, ValidationError> {
    match retries {
        -1 => Ok(None),
        n if n < -1 => Err(ValidationError::new(
            field,
            format!("max_retries must be -1 (unlimited) or more, got {n}"),
        )),
        n => u32::try_from(n)
            .ok()
            .and_then(|n| n.checked_add(1))
            .map(Some)
            .ok_or_else(|| {
                ValidationError::new(
                    field,
                    format!(
                        "max_retries {n} is too large (at most {}, or -1 for unlimited)",
                        u32::MAX - 1
                    ),
                )
            }),
    }
}

/// `max_attempts` (≥ -1) as total attempts; -1 is unlimited.
fn attempts_from_count(field: &str, attempts: i64) -> Result<Option<u32>, ValidationError> {
    match attempts {
        -1 => Ok(None),
        n => u32::try_from(n).map(Some).map_err(|_| {
            ValidationError::new(
                field,
                format!(
                    "{n} attempts is out of range (-1 for unlimited, or 1 to {})",
                    u32::MAX
                ),
            )
        }),
    }
}

// ---------------------------------------------------------------------------
// retry dialects

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Steep,
    Temporal,
    ServerlessWorkflow,
}

impl Dialect {
    const ALL: [Dialect; 3] = [Dialect::Steep, Dialect::Temporal, Dialect::ServerlessWorkflow];

    fn keys(self) -> &'static [&'static str] {
        match self {
            Dialect::Steep => &STEEP_KEYS,
            Dialect::Temporal => &TEMPORAL_KEYS,
            Dialect::ServerlessWorkflow => &SW_KEYS,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Dialect::Steep => "Steep",
            Dialect::Temporal => "OpenWorkflow/Temporal",
            Dialect::ServerlessWorkflow => "Serverless Workflow",
        }
    }
}

fn dialect_list() -> String {
    Dialect::ALL
        .iter()
        .map(|d| format!("{}: {}", d.name(), d.keys().join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Which dialect a `retry` object is written in, by its keys.
fn recognise(retry: &Map<String, Value>) -> Result<Dialect, ValidationError> {
    if retry.is_empty() {
        return Err(ValidationError::new(
            "retry",
            format!(
                "empty retry policy object: give the keys of one dialect ({})",
                dialect_list()
            ),
        ));
    }
    let mut candidates: Vec<Dialect> = Dialect::ALL.to_vec();
    for key in retry.keys() {
        let of_key: Vec<Dialect> = Dialect::ALL
            .iter()
            .copied()
            .filter(|d| d.keys().contains(&key.as_str()))
            .collect();
        if of_key.is_empty() {
            return Err(ValidationError::new(
                format!("retry.{key}"),
                format!("unknown retry key {key:?} ({})", dialect_list()),
            ));
        }
        candidates.retain(|d| of_key.contains(d));
        if candidates.is_empty() {
            let names: Vec<String> = retry
                .keys()
                .map(|k| {
                    let owners: Vec<&str> = Dialect::ALL
                        .iter()
                        .filter(|d| d.keys().contains(&k.as_str()))
                        .map(|d| d.name())
                        .collect();
                    format!("{k} ({})", owners.join(" or "))
                })
                .collect();
            return Err(ValidationError::new(
                "retry",
                format!(
                    "the retry policy mixes dialects: {}; use the keys of one dialect only",
                    names.join(", ")
                ),
            ));
        }
    }
    match candidates.as_slice() {
        [one] => Ok(*one),
        // Only `delay`, shared by Steep and Serverless Workflow.
        _ => {
            let sw = match retry.get("delay") {
                Some(Value::Object(_)) => true,
                Some(Value::String(s)) => s.trim_start().starts_with('P'),
                _ => false,
            };
            Ok(if sw {
                Dialect::ServerlessWorkflow
            } else {
                Dialect::Steep
            })
        }
    }
}

fn from_dialect(retry: &Map<String, Value>) -> Result<RetryPolicy, ValidationError> {
    let policy = match recognise(retry)? {
        Dialect::Steep => steep(retry)?,
        Dialect::Temporal => temporal(retry)?,
        Dialect::ServerlessWorkflow => serverless_workflow(retry)?,
    };
    Ok(policy)
}

/// A policy with a dialect's values and Tartan's defaults for the rest.
fn dialect_policy(
    max_attempts: Option<u32>,
    init_backoff_ms: u64,
    max_backoff_ms: u64,
    backoff_type: BackoffType,
    backoff_coefficient: f64,
) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        init_backoff_ms,
        max_backoff_ms,
        backoff_type,
        backoff_coefficient,
        jitter: Jitter::None,
        extra_jitter_ms: None,
        retry_on: DEFAULT_RETRY_ON.to_vec(),
        honor_retry_after: true,
        max_retry_duration_ms: None,
        attempt_timeout_ms: None,
    }
}

/// Steep: `{maxAttempts (1; -1 unlimited; 0 skip), delay (0),
/// exponentialBackoff (1), maxDelay (none)}`;
/// delay = `min(delay × exponentialBackoff^r, maxDelay)`.
fn steep(retry: &Map<String, Value>) -> Result<RetryPolicy, ValidationError> {
    let get = |key: &str| retry.get(key).filter(|v| !v.is_null());
    let max_attempts = match get("maxAttempts") {
        None => Some(1),
        Some(v) => match integer("retry.maxAttempts", v)? {
            -1 => None,
            n => Some(u32::try_from(n).map_err(|_| {
                ValidationError::new(
                    "retry.maxAttempts",
                    format!(
                        "maxAttempts must be -1 (unlimited), 0 (skip the step) or a count up to {}, got {n}",
                        u32::MAX
                    ),
                )
            })?),
        },
    };
    let delay = get("delay")
        .map(|v| duration_ms("retry.delay", v, DurationKind::Delay))
        .transpose()?
        .unwrap_or(0);
    let factor = match get("exponentialBackoff") {
        None => 1.0,
        Some(v) => coefficient("retry.exponentialBackoff", "exponentialBackoff", v)?.ok_or_else(|| {
            ValidationError::new(
                "retry.exponentialBackoff",
                "exponentialBackoff must be >= 1 (1 means no backoff), got 0",
            )
        })?,
    };
    let max_delay = get("maxDelay")
        .map(|v| duration_ms("retry.maxDelay", v, DurationKind::Delay))
        .transpose()?;
    if let Some(max) = max_delay.filter(|max| *max < delay) {
        return Err(ValidationError::new(
            "retry.maxDelay",
            format!("maxDelay ({max} ms) must be >= delay ({delay} ms)"),
        ));
    }
    Ok(dialect_policy(
        max_attempts,
        delay,
        max_delay.unwrap_or(NO_CAP),
        BackoffType::Exponential,
        factor,
    ))
}

/// OpenWorkflow / Temporal: `{initialInterval (1s), backoffCoefficient (2),
/// maximumInterval (100s), maximumAttempts (10; 0 unlimited)}`. As in
/// Temporal, a zero interval or coefficient means the default.
fn temporal(retry: &Map<String, Value>) -> Result<RetryPolicy, ValidationError> {
    let get = |key: &str| retry.get(key).filter(|v| !v.is_null());
    if get("nonRetryableErrorTypes").is_some() {
        return Err(ValidationError::new(
            "retry.nonRetryableErrorTypes",
            "nonRetryableErrorTypes is not supported: Tartan classifies by HTTP status \
             (work_config.retry_on)",
        ));
    }
    let initial = get("initialInterval")
        .map(|v| duration_ms("retry.initialInterval", v, DurationKind::Delay))
        .transpose()?
        .filter(|ms| *ms != 0);
    let init = initial.unwrap_or(TEMPORAL_INITIAL_MS);
    let coefficient = match get("backoffCoefficient") {
        None => DEFAULT_COEFFICIENT,
        Some(v) => {
            coefficient("retry.backoffCoefficient", "backoffCoefficient", v)?.unwrap_or(DEFAULT_COEFFICIENT)
        }
    };
    let maximum = get("maximumInterval")
        .map(|v| duration_ms("retry.maximumInterval", v, DurationKind::Delay))
        .transpose()?
        .filter(|ms| *ms != 0);
    let max_backoff = match maximum {
        Some(max) if max < init => {
            return Err(ValidationError::new(
                "retry.maximumInterval",
                format!("maximumInterval ({max} ms) must be >= initialInterval ({init} ms)"),
            ))
        }
        Some(max) => max,
        None => TEMPORAL_MAXIMUM_MS.max(init),
    };
    let max_attempts = match get("maximumAttempts") {
        None => Some(TEMPORAL_MAX_ATTEMPTS),
        Some(v) => match integer("retry.maximumAttempts", v)? {
            0 => None,
            n => Some(u32::try_from(n).map_err(|_| {
                ValidationError::new(
                    "retry.maximumAttempts",
                    format!(
                        "maximumAttempts must be 0 (unlimited) or a count up to {}, got {n}",
                        u32::MAX
                    ),
                )
            })?),
        },
    };
    Ok(dialect_policy(
        max_attempts,
        init,
        max_backoff,
        BackoffType::Exponential,
        coefficient,
    ))
}

/// Serverless Workflow: `{delay (0), backoff {constant|linear|exponential}
/// (constant), limit {attempt {count (retries; none = unlimited), duration
/// (per-attempt timeout)}, duration (retry budget)}, jitter {from, to}}`.
fn serverless_workflow(retry: &Map<String, Value>) -> Result<RetryPolicy, ValidationError> {
    let get = |key: &str| retry.get(key).filter(|v| !v.is_null());
    for key in ["when", "exceptWhen"] {
        if get(key).is_some() {
            return Err(ValidationError::new(
                format!("retry.{key}"),
                format!("{key} is not supported: runtime expressions are not evaluated (use work_config.retry_on)"),
            ));
        }
    }
    let delay = get("delay")
        .map(|v| duration_ms("retry.delay", v, DurationKind::Delay))
        .transpose()?
        .unwrap_or(0);

    let backoff_type = match get("backoff") {
        None => BackoffType::Fixed,
        Some(Value::Object(map)) => {
            let mut found = None;
            for (key, value) in map {
                let kind = match key.as_str() {
                    "constant" => BackoffType::Fixed,
                    "linear" => BackoffType::Linear,
                    "exponential" => BackoffType::Exponential,
                    other => {
                        return Err(ValidationError::new(
                            format!("retry.backoff.{other}"),
                            format!(
                                "unknown backoff strategy {other:?}: must be constant, linear or exponential"
                            ),
                        ))
                    }
                };
                match value {
                    Value::Null => {}
                    Value::Object(params) if params.is_empty() => {}
                    Value::Object(params) => {
                        let names: Vec<&str> = params.keys().map(String::as_str).collect();
                        return Err(ValidationError::new(
                            format!("retry.backoff.{key}"),
                            format!(
                                "the {key} backoff takes no parameters, got {} (the delay is retry.delay)",
                                names.join(", ")
                            ),
                        ));
                    }
                    other => {
                        return Err(ValidationError::new(
                            format!("retry.backoff.{key}"),
                            format!("must be an object ({{}}), got {}", json_kind(other)),
                        ))
                    }
                }
                if found.replace(kind).is_some() {
                    return Err(ValidationError::new(
                        "retry.backoff",
                        "give exactly one backoff strategy: constant, linear or exponential",
                    ));
                }
            }
            found.ok_or_else(|| {
                ValidationError::new(
                    "retry.backoff",
                    "give exactly one backoff strategy: constant, linear or exponential",
                )
            })?
        }
        Some(other) => {
            return Err(ValidationError::new(
                "retry.backoff",
                format!(
                    "must be an object such as {{\"exponential\": {{}}}}, got {}",
                    json_kind(other)
                ),
            ))
        }
    };

    let mut max_attempts = None;
    let mut attempt_timeout_ms = None;
    let mut max_retry_duration_ms = None;
    if let Some(limit) = get("limit") {
        let limit = object("retry.limit", limit, &["attempt", "duration"])?;
        if let Some(attempt) = limit.get("attempt").filter(|v| !v.is_null()) {
            let attempt = object("retry.limit.attempt", attempt, &["count", "duration"])?;
            if let Some(count) = attempt.get("count").filter(|v| !v.is_null()) {
                let count = integer("retry.limit.attempt.count", count)?;
                let attempts = u32::try_from(count)
                    .ok()
                    .and_then(|c| c.checked_add(1))
                    .ok_or_else(|| {
                        ValidationError::new(
                            "retry.limit.attempt.count",
                            format!(
                                "count is the number of retries: 0 to {}, got {count}",
                                u32::MAX - 1
                            ),
                        )
                    })?;
                max_attempts = Some(attempts);
            }
            attempt_timeout_ms = attempt
                .get("duration")
                .filter(|v| !v.is_null())
                .map(|v| duration_ms("retry.limit.attempt.duration", v, DurationKind::Timeout))
                .transpose()?;
        }
        max_retry_duration_ms = limit
            .get("duration")
            .filter(|v| !v.is_null())
            .map(|v| duration_ms("retry.limit.duration", v, DurationKind::Timeout))
            .transpose()?;
    }

    let extra_jitter_ms = match get("jitter") {
        None => None,
        Some(jitter) => {
            let jitter = object("retry.jitter", jitter, &["from", "to"])?;
            let bound = |key: &str| -> Result<u64, ValidationError> {
                let path = format!("retry.jitter.{key}");
                match jitter.get(key).filter(|v| !v.is_null()) {
                    Some(v) => duration_ms(&path, v, DurationKind::Delay),
                    None => Err(ValidationError::new(
                        path,
                        format!("jitter needs both from and to; {key} is missing"),
                    )),
                }
            };
            let (from, to) = (bound("from")?, bound("to")?);
            if to < from {
                return Err(ValidationError::new(
                    "retry.jitter.to",
                    format!("jitter.to ({to} ms) must be >= jitter.from ({from} ms)"),
                ));
            }
            Some((from, to))
        }
    };

    let mut policy = dialect_policy(max_attempts, delay, NO_CAP, backoff_type, DEFAULT_COEFFICIENT);
    policy.extra_jitter_ms = extra_jitter_ms;
    policy.max_retry_duration_ms = max_retry_duration_ms;
    policy.attempt_timeout_ms = attempt_timeout_ms;
    Ok(policy)
}

// ---------------------------------------------------------------------------
// field helpers

/// A JSON integer (no fraction, no string).
fn integer(field: &str, v: &Value) -> Result<i64, ValidationError> {
    match v {
        Value::Number(n) => n.as_i64().ok_or_else(|| {
            let why = if n.is_f64() {
                "must be a whole number"
            } else {
                "is too large"
            };
            ValidationError::new(field, format!("{n} {why}"))
        }),
        other => Err(ValidationError::new(
            field,
            format!("must be an integer, got {}", json_kind(other)),
        )),
    }
}

fn string<'a>(field: &str, v: &'a Value) -> Result<&'a str, ValidationError> {
    v.as_str()
        .ok_or_else(|| ValidationError::new(field, format!("must be a string, got {}", json_kind(v))))
}

/// An exponential factor: a number ≥ 1, or `None` for 0 (callers decide
/// whether zero means "the default").
fn coefficient(field: &str, name: &str, v: &Value) -> Result<Option<f64>, ValidationError> {
    let c = v.as_f64().ok_or_else(|| {
        ValidationError::new(field, format!("{name} must be a number, got {}", json_kind(v)))
    })?;
    if c == 0.0 {
        return Ok(None);
    }
    if !c.is_finite() || c < 1.0 {
        return Err(ValidationError::new(
            field,
            format!("{name} must be >= 1.0, got {v}"),
        ));
    }
    Ok(Some(c))
}

/// Any duration form (docs/durations.md) as whole milliseconds.
fn duration_ms(field: &str, v: &Value, kind: DurationKind) -> Result<u64, ValidationError> {
    parse_duration(v, kind)
        .map(as_millis_u64)
        .map_err(|e| ValidationError::new(field, e.to_string()))
}

/// An object whose keys are all in `allowed`.
fn object<'a>(
    field: &str,
    v: &'a Value,
    allowed: &[&str],
) -> Result<&'a Map<String, Value>, ValidationError> {
    let Value::Object(map) = v else {
        return Err(ValidationError::new(
            field,
            format!("must be an object, got {}", json_kind(v)),
        ));
    };
    if let Some(key) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ValidationError::new(
            format!("{field}.{key}"),
            format!("unknown key {key:?} (allowed: {})", allowed.join(", ")),
        ));
    }
    Ok(map)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
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
