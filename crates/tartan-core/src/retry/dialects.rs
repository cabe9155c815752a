//! The other systems' retry dialects, recognised by their keys and
//! normalised into a [`RetryPolicy`]: Steep, OpenWorkflow / Temporal and
//! Serverless Workflow, each with its own defaults (docs/retries.md, "The
//! dialects").

use serde_json::{Map, Value};

use crate::duration::DurationKind;
use crate::error::ValidationError;
use crate::json::json_kind;

use super::fields::{coefficient, duration_ms, integer, object};
use super::{BackoffType, Jitter, RetryPolicy, DEFAULT_COEFFICIENT, DEFAULT_RETRY_ON, NO_CAP};

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

pub(super) fn from_dialect(retry: &Map<String, Value>) -> Result<RetryPolicy, ValidationError> {
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
