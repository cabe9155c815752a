//! Reading one field of a retry policy's JSON, with errors that name it.

use serde_json::{Map, Value};

use crate::duration::{as_millis_u64, parse_duration, DurationKind};
use crate::error::ValidationError;
use crate::json::json_kind;

/// A JSON integer (no fraction, no string).
pub(super) fn integer(field: &str, v: &Value) -> Result<i64, ValidationError> {
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

pub(super) fn string<'a>(field: &str, v: &'a Value) -> Result<&'a str, ValidationError> {
    v.as_str()
        .ok_or_else(|| ValidationError::new(field, format!("must be a string, got {}", json_kind(v))))
}

/// An exponential factor: a number ≥ 1, or `None` for 0 (callers decide
/// whether zero means "the default").
pub(super) fn coefficient(field: &str, name: &str, v: &Value) -> Result<Option<f64>, ValidationError> {
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
pub(super) fn duration_ms(field: &str, v: &Value, kind: DurationKind) -> Result<u64, ValidationError> {
    parse_duration(v, kind)
        .map(as_millis_u64)
        .map_err(|e| ValidationError::new(field, e.to_string()))
}

/// An object whose keys are all in `allowed`.
pub(super) fn object<'a>(
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
