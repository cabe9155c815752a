//! Where settings come from, lowest precedence first: the defaults, the TOML
//! file, the environment, then flags (docs/operating.md, "Configuration").
//! figment merges them; the providers here name each value's source so that
//! an error says which variable, flag or file key to fix.

use std::collections::HashMap;

use figment::value::{Dict, Map, Value};
use figment::{Error, Figment, Metadata, Profile, Provider};

/// A setting: its key (the TOML key), and the names it has elsewhere.
pub struct Key {
    pub name: &'static str,
    /// Argyll's name for it (read when the `TARTAN_` one is not set).
    pub fallback_env: Option<&'static str>,
}

const fn key(name: &'static str) -> Key {
    Key {
        name,
        fallback_env: None,
    }
}

const fn argyll(name: &'static str, env: &'static str) -> Key {
    Key {
        name,
        fallback_env: Some(env),
    }
}

/// Every setting, in the order `tartan config check` prints them.
pub const KEYS: &[Key] = &[
    key("listen"),
    argyll("database_url", "DATABASE_URL"),
    key("webhook_base_url"),
    key("node_id"),
    key("log_format"),
    key("api_token"),
    key("api_token_file"),
    key("read_token"),
    key("read_token_file"),
    key("allow_unauthenticated"),
    key("cors_origins"),
    key("allowed_hosts"),
    key("step_hosts"),
    argyll("step_timeout", "STEP_TIMEOUT"),
    argyll("retry_max_retries", "RETRY_MAX_RETRIES"),
    argyll("retry_initial_backoff", "RETRY_INITIAL_BACKOFF"),
    argyll("retry_max_backoff", "RETRY_MAX_BACKOFF"),
    argyll("retry_backoff_type", "RETRY_BACKOFF_TYPE"),
    key("max_step_attempts"),
    key("max_active_flows"),
    key("lease"),
    key("max_calls"),
    key("max_calls_per_step"),
    key("max_queued_calls"),
    key("max_streams"),
    key("stream_buffer"),
    key("stream_buffer_bytes"),
    key("max_bulk_flows"),
    key("max_response_bytes"),
    key("max_inflight_bytes"),
    key("max_flow_bytes"),
    key("max_retry_after"),
    key("db_pool"),
    key("db_read_pool"),
    key("db_read_timeout"),
    key("header_timeout"),
    key("body_timeout"),
    key("max_connections"),
    key("shutdown_grace"),
    key("retention"),
];

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

/// The built-in defaults; keys without one are unset unless given.
pub struct Defaults;

impl Provider for Defaults {
    fn metadata(&self) -> Metadata {
        Metadata::named("default")
    }

    fn data(&self) -> Result<Map<Profile, Dict>, Error> {
        let dict: Dict = [
            ("listen", Value::from("127.0.0.1:8080")),
            ("database_url", Value::from("sqlite://tartan.db")),
            ("log_format", Value::from("text")),
            ("allow_unauthenticated", Value::from(false)),
            ("step_timeout", Value::from("30s")),
            ("retry_max_retries", Value::from(10)),
            ("retry_initial_backoff", Value::from("1s")),
            ("retry_max_backoff", Value::from("60s")),
            ("retry_backoff_type", Value::from("exponential")),
            (
                "max_step_attempts",
                Value::from(tartan_core::flow::DEFAULT_MAX_STEP_ATTEMPTS),
            ),
            ("max_active_flows", Value::from(10_000)),
            ("lease", Value::from("30s")),
            ("max_calls", Value::from(tartan_engine::DEFAULT_MAX_CALLS as u64)),
            (
                "max_queued_calls",
                Value::from(tartan_engine::DEFAULT_MAX_QUEUED_CALLS as u64),
            ),
            (
                "max_response_bytes",
                Value::from(tartan_engine::DEFAULT_MAX_RESPONSE_BYTES as u64),
            ),
            (
                "max_inflight_bytes",
                Value::from(tartan_engine::DEFAULT_MAX_INFLIGHT_BYTES as u64),
            ),
            (
                "max_flow_bytes",
                Value::from(tartan_core::json::DEFAULT_MAX_FLOW_BYTES),
            ),
            (
                "max_streams",
                Value::from(tartan_engine::DEFAULT_MAX_STREAMS as u64),
            ),
            (
                "stream_buffer",
                Value::from(tartan_engine::DEFAULT_STREAM_BUFFER as u64),
            ),
            (
                "stream_buffer_bytes",
                Value::from(tartan_engine::DEFAULT_STREAM_BUFFER_BYTES as u64),
            ),
            (
                "max_bulk_flows",
                Value::from(tartan_engine::DEFAULT_MAX_BULK_FLOWS),
            ),
            ("max_retry_after", Value::from("1h")),
            ("db_read_timeout", Value::from("30s")),
            ("header_timeout", Value::from("10s")),
            ("body_timeout", Value::from("30s")),
            ("shutdown_grace", Value::from("10s")),
            ("retention", Value::from("30d")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
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

/// The environment: `TARTAN_<KEY>`, else Argyll's name for it. An empty
/// variable counts as unset.
pub fn environment() -> impl Provider {
    let read = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let values = KEYS
        .iter()
        .filter_map(|k| {
            let tartan = env_name(k.name);
            read(&tartan).map(|v| (k.name, tartan, v)).or_else(|| {
                let other = k.fallback_env?;
                read(other).map(|v| (k.name, other.to_string(), v))
            })
        })
        .collect();
    Named {
        what: ENVIRONMENT,
        values,
    }
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
pub fn explain(error: Error) -> String {
    error
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
