//! What a careful reader of a configuration would point out: every value
//! that does not read, all at once rather than the first only; a key no
//! setting has, with the nearest that does; and values that are valid but
//! almost surely a slip (docs/operating.md, "Configuration").

use std::time::Duration;

use figment::value::Value;
use figment::{Figment, Provider};

use super::sources;
use super::table::{Settings, SETTINGS};

/// A lease shorter than this renews more often than a database can bear.
const SHORT_LEASE: Duration = Duration::from_secs(1);
/// A timeout shorter than this fails nearly every call or request.
const SHORT_TIMEOUT: Duration = Duration::from_millis(100);

/// Every problem of a configuration that did not load: the values that do
/// not read and the keys no setting has. Empty when figment's own error is
/// of another kind (a file that does not parse), which is then shown.
pub fn problems(figment: &Figment) -> Vec<figment::Error> {
    let mut out = Settings::each_error(figment);
    out.extend(unknown_keys(figment));
    out
}

/// A key of the file that no setting has, with the one it most likely
/// meant.
fn unknown_keys(figment: &Figment) -> Vec<figment::Error> {
    let Ok(data) = figment.data() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for dict in data.values() {
        for key in dict.keys() {
            if SETTINGS.iter().any(|s| s.key == key) {
                continue;
            }
            let message = match nearest(key) {
                Some(known) => format!("no such setting; did you mean `{known}`?"),
                None => "no such setting (`tartan serve --help` lists them)".to_string(),
            };
            let mut e = figment::Error::from(message);
            e.path = vec![key.to_string()];
            e.metadata = figment.find_metadata(key).cloned();
            out.push(e);
        }
    }
    out
}

/// The setting whose key is closest to `key`, when close enough to be a
/// misspelling (`tartan_core::suggest`'s rule, as for step ids).
fn nearest(key: &str) -> Option<&'static str> {
    let key = key.to_ascii_lowercase().replace('-', "_");
    tartan_core::suggest::nearest(&key, SETTINGS.iter().map(|s| s.key))
}

/// Valid values that are most likely a slip: a lease under 1 s, a timeout
/// under 100 ms (a bare number is milliseconds: `lease = "30"` is 30 ms).
pub fn warnings(figment: &Figment, lease: Duration, timeouts: &[(&str, Duration)]) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |key: &str, value: Duration, floor: Duration| {
        if value.is_zero() || value >= floor {
            return;
        }
        let bare = figment.find_value(key).ok().is_some_and(|v| match v {
            Value::Num(..) => true,
            Value::String(_, text) => text.trim().chars().all(|c| c.is_ascii_digit()),
            _ => false,
        });
        let hint = if bare {
            "; a bare number is milliseconds, write a unit (\"30s\") for more"
        } else {
            ""
        };
        out.push(format!(
            "{} is {} ms, under {} ms: almost surely a slip{hint}",
            sources::origin(figment, key),
            value.as_millis(),
            floor.as_millis()
        ));
    };
    check("lease", lease, SHORT_LEASE);
    for (key, value) in timeouts {
        check(key, *value, SHORT_TIMEOUT);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::nearest;

    #[test]
    fn a_misspelt_key_finds_the_setting_and_a_stranger_finds_none() {
        assert_eq!(nearest("lese"), Some("lease"));
        assert_eq!(nearest("max_call"), Some("max_calls"));
        assert_eq!(nearest("step-timout"), Some("step_timeout"));
        assert_eq!(nearest("databse_url"), Some("database_url"));
        assert_eq!(nearest("colour_scheme"), None);
    }
}
