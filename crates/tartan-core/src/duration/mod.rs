//! The one duration parser of Tartan (docs/durations.md).
//!
//! Every duration field accepts:
//! - a JSON integer: milliseconds;
//! - an ISO 8601 string `P[nW][nD][T[nH][nM][nS]]` (uppercase designators,
//!   a decimal-point fraction on the last component; years and months are
//!   rejected because their length depends on the calendar);
//! - a unit string: one or more `number unit` pairs in any order, summed
//!   (`1h30m`, `1.5h`, `10 days 1hrs 30m 15 secs`), units lowercase;
//! - a bare number string: milliseconds (`"1000"`, `"1.5"`);
//! - a Serverless-Workflow object `{days, hours, minutes, seconds,
//!   milliseconds}` with non-negative integer values and at least one key.
//!
//! The parser is hand-written on purpose: no crate covers ISO 8601, Go-style
//! (`1h30m`), Steep-style (`10 days 1hrs`) and Serverless-Workflow forms
//! together with these exact rules (exact fractions, no calendar units, no
//! negatives, overflow is an error rather than saturation).
//!
//! All arithmetic is exact integer arithmetic in nanoseconds (`u128`): a
//! fraction that does not come out as a whole number of nanoseconds
//! (`"1.0000000001s"`) is rejected rather than rounded, and anything larger
//! than [`Duration::MAX`] is an overflow error.
//!
//! Error messages name the offending input (as JSON text) but never a field:
//! callers prefix them with `"field.path: "`.

use std::time::Duration;

use serde_json::Value;

mod forms;
use forms::{parse_iso, parse_number, parse_object, parse_units, unit_nanos};

const NANOS_PER_MICRO: u128 = 1_000;
const NANOS_PER_MILLI: u128 = 1_000_000;
const NANOS_PER_SEC: u128 = 1_000_000_000;
const NANOS_PER_MIN: u128 = 60 * NANOS_PER_SEC;
const NANOS_PER_HOUR: u128 = 60 * NANOS_PER_MIN;
const NANOS_PER_DAY: u128 = 24 * NANOS_PER_HOUR;
const NANOS_PER_WEEK: u128 = 7 * NANOS_PER_DAY;

/// Largest representable duration in nanoseconds ([`Duration::MAX`]).
const MAX_NANOS: u128 = (u64::MAX as u128) * NANOS_PER_SEC + (NANOS_PER_SEC - 1);

/// Fraction digits (after trimming trailing zeros) beyond which no unit can
/// give a whole number of nanoseconds: the largest unit (a week) has 2^16 and
/// 5^11 as factors, so at most 16 significant fraction digits can be exact.
const MAX_FRACTION_DIGITS: usize = 20;

/// Inputs longer than this (in chars) are shortened in error messages.
const MAX_ERROR_INPUT_CHARS: usize = 200;

/// Keys of the Serverless-Workflow duration object, with their unit.
const OBJECT_KEYS: [(&str, u128); 5] = [
    ("days", NANOS_PER_DAY),
    ("hours", NANOS_PER_HOUR),
    ("minutes", NANOS_PER_MIN),
    ("seconds", NANOS_PER_SEC),
    ("milliseconds", NANOS_PER_MILLI),
];

/// Whether zero is allowed: delays allow 0, timeouts do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurationKind {
    /// Zero is a valid value (e.g. a retry delay).
    Delay,
    /// Zero is rejected (e.g. a step timeout).
    Timeout,
}

/// Why a duration input was rejected.
///
/// `input` is the offending input as JSON text (strings are quoted, objects
/// serialized), shortened to about 200 characters when very long. The
/// Display text never names a field; callers prefix `"field.path: "`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The string is empty or only whitespace.
    #[error("invalid duration {input}: empty string")]
    Empty {
        /// The offending input.
        input: String,
    },
    /// A minus sign: durations are never negative.
    #[error("invalid duration {input}: negative durations are not allowed")]
    Negative {
        /// The offending input.
        input: String,
    },
    /// A unit string uses a unit that is not in the list (units are lowercase).
    #[error(
        "invalid duration {input}: unknown unit {unit:?} ({})",
        unknown_unit_hint(.unit)
    )]
    UnknownUnit {
        /// The offending input.
        input: String,
        /// The unit as written.
        unit: String,
    },
    /// A number without a unit, followed by more text (`"100 days 1"`).
    #[error(
        "invalid duration {input}: missing unit after {number:?} (only a lone number means \
         milliseconds)"
    )]
    MissingUnit {
        /// The offending input.
        input: String,
        /// The number lacking a unit.
        number: String,
    },
    /// Text that is not any accepted duration form.
    #[error("invalid duration {input}: not a duration ({detail})")]
    NotADuration {
        /// The offending input.
        input: String,
        /// What was expected or found.
        detail: String,
    },
    /// An ISO 8601 duration with no component (`"P"`, `"PT"`).
    #[error("invalid duration {input}: empty ISO 8601 duration (expected e.g. \"PT15S\")")]
    EmptyIso {
        /// The offending input.
        input: String,
    },
    /// An ISO 8601 duration with a `T` but no time component (`"P1DT"`).
    #[error("invalid duration {input}: empty time part after \"T\"")]
    EmptyIsoTimePart {
        /// The offending input.
        input: String,
    },
    /// An ISO 8601 component (or `T`) given twice (`"PT1H1H"`).
    #[error("invalid duration {input}: repeated component \"{designator}\"")]
    RepeatedComponent {
        /// The offending input.
        input: String,
        /// The repeated designator.
        designator: char,
    },
    /// ISO 8601 components not in the order W, D, T, H, M, S.
    #[error(
        "invalid duration {input}: component \"{designator}\" out of order (ISO 8601 order is \
         W, D, T, H, M, S)"
    )]
    ComponentOrder {
        /// The offending input.
        input: String,
        /// The misplaced designator.
        designator: char,
    },
    /// A date designator after `T` or a time designator before it.
    #[error("invalid duration {input}: component \"{designator}\" must be {place}")]
    MisplacedComponent {
        /// The offending input.
        input: String,
        /// The misplaced designator.
        designator: char,
        /// Where it belongs.
        place: &'static str,
    },
    /// An ISO 8601 number without a designator (`"PT5"`).
    #[error("invalid duration {input}: missing designator after {number:?}")]
    MissingDesignator {
        /// The offending input.
        input: String,
        /// The number lacking a designator.
        number: String,
    },
    /// An ISO 8601 fraction on a component other than the last one.
    #[error("invalid duration {input}: only the last ISO 8601 component may have a fraction")]
    FractionNotLast {
        /// The offending input.
        input: String,
    },
    /// An ISO 8601 decimal comma (`"PT1,5S"`); only the point is accepted.
    #[error("invalid duration {input}: decimal comma is not accepted, use a point (\"PT1.5S\")")]
    DecimalComma {
        /// The offending input.
        input: String,
    },
    /// A lowercase ISO 8601 designator (`"pt1s"`).
    #[error(
        "invalid duration {input}: lowercase ISO 8601 designator {found:?} (designators are \
         uppercase, e.g. \"PT1S\")"
    )]
    LowercaseIso {
        /// The offending input.
        input: String,
        /// The lowercase designator.
        found: char,
    },
    /// ISO 8601 years or months, whose length depends on the calendar.
    #[error(
        "invalid duration {input}: calendar {unit} are not accepted (their length varies); use \
         weeks, days or hours"
    )]
    CalendarUnit {
        /// The offending input.
        input: String,
        /// `"years"` or `"months"`.
        unit: &'static str,
    },
    /// The object form with no key.
    #[error(
        "invalid duration {input}: empty object (give at least one of days, hours, minutes, \
         seconds, milliseconds)"
    )]
    EmptyObject {
        /// The offending input.
        input: String,
    },
    /// The object form with a key outside the allowed list.
    #[error(
        "invalid duration {input}: unknown key {key:?} (allowed: days, hours, minutes, seconds, \
         milliseconds)"
    )]
    UnknownKey {
        /// The offending input.
        input: String,
        /// The unknown key.
        key: String,
    },
    /// The object form with a value that is not a non-negative integer.
    #[error("invalid duration {input}: value of {key:?} is not an integer")]
    ObjectValueNotInteger {
        /// The offending input.
        input: String,
        /// The key whose value is wrong.
        key: String,
    },
    /// A JSON number with a fraction or exponent (the number form is whole milliseconds).
    #[error(
        "invalid duration {input}: not an integer (a JSON number is whole milliseconds; write \
         fractions as a string such as \"1.5ms\")"
    )]
    NumberNotInteger {
        /// The offending input.
        input: String,
    },
    /// A JSON value that is neither a number, a string nor an object.
    #[error("invalid duration {input}: expected an integer (milliseconds), a string or an object")]
    WrongType {
        /// The offending input.
        input: String,
    },
    /// A fraction that is not a whole number of nanoseconds.
    #[error("invalid duration {input}: more precise than one nanosecond")]
    TooPrecise {
        /// The offending input.
        input: String,
    },
    /// Larger than the largest representable duration.
    #[error("invalid duration {input}: overflow (larger than the largest duration)")]
    Overflow {
        /// The offending input.
        input: String,
    },
    /// Zero where a timeout is expected.
    #[error("invalid duration {input}: zero is not a valid timeout")]
    ZeroTimeout {
        /// The offending input.
        input: String,
    },
}

/// Parse any accepted JSON form (integer ms, ISO 8601 string, unit string,
/// bare-number string = ms, Serverless-Workflow object
/// `{days,hours,minutes,seconds,milliseconds}`).
pub fn parse_duration(value: &Value, kind: DurationKind) -> Result<Duration, DurationError> {
    match value {
        Value::String(text) => parse_duration_str(text, kind),
        Value::Number(_) | Value::Object(_) => {
            let input = shorten(value.to_string());
            let nanos = match value {
                Value::Object(map) => parse_object(map, &input)?,
                _ => parse_number(value, &input)?,
            };
            finish(nanos, kind, input)
        }
        Value::Null | Value::Bool(_) | Value::Array(_) => Err(DurationError::WrongType {
            input: shorten(value.to_string()),
        }),
    }
}

/// Parse a string form only (used for env vars / CLI): ISO 8601, unit
/// string, or bare number (milliseconds). Surrounding whitespace is ignored.
pub fn parse_duration_str(text: &str, kind: DurationKind) -> Result<Duration, DurationError> {
    let input = shorten(Value::String(text.to_owned()).to_string());
    let trimmed = text.trim();
    let nanos = if trimmed.is_empty() {
        return Err(DurationError::Empty { input });
    } else if trimmed.starts_with('-') {
        return Err(DurationError::Negative { input });
    } else if let Some(rest) = trimmed.strip_prefix('P') {
        parse_iso(rest, &input)?
    } else if trimmed.starts_with('p') {
        return Err(DurationError::LowercaseIso { input, found: 'p' });
    } else {
        parse_units(trimmed, &input)?
    };
    finish(nanos, kind, input)
}

/// Canonical text, e.g. `"1h30m"`, `"1.5s"`, `"250ms"`, `"1500us"`, `"0s"`;
/// it parses back to the same `Duration` exactly.
///
/// At least one second: hours, minutes and seconds (with a decimal fraction
/// when needed), zero components left out. Below one second: a whole number
/// of `ms`, else `us`, else `ns`.
// `is_multiple_of` needs Rust 1.87; the workspace declares rust-version 1.85.
#[allow(clippy::manual_is_multiple_of)]
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let sub_nanos = d.subsec_nanos();
    if secs == 0 {
        return if sub_nanos == 0 {
            "0s".to_owned()
        } else if sub_nanos % 1_000_000 == 0 {
            format!("{}ms", sub_nanos / 1_000_000)
        } else if sub_nanos % 1_000 == 0 {
            format!("{}us", sub_nanos / 1_000)
        } else {
            format!("{sub_nanos}ns")
        };
    }
    let hours = secs / 3600;
    let minutes = (secs % 3600) / 60;
    let seconds = secs % 60;
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    if sub_nanos > 0 {
        let fraction = format!("{sub_nanos:09}");
        out.push_str(&format!("{seconds}.{}s", fraction.trim_end_matches('0')));
    } else if seconds > 0 {
        out.push_str(&format!("{seconds}s"));
    }
    out
}

/// Milliseconds as `u64`, saturating at `u64::MAX` (for `*_ms` echoes).
pub fn as_millis_u64(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Hint for an unknown unit: the lowercase spelling when that is a unit.
fn unknown_unit_hint(unit: &str) -> String {
    let lower = unit.to_lowercase();
    let name = match unit_nanos(&lower) {
        _ if lower == unit => None,
        Some(1) => Some("nanoseconds"),
        Some(NANOS_PER_MICRO) => Some("microseconds"),
        Some(NANOS_PER_MILLI) => Some("milliseconds"),
        Some(NANOS_PER_SEC) => Some("seconds"),
        Some(NANOS_PER_MIN) => Some("minutes"),
        Some(NANOS_PER_HOUR) => Some("hours"),
        Some(NANOS_PER_DAY) => Some("days"),
        Some(NANOS_PER_WEEK) => Some("weeks"),
        Some(_) | None => None,
    };
    if let Some(name) = name {
        format!("units are lowercase: did you mean {lower:?} ({name})?")
    } else {
        "units are lowercase: ns, us, µs, ms, s, m, h, d, w, or words such as secs, minutes, \
         hours, days, weeks"
            .to_owned()
    }
}

/// Shorten very long inputs for error messages (char-boundary safe).
fn shorten(text: String) -> String {
    if text.chars().count() <= MAX_ERROR_INPUT_CHARS {
        text
    } else {
        let mut short: String = text.chars().take(MAX_ERROR_INPUT_CHARS).collect();
        short.push('…');
        short
    }
}

/// Range and zero checks shared by every form.
fn finish(nanos: u128, kind: DurationKind, input: String) -> Result<Duration, DurationError> {
    if nanos > MAX_NANOS {
        return Err(DurationError::Overflow { input });
    }
    if nanos == 0 && kind == DurationKind::Timeout {
        return Err(DurationError::ZeroTimeout { input });
    }
    let secs =
        u64::try_from(nanos / NANOS_PER_SEC).map_err(|_| DurationError::Overflow { input: input.clone() })?;
    let sub = u32::try_from(nanos % NANOS_PER_SEC).map_err(|_| DurationError::Overflow { input })?;
    Ok(Duration::new(secs, sub))
}
