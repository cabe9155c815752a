//! Where settings come from, lowest precedence first: the defaults, the TOML
//! file, the environment, then flags (docs/operating.md, "Configuration").
//! figment merges them; the providers here name each value's source so that
//! an error says which variable, flag or file key to fix.

use std::collections::HashMap;

use figment::value::{Dict, Map, Value};
use figment::{Error, Figment, Metadata, Profile, Provider};

use super::table::{Default, Fixed, SETTINGS};

/// The environment variable of a key.
pub fn env_name(key: &str) -> String {
    format!("TARTAN_{}", key.to_ascii_uppercase())
}

/// The flag of a key.
pub fn flag_name(key: &str) -> String {
    format!("--{}", key.replace('_', "-"))
}

const ENVIRONMENT: &str = "environment variable";
const FLAGS: &str = "command-line flag";

/// The built-in defaults (`table`); keys without one are unset unless given.
pub struct Defaults;

impl Provider for Defaults {
    fn metadata(&self) -> Metadata {
        Metadata::named("default")
    }

    fn data(&self) -> Result<Map<Profile, Dict>, Error> {
        let dict: Dict = SETTINGS
            .iter()
            .filter_map(|s| {
                let value = match s.default {
                    Default::Value(Fixed::Text(v)) => Value::from(v),
                    Default::Value(Fixed::Int(v)) => Value::from(v),
                    Default::Value(Fixed::Bool(v)) => Value::from(v),
                    Default::Unset(_) => return None,
                };
                Some((s.key.to_string(), value))
            })
            .collect();
        Ok(Profile::Default.collect(dict))
    }
}

/// Values found under names (environment variables or flags), each
/// remembered with the name it came from, so that an error names it.
struct Named {
    what: &'static str,
    values: Vec<(&'static str, String, String)>,
}

impl Provider for Named {
    fn metadata(&self) -> Metadata {
        let names: HashMap<String, String> = self
            .values
            .iter()
            .map(|(key, name, _)| (key.to_string(), name.clone()))
            .collect();
        Metadata::named(self.what).interpolater(move |_: &Profile, keys: &[&str]| {
            let key = keys.join(".");
            names.get(&key).cloned().unwrap_or(key)
        })
    }

    fn data(&self) -> Result<Map<Profile, Dict>, Error> {
        let dict: Dict = self
            .values
            .iter()
            .map(|(key, _, value)| (key.to_string(), Value::from(value.clone())))
            .collect();
        Ok(Profile::Default.collect(dict))
    }
}

/// An environment variable's value; empty counts as unset.
fn read_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The environment: `TARTAN_<KEY>`, else Argyll's name for it
/// (docs/argyll.md, "Settings"). An empty variable counts as unset.
pub fn environment() -> impl Provider {
    let mut values: Vec<(&'static str, String, String)> = SETTINGS
        .iter()
        .filter_map(|k| {
            let tartan = env_name(k.key);
            read_env(&tartan).map(|v| (k.key, tartan, v)).or_else(|| {
                let other = k.fallback_env?;
                read_env(other).map(|v| (k.key, other.to_string(), v))
            })
        })
        .collect();
    if !values.iter().any(|(key, _, _)| *key == "listen") {
        if let Some(listen) = argyll_listen(read_env("API_HOST"), read_env("API_PORT")) {
            values.push(("listen", "API_HOST and API_PORT".to_string(), listen));
        }
    }
    Named {
        what: ENVIRONMENT,
        values,
    }
}

/// Argyll's listen address from its `API_HOST` and `API_PORT`, when either
/// is set, each defaulting as in Argyll (`0.0.0.0`, `8080`). A port that is
/// not one is left for the `listen` setting's check to name.
fn argyll_listen(host: Option<String>, port: Option<String>) -> Option<String> {
    if host.is_none() && port.is_none() {
        return None;
    }
    let host = host.unwrap_or_else(|| "0.0.0.0".to_string());
    let port = port.unwrap_or_else(|| "8080".to_string());
    // An IPv6 address takes brackets before its port.
    Some(if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    })
}

/// Argyll's settings that mean nothing to Tartan (its Raft cluster and its
/// projection cache: Tartan's engines share one database), with why.
const ARGYLL_IGNORED: [&str; 5] = [
    "RAFT_ADDRESS",
    "RAFT_DATA_DIR",
    "RAFT_LOG_TAIL_SIZE",
    "RAFT_SERVERS",
    "TIMEBOX_CACHE_SIZE",
];

/// The ignored Argyll settings that are set, one line each.
pub fn argyll_ignored() -> Vec<String> {
    ARGYLL_IGNORED
        .iter()
        .filter(|name| read_env(name).is_some())
        .map(|name| {
            format!(
                "{name} (environment variable) is Argyll's and is ignored: Tartan's engines share \
                 one database instead of a Raft cluster (docs/argyll.md, \"Settings\")"
            )
        })
        .collect()
}

/// Flags given on the command line, as `(key, value)`.
pub fn flags(given: Vec<(&'static str, String)>) -> impl Provider {
    Named {
        what: FLAGS,
        values: given
            .into_iter()
            .map(|(key, value)| (key, flag_name(key), value))
            .collect(),
    }
}

/// Where the value of `key` came from: `TARTAN_MAX_CALLS (environment
/// variable)`, `--max-calls (command-line flag)`, `max_calls in tartan.toml`,
/// `max_calls (default)`.
pub fn origin(figment: &Figment, key: &str) -> String {
    match figment.find_metadata(key) {
        Some(md) => describe(md, &[key]),
        None => format!("{key} (not set)"),
    }
}

/// Where a value came from, a file as its path was given: figment's own
/// display makes it relative to the working directory when it can, which
/// names another file once the operator is elsewhere.
fn shown(source: &figment::Source) -> String {
    match source {
        figment::Source::File(path) => path.display().to_string(),
        other => other.to_string(),
    }
}

fn describe(md: &Metadata, path: &[&str]) -> String {
    match &md.source {
        // A file: the key as written in it.
        Some(source) => format!("{} in {}", path.join("."), shown(source)),
        // The environment or flags: the variable or flag that gave it.
        None if md.name == ENVIRONMENT || md.name == FLAGS => {
            format!("{} ({})", md.interpolate(&Profile::Default, path), md.name)
        }
        None => format!("{} ({})", path.join("."), md.name),
    }
}

/// A loading error as one line per problem, each naming its setting and
/// where it came from.
pub fn explain(errors: impl IntoIterator<Item = Error>) -> String {
    errors
        .into_iter()
        .map(|e| {
            let path: Vec<&str> = e.path.iter().map(String::as_str).collect();
            match (&e.metadata, path.is_empty()) {
                (Some(md), false) => format!("{}: {}", describe(md, &path), e.kind),
                (Some(md), true) => match &md.source {
                    Some(source) => format!("{}: {}", shown(source), e.kind),
                    None => format!("{}: {}", md.name, e.kind),
                },
                (None, _) if !path.is_empty() => format!("{}: {}", path.join("."), e.kind),
                (None, _) => e.kind.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::argyll_listen;

    #[test]
    fn argyll_host_and_port_make_the_listen_address_each_defaulting_as_argyll_does() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(argyll_listen(None, None), None);
        assert_eq!(argyll_listen(s("127.0.0.1"), s("9000")), s("127.0.0.1:9000"));
        assert_eq!(argyll_listen(None, s("9000")), s("0.0.0.0:9000"));
        assert_eq!(argyll_listen(s("10.0.0.5"), None), s("10.0.0.5:8080"));
        assert_eq!(argyll_listen(s("::1"), s("81")), s("[::1]:81"));
        assert_eq!(argyll_listen(s("[::1]"), s("81")), s("[::1]:81"));
    }
}
