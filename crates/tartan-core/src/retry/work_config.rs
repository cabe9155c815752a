//! Argyll's `work_config` retry fields, with Tartan's additions, as a
//! policy: zero or absent values take the global defaults.

use serde_json::{Map, Value};

use crate::duration::DurationKind;
use crate::error::ValidationError;
use crate::json::json_kind;

use super::fields::{coefficient, duration_ms, integer, string};
use super::{Jitter, RetryDefaults, RetryOn, RetryPolicy, DEFAULT_COEFFICIENT, DEFAULT_RETRY_ON};

/// A `work_config` retry field that counts as given: not null, not 0, not "".
pub(crate) fn is_set(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

pub(super) fn from_work_config(
    wc: Option<&Map<String, Value>>,
    defaults: &RetryDefaults,
) -> Result<RetryPolicy, ValidationError> {
    let get = |key: &str| wc.and_then(|m| m.get(key)).filter(|v| !v.is_null());
    let field = |key: &str| format!("work_config.{key}");

    let max_attempts = max_attempts_of(wc, defaults)?;

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
    let retry_on = retry_on_of(wc)?;
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

/// `max_attempts` and `max_retries`, which must agree when both are given,
/// as the attempts allowed; the engine's default when neither is.
fn max_attempts_of(
    wc: Option<&Map<String, Value>>,
    defaults: &RetryDefaults,
) -> Result<Option<u32>, ValidationError> {
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
    Ok(max_attempts)
}

/// `retry_on`: the statuses and classes that are retried, each once.
fn retry_on_of(wc: Option<&Map<String, Value>>) -> Result<Vec<RetryOn>, ValidationError> {
    let get = |key: &str| wc.and_then(|m| m.get(key)).filter(|v| !v.is_null());
    let field = |key: &str| format!("work_config.{key}");
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
    Ok(retry_on)
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
