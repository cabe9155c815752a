//! The delay math (docs/retries.md, "The wait"): the base, the cap, jitter,
//! Serverless Workflow's extra jitter and the `Retry-After` floor, all
//! saturating; and reading a `Retry-After` header.

use chrono::{DateTime, NaiveDateTime, Utc};

use super::{BackoffType, DelayParts, Jitter, RetryPolicy};

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
