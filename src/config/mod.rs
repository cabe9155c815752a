//! The configuration of `tartan serve` and `tartan config check`: defaults,
//! then the TOML file, then the environment, then flags, merged by one
//! loader (figment) and checked after merging, whatever each value's source
//! (docs/operating.md, "Configuration").
//!
//! - `sources`: the four sources, and how a value's source is named.
//! - `values`: how each kind of value is read and checked.

mod sources;
mod values;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use figment::providers::{Format, Toml};
use figment::Figment;
use serde::Deserialize;
use tartan_core::hosts::StepHosts;
use tartan_core::retry::{BackoffType, RetryDefaults};
use tartan_server::{AllowedHosts, ApiSecurity};

pub use sources::KEYS;

/// Declares the flags, one per setting (each also `TARTAN_<KEY>` in the
/// environment and `<key>` in the file), and lists those given.
macro_rules! setting_flags {
    ($( $(#[doc = $doc:expr])* $field:ident ),* $(,)?) => {
        /// Flags of `tartan serve` and `tartan config check`.
        #[derive(Debug, Clone, Default, Args)]
        pub struct ServeArgs {
            /// TOML file of settings (keys as the flags', with `_`: `max_calls = 64`)
            #[arg(long, env = "TARTAN_CONFIG")]
            pub config: Option<PathBuf>,
            /// Serve without tokens on a non-loopback address (anyone who reaches it may drive the engine)
            #[arg(long, num_args = 0..=1, default_missing_value = "true")]
            pub allow_unauthenticated: Option<String>,
            $( $(#[doc = $doc])* #[arg(long)] pub $field: Option<String>, )*
        }

        impl ServeArgs {
            /// The settings given as flags, by key.
            fn given(&self) -> Vec<(&'static str, String)> {
                let mut given = Vec::new();
                if let Some(v) = &self.allow_unauthenticated {
                    given.push(("allow_unauthenticated", v.clone()));
                }
                $( if let Some(v) = &self.$field {
                    given.push((stringify!($field), v.clone()));
                } )*
                given
            }
        }
    };
}

setting_flags! {
    /// Address to listen on; port 0 picks a free port [default: 127.0.0.1:8080]
    listen,
    /// sqlite://path (created if missing) or postgres://... (env TARTAN_DATABASE_URL, then DATABASE_URL) [default: sqlite://tartan.db]
    database_url,
    /// Base URL async steps call back [default: http://<listen address>]
    webhook_base_url,
    /// Stable id of this engine process [default: <hostname>-<port>]
    node_id,
    /// Log lines as `text` or `json` [default: text]
    log_format,
    /// Bearer tokens granting every route, comma-separated (rotation: list old and new)
    api_token,
    /// File holding the API tokens (e.g. a mounted Kubernetes secret)
    api_token_file,
    /// Bearer tokens granting GET routes only, comma-separated
    read_token,
    /// File holding the read tokens
    read_token_file,
    /// Origins browsers may call the API from, comma-separated exact origins or * [default: none]
    cors_origins,
    /// Host names requests may address besides loopback, localhost and the listen address,
    /// comma-separated, each with or without :port, *.domain, or * for any (DNS rebinding)
    /// [default: none; with tokens, the Host is checked only when this is set]
    allowed_hosts,
    /// Where steps may call: comma-separated host names, *.domain patterns,
    /// IP addresses and CIDR ranges [default: any address but link-local]
    step_hosts,
    /// Attempt timeout of a step that sets none [default: 30s]
    step_timeout,
    /// Retries of a step that sets none; -1 for no limit [default: 10]
    retry_max_retries,
    /// First retry delay of a step that sets none [default: 1s]
    retry_initial_backoff,
    /// Longest retry delay of a step that sets none [default: 60s]
    retry_max_backoff,
    /// fixed, linear or exponential [default: exponential]
    retry_backoff_type,
    /// Attempts of one flow's work items together, default and ceiling [default: 1000]
    max_step_attempts,
    /// Flows with work in progress in this process at most; beyond it starts get 503 [default: 10000]
    max_active_flows,
    /// How long a lease outlives the attempt timeout [default: 30s]
    lease,
    /// Calls in flight in this process at most [default: 1024]
    max_calls,
    /// Calls of one step in flight at most, a hard cap on top of the rule
    /// that a step holds at most half of the slots the other steps leave
    /// [default: unset]
    max_calls_per_step,
    /// Calls waiting for a slot at most; one beyond it is made when its lease runs out [default: 10000]
    max_queued_calls,
    /// Event streams (SSE and WebSocket) open at once at most; one more is answered 503 [default: 1000]
    max_streams,
    /// Decisions' events a stream may fall behind by before it is dropped (it resumes with Last-Event-ID) [default: 1024]
    stream_buffer,
    /// Bytes of events (as JSON) a stream may fall behind by before it is dropped; what the bus holds for slow streams at most [default: 67108864]
    stream_buffer_bytes,
    /// Flows one bulk retry or cancel may match at most; a filter matching more is refused [default: 100000]
    max_bulk_flows,
    /// Bytes of a step's response body (or webhook body) at most; past it the attempt fails [default: 8388608]
    max_response_bytes,
    /// Bytes of step response bodies held at once, from reading to recording; calls past it wait [default: 67108864]
    max_inflight_bytes,
    /// Bytes of JSON of one flow's inputs and outputs at most; an output past it fails its work item for good [default: 67108864]
    max_flow_bytes,
    /// The longest wait a step's Retry-After may ask for, e.g. 1h or 300ms [default: 1h]
    max_retry_after,
    /// Database connections of the engine [default: 16 Postgres, 4 SQLite]
    db_pool,
    /// Database connections of the API's listings and histories [default: 4]
    db_read_pool,
    /// Postgres: how long one listing or history statement may run [default: 30s]
    db_read_timeout,
    /// How long a client may take to send a request's headers, and how long a connection may stay idle
    /// [default: 10s]
    header_timeout,
    /// How long a client may take to send a request's body after its headers [default: 30s]
    body_timeout,
    /// Connections open at once at most; more wait to be accepted
    /// [default: half the open-file limit, at most 10000]
    max_connections,
    /// How long calls in flight may finish after SIGTERM before they are handed back [default: 10s]
    shutdown_grace,
    /// Finished flows older than this are deleted; 0 keeps everything [default: 30d]
    retention,
}

/// How log lines are written (`TARTAN_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!("expected text or json, got {s:?}")),
        }
    }
}

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);

/// The longest each duration setting may be (docs/operating.md, "Every
/// setting"). A value beyond its ceiling is a mistake, and the times
/// computed from it overflow: `TARTAN_LEASE=99999999999d` made every lease
/// a time past the end of Postgres's calendar, so every start answered 503.
/// Each is far above any use (the defaults are seconds to a month).
pub const MAX_STEP_TIMEOUT: Duration = DAY;
pub const MAX_RETRY_BACKOFF: Duration = DAY;
pub const MAX_LEASE: Duration = HOUR;
pub const MAX_RETRY_AFTER_CEILING: Duration = DAY;
pub const MAX_DB_READ_TIMEOUT: Duration = HOUR;
pub const MAX_HEADER_TIMEOUT: Duration = Duration::from_secs(10 * MINUTE.as_secs());
pub const MAX_BODY_TIMEOUT: Duration = HOUR;
pub const MAX_SHUTDOWN_GRACE: Duration = HOUR;
pub const MAX_RETENTION: Duration = Duration::from_secs(3650 * 86_400);

/// Every setting after merging, each read and checked by `values`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    #[serde(deserialize_with = "values::text")]
    listen: String,
    #[serde(deserialize_with = "values::text")]
    database_url: String,
    #[serde(default, deserialize_with = "values::opt_http_url")]
    webhook_base_url: Option<String>,
    #[serde(default, deserialize_with = "values::opt_text")]
    node_id: Option<String>,
    #[serde(deserialize_with = "values::parsed")]
    log_format: LogFormat,
    #[serde(default, deserialize_with = "values::list")]
    api_token: Vec<String>,
    #[serde(default, deserialize_with = "values::opt_path")]
    api_token_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "values::list")]
    read_token: Vec<String>,
    #[serde(default, deserialize_with = "values::opt_path")]
    read_token_file: Option<PathBuf>,
    #[serde(deserialize_with = "values::flag")]
    allow_unauthenticated: bool,
    #[serde(default, deserialize_with = "values::list")]
    cors_origins: Vec<String>,
    #[serde(default, deserialize_with = "values::allowed_hosts")]
    allowed_hosts: AllowedHosts,
    #[serde(default, deserialize_with = "values::hosts")]
    step_hosts: Option<StepHosts>,
    #[serde(deserialize_with = "values::timeout")]
    step_timeout: Duration,
    #[serde(deserialize_with = "values::max_retries")]
    retry_max_retries: i64,
    #[serde(deserialize_with = "values::timeout")]
    retry_initial_backoff: Duration,
    #[serde(deserialize_with = "values::timeout")]
    retry_max_backoff: Duration,
    #[serde(deserialize_with = "values::parsed")]
    retry_backoff_type: BackoffType,
    #[serde(deserialize_with = "values::count")]
    max_step_attempts: u32,
    #[serde(deserialize_with = "values::count")]
    max_active_flows: usize,
    #[serde(deserialize_with = "values::timeout")]
    lease: Duration,
    #[serde(deserialize_with = "values::count")]
    max_calls: usize,
    #[serde(default, deserialize_with = "values::opt_count")]
    max_calls_per_step: Option<usize>,
    #[serde(deserialize_with = "values::count")]
    max_queued_calls: usize,
    #[serde(deserialize_with = "values::count")]
    max_streams: usize,
    #[serde(deserialize_with = "values::count")]
    stream_buffer: usize,
    #[serde(deserialize_with = "values::count")]
    stream_buffer_bytes: usize,
    #[serde(deserialize_with = "values::count")]
    max_bulk_flows: usize,
    #[serde(deserialize_with = "values::count")]
    max_response_bytes: usize,
    #[serde(deserialize_with = "values::count")]
    max_inflight_bytes: usize,
    #[serde(deserialize_with = "values::count")]
    max_flow_bytes: u64,
    #[serde(deserialize_with = "values::timeout")]
    max_retry_after: Duration,
    #[serde(default, deserialize_with = "values::opt_count")]
    db_pool: Option<u32>,
    #[serde(default, deserialize_with = "values::opt_count")]
    db_read_pool: Option<u32>,
    #[serde(deserialize_with = "values::timeout")]
    db_read_timeout: Duration,
    #[serde(deserialize_with = "values::timeout")]
    header_timeout: Duration,
    #[serde(deserialize_with = "values::timeout")]
    body_timeout: Duration,
    #[serde(default, deserialize_with = "values::opt_count")]
    max_connections: Option<usize>,
    #[serde(deserialize_with = "values::timeout")]
    shutdown_grace: Duration,
    #[serde(deserialize_with = "values::delay")]
    retention: Duration,
}

impl Settings {
    /// Every duration setting: its key, its value and its ceiling.
    fn durations(&self) -> [(&'static str, Duration, Duration); 10] {
        [
            ("step_timeout", self.step_timeout, MAX_STEP_TIMEOUT),
            (
                "retry_initial_backoff",
                self.retry_initial_backoff,
                MAX_RETRY_BACKOFF,
            ),
            ("retry_max_backoff", self.retry_max_backoff, MAX_RETRY_BACKOFF),
            ("lease", self.lease, MAX_LEASE),
            ("max_retry_after", self.max_retry_after, MAX_RETRY_AFTER_CEILING),
            ("db_read_timeout", self.db_read_timeout, MAX_DB_READ_TIMEOUT),
            ("header_timeout", self.header_timeout, MAX_HEADER_TIMEOUT),
            ("body_timeout", self.body_timeout, MAX_BODY_TIMEOUT),
            ("shutdown_grace", self.shutdown_grace, MAX_SHUTDOWN_GRACE),
            ("retention", self.retention, MAX_RETENTION),
        ]
    }
}

/// A ceiling as the documentation writes it: more than a day in whole
/// days as days (`3650d`), anything else in hours and less (`24h`).
// `is_multiple_of` needs Rust 1.87; the workspace declares rust-version 1.85.
#[allow(clippy::manual_is_multiple_of)]
fn shown(d: Duration) -> String {
    if d > DAY && d.as_secs() % 86_400 == 0 && d.subsec_nanos() == 0 {
        format!("{}d", d.as_secs() / 86_400)
    } else {
        tartan_core::duration::format_duration(d)
    }
}

/// The resolved configuration.
pub struct Config {
    pub listen: String,
    pub database_url: String,
    pub webhook_base_url: Option<String>,
    pub node_id: Option<String>,
    pub log_format: LogFormat,
    pub step_timeout: Duration,
    pub work_defaults: RetryDefaults,
    /// Default cap on a flow's attempts (`TARTAN_MAX_STEP_ATTEMPTS`).
    pub max_step_attempts: u32,
    /// How long a lease holds beyond the attempt timeout (`TARTAN_LEASE`).
    pub lease: Duration,
    /// Flows in progress in this process at most (`TARTAN_MAX_ACTIVE_FLOWS`).
    pub max_active_flows: usize,
    /// Header and body read timeouts, shutdown grace; the connection cap is
    /// set at start-up from `max_connections` and the open-file limit.
    pub server_limits: tartan_server::ServerLimits,
    /// Connections at once at most, when set (`TARTAN_MAX_CONNECTIONS`).
    pub max_connections: Option<usize>,
    /// Tokens and CORS origins of the API.
    pub security: ApiSecurity,
    /// Where steps may call (`TARTAN_STEP_HOSTS`).
    pub step_hosts: StepHosts,
    pub max_calls: usize,
    pub max_calls_per_step: Option<usize>,
    pub max_queued_calls: usize,
    /// Event streams at once, and how far one may fall behind
    /// (docs/api.md, "Event streams").
    pub max_streams: usize,
    pub stream_buffer: usize,
    pub stream_buffer_bytes: usize,
    /// Flows one bulk job may match (docs/api.md, "Bulk operations").
    pub max_bulk_flows: usize,
    /// Connection pools (`TARTAN_DB_POOL`, `TARTAN_DB_READ_POOL`,
    /// `TARTAN_DB_READ_TIMEOUT`).
    pub pools: tartan_store::Pools,
    pub max_response_bytes: usize,
    /// `TARTAN_MAX_INFLIGHT_BYTES` (docs/durability.md, "Bytes in flight").
    pub max_inflight_bytes: usize,
    /// `TARTAN_MAX_FLOW_BYTES` (docs/errors.md, "A flow's size").
    pub max_flow_bytes: u64,
    pub max_retry_after: Duration,
    /// Finished flows older than this are deleted; `None` keeps them.
    pub retention: Option<Duration>,
}

/// A configuration with the sources it was merged from.
pub struct Loaded {
    pub config: Config,
    figment: Figment,
}

impl Config {
    /// Merge the four sources and check the result.
    pub fn load(args: &ServeArgs) -> Result<Loaded> {
        let mut figment = Figment::from(sources::Defaults);
        if let Some(path) = &args.config {
            // `file_exact`: a file that was named but is missing is an error.
            std::fs::metadata(path)
                .with_context(|| format!("--config / TARTAN_CONFIG: reading {}", path.display()))?;
            figment = figment.merge(Toml::file_exact(path));
        }
        let figment = figment
            .merge(sources::environment())
            .merge(sources::flags(args.given()));
        let settings: Settings = figment
            .extract()
            .map_err(|e| anyhow::anyhow!("invalid configuration:\n{}", sources::explain(e)))?;
        let config = Self::check(settings, &figment)?;
        Ok(Loaded { config, figment })
    }

    /// The checks that span settings, or read files; errors name the source.
    fn check(s: Settings, figment: &Figment) -> Result<Config> {
        let origin = |key: &str| sources::origin(figment, key);
        let Ok(addr) = s.listen.parse::<SocketAddr>() else {
            bail!("{}: expected host:port, got {:?}", origin("listen"), s.listen);
        };
        for (key, value, ceiling) in s.durations() {
            if value > ceiling {
                let given = figment
                    .find_value(key)
                    .map(|v| toml_literal(&v))
                    .unwrap_or_else(|_| shown(value));
                bail!("{}: at most {}, got {given}", origin(key), shown(ceiling));
            }
        }
        if s.retry_max_backoff < s.retry_initial_backoff {
            bail!(
                "{} must be at least {}",
                origin("retry_max_backoff"),
                origin("retry_initial_backoff")
            );
        }
        let api_tokens = tokens(figment, "api_token", s.api_token, s.api_token_file)?;
        let read_tokens = tokens(figment, "read_token", s.read_token, s.read_token_file)?;
        let security =
            ApiSecurity::new(&api_tokens, &read_tokens, &s.cors_origins)?.with_allowed_hosts(s.allowed_hosts);
        // As Redis's protected mode: no credentials, no network exposure.
        if !security.requires_token() && !addr.ip().to_canonical().is_loopback() && !s.allow_unauthenticated {
            bail!(
                "refusing to listen on {addr} ({}) without authentication: anyone who can reach it could \
                 drive the engine. Set TARTAN_API_TOKEN (or TARTAN_API_TOKEN_FILE) to require bearer tokens, \
                 or TARTAN_ALLOW_UNAUTHENTICATED=true (--allow-unauthenticated) to serve without them",
                origin("listen")
            );
        }
        Ok(Config {
            listen: s.listen,
            database_url: s.database_url,
            webhook_base_url: s.webhook_base_url,
            node_id: s.node_id,
            log_format: s.log_format,
            step_timeout: s.step_timeout,
            work_defaults: RetryDefaults {
                max_retries: s.retry_max_retries,
                init_backoff_ms: tartan_core::duration::as_millis_u64(s.retry_initial_backoff),
                max_backoff_ms: tartan_core::duration::as_millis_u64(s.retry_max_backoff),
                backoff_type: s.retry_backoff_type,
            },
            max_step_attempts: s.max_step_attempts,
            lease: s.lease,
            max_active_flows: s.max_active_flows,
            server_limits: tartan_server::ServerLimits {
                header_timeout: s.header_timeout,
                body_timeout: s.body_timeout,
                shutdown_grace: s.shutdown_grace,
                max_connections: s
                    .max_connections
                    .unwrap_or(tartan_server::DEFAULT_MAX_CONNECTIONS),
            },
            max_connections: s.max_connections,
            security,
            step_hosts: s.step_hosts.unwrap_or_else(StepHosts::unrestricted),
            max_calls: s.max_calls,
            max_calls_per_step: s.max_calls_per_step,
            max_queued_calls: s.max_queued_calls,
            max_streams: s.max_streams,
            stream_buffer: s.stream_buffer,
            stream_buffer_bytes: s.stream_buffer_bytes,
            max_bulk_flows: s.max_bulk_flows,
            pools: tartan_store::Pools {
                engine: s.db_pool,
                read: s.db_read_pool,
                read_timeout: s.db_read_timeout,
            },
            max_response_bytes: s.max_response_bytes,
            max_inflight_bytes: s.max_inflight_bytes,
            max_flow_bytes: s.max_flow_bytes,
            max_retry_after: s.max_retry_after,
            retention: Some(s.retention).filter(|d| !d.is_zero()),
        })
    }
}

/// The tokens of one setting, from its value or its `_file` (not both):
/// comma- or newline-separated, blanks ignored. Never logged.
fn tokens(figment: &Figment, key: &str, given: Vec<String>, file: Option<PathBuf>) -> Result<Vec<String>> {
    let file_key = format!("{key}_file");
    let read_from = |path: &PathBuf| {
        std::fs::read_to_string(path).with_context(|| {
            format!(
                "{}: reading {}",
                sources::origin(figment, &file_key),
                path.display()
            )
        })
    };
    let (tokens, origin) = match (given.is_empty(), file) {
        (false, Some(_)) => bail!(
            "set {} or {}, not both",
            sources::origin(figment, key),
            sources::origin(figment, &file_key)
        ),
        (false, None) => (given, sources::origin(figment, key)),
        (true, Some(path)) => (
            values::split_list(&read_from(&path)?),
            sources::origin(figment, &file_key),
        ),
        (true, None) => return Ok(Vec::new()),
    };
    if tokens.is_empty() {
        bail!("{origin} is set but holds no token");
    }
    // Checked here too, where the setting that gave the token is known
    // (a file, the TOML file, a flag); the server checks its own.
    if let Some(why) = tokens.iter().find_map(|t| tartan_server::token_problem(t)) {
        bail!("{origin}: {why}");
    }
    Ok(tokens)
}

/// What `tartan config check` prints and the start-up log shows.
pub struct Line {
    pub key: &'static str,
    /// The value as TOML would write it; secrets redacted. `None`: unset.
    pub value: Option<String>,
    pub origin: String,
}

/// Settings whose values are never shown.
const SECRETS: [&str; 2] = ["api_token", "read_token"];

impl Loaded {
    /// Every setting with its value (secrets redacted) and its source.
    pub fn report(&self) -> Vec<Line> {
        KEYS.iter()
            .map(|k| {
                let value = self.figment.find_value(k.name).ok().map(|v| {
                    if SECRETS.contains(&k.name) {
                        "\"<redacted>\"".to_string()
                    } else if k.name == "database_url" {
                        toml_literal(&figment::value::Value::from(tartan_store::redact(
                            &self.config.database_url,
                        )))
                    } else {
                        toml_literal(&v)
                    }
                });
                Line {
                    key: k.name,
                    value,
                    origin: sources::origin(&self.figment, k.name),
                }
            })
            .collect()
    }
}

/// A value as it would be written in the TOML file.
fn toml_literal(value: &figment::value::Value) -> String {
    use figment::value::Value;
    match value {
        // From the environment or a flag every value is text: shown as the
        // number or boolean it was read as.
        Value::String(_, s) if s.parse::<i64>().is_ok() || s == "true" || s == "false" => s.clone(),
        Value::String(_, s) => format!("{s:?}"),
        Value::Char(_, c) => format!("{:?}", c.to_string()),
        Value::Bool(_, b) => b.to_string(),
        Value::Num(..) => match (value.to_u128(), value.to_i128(), value.to_f64()) {
            (Some(u), _, _) => u.to_string(),
            (None, Some(i), _) => i.to_string(),
            (None, None, f) => f.unwrap_or_default().to_string(),
        },
        Value::Array(_, items) => format!(
            "[{}]",
            items.iter().map(toml_literal).collect::<Vec<_>>().join(", ")
        ),
        Value::Dict(_, _) | Value::Empty(_, _) => "{}".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ServeArgs,
    }

    /// Each setting is a key of the file, a variable and a flag.
    #[test]
    fn every_key_has_a_flag() {
        let command = Cli::command();
        for key in KEYS {
            let flag = key.name.replace('_', "-");
            assert!(
                command
                    .get_arguments()
                    .any(|a| a.get_long() == Some(flag.as_str())),
                "no --{flag}"
            );
        }
    }

    /// The settings as `Config::load` reads them, with `key` given as a
    /// flag.
    fn load_with(key: &'static str, value: &str) -> std::result::Result<Loaded, String> {
        let figment = Figment::from(sources::Defaults).merge(sources::flags(vec![(key, value.to_string())]));
        let settings: Settings = figment.extract().map_err(sources::explain)?;
        let config = Config::check(settings, &figment).map_err(|e| e.to_string())?;
        Ok(Loaded { config, figment })
    }

    /// Every setting whose default is a duration has a ceiling, and a
    /// value past it stops start-up naming the setting and the ceiling.
    #[test]
    fn every_duration_setting_has_a_ceiling() {
        let defaults = Figment::from(sources::Defaults);
        let Ok(settings) = defaults.extract::<Settings>() else {
            panic!("the defaults load");
        };
        let bounded: Vec<&str> = settings.durations().iter().map(|d| d.0).collect();
        for key in KEYS {
            let default = defaults.find_value(key.name).ok().and_then(|v| v.into_string());
            let is_duration = default.is_some_and(|d| {
                tartan_core::duration::parse_duration_str(&d, tartan_core::duration::DurationKind::Delay)
                    .is_ok()
            });
            assert_eq!(is_duration, bounded.contains(&key.name), "{}", key.name);
        }
        for (key, _, ceiling) in settings.durations() {
            let at = load_with(key, &format!("{}ms", ceiling.as_millis()));
            // The initial backoff at its ceiling is past the default longest one.
            assert!(
                at.is_ok() || key == "retry_initial_backoff",
                "{key}: {:?}",
                at.err()
            );
            let Err(why) = load_with(key, "99999999999d") else {
                panic!("{key}: 99999999999d accepted");
            };
            assert!(
                why.starts_with(&format!(
                    "--{} (command-line flag): at most {}",
                    key.replace('_', "-"),
                    shown(ceiling)
                )),
                "{why}"
            );
            assert!(why.ends_with("got \"99999999999d\""), "{why}");
        }
    }

    /// Each setting's flag reaches the merged settings.
    #[test]
    fn a_flag_wins_over_the_default() {
        let args = ServeArgs {
            max_calls: Some("7".into()),
            retention: Some("0".into()),
            log_format: Some("JSON".into()),
            ..ServeArgs::default()
        };
        let loaded = Config::load(&args).map_err(|e| e.to_string());
        let Ok(loaded) = loaded else {
            panic!("{loaded:?}", loaded = loaded.err());
        };
        assert_eq!(loaded.config.max_calls, 7);
        assert_eq!(loaded.config.retention, None);
        assert_eq!(loaded.config.log_format, LogFormat::Json);
    }
}
