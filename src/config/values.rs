//! How one setting's value is read, whatever its source: the TOML file gives
//! typed values (`max_calls = 8`, `step_timeout = 1500`), the environment and
//! flags give text (`TARTAN_MAX_CALLS=8`). Each reader here accepts both, and
//! checks the value, so that a bad value is refused the same way wherever it
//! came from (docs/operating.md, "Configuration").

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{Deserialize, Deserializer, Error};
use tartan_core::duration::{parse_duration_str, DurationKind};
use tartan_core::hosts::StepHosts;
use tartan_core::lanes::HostLanes;
use tartan_server::AllowedHosts;

/// A value as any source gives it.
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
enum Raw {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Text(String),
    List(Vec<Raw>),
}

impl Raw {
    /// The value as text, as an operator would have typed it.
    fn into_text<E: Error>(self) -> Result<String, E> {
        Ok(match self {
            Raw::Bool(b) => b.to_string(),
            Raw::Int(n) => n.to_string(),
            Raw::UInt(n) => n.to_string(),
            Raw::Float(n) => n.to_string(),
            Raw::Text(t) => t,
            Raw::List(_) => return Err(E::custom("expected a single value, got a list")),
        })
    }
}

/// Text (a number is taken as its digits: `TARTAN_NODE_ID=7`).
pub fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Raw::deserialize(d)?.into_text()
}

pub fn opt_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    text(d).map(Some)
}

pub fn opt_path<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    text(d).map(|t| Some(PathBuf::from(t)))
}

/// A comma-separated list, or a TOML array of strings.
pub fn list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let entries = match Raw::deserialize(d)? {
        Raw::List(items) => items
            .into_iter()
            .map(Raw::into_text)
            .collect::<Result<Vec<_>, _>>()?,
        one => vec![one.into_text()?],
    };
    Ok(split_list(&entries.join(",")))
}

/// Entries of a comma- or newline-separated list, trimmed, blanks dropped.
pub fn split_list(text: &str) -> Vec<String> {
    text.split([',', '\n'])
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_string)
        .collect()
}

/// Where steps may call: a comma-separated list or an array; an empty one
/// is no restriction.
pub fn hosts<'de, D: Deserializer<'de>>(d: D) -> Result<Option<StepHosts>, D::Error> {
    let entries = list(d)?;
    if entries.is_empty() {
        return Ok(None);
    }
    StepHosts::parse(&entries.join(","))
        .map(Some)
        .map_err(|e| D::Error::custom(e.to_string()))
}

/// The lanes of endpoint hosts (`lanes`): a TOML table, or the same as
/// JSON text (`TARTAN_LANES='{"api.example.com": {"concurrency": 4}}'`).
pub fn lanes<'de, D: Deserializer<'de>>(d: D) -> Result<HostLanes, D::Error> {
    let value = match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(text) => serde_json::from_str(&text)
            .map_err(|e| D::Error::custom(format!("expected a JSON object of hosts to limits: {e}")))?,
        other => other,
    };
    HostLanes::parse("lanes", &value).map_err(|e| D::Error::custom(format!("{}: {}", e.field, e.message)))
}

/// The host names requests may address (`allowed_hosts`): a
/// comma-separated list or an array; an empty one is no setting.
pub fn allowed_hosts<'de, D: Deserializer<'de>>(d: D) -> Result<AllowedHosts, D::Error> {
    AllowedHosts::parse(&list(d)?).map_err(D::Error::custom)
}

/// A whole number of at least 1.
pub fn count<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr + TryFrom<u64>,
{
    let raw = Raw::deserialize(d)?;
    let n = match &raw {
        Raw::Int(n) => u64::try_from(*n).ok(),
        Raw::UInt(n) => Some(*n),
        Raw::Text(t) => t.trim().parse::<u64>().ok(),
        _ => None,
    };
    n.filter(|n| *n >= 1)
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| {
            D::Error::custom(format!(
                "must be a whole number of at least 1, got {}",
                shown(&raw)
            ))
        })
}

pub fn opt_count<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr + TryFrom<u64>,
{
    count(d).map(Some)
}

/// `retry_max_retries`: -1 (no limit) or more.
pub fn max_retries<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let raw = Raw::deserialize(d)?;
    let n = match &raw {
        Raw::Int(n) => Some(*n),
        Raw::UInt(n) => i64::try_from(*n).ok(),
        Raw::Text(t) => t.trim().parse::<i64>().ok(),
        _ => None,
    };
    n.filter(|n| *n >= -1).ok_or_else(|| {
        D::Error::custom(format!(
            "must be an integer, -1 (unlimited) or more, got {}",
            shown(&raw)
        ))
    })
}

/// A duration: integer milliseconds (`1500`) or text (`1.5s`, `PT1M`,
/// `1h30m`; docs/durations.md). Zero is refused.
pub fn timeout<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    duration(d, DurationKind::Timeout)
}

/// A duration where zero means "off".
pub fn delay<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    duration(d, DurationKind::Delay)
}

fn duration<'de, D: Deserializer<'de>>(d: D, kind: DurationKind) -> Result<Duration, D::Error> {
    let raw = Raw::deserialize(d)?;
    let millis = match &raw {
        Raw::Int(n) => {
            Some(u64::try_from(*n).map_err(|_| D::Error::custom(format!("must not be negative, got {n}")))?)
        }
        Raw::UInt(n) => Some(*n),
        _ => None,
    };
    let parsed = match millis {
        Some(0) if kind == DurationKind::Timeout => {
            return Err(D::Error::custom("must be more than zero, got 0"));
        }
        Some(ms) => Duration::from_millis(ms),
        None => parse_duration_str(&raw.into_text()?, kind).map_err(|e| D::Error::custom(e.to_string()))?,
    };
    Ok(parsed)
}

/// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`).
pub fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    let raw = Raw::deserialize(d)?;
    let text = match &raw {
        Raw::Bool(b) => return Ok(*b),
        Raw::Int(n) => n.to_string(),
        Raw::UInt(n) => n.to_string(),
        Raw::Text(t) => t.trim().to_ascii_lowercase(),
        _ => String::new(),
    };
    match text.as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(D::Error::custom(format!(
            "must be true or false, got {}",
            shown(&raw)
        ))),
    }
}

/// A value named by text: the backoff type, the log format.
pub fn parsed<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: std::fmt::Display,
{
    let text = text(d)?;
    text.trim().parse::<T>().map_err(D::Error::custom)
}

/// An `http(s)://` URL.
pub fn opt_http_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let url = text(d)?;
    if !url.starts_with("http://") && !url.starts_with("https://") {
        return Err(D::Error::custom(format!("expected an http(s) URL, got {url:?}")));
    }
    Ok(Some(url))
}

fn shown(raw: &Raw) -> String {
    match raw {
        Raw::Text(t) => format!("{t:?}"),
        Raw::Bool(b) => b.to_string(),
        Raw::Int(n) => n.to_string(),
        Raw::UInt(n) => n.to_string(),
        Raw::Float(n) => n.to_string(),
        Raw::List(_) => "a list".to_string(),
    }
}
