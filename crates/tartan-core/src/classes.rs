//! A step's own classification of HTTP statuses, `http.classify`
//! (docs/retries.md, "A step's own classes"): statuses, ranges or classes
//! mapped to `retryable`, `permanent` or `rate_limited`, consulted before
//! the retry policy's `retry_on`.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Most entries one table may hold.
pub const MAX_CLASSIFY_ENTRIES: usize = 64;

/// What a step declares a status to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeclaredClass {
    Retryable,
    Permanent,
    /// Retryable, and the response's `Retry-After` is honoured whatever the
    /// policy's `honor_retry_after` says.
    RateLimited,
}

impl DeclaredClass {
    pub fn as_str(self) -> &'static str {
        match self {
            DeclaredClass::Retryable => "retryable",
            DeclaredClass::Permanent => "permanent",
            DeclaredClass::RateLimited => "rate_limited",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [
            DeclaredClass::Retryable,
            DeclaredClass::Permanent,
            DeclaredClass::RateLimited,
        ]
        .into_iter()
        .find(|c| c.as_str() == text)
    }
}

/// Which statuses an entry covers: `404`, `500-504` or `5xx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusKey {
    Status(u16),
    Range(u16, u16),
    Class(u16),
}

impl StatusKey {
    fn matches(self, s: u16) -> bool {
        match self {
            StatusKey::Status(n) => n == s,
            StatusKey::Range(lo, hi) => (lo..=hi).contains(&s),
            StatusKey::Class(c) => s / 100 == c,
        }
    }

    /// How many statuses it covers: the narrowest matching entry wins.
    fn width(self) -> u16 {
        match self {
            StatusKey::Status(_) => 1,
            StatusKey::Range(lo, hi) => hi - lo + 1,
            StatusKey::Class(_) => 100,
        }
    }

    fn parse(text: &str) -> Result<Self, String> {
        let status = |part: &str| -> Result<u16, String> {
            let n: u16 = part.parse().map_err(|_| {
                "not a status, a range such as \"500-504\" or a class such as \"5xx\"".to_string()
            })?;
            if !(100..600).contains(&n) {
                return Err(format!("{n} is not an HTTP status (100 to 599)"));
            }
            if (200..300).contains(&n) {
                return Err(format!("{n} is a success: only failures are classified"));
            }
            Ok(n)
        };
        let bytes = text.as_bytes();
        if let [d @ b'1'..=b'5', b'x', b'x'] = bytes {
            if *d == b'2' {
                return Err("\"2xx\" are successes: only failures are classified".into());
            }
            return Ok(StatusKey::Class(u16::from(*d - b'0')));
        }
        match text.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (status(lo.trim())?, status(hi.trim())?);
                if lo > hi {
                    return Err("the range runs backwards".into());
                }
                if lo < 300 && hi >= 200 {
                    return Err("the range covers successes: only failures are classified".into());
                }
                Ok(StatusKey::Range(lo, hi))
            }
            None => status(text.trim()).map(StatusKey::Status),
        }
    }
}

impl fmt::Display for StatusKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatusKey::Status(s) => write!(f, "{s}"),
            StatusKey::Range(lo, hi) => write!(f, "{lo}-{hi}"),
            StatusKey::Class(c) => write!(f, "{c}xx"),
        }
    }
}

/// A step's table, parsed; empty when the step declares none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusClasses(Vec<(StatusKey, DeclaredClass)>);

impl StatusClasses {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// What the step declares `status` to be: the narrowest entry covering
    /// it (an exact status over a range over a class), or `None`.
    pub fn class_of(&self, status: u16) -> Option<DeclaredClass> {
        self.0
            .iter()
            .filter(|(key, _)| key.matches(status))
            .min_by_key(|(key, _)| key.width())
            .map(|(_, class)| *class)
    }

    /// Parse `{"<status|range|class>": "<class>"}`; the error names the key.
    pub fn from_map(map: &BTreeMap<String, String>) -> Result<Self, String> {
        if map.len() > MAX_CLASSIFY_ENTRIES {
            return Err(format!(
                "{} entries, more than the {MAX_CLASSIFY_ENTRIES} a step may declare",
                map.len()
            ));
        }
        let mut entries = Vec::with_capacity(map.len());
        for (key, class) in map {
            let shown = crate::ids::shown_key(key);
            let parsed = StatusKey::parse(key).map_err(|e| format!("{shown}: {e}"))?;
            let class = DeclaredClass::parse(class).ok_or_else(|| {
                format!("{shown}: unknown class {class:?}: retryable, permanent or rate_limited")
            })?;
            if entries.iter().any(|(k, _)| *k == parsed) {
                return Err(format!("{shown}: the same statuses as another entry, {parsed}"));
            }
            entries.push((parsed, class));
        }
        Ok(StatusClasses(entries))
    }
}

impl Serialize for StatusClasses {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let map: BTreeMap<String, &str> = self.0.iter().map(|(k, c)| (k.to_string(), c.as_str())).collect();
        map.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for StatusClasses {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, String>::deserialize(deserializer)?;
        StatusClasses::from_map(&map).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn table(pairs: &[(&str, &str)]) -> Result<StatusClasses, String> {
        StatusClasses::from_map(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn the_narrowest_entry_wins() {
        let t = table(&[
            ("5xx", "permanent"),
            ("500-503", "retryable"),
            ("503", "rate_limited"),
            ("404", "retryable"),
        ])
        .unwrap();
        assert_eq!(t.class_of(503), Some(DeclaredClass::RateLimited));
        assert_eq!(t.class_of(502), Some(DeclaredClass::Retryable));
        assert_eq!(t.class_of(504), Some(DeclaredClass::Permanent));
        assert_eq!(t.class_of(404), Some(DeclaredClass::Retryable));
        assert_eq!(t.class_of(400), None);
        let text = serde_json::to_value(&t).unwrap();
        assert_eq!(text["500-503"], "retryable");
        assert_eq!(serde_json::from_value::<StatusClasses>(text).unwrap(), t);
    }

    #[test]
    fn bad_entries_are_named() {
        for (key, class, says) in [
            ("abc", "retryable", "not a status"),
            ("200", "retryable", "success"),
            ("2xx", "retryable", "success"),
            ("199-301", "retryable", "successes"),
            ("504-500", "retryable", "backwards"),
            ("700", "retryable", "100 to 599"),
            ("404", "flaky", "unknown class \"flaky\""),
        ] {
            let e = table(&[(key, class)]).unwrap_err();
            assert!(e.contains(says) && e.starts_with(key), "{key}: {e}");
        }
        let many: Vec<(String, String)> = (0..65)
            .map(|n| (format!("{}", 400 + n), "permanent".to_string()))
            .collect();
        let e = StatusClasses::from_map(&many.into_iter().collect()).unwrap_err();
        assert!(e.contains("64"), "{e}");
    }
}
