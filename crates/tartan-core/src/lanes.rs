//! Lanes (docs/lanes.md): limits that the calls of one step, or of every
//! step calling one endpoint host, share across flows and engine processes:
//! how many run at once, how many start per second, and an opt-in circuit
//! breaker. Here: the limits as declared (a step's `limits`, the `lanes`
//! setting), checked once into typed values; which lanes a call is in; and
//! the rate arithmetic, a pure function the store applies to a lane's row.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::duration::{parse_duration, DurationKind};
use crate::error::ValidationError;

/// The most calls a lane lets run at once.
pub const MAX_CONCURRENCY: u32 = 100_000;
/// The most calls a lane lets start per second, and its largest burst.
pub const MAX_RATE_PER_SECOND: f64 = 1_000_000.0;
/// The longest quiet spell a burst may stand for, in µs: a year.
const MAX_BURST_WINDOW_US: i128 = 366 * 86_400 * 1_000_000;
/// The slowest rate: one call a day.
pub const MIN_RATE_PER_SECOND: f64 = 1.0 / 86_400.0;
/// The longest cool-down of a breaker.
pub const MAX_COOL_DOWN: std::time::Duration = std::time::Duration::from_secs(86_400);
/// The most consecutive failures a breaker may be set to wait for.
pub const MAX_BREAKER_FAILURES: u32 = 10_000;

/// A lane's limits, typed. At least one of them is set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LaneLimits {
    /// Calls in flight at once, across every process.
    pub concurrency: Option<u32>,
    /// Calls started per period, across every process.
    pub rate: Option<Rate>,
    /// Calls that may start back to back after a quiet spell (with `rate`;
    /// 1 when unset: calls are spaced evenly).
    pub burst: u32,
    pub breaker: Option<BreakerPolicy>,
}

/// `R/s`, `R/min` or `R/h`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub count: f64,
    pub per_ms: u64,
}

/// Opens after `failures` consecutive retryable failures; after
/// `cool_down_ms` one call goes through, and its success closes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    pub failures: u32,
    pub cool_down_ms: u64,
}

impl Rate {
    /// Parse `"10/s"`, `"600/min"`, `"2.5/s"`, `"100/h"`.
    pub fn parse(text: &str) -> Result<Rate, String> {
        let shape = || format!("{text:?} is not a rate: write it as \"10/s\", \"600/min\" or \"100/h\"");
        let (count, unit) = text.trim().split_once('/').ok_or_else(shape)?;
        let count: f64 = count.trim().parse().map_err(|_| shape())?;
        let per_ms = match unit.trim() {
            "s" | "sec" | "second" => 1_000,
            "m" | "min" | "minute" => 60_000,
            "h" | "hour" => 3_600_000,
            _ => return Err(shape()),
        };
        if !count.is_finite() || count <= 0.0 {
            return Err(format!("{text:?}: the rate must be more than 0"));
        }
        let rate = Rate { count, per_ms };
        if rate.per_second() > MAX_RATE_PER_SECOND {
            return Err(format!("{text:?}: at most {MAX_RATE_PER_SECOND} per second"));
        }
        if rate.per_second() < MIN_RATE_PER_SECOND {
            return Err(format!("{text:?}: at least one call a day"));
        }
        Ok(rate)
    }

    pub fn per_second(&self) -> f64 {
        self.count * 1_000.0 / self.per_ms as f64
    }

    /// The time between two calls at this rate, in µs (at least 1).
    pub fn interval_us(&self) -> i64 {
        ((self.per_ms as f64 * 1_000.0 / self.count).round() as i64).max(1)
    }

    /// The form it was written in, normalised: `10/s`.
    pub fn text(&self) -> String {
        let unit = match self.per_ms {
            1_000 => "s",
            60_000 => "min",
            _ => "h",
        };
        format!("{}/{unit}", self.count)
    }
}

fn positive(field: &str, v: &Value, max: u32) -> Result<u32, ValidationError> {
    match v.as_u64() {
        Some(n) if n >= 1 && n <= u64::from(max) => Ok(n as u32),
        _ => Err(ValidationError::new(
            field,
            format!("must be a whole number from 1 to {max}, got {v}"),
        )),
    }
}

impl LaneLimits {
    /// Check a declaration (`{concurrency, rate, burst, breaker}`); errors
    /// name the field under `field` (`limits.rate`).
    pub fn parse(field: &str, v: &Value) -> Result<LaneLimits, ValidationError> {
        let Some(obj) = v.as_object() else {
            return Err(ValidationError::new(
                field,
                "must be an object of concurrency, rate, burst and breaker",
            ));
        };
        let at = |key: &str| format!("{field}.{key}");
        for key in obj.keys() {
            if !["concurrency", "rate", "burst", "breaker"].contains(&key.as_str()) {
                return Err(ValidationError::new(
                    at(key),
                    "unknown field (concurrency, rate, burst and breaker are known)",
                ));
            }
        }
        let present = |key: &str| obj.get(key).filter(|v| !v.is_null());
        let concurrency = present("concurrency")
            .map(|v| positive(&at("concurrency"), v, MAX_CONCURRENCY))
            .transpose()?;
        let rate = present("rate")
            .map(|v| match v.as_str() {
                Some(s) => Rate::parse(s).map_err(|e| ValidationError::new(at("rate"), e)),
                None => Err(ValidationError::new(
                    at("rate"),
                    format!("must be a string such as \"10/s\", got {v}"),
                )),
            })
            .transpose()?;
        let burst = present("burst")
            .map(|v| positive(&at("burst"), v, MAX_RATE_PER_SECOND as u32))
            .transpose()?;
        if burst.is_some() && rate.is_none() {
            return Err(ValidationError::new(at("burst"), "burst needs a rate"));
        }
        // A burst is the calls of this long a quiet spell at the rate: past
        // a year, the arithmetic would no longer bound anything.
        if let Some(rate) = &rate {
            let window = i128::from(rate.interval_us()) * i128::from(burst.unwrap_or(1));
            if window > MAX_BURST_WINDOW_US {
                return Err(ValidationError::new(
                    at("burst"),
                    "the burst at this rate spans more than a year: lower the burst or raise the rate",
                ));
            }
        }
        let breaker = present("breaker")
            .map(|v| BreakerPolicy::parse(&at("breaker"), v))
            .transpose()?;
        if concurrency.is_none() && rate.is_none() && breaker.is_none() {
            return Err(ValidationError::new(
                field,
                "set at least one of concurrency, rate and breaker",
            ));
        }
        Ok(LaneLimits {
            concurrency,
            rate,
            burst: burst.unwrap_or(1),
            breaker,
        })
    }

    /// The limits as JSON, every value explicit: what `GET /engine/lanes`
    /// shows and what is stored with the lane.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        if let Some(n) = self.concurrency {
            out.insert("concurrency".into(), n.into());
        }
        if let Some(rate) = &self.rate {
            out.insert("rate".into(), rate.text().into());
            out.insert("burst".into(), self.burst.into());
        }
        if let Some(b) = &self.breaker {
            out.insert(
                "breaker".into(),
                serde_json::json!({"failures": b.failures, "cool_down": b.cool_down_ms}),
            );
        }
        Value::Object(out)
    }
}

impl BreakerPolicy {
    fn parse(field: &str, v: &Value) -> Result<BreakerPolicy, ValidationError> {
        let Some(obj) = v.as_object() else {
            return Err(ValidationError::new(
                field,
                "must be an object of failures and cool_down",
            ));
        };
        for key in obj.keys() {
            if key != "failures" && key != "cool_down" {
                return Err(ValidationError::new(
                    format!("{field}.{key}"),
                    "unknown field (failures and cool_down are known)",
                ));
            }
        }
        let failures = match obj.get("failures") {
            Some(v) => positive(&format!("{field}.failures"), v, MAX_BREAKER_FAILURES)?,
            None => return Err(ValidationError::new(format!("{field}.failures"), "required")),
        };
        let cool_down_ms = match obj.get("cool_down") {
            Some(v) => {
                let d = parse_duration(v, DurationKind::Timeout)
                    .map_err(|e| ValidationError::new(format!("{field}.cool_down"), e.to_string()))?;
                if d > MAX_COOL_DOWN {
                    return Err(ValidationError::new(format!("{field}.cool_down"), "at most 24h"));
                }
                u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
            }
            None => 30_000,
        };
        Ok(BreakerPolicy {
            failures,
            cool_down_ms,
        })
    }
}

/// The lanes of endpoint hosts (the `lanes` setting), keyed by host or
/// `host:port`, lowercase.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostLanes(BTreeMap<String, LaneLimits>);

impl HostLanes {
    /// Check the setting: an object of host keys to limits.
    pub fn parse(field: &str, v: &Value) -> Result<HostLanes, ValidationError> {
        let Some(obj) = v.as_object() else {
            return Err(ValidationError::new(field, "must be a table of hosts to limits"));
        };
        let mut lanes = BTreeMap::new();
        for (key, limits) in obj {
            let host = key.trim().to_ascii_lowercase();
            let valid = !host.is_empty()
                && host.len() <= 253
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-:[]_".contains(c));
            if !valid {
                return Err(ValidationError::new(
                    format!("{field}.{key}"),
                    "must be a host name or host:port",
                ));
            }
            lanes.insert(host, LaneLimits::parse(&format!("{field}.{key}"), limits)?);
        }
        Ok(HostLanes(lanes))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (String, &LaneLimits)> {
        self.0.iter().map(|(host, l)| (host_lane(host), l))
    }

    /// The lane of a call to `host` on `port`: `host:port`'s, else `host`'s.
    pub fn find(&self, host: &str, port: Option<u16>) -> Option<(String, &LaneLimits)> {
        let host = host.to_ascii_lowercase();
        if let Some(port) = port {
            let key = format!("{host}:{port}");
            if let Some(l) = self.0.get(&key) {
                return Some((host_lane(&key), l));
            }
        }
        self.0.get(&host).map(|l| (host_lane(&host), l))
    }
}

/// The id of a step's own lane.
pub fn step_lane(step_id: &str) -> String {
    format!("step:{step_id}")
}

/// The id of a host's lane.
pub fn host_lane(key: &str) -> String {
    format!("host:{key}")
}

/// The start times of up to `want` calls, reserved on a lane's rate: the
/// generic cell rate algorithm, whose whole state is one time, `tat` (when
/// the next call would start if calls came evenly). A call may start at
/// `tat - (burst - 1) × interval` (µs) or later; only times within `horizon_us`
/// of `now_us` are given. Returns the times, in order, and the new `tat`.
/// A reserved time that goes unused is lost: the lane errs below its rate,
/// never above.
pub fn reserve(
    tat_us: i64,
    now_us: i64,
    want: u32,
    interval: i64,
    burst: u32,
    horizon_us: i64,
) -> (Vec<i64>, i64) {
    let interval = interval.max(1);
    let tolerance = interval.saturating_mul(i64::from(burst.max(1)) - 1);
    let mut tat = tat_us;
    let mut times = Vec::new();
    while times.len() < want as usize {
        let start = now_us.max(tat.saturating_sub(tolerance));
        if start > now_us.saturating_add(horizon_us) {
            break;
        }
        times.push(start);
        tat = tat.max(start).saturating_add(interval);
    }
    (times, tat)
}

/// A lane's circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BreakerState {
    #[default]
    Closed,
    /// No call goes through until the cool-down ends.
    Open,
    /// One call (the canary) went through; its outcome decides.
    HalfOpen,
}

impl BreakerState {
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }

    pub fn parse(s: &str) -> Option<BreakerState> {
        match s {
            "closed" => Some(BreakerState::Closed),
            "open" => Some(BreakerState::Open),
            "half_open" => Some(BreakerState::HalfOpen),
            _ => None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn limits_are_checked_and_errors_name_the_field() {
        let l = LaneLimits::parse("limits", &json!({"concurrency": 2, "rate": "10/s", "burst": 3})).unwrap();
        assert_eq!(l.concurrency, Some(2));
        assert_eq!(l.rate.unwrap().interval_us(), 100_000);
        assert_eq!(l.burst, 3);
        let l = LaneLimits::parse("limits", &json!({"rate": "30/min"})).unwrap();
        assert_eq!((l.rate.unwrap().interval_us(), l.burst), (2_000_000, 1));
        let l = LaneLimits::parse("limits", &json!({"breaker": {"failures": 3, "cool_down": "2s"}})).unwrap();
        assert_eq!(
            l.breaker,
            Some(BreakerPolicy {
                failures: 3,
                cool_down_ms: 2_000
            })
        );
        for (bad, field) in [
            (json!({"concurrency": -1}), "limits.concurrency"),
            (json!({"concurrency": 0}), "limits.concurrency"),
            (json!({"concurrency": 1.5}), "limits.concurrency"),
            (json!({"rate": "0/s"}), "limits.rate"),
            (json!({"rate": "-3/s"}), "limits.rate"),
            (json!({"rate": "10/week"}), "limits.rate"),
            (json!({"rate": 10}), "limits.rate"),
            (json!({"rate": "1e-300/s", "burst": 2}), "limits.rate"),
            (json!({"rate": "1/h", "burst": 100000}), "limits.burst"),
            (json!({"rate": "10/s", "burst": 0}), "limits.burst"),
            (json!({"burst": 2}), "limits.burst"),
            (json!({"speed": 2}), "limits.speed"),
            (json!({}), "limits"),
            (json!([]), "limits"),
            (json!({"breaker": {"failures": 0}}), "limits.breaker.failures"),
            (json!({"breaker": {}}), "limits.breaker.failures"),
            (
                json!({"breaker": {"failures": 2, "cool_down": "soon"}}),
                "limits.breaker.cool_down",
            ),
        ] {
            let e = LaneLimits::parse("limits", &bad).unwrap_err();
            assert_eq!(e.field, field, "{bad}: {e:?}");
        }
    }

    #[test]
    fn a_host_lane_is_found_by_host_and_port_first() {
        let lanes = HostLanes::parse(
            "lanes",
            &json!({"API.example.com": {"concurrency": 1}, "api.example.com:8443": {"concurrency": 5}}),
        )
        .unwrap();
        let (id, l) = lanes.find("api.example.com", Some(8443)).unwrap();
        assert_eq!(
            (id.as_str(), l.concurrency),
            ("host:api.example.com:8443", Some(5))
        );
        let (id, _) = lanes.find("api.EXAMPLE.com", Some(443)).unwrap();
        assert_eq!(id, "host:api.example.com");
        assert!(lanes.find("other", Some(80)).is_none());
        let e = HostLanes::parse("lanes", &json!({"a b": {"concurrency": 1}})).unwrap_err();
        assert_eq!(e.field, "lanes.a b");
    }

    #[test]
    fn the_rate_spaces_calls_and_allows_its_burst() {
        let rate = Rate::parse("10/s").unwrap();
        // Burst 1: one now, the next 100 ms later.
        let (times, tat) = reserve(0, 1_000_000, 3, rate.interval_us(), 1, 1_000_000);
        assert_eq!(times, vec![1_000_000, 1_100_000, 1_200_000]);
        assert_eq!(tat, 1_300_000);
        // Asking again at once continues where the last left off.
        let (times, _) = reserve(tat, 1_000_000, 1, rate.interval_us(), 1, 1_000_000);
        assert_eq!(times, vec![1_300_000]);
        // Burst 3 after a quiet spell: three at once, then spaced.
        let (times, _) = reserve(0, 5_000_000, 5, rate.interval_us(), 3, 1_000_000);
        assert_eq!(times, vec![5_000_000, 5_000_000, 5_000_000, 5_100_000, 5_200_000]);
        // Nothing past the horizon.
        let (times, tat) = reserve(0, 0, 100, rate.interval_us(), 1, 250_000);
        assert_eq!(times.len(), 3);
        assert_eq!(tat, 300_000);
    }

    #[test]
    fn any_second_holds_at_most_the_rate_plus_the_burst() {
        let rate = Rate::parse("10/s").unwrap();
        let mut tat = 0;
        let mut all = Vec::new();
        let mut now = 0;
        while now < 10_000_000 {
            let (times, next) = reserve(tat, now, 7, rate.interval_us(), 4, 500_000);
            tat = next;
            all.extend(times);
            now += 137_000;
        }
        for start in (0..10_000_000).step_by(10_000) {
            let n = all
                .iter()
                .filter(|t| **t >= start && **t < start + 1_000_000)
                .count();
            assert!(n <= 10 + 4, "{n} calls in the second from {start}");
        }
    }
}
