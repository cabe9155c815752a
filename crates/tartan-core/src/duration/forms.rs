//! The forms a duration is written in, each parsed to exact nanoseconds:
//! a JSON number, the Serverless-Workflow object, `number unit` pairs and
//! ISO 8601 (docs/durations.md). The entry points, the range checks and
//! the errors are the module's (`mod.rs`).

use serde_json::Value;

use super::*;

/// The JSON number form: whole, non-negative milliseconds.
pub(super) fn parse_number(value: &Value, input: &str) -> Result<u128, DurationError> {
    if let Some(ms) = value.as_u64() {
        return Ok(u128::from(ms) * NANOS_PER_MILLI);
    }
    if value.as_i64().is_some() {
        // Only negative integers are i64 but not u64.
        return Err(DurationError::Negative {
            input: input.to_owned(),
        });
    }
    match value.as_f64() {
        Some(f) if f < 0.0 => Err(DurationError::Negative {
            input: input.to_owned(),
        }),
        // An integral float beyond u64 (e.g. 1e30): too large whichever way it is read.
        Some(f) if f.fract() == 0.0 && f >= 18_446_744_073_709_551_616.0 => Err(DurationError::Overflow {
            input: input.to_owned(),
        }),
        _ => Err(DurationError::NumberNotInteger {
            input: input.to_owned(),
        }),
    }
}

/// The Serverless-Workflow object form.
pub(super) fn parse_object(map: &serde_json::Map<String, Value>, input: &str) -> Result<u128, DurationError> {
    if map.is_empty() {
        return Err(DurationError::EmptyObject {
            input: input.to_owned(),
        });
    }
    let mut total: u128 = 0;
    for (key, value) in map {
        let Some(&(_, unit)) = OBJECT_KEYS.iter().find(|(name, _)| name == key) else {
            return Err(DurationError::UnknownKey {
                input: input.to_owned(),
                key: key.clone(),
            });
        };
        let count = match value.as_u64() {
            Some(n) => n,
            None if value.as_i64().is_some() || value.as_f64().is_some_and(|f| f < 0.0) => {
                return Err(DurationError::Negative {
                    input: input.to_owned(),
                })
            }
            None => {
                return Err(DurationError::ObjectValueNotInteger {
                    input: input.to_owned(),
                    key: key.clone(),
                })
            }
        };
        // u64 * (at most 8.64e13) fits in u128; the sum of five such values too.
        total = total
            .checked_add(u128::from(count) * unit)
            .ok_or_else(|| DurationError::Overflow {
                input: input.to_owned(),
            })?;
    }
    Ok(total)
}

/// A decimal number as written: integer digits and fraction digits (ASCII).
struct Decimal<'a> {
    int_digits: &'a str,
    frac_digits: &'a str,
    /// The number as written, for error messages.
    text: &'a str,
}

impl Decimal<'_> {
    fn has_fraction(&self) -> bool {
        self.frac_digits.bytes().any(|b| b != b'0')
    }

    /// Exact value in nanoseconds of this number of `unit_nanos`.
    // `is_multiple_of` needs Rust 1.87; the workspace declares rust-version 1.85.
    #[allow(clippy::manual_is_multiple_of)]
    fn nanos(&self, unit_nanos: u128, input: &str) -> Result<u128, DurationError> {
        let overflow = || DurationError::Overflow {
            input: input.to_owned(),
        };
        let too_precise = || DurationError::TooPrecise {
            input: input.to_owned(),
        };
        let mut whole: u128 = 0;
        for b in self.int_digits.bytes() {
            whole = whole
                .checked_mul(10)
                .and_then(|w| w.checked_add(u128::from(b - b'0')))
                .ok_or_else(overflow)?;
        }
        let whole_nanos = whole.checked_mul(unit_nanos).ok_or_else(overflow)?;
        let frac = self.frac_digits.trim_end_matches('0');
        if frac.is_empty() {
            return Ok(whole_nanos);
        }
        if frac.len() > MAX_FRACTION_DIGITS {
            return Err(too_precise());
        }
        let mut numerator: u128 = 0;
        let mut denominator: u128 = 1;
        for b in frac.bytes() {
            // At most 20 digits: numerator < 10^20, no overflow possible.
            numerator = numerator * 10 + u128::from(b - b'0');
            denominator *= 10;
        }
        // numerator < 10^20 and unit_nanos < 10^15: the product fits in u128.
        let scaled = numerator * unit_nanos;
        if scaled % denominator != 0 {
            return Err(too_precise());
        }
        whole_nanos.checked_add(scaled / denominator).ok_or_else(overflow)
    }
}

/// Lex `digits* ('.' digits*)?` with at least one digit at the start of `text`.
/// Returns the number and the rest, or `None` when `text` does not start with one.
fn lex_decimal(text: &str) -> Option<(Decimal<'_>, &str)> {
    let int_len = text.bytes().take_while(u8::is_ascii_digit).count();
    let after_int = &text[int_len..];
    let (frac_digits, len) = match after_int.strip_prefix('.') {
        Some(after_point) => {
            let frac_len = after_point.bytes().take_while(u8::is_ascii_digit).count();
            (&after_point[..frac_len], int_len + 1 + frac_len)
        }
        None => ("", int_len),
    };
    if int_len == 0 && frac_digits.is_empty() {
        return None;
    }
    let number = Decimal {
        int_digits: &text[..int_len],
        frac_digits,
        text: &text[..len],
    };
    Some((number, &text[len..]))
}

/// Describe what comes next in `text` for "not a duration" messages.
fn found(text: &str) -> String {
    match text.chars().next() {
        None => "found the end of the text".to_owned(),
        Some(c) => format!("found {:?}", c.to_string()),
    }
}

/// Unit strings (`1h30m`, `10 days 1hrs`, `.5s`) and bare numbers (milliseconds).
pub(super) fn parse_units(text: &str, input: &str) -> Result<u128, DurationError> {
    let mut rest = text.trim_start();
    let mut total: u128 = 0;
    let mut first = true;
    while !rest.is_empty() {
        if rest.starts_with('-') {
            return Err(DurationError::Negative {
                input: input.to_owned(),
            });
        }
        let Some((number, after_number)) = lex_decimal(rest) else {
            return Err(DurationError::NotADuration {
                input: input.to_owned(),
                detail: format!("expected a number, {}", found(rest)),
            });
        };
        let after_space = after_number.trim_start();
        let unit_len: usize = after_space
            .chars()
            .take_while(|c| c.is_alphabetic())
            .map(char::len_utf8)
            .sum();
        let (unit, after_unit) = after_space.split_at(unit_len);
        if unit.is_empty() {
            if first && after_space.is_empty() {
                // A lone number: milliseconds.
                return number.nanos(NANOS_PER_MILLI, input);
            }
            let next_is_number = after_space.starts_with(|c: char| c.is_ascii_digit() || c == '.');
            if after_space.is_empty() || next_is_number || after_space.starts_with('-') {
                return Err(DurationError::MissingUnit {
                    input: input.to_owned(),
                    number: number.text.to_owned(),
                });
            }
            return Err(DurationError::NotADuration {
                input: input.to_owned(),
                detail: format!("expected a unit after {:?}, {}", number.text, found(after_space)),
            });
        }
        let Some(unit_nanos) = unit_nanos(unit) else {
            return Err(DurationError::UnknownUnit {
                input: input.to_owned(),
                unit: unit.to_owned(),
            });
        };
        let nanos = number.nanos(unit_nanos, input)?;
        total = total.checked_add(nanos).ok_or_else(|| DurationError::Overflow {
            input: input.to_owned(),
        })?;
        first = false;
        rest = after_unit.trim_start();
    }
    Ok(total)
}

/// Nanoseconds per unit for the unit-string form (case-sensitive).
pub(super) fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        // U+00B5 MICRO SIGN and U+03BC GREEK SMALL LETTER MU.
        "us" | "\u{b5}s" | "\u{3bc}s" => NANOS_PER_MICRO,
        "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => NANOS_PER_MILLI,
        "s" | "sec" | "secs" | "second" | "seconds" => NANOS_PER_SEC,
        "m" | "min" | "mins" | "minute" | "minutes" => NANOS_PER_MIN,
        "h" | "hr" | "hrs" | "hour" | "hours" => NANOS_PER_HOUR,
        "d" | "day" | "days" => NANOS_PER_DAY,
        "w" | "week" | "weeks" => NANOS_PER_WEEK,
        _ => return None,
    })
}

/// ISO 8601 designators in their required order, with their unit.
const ISO_DATE: [(char, u128); 2] = [('W', NANOS_PER_WEEK), ('D', NANOS_PER_DAY)];
const ISO_TIME: [(char, u128); 3] = [('H', NANOS_PER_HOUR), ('M', NANOS_PER_MIN), ('S', NANOS_PER_SEC)];

/// ISO 8601 `P[nW][nD][T[nH][nM][nS]]`; `text` is what follows the `P`.
pub(super) fn parse_iso(text: &str, input: &str) -> Result<u128, DurationError> {
    let err_input = || input.to_owned();
    let mut rest = text;
    let mut total: u128 = 0;
    let mut in_time = false;
    let mut components = 0usize;
    let mut time_components = 0usize;
    // Index in the current part's designator list of the last component seen.
    let mut last_index: Option<usize> = None;
    let mut seen_fraction = false;
    while let Some(c) = rest.chars().next() {
        if c == 'T' {
            if in_time {
                return Err(DurationError::RepeatedComponent {
                    input: err_input(),
                    designator: 'T',
                });
            }
            in_time = true;
            last_index = None;
            rest = &rest[1..];
            continue;
        }
        if c == '-' {
            return Err(DurationError::Negative { input: err_input() });
        }
        if c.is_ascii_lowercase() && "twdhmsy".contains(c) {
            return Err(DurationError::LowercaseIso {
                input: err_input(),
                found: c,
            });
        }
        let Some((number, after_number)) = lex_decimal(rest) else {
            return Err(DurationError::NotADuration {
                input: err_input(),
                detail: format!("expected a number in the ISO 8601 duration, {}", found(rest)),
            });
        };
        if seen_fraction {
            return Err(DurationError::FractionNotLast { input: err_input() });
        }
        let Some(designator) = after_number.chars().next() else {
            return Err(DurationError::MissingDesignator {
                input: err_input(),
                number: number.text.to_owned(),
            });
        };
        match designator {
            ',' => return Err(DurationError::DecimalComma { input: err_input() }),
            'Y' => {
                return Err(DurationError::CalendarUnit {
                    input: err_input(),
                    unit: "years",
                })
            }
            'M' if !in_time => {
                return Err(DurationError::CalendarUnit {
                    input: err_input(),
                    unit: "months",
                })
            }
            'T' | '-' => {
                return Err(DurationError::MissingDesignator {
                    input: err_input(),
                    number: number.text.to_owned(),
                })
            }
            c if c.is_ascii_lowercase() && "twdhmsy".contains(c) => {
                return Err(DurationError::LowercaseIso {
                    input: err_input(),
                    found: c,
                })
            }
            _ => {}
        }
        let (own, other) = if in_time {
            (&ISO_TIME[..], &ISO_DATE[..])
        } else {
            (&ISO_DATE[..], &ISO_TIME[..])
        };
        let Some(index) = own.iter().position(|&(d, _)| d == designator) else {
            if other.iter().any(|&(d, _)| d == designator) {
                return Err(DurationError::MisplacedComponent {
                    input: err_input(),
                    designator,
                    place: if in_time {
                        "before \"T\" (date part)"
                    } else {
                        "after \"T\" (time part)"
                    },
                });
            }
            return Err(DurationError::NotADuration {
                input: err_input(),
                detail: format!(
                    "unknown ISO 8601 designator {:?} after {:?}",
                    designator.to_string(),
                    number.text
                ),
            });
        };
        match last_index {
            Some(last) if last == index => {
                return Err(DurationError::RepeatedComponent {
                    input: err_input(),
                    designator,
                })
            }
            Some(last) if last > index => {
                return Err(DurationError::ComponentOrder {
                    input: err_input(),
                    designator,
                })
            }
            _ => {}
        }
        last_index = Some(index);
        seen_fraction = number.has_fraction();
        let nanos = number.nanos(own[index].1, input)?;
        total = total
            .checked_add(nanos)
            .ok_or_else(|| DurationError::Overflow { input: err_input() })?;
        components += 1;
        if in_time {
            time_components += 1;
        }
        rest = &after_number[designator.len_utf8()..];
    }
    if components == 0 {
        return Err(DurationError::EmptyIso { input: err_input() });
    }
    if in_time && time_components == 0 {
        return Err(DurationError::EmptyIsoTimePart { input: err_input() });
    }
    Ok(total)
}
