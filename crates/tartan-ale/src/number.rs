//! Ale's numbers: 64-bit integers, floats and ratios, combined as Ale's
//! `purify` does (integer+ratio -> ratio, anything+float -> float).
//!
//! Where Ale would move to arbitrary precision (an integer overflowing 64
//! bits) the operation fails instead of giving a different value.

use std::cmp::Ordering;

use crate::limits::{rt, R};
use crate::value::Value;

#[derive(Clone, Copy, Debug)]
pub enum Num {
    Int(i64),
    Float(f64),
    Ratio(i64, i64),
}

pub fn num_of(v: &Value, op: &str) -> R<Num> {
    match v {
        Value::Int(i) => Ok(Num::Int(*i)),
        Value::Float(f) => Ok(Num::Float(*f)),
        Value::Ratio(n, d) => Ok(Num::Ratio(*n, *d)),
        other => rt(format!("{op}: expected a number, got {}", other.type_name())),
    }
}

impl Num {
    pub fn to_value(self) -> Value {
        match self {
            Num::Int(i) => Value::Int(i),
            Num::Float(f) => Value::Float(f),
            Num::Ratio(n, d) => Value::Ratio(n, d),
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
            Num::Ratio(n, d) => ratio_to_f64(n, d),
        }
    }

    fn as_ratio(self) -> (i128, i128) {
        match self {
            Num::Int(i) => (i128::from(i), 1),
            Num::Ratio(n, d) => (i128::from(n), i128::from(d)),
            // Never called with a float: floats win in `kind`.
            Num::Float(_) => (0, 1),
        }
    }
}

/// Exact operands make the division correctly rounded, as Go's
/// `big.Rat.Float64` is; larger ones are refused in `float_operands`.
fn ratio_to_f64(n: i64, d: i64) -> f64 {
    (n as f64) / (d as f64)
}

const EXACT_F64_INT: i64 = 1 << 53;

fn exact_in_f64(n: Num) -> bool {
    match n {
        Num::Ratio(a, b) => a.abs() <= EXACT_F64_INT && b <= EXACT_F64_INT,
        _ => true,
    }
}

enum Kind {
    Int(i64, i64),
    Float(f64, f64),
    Ratio((i128, i128), (i128, i128)),
    /// A ratio too large to round to a float the way Go does.
    Inexact,
}

fn inexact<T>() -> R<T> {
    rt("ratio too large to convert to a float exactly")
}

fn kind(a: Num, b: Num) -> Kind {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => Kind::Int(x, y),
        (Num::Float(_), _) | (_, Num::Float(_)) => {
            if exact_in_f64(a) && exact_in_f64(b) {
                Kind::Float(a.as_f64(), b.as_f64())
            } else {
                Kind::Inexact
            }
        }
        _ => Kind::Ratio(a.as_ratio(), b.as_ratio()),
    }
}

fn overflow<T>() -> R<T> {
    rt("integer overflow: Ale would switch to arbitrary precision, which is not supported here")
}

fn gcd(mut a: i128, mut b: i128) -> i128 {
    a = a.abs();
    b = b.abs();
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}

/// Normalizes n/d into an integer or a reduced ratio with a positive
/// denominator (Ale's `maybeWhole`).
pub fn make_ratio(n: i128, d: i128) -> R<Num> {
    if d == 0 {
        return rt("divide by zero");
    }
    let g = gcd(n, d).max(1);
    let (mut n, mut d) = (n / g, d / g);
    if d < 0 {
        n = -n;
        d = -d;
    }
    let n64 = i64::try_from(n).or_else(|_| overflow())?;
    if d == 1 {
        return Ok(Num::Int(n64));
    }
    let d64 = i64::try_from(d).or_else(|_| overflow())?;
    Ok(Num::Ratio(n64, d64))
}

pub fn add(a: Num, b: Num) -> R<Num> {
    match kind(a, b) {
        Kind::Int(x, y) => x.checked_add(y).map(Num::Int).map_or_else(overflow, Ok),
        Kind::Float(x, y) => Ok(Num::Float(x + y)),
        Kind::Ratio((n1, d1), (n2, d2)) => make_ratio(n1 * d2 + n2 * d1, d1 * d2),
        Kind::Inexact => inexact(),
    }
}

pub fn sub(a: Num, b: Num) -> R<Num> {
    match kind(a, b) {
        Kind::Int(x, y) => x.checked_sub(y).map(Num::Int).map_or_else(overflow, Ok),
        Kind::Float(x, y) => Ok(Num::Float(x - y)),
        Kind::Ratio((n1, d1), (n2, d2)) => make_ratio(n1 * d2 - n2 * d1, d1 * d2),
        Kind::Inexact => inexact(),
    }
}

pub fn mul(a: Num, b: Num) -> R<Num> {
    match kind(a, b) {
        Kind::Int(x, y) => x.checked_mul(y).map(Num::Int).map_or_else(overflow, Ok),
        Kind::Float(x, y) => Ok(Num::Float(x * y)),
        Kind::Ratio((n1, d1), (n2, d2)) => make_ratio(n1 * n2, d1 * d2),
        Kind::Inexact => inexact(),
    }
}

/// Integer division yields a ratio unless exact, as `(/ 1 3)` does in Ale.
pub fn div(a: Num, b: Num) -> R<Num> {
    match kind(a, b) {
        Kind::Int(x, y) => make_ratio(i128::from(x), i128::from(y)),
        Kind::Float(x, y) => Ok(Num::Float(x / y)),
        Kind::Ratio((n1, d1), (n2, d2)) => make_ratio(n1 * d2, d1 * n2),
        Kind::Inexact => inexact(),
    }
}

/// Ale's `mod`: the result takes the sign of the divisor.
pub fn modulo(a: Num, b: Num) -> R<Num> {
    match kind(a, b) {
        Kind::Int(x, y) => {
            if y == 0 {
                return rt("divide by zero");
            }
            // Go defines MinInt64 % -1 as 0, as wrapping_rem does.
            let r = x.wrapping_rem(y);
            if (r < 0 && y > 0) || (r > 0 && y < 0) {
                return Ok(Num::Int(r + y));
            }
            Ok(Num::Int(r))
        }
        Kind::Float(x, y) => {
            let r = x % y;
            if (r < 0.0 && y > 0.0) || (r > 0.0 && y < 0.0) {
                return Ok(Num::Float(r + y));
            }
            Ok(Num::Float(r))
        }
        Kind::Ratio((n1, d1), (n2, d2)) => {
            // Go's big.Int.Div is Euclidean division.
            let n = n1 * d2;
            let d = d1 * n2;
            if d == 0 {
                return rt("divide by zero");
            }
            let q = n.div_euclid(d);
            // l - q * r
            let qr = q.checked_mul(n2).and_then(|x| x.checked_mul(d1));
            match qr.and_then(|qr| (n1 * d2).checked_sub(qr)) {
                Some(num) => make_ratio(num, d1 * d2),
                None => overflow(),
            }
        }
        Kind::Inexact => inexact(),
    }
}

/// `Ok(None)` when the numbers cannot be ordered (NaN).
pub fn cmp(a: Num, b: Num) -> R<Option<Ordering>> {
    Ok(match kind(a, b) {
        Kind::Int(x, y) => Some(x.cmp(&y)),
        Kind::Float(x, y) => x.partial_cmp(&y),
        Kind::Ratio((n1, d1), (n2, d2)) => Some((n1 * d2).cmp(&(n2 * d1))),
        Kind::Inexact => return inexact(),
    })
}

/// Ale's `Float.String`: whole values print as `N.0`, others as Go's `%g`
/// in lower case.
pub fn format_float(f: f64) -> String {
    // Go converts with int64(f); values outside that range do not round-trip.
    if f.is_finite() && f == f.trunc() && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) {
        return format!("{}.0", f as i64);
    }
    go_g(f).to_lowercase()
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)` (also what `%v` prints).
pub fn go_g(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".to_string()
        } else {
            "-Inf".to_string()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".to_string()
        } else {
            "0".to_string()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits, as Go's -1 precision.
    let sci = format!("{:e}", f.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let sign = if f < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.abs());
    }
    let nd = digits.len() as i64;
    let dp = exp + 1; // digits before the decimal point
    let s = if dp <= 0 {
        format!("0.{}{}", "0".repeat((-dp) as usize), digits)
    } else if dp >= nd {
        format!("{}{}", digits, "0".repeat((dp - nd) as usize))
    } else {
        let (a, b) = digits.split_at(dp as usize);
        format!("{a}.{b}")
    };
    format!("{sign}{s}")
}

pub fn format_ratio(n: i64, d: i64) -> String {
    format!("{n}/{d}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_ale_does() {
        let cases = [
            (1.0, "1.0"),
            (-0.0, "0.0"),
            (0.1, "0.1"),
            (1e15, "1000000000000000.0"),
            (1e21, "1e+21"),
            (9.223_372_036_854_776e18, "9.223372036854776e+18"),
            (-9.223_372_036_854_776e18, "-9223372036854775808.0"),
            (1234567.5, "1.2345675e+06"),
            (100000.5, "100000.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e300, "1.5e+300"),
            (5e-324, "5e-324"),
            (f64::INFINITY, "+inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ];
        for (f, want) in cases {
            assert_eq!(format_float(f), want, "{f:e}");
        }
        assert_eq!(go_g(1e6), "1e+06");
        assert_eq!(go_g(123456.0), "123456");
        assert_eq!(go_g(-2.5), "-2.5");
    }

    #[test]
    fn ratios_normalize() {
        assert!(matches!(make_ratio(4, 2), Ok(Num::Int(2))));
        assert!(matches!(make_ratio(2, -4), Ok(Num::Ratio(-1, 2))));
        assert!(make_ratio(1, 0).is_err());
        assert!(make_ratio(i128::from(i64::MAX) + 1, 1).is_err());
        assert!(matches!(
            modulo(Num::Int(i64::MIN), Num::Int(-1)),
            Ok(Num::Int(0))
        ));
    }
}
