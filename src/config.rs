//! Configuration of `tartan serve`: flags, environment and an optional TOML
//! file with the same keys, in that order of precedence, then `validate()`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Deserialize;
use tartan_core::duration::{parse_duration_str, DurationKind};
use tartan_core::hosts::StepHosts;
use tartan_core::retry::{BackoffType, RetryDefaults};
use tartan_server::ApiSecurity;

/// Flags of `tartan serve`. Every flag has an environment variable.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port [default: 127.0.0.1:8080]
    #[arg(long, env = "TARTAN_LISTEN")]
    pub listen: Option<String>,
    /// Database: sqlite://path (created if missing) or postgres://... [default: sqlite://tartan.db]
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Base URL async steps call back [default: http://<listen address>]
    #[arg(long, env = "TARTAN_WEBHOOK_BASE_URL")]
    pub webhook_base_url: Option<String>,
    /// TOML file with the same keys (listen, database_url, ...)
    #[arg(long, env = "TARTAN_CONFIG")]
    pub config: Option<PathBuf>,
    /// Stable id of this engine process [default: derived from host and listen address]
    #[arg(long, env = "TARTAN_NODE_ID")]
    pub node_id: Option<String>,
    /// Bearer tokens granting every route, comma-separated (rotation: list old and new)
    #[arg(long, env = "TARTAN_API_TOKEN", hide_env_values = true)]
    pub api_token: Option<String>,
    /// File holding the API tokens (e.g. a mounted Kubernetes secret)
    #[arg(long, env = "TARTAN_API_TOKEN_FILE")]
    pub api_token_file: Option<PathBuf>,
    /// Bearer tokens granting GET routes only, comma-separated
    #[arg(long, env = "TARTAN_READ_TOKEN", hide_env_values = true)]
    pub read_token: Option<String>,
    /// File holding the read tokens
    #[arg(long, env = "TARTAN_READ_TOKEN_FILE")]
    pub read_token_file: Option<PathBuf>,
    /// Serve without tokens on a non-loopback address (anyone who reaches it may drive the engine)
    #[arg(long, env = "TARTAN_ALLOW_UNAUTHENTICATED", num_args = 0..=1, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub allow_unauthenticated: Option<bool>,
    /// Origins browsers may call the API from, comma-separated exact origins or * [default: none]
    #[arg(long, env = "TARTAN_CORS_ORIGINS")]
    pub cors_origins: Option<String>,
    /// Where steps may call: comma-separated host names, *.domain patterns,
    /// IP addresses and CIDR ranges [default: any address but link-local]
    #[arg(long, env = "TARTAN_STEP_HOSTS")]
    pub step_hosts: Option<String>,
    /// Calls in flight in this process at most [default: 1024]
    #[arg(long, env = "TARTAN_MAX_CALLS", value_parser = at_least_one)]
    pub max_calls: Option<usize>,
    /// Calls of one step in flight at most, so that one step whose endpoint
    /// hangs cannot hold every slot [default: half of TARTAN_MAX_CALLS]
    #[arg(long, env = "TARTAN_MAX_CALLS_PER_STEP", value_parser = at_least_one)]
    pub max_calls_per_step: Option<usize>,
    /// Calls waiting for a slot at most; one beyond it is made when its lease runs out [default: 10000]
    #[arg(long, env = "TARTAN_MAX_QUEUED_CALLS", value_parser = at_least_one)]
    pub max_queued_calls: Option<usize>,
    /// Database connections of the engine (Postgres: commits, leases and the engine's reads;
    /// SQLite: the engine's readers, beside its one writer) [default: 16 Postgres, 4 SQLite]
    #[arg(long, env = "TARTAN_DB_POOL", value_parser = at_least_one_u32)]
    pub db_pool: Option<u32>,
    /// Database connections of the API's listings and histories, apart from the engine's [default: 4]
    #[arg(long, env = "TARTAN_DB_READ_POOL", value_parser = at_least_one_u32)]
    pub db_read_pool: Option<u32>,
    /// Postgres: how long one listing or history statement of the API may run [default: 30s]
    #[arg(long, env = "TARTAN_DB_READ_TIMEOUT")]
    pub db_read_timeout: Option<String>,
    /// How long a client may take to send a request's headers [default: 10s]
    #[arg(long, env = "TARTAN_HEADER_TIMEOUT")]
    pub header_timeout: Option<String>,
    /// How long a client may take to send a request's body after its headers [default: 30s]
    #[arg(long, env = "TARTAN_BODY_TIMEOUT")]
    pub body_timeout: Option<String>,
    /// How long calls in flight may finish after SIGTERM before they are handed back [default: 10s]
    #[arg(long, env = "TARTAN_SHUTDOWN_GRACE")]
    pub shutdown_grace: Option<String>,
    /// Bytes of a step's response body (or webhook body) at most; past it the attempt fails [default: 8388608]
    #[arg(long, env = "TARTAN_MAX_RESPONSE_BYTES")]
    pub max_response_bytes: Option<String>,
    /// The longest wait a step's Retry-After may ask for, e.g. 1h or 300ms [default: 1h]
    #[arg(long, env = "TARTAN_MAX_RETRY_AFTER")]
    pub max_retry_after: Option<String>,
}

/// A count of at least 1 given as a flag or environment variable.
fn at_least_one(text: &str) -> std::result::Result<usize, String> {
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("must be a whole number of at least 1, got {text:?}"))
}

fn at_least_one_u32(text: &str) -> std::result::Result<u32, String> {
    at_least_one(text).and_then(|n| u32::try_from(n).map_err(|_| format!("too large: {text:?}")))
}

/// The file form: the same keys, all optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<String>,
    database_url: Option<String>,
    webhook_base_url: Option<String>,
    node_id: Option<String>,
    step_timeout: Option<String>,
    retry_max_retries: Option<i64>,
    retry_initial_backoff: Option<String>,
    retry_max_backoff: Option<String>,
    retry_backoff_type: Option<String>,
    max_step_attempts: Option<u32>,
    max_active_flows: Option<usize>,
    lease: Option<String>,
    header_timeout: Option<String>,
    body_timeout: Option<String>,
    shutdown_grace: Option<String>,
    api_token: Option<String>,
    api_token_file: Option<PathBuf>,
    read_token: Option<String>,
    read_token_file: Option<PathBuf>,
    allow_unauthenticated: Option<bool>,
    cors_origins: Option<String>,
    step_hosts: Option<HostList>,
    max_calls: Option<usize>,
    max_calls_per_step: Option<usize>,
    max_queued_calls: Option<usize>,
    db_pool: Option<u32>,
    db_read_pool: Option<u32>,
    db_read_timeout: Option<String>,
    max_response_bytes: Option<usize>,
    max_retry_after: Option<String>,
}

/// `step_hosts` in the file: the comma-separated text, or a list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum HostList {
    Text(String),
    List(Vec<String>),
}

/// The resolved configuration.
pub struct Config {
    pub listen: String,
    pub database_url: String,
    pub webhook_base_url: Option<String>,
    pub node_id: Option<String>,
    pub step_timeout: Duration,
    pub work_defaults: RetryDefaults,
    /// Default cap on a flow's attempts (`TARTAN_MAX_STEP_ATTEMPTS`).
    pub max_step_attempts: u32,
    /// How long a lease holds beyond the attempt timeout (`TARTAN_LEASE`).
    pub lease: Duration,
    /// Flows in progress in this process at most (`TARTAN_MAX_ACTIVE_FLOWS`).
    pub max_active_flows: usize,
    /// Header and body read timeouts, shutdown grace (`TARTAN_HEADER_TIMEOUT`,
    /// `TARTAN_BODY_TIMEOUT`, `TARTAN_SHUTDOWN_GRACE`).
    pub server_limits: tartan_server::ServerLimits,
    /// Tokens and CORS origins of the API.
    pub security: ApiSecurity,
    /// Serve without tokens on a non-loopback address.
    pub allow_unauthenticated: bool,
    /// Where steps may call (`TARTAN_STEP_HOSTS`).
    pub step_hosts: StepHosts,
    /// Calls in flight at most (`TARTAN_MAX_CALLS`), of one step
    /// (`TARTAN_MAX_CALLS_PER_STEP`), waiting (`TARTAN_MAX_QUEUED_CALLS`).
    pub max_calls: usize,
    pub max_calls_per_step: Option<usize>,
    pub max_queued_calls: usize,
    /// Connection pools (`TARTAN_DB_POOL`, `TARTAN_DB_READ_POOL`,
    /// `TARTAN_DB_READ_TIMEOUT`).
    pub pools: tartan_store::Pools,
    /// A step's response body at most (`TARTAN_MAX_RESPONSE_BYTES`).
    pub max_response_bytes: usize,
    /// The longest `Retry-After` wait honoured (`TARTAN_MAX_RETRY_AFTER`).
    pub max_retry_after: Duration,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("database_url", &tartan_store::redact(&self.database_url))
            .field("webhook_base_url", &self.webhook_base_url)
            .field("node_id", &self.node_id)
            .field("step_timeout", &self.step_timeout)
            .field("work_defaults", &self.work_defaults)
            .field("max_step_attempts", &self.max_step_attempts)
            .field("lease", &self.lease)
            .field("max_active_flows", &self.max_active_flows)
            .field("server_limits", &self.server_limits)
            .field("security", &self.security)
            .field("allow_unauthenticated", &self.allow_unauthenticated)
            .field("step_hosts", &self.step_hosts.to_string())
            .field("max_calls", &self.max_calls)
            .field("max_calls_per_step", &self.max_calls_per_step)
            .field("max_queued_calls", &self.max_queued_calls)
            .field("pools", &self.pools)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("max_retry_after", &self.max_retry_after)
            .finish()
    }
}

/// An environment variable under its Tartan name or Argyll's.
fn env_var(names: &[&str]) -> Option<(String, String)> {
    names.iter().find_map(|n| {
        std::env::var(n)
            .ok()
            .filter(|v| !v.is_empty())
            .map(|v| (n.to_string(), v))
    })
}

fn duration_setting(
    names: &[&str],
    file: Option<String>,
    default: Duration,
    kind: DurationKind,
) -> Result<Duration> {
    let (source, text) = match env_var(names) {
        Some(found) => found,
        None => match file {
            Some(t) => ("config file".to_string(), t),
            None => return Ok(default),
        },
    };
    parse_duration_str(&text, kind).map_err(|e| anyhow::anyhow!("{source}: {e}"))
}

/// A duration from a flag (or its environment variable, which clap reads),
/// else the file, else `default`; errors name where the value came from.
fn flag_duration(
    name: &str,
    flag: Option<String>,
    file: Option<String>,
    default: Duration,
) -> Result<Duration> {
    let (source, text) = match (flag.filter(|t| !t.trim().is_empty()), file) {
        (Some(t), _) => (name.to_string(), t),
        (None, Some(t)) => (format!("{name} in the config file"), t),
        (None, None) => return Ok(default),
    };
    parse_duration_str(&text, DurationKind::Timeout).map_err(|e| anyhow::anyhow!("{source}: {e}"))
}

impl Config {
    pub fn resolve(args: ServeArgs) -> Result<Config> {
        let file: FileConfig = match &args.config {
            Some(path) => {
                let text =
                    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
            }
            None => FileConfig::default(),
        };
        let defaults = RetryDefaults::default();
        let max_retries = match env_var(&["TARTAN_RETRY_MAX_RETRIES", "RETRY_MAX_RETRIES"]) {
            Some((name, v)) => v
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= -1)
                .with_context(|| format!("{name}: must be an integer, -1 (unlimited) or more, got {v:?}"))?,
            None => file.retry_max_retries.unwrap_or(defaults.max_retries),
        };
        let init = duration_setting(
            &["TARTAN_RETRY_INITIAL_BACKOFF", "RETRY_INITIAL_BACKOFF"],
            file.retry_initial_backoff,
            Duration::from_millis(defaults.init_backoff_ms),
            DurationKind::Timeout,
        )?;
        let max = duration_setting(
            &["TARTAN_RETRY_MAX_BACKOFF", "RETRY_MAX_BACKOFF"],
            file.retry_max_backoff,
            Duration::from_millis(defaults.max_backoff_ms),
            DurationKind::Timeout,
        )?;
        // Parsed here, whatever its source: a misspelt type stops start-up
        // naming the setting, rather than failing every registration.
        let backoff_type = match env_var(&["TARTAN_RETRY_BACKOFF_TYPE", "RETRY_BACKOFF_TYPE"]) {
            Some((name, v)) => v
                .parse::<BackoffType>()
                .map_err(|e| anyhow::anyhow!("{name}: {e}"))?,
            None => match file.retry_backoff_type {
                Some(v) => v
                    .parse::<BackoffType>()
                    .map_err(|e| anyhow::anyhow!("retry_backoff_type in the configuration file: {e}"))?,
                None => defaults.backoff_type,
            },
        };
        let step_timeout = duration_setting(
            &["TARTAN_STEP_TIMEOUT", "STEP_TIMEOUT"],
            file.step_timeout,
            Duration::from_secs(30),
            DurationKind::Timeout,
        )?;
        let max_step_attempts = count_setting(
            "TARTAN_MAX_STEP_ATTEMPTS",
            file.max_step_attempts,
            tartan_core::flow::DEFAULT_MAX_STEP_ATTEMPTS,
        )?;
        let max_active_flows = count_setting("TARTAN_MAX_ACTIVE_FLOWS", file.max_active_flows, 10_000)?;
        let max_response_bytes = match args.max_response_bytes {
            Some(v) => v
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n >= 1)
                .with_context(|| {
                    format!("--max-response-bytes / TARTAN_MAX_RESPONSE_BYTES: must be a whole number of bytes, at least 1, got {v:?}")
                })?,
            None => match file.max_response_bytes {
                Some(0) => bail!("max_response_bytes in the config file: must be at least 1"),
                Some(n) => n,
                None => tartan_engine::DEFAULT_MAX_RESPONSE_BYTES,
            },
        };
        let max_retry_after = match args.max_retry_after {
            Some(text) => parse_duration_str(&text, DurationKind::Timeout)
                .map_err(|e| anyhow::anyhow!("--max-retry-after / TARTAN_MAX_RETRY_AFTER: {e}"))?,
            None => match file.max_retry_after {
                Some(text) => parse_duration_str(&text, DurationKind::Timeout)
                    .map_err(|e| anyhow::anyhow!("max_retry_after in the config file: {e}"))?,
                None => tartan_engine::DEFAULT_MAX_RETRY_AFTER,
            },
        };
        let lease = duration_setting(
            &["TARTAN_LEASE"],
            file.lease,
            Duration::from_secs(30),
            DurationKind::Timeout,
        )?;
        let max_calls_per_step = match args.max_calls_per_step.or(file.max_calls_per_step) {
            Some(n) if n < 1 => bail!("max_calls_per_step in the config file: must be at least 1"),
            n => n,
        };
        let counts = [
            ("max_calls", args.max_calls.or(file.max_calls)),
            (
                "max_queued_calls",
                args.max_queued_calls.or(file.max_queued_calls),
            ),
            ("db_pool", args.db_pool.or(file.db_pool).map(|n| n as usize)),
            (
                "db_read_pool",
                args.db_read_pool.or(file.db_read_pool).map(|n| n as usize),
            ),
        ];
        if let Some((name, _)) = counts.iter().find(|(_, n)| *n == Some(0)) {
            bail!("{name} in the config file: must be at least 1");
        }
        let read_timeout = match (args.db_read_timeout, file.db_read_timeout) {
            (Some(text), _) => parse_duration_str(&text, DurationKind::Timeout)
                .map_err(|e| anyhow::anyhow!("--db-read-timeout / TARTAN_DB_READ_TIMEOUT: {e}"))?,
            (None, Some(text)) => parse_duration_str(&text, DurationKind::Timeout)
                .map_err(|e| anyhow::anyhow!("db_read_timeout in the config file: {e}"))?,
            (None, None) => tartan_store::Pools::default().read_timeout,
        };
        let pools = tartan_store::Pools {
            engine: args.db_pool.or(file.db_pool),
            read: args.db_read_pool.or(file.db_read_pool),
            read_timeout,
        };
        let server_defaults = tartan_server::ServerLimits::default();
        let server_limits = tartan_server::ServerLimits {
            header_timeout: flag_duration(
                "--header-timeout / TARTAN_HEADER_TIMEOUT",
                args.header_timeout,
                file.header_timeout,
                server_defaults.header_timeout,
            )?,
            body_timeout: flag_duration(
                "--body-timeout / TARTAN_BODY_TIMEOUT",
                args.body_timeout,
                file.body_timeout,
                server_defaults.body_timeout,
            )?,
            shutdown_grace: flag_duration(
                "--shutdown-grace / TARTAN_SHUTDOWN_GRACE",
                args.shutdown_grace,
                file.shutdown_grace,
                server_defaults.shutdown_grace,
            )?,
        };
        let api_tokens = tokens(
            "TARTAN_API_TOKEN",
            args.api_token.or(file.api_token),
            args.api_token_file.or(file.api_token_file),
        )?;
        let read_tokens = tokens(
            "TARTAN_READ_TOKEN",
            args.read_token.or(file.read_token),
            args.read_token_file.or(file.read_token_file),
        )?;
        let cors_origins = list(args.cors_origins.or(file.cors_origins).as_deref().unwrap_or(""));
        let security = ApiSecurity::new(&api_tokens, &read_tokens, &cors_origins)?;
        // An empty setting (or one of commas and spaces) is no setting.
        let given = |text: &str| text.split(',').any(|e| !e.trim().is_empty());
        let file_hosts = file.step_hosts.map(|list| match list {
            HostList::Text(t) => t,
            HostList::List(l) => l.join(","),
        });
        let step_hosts = match (
            args.step_hosts.filter(|t| given(t)),
            file_hosts.filter(|t| given(t)),
        ) {
            (Some(text), _) => StepHosts::parse(&text)
                .map_err(|e| anyhow::anyhow!("--step-hosts / TARTAN_STEP_HOSTS: {e}"))?,
            (None, Some(text)) => {
                StepHosts::parse(&text).map_err(|e| anyhow::anyhow!("step_hosts in the config file: {e}"))?
            }
            (None, None) => StepHosts::unrestricted(),
        };
        let config = Config {
            listen: args
                .listen
                .or(file.listen)
                .unwrap_or_else(|| "127.0.0.1:8080".into()),
            database_url: args
                .database_url
                .or(file.database_url)
                .unwrap_or_else(|| "sqlite://tartan.db".into()),
            webhook_base_url: args.webhook_base_url.or(file.webhook_base_url),
            node_id: args.node_id.or(file.node_id),
            step_timeout,
            work_defaults: RetryDefaults {
                max_retries,
                init_backoff_ms: u64::try_from(init.as_millis()).unwrap_or(u64::MAX),
                max_backoff_ms: u64::try_from(max.as_millis()).unwrap_or(u64::MAX),
                backoff_type,
            },
            max_step_attempts,
            lease,
            max_active_flows,
            server_limits,
            security,
            allow_unauthenticated: args
                .allow_unauthenticated
                .or(file.allow_unauthenticated)
                .unwrap_or(false),
            step_hosts,
            max_calls: args
                .max_calls
                .or(file.max_calls)
                .unwrap_or(tartan_engine::DEFAULT_MAX_CALLS),
            max_calls_per_step,
            max_queued_calls: args
                .max_queued_calls
                .or(file.max_queued_calls)
                .unwrap_or(tartan_engine::DEFAULT_MAX_QUEUED_CALLS),
            pools,
            max_response_bytes,
            max_retry_after,
        };
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<()> {
        let Ok(addr) = self.listen.parse::<SocketAddr>() else {
            bail!(
                "--listen / TARTAN_LISTEN: expected host:port, got {:?}",
                self.listen
            );
        };
        // As Redis's protected mode: no credentials, no network exposure.
        if !self.security.requires_token()
            && !addr.ip().to_canonical().is_loopback()
            && !self.allow_unauthenticated
        {
            bail!(
                "refusing to listen on {addr} without authentication: anyone who can reach it could drive \
                 the engine. Set TARTAN_API_TOKEN (or TARTAN_API_TOKEN_FILE) to require bearer tokens, \
                 or TARTAN_ALLOW_UNAUTHENTICATED=true to serve without them"
            );
        }
        if self.work_defaults.max_backoff_ms < self.work_defaults.init_backoff_ms {
            bail!("TARTAN_RETRY_MAX_BACKOFF must be >= TARTAN_RETRY_INITIAL_BACKOFF");
        }
        if let Some(url) = &self.webhook_base_url {
            if !url.starts_with("http://") && !url.starts_with("https://") {
                bail!("--webhook-base-url / TARTAN_WEBHOOK_BASE_URL: expected an http(s) URL, got {url:?}");
            }
        }
        Ok(())
    }
}

/// The tokens of one setting, from its value or its `_FILE` (not both):
/// comma- or newline-separated, blanks ignored. Never logged.
fn tokens(setting: &str, value: Option<String>, file: Option<PathBuf>) -> Result<Vec<String>> {
    let text = match (value, file) {
        (Some(_), Some(_)) => bail!("set {setting} or {setting}_FILE, not both"),
        (Some(v), None) => v,
        (None, Some(path)) => std::fs::read_to_string(&path)
            .with_context(|| format!("{setting}_FILE: reading {}", path.display()))?,
        (None, None) => return Ok(Vec::new()),
    };
    let tokens = list(&text);
    if tokens.is_empty() {
        bail!("{setting} is set but holds no token");
    }
    Ok(tokens)
}

/// A comma- (or newline-) separated list, entries trimmed, blanks dropped.
fn list(text: &str) -> Vec<String> {
    text.split([',', '\n'])
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// A count of at least 1 from the environment, else the file, else `default`.
fn count_setting<T: std::str::FromStr + PartialOrd + From<u8>>(
    name: &str,
    file: Option<T>,
    default: T,
) -> Result<T> {
    match env_var(&[name]) {
        Some((name, v)) => v
            .trim()
            .parse::<T>()
            .ok()
            .filter(|n| *n >= T::from(1))
            .with_context(|| format!("{name}: must be a whole number of at least 1, got {v:?}")),
        None => Ok(file.unwrap_or(default)),
    }
}
