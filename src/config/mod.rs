//! The configuration of `tartan serve` and `tartan config check`: defaults,
//! then the TOML file, then the environment, then flags, merged by one
//! loader (figment) and checked after merging, whatever each value's source
//! (docs/operating.md, "Configuration").
//!
//! - `table`: every setting, once: key, reader, default, ceiling, help.
//! - `sources`: the four sources, and how a value's source is named.
//! - `values`: how each kind of value is read and checked.

mod files;
mod lint;
mod sources;
mod table;
mod values;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use figment::providers::{Format, Toml};
use figment::Figment;
use tartan_core::hosts::StepHosts;
use tartan_core::retry::RetryDefaults;
use tartan_engine::EngineConfig;
use tartan_server::ApiSecurity;

use table::Settings;
pub use table::SETTINGS;

/// Flags of `tartan serve` and `tartan config check`: `--config`, and one
/// per setting (`table`), each also `TARTAN_<KEY>` in the environment and
/// `<key>` in the file.
#[derive(Debug, Clone, Default)]
pub struct ServeArgs {
    pub config: Option<PathBuf>,
    /// The settings given as flags, by key.
    given: Vec<(&'static str, String)>,
}

impl clap::FromArgMatches for ServeArgs {
    fn from_arg_matches(matches: &clap::ArgMatches) -> std::result::Result<Self, clap::Error> {
        Ok(ServeArgs {
            config: matches.get_one::<PathBuf>("config").cloned(),
            given: SETTINGS
                .iter()
                .filter_map(|s| Some((s.key, matches.get_one::<String>(s.key)?.clone())))
                .collect(),
        })
    }

    fn update_from_arg_matches(
        &mut self,
        matches: &clap::ArgMatches,
    ) -> std::result::Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for ServeArgs {
    fn augment_args(command: clap::Command) -> clap::Command {
        let config = clap::Arg::new("config")
            .long("config")
            .env("TARTAN_CONFIG")
            .value_parser(clap::value_parser!(PathBuf))
            .value_name("CONFIG")
            .help("TOML file of settings (keys as the flags', with `_`: `max_calls = 64`)");
        SETTINGS.iter().fold(command.arg(config), |command, s| {
            let arg = clap::Arg::new(s.key)
                .long(s.key.replace('_', "-"))
                .value_name(s.key.to_ascii_uppercase())
                .help(s.shown_help());
            command.arg(if s.switch {
                arg.num_args(0..=1).default_missing_value("true")
            } else {
                arg
            })
        })
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        Self::augment_args(command)
    }
}

/// The flags of the commands that only open the database (`migrate`,
/// `purge`, `backup`): the settings file and the database URL. The
/// database is the one `serve` would use (`TARTAN_DATABASE_URL`, the file's
/// `database_url`); `serve`'s other settings are no flags here, so that
/// these commands' help fits a screen.
#[derive(Debug, Clone, clap::Args)]
pub struct DatabaseArgs {
    /// TOML file of settings, as `serve` reads it (its `database_url`).
    #[arg(long, env = "TARTAN_CONFIG", value_name = "CONFIG")]
    config: Option<PathBuf>,
    /// sqlite://path or postgres://... (env TARTAN_DATABASE_URL, then
    /// DATABASE_URL) [default: sqlite://tartan.db].
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
}

impl DatabaseArgs {
    /// As the settings of `serve`: the database URL the only flag.
    pub fn settings(&self) -> ServeArgs {
        ServeArgs {
            config: self.config.clone(),
            given: self
                .database_url
                .iter()
                .map(|url| ("database_url", url.clone()))
                .collect(),
        }
    }
}

impl ServeArgs {
    /// These arguments with `key` given as a flag.
    #[cfg(test)]
    fn with(mut self, key: &'static str, value: &str) -> Self {
        self.given.push((key, value.to_string()));
        self
    }
}

/// How log lines are written (`TARTAN_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
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
    /// The engine's, but for what is known only once the server listens:
    /// its node id and webhook base (from the two above and the address),
    /// and the tracer.
    pub engine: EngineConfig,
    /// Header and body read timeouts, shutdown grace; the connection cap is
    /// set at start-up from `max_connections` and the open-file limit.
    pub server: tartan_server::ServerOptions,
    /// Connections at once at most, when set (`TARTAN_MAX_CONNECTIONS`).
    pub max_connections: Option<usize>,
    /// Tokens and CORS origins of the API.
    pub security: ApiSecurity,
    /// Connection pools (`TARTAN_DB_POOL`, `TARTAN_DB_READ_POOL`,
    /// `TARTAN_DB_READ_TIMEOUT`).
    pub pools: tartan_store::Pools,
    /// The runtime's worker threads, when set (`TARTAN_WORKER_THREADS`).
    pub worker_threads: Option<usize>,
}

/// Worker threads at most: each is an OS thread with its own stack.
pub const MAX_WORKER_THREADS: usize = 1024;

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
            .merge(sources::flags(args.given.clone()));
        let settings: Settings = figment.extract().map_err(|e| {
            // Every problem at once, not the first only.
            let all = lint::problems(&figment);
            let shown = if all.is_empty() {
                sources::explain(e)
            } else {
                sources::explain(all)
            };
            anyhow::anyhow!("invalid configuration:\n{shown}")
        })?;
        let config = Self::check(settings, &figment)?;
        Ok(Loaded { config, figment })
    }

    /// The checks that span settings, or read files; errors name the source.
    fn check(s: Settings, figment: &Figment) -> Result<Config> {
        let origin = |key: &str| sources::origin(figment, key);
        let Ok(addr) = s.listen.parse::<SocketAddr>() else {
            bail!("{}: expected host:port, got {:?}", origin("listen"), s.listen);
        };
        for (key, value, ceiling) in s.bounded() {
            if value > ceiling {
                let given = figment
                    .find_value(key)
                    .map(|v| toml_literal(&v))
                    .unwrap_or_else(|_| shown(value));
                bail!("{}: at most {}, got {given}", origin(key), shown(ceiling));
            }
        }
        // Counts have no ceiling in the table (a count's only bound is
        // usually the machine's); this one allocates per answer kept.
        if s.memo_cache_size > tartan_engine::MAX_MEMO_CACHE_SIZE {
            bail!(
                "{}: at most {}, got {}",
                origin("memo_cache_size"),
                tartan_engine::MAX_MEMO_CACHE_SIZE,
                s.memo_cache_size
            );
        }
        if let Some(n) = s.worker_threads.filter(|n| *n > MAX_WORKER_THREADS) {
            bail!(
                "{}: at most {MAX_WORKER_THREADS}, got {n}",
                origin("worker_threads")
            );
        }
        if s.retry_max_backoff < s.retry_initial_backoff {
            bail!(
                "{} must be at least {}",
                origin("retry_max_backoff"),
                origin("retry_initial_backoff")
            );
        }
        let step_tls = files::step_tls(
            figment,
            s.step_ca_file,
            s.step_client_cert_file,
            s.step_client_key_file,
        )?;
        // The examples' placeholder password, applied unchanged
        // (deploy/k8s/secret.yaml): refused by name, before any connection.
        let password = reqwest::Url::parse(&s.database_url)
            .ok()
            .and_then(|url| url.password().map(str::to_string));
        if password.is_some_and(|p| tartan_server::security::is_placeholder(&p)) {
            bail!(
                "{} holds the examples' placeholder password (CHANGE-ME): set the database's real URL",
                origin("database_url")
            );
        }
        let api_tokens = files::tokens(figment, "api_token", s.api_token, s.api_token_file)?;
        let read_tokens = files::tokens(figment, "read_token", s.read_token, s.read_token_file)?;
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
            engine: EngineConfig {
                work_defaults: RetryDefaults {
                    max_retries: s.retry_max_retries,
                    init_backoff_ms: tartan_core::duration::as_millis_u64(s.retry_initial_backoff),
                    max_backoff_ms: tartan_core::duration::as_millis_u64(s.retry_max_backoff),
                    backoff_type: s.retry_backoff_type,
                },
                step_timeout: s.step_timeout,
                max_step_attempts: s.max_step_attempts,
                max_active_flows: s.max_active_flows,
                lease: s.lease,
                step_hosts: s.step_hosts.unwrap_or_else(StepHosts::unrestricted),
                step_tls,
                lanes: s.lanes,
                max_calls: s.max_calls,
                max_calls_per_step: s.max_calls_per_step,
                max_queued_calls: s.max_queued_calls,
                max_response_bytes: s.max_response_bytes,
                max_inflight_bytes: s.max_inflight_bytes,
                max_flow_bytes: s.max_flow_bytes,
                max_retry_after: s.max_retry_after,
                retention: Some(s.retention).filter(|d| !d.is_zero()),
                max_streams: s.max_streams,
                stream_buffer: s.stream_buffer,
                stream_buffer_bytes: s.stream_buffer_bytes,
                max_bulk_flows: s.max_bulk_flows,
                memo_cache_size: s.memo_cache_size,
                memo_max_entries: s.memo_max_entries,
                script_limits: tartan_core::step::ScriptLimits {
                    instructions: s.script_max_instructions,
                    memory_bytes: s.script_max_memory,
                    wall: s.script_timeout,
                },
                max_scripts: s.script_max_concurrent,
                health: tartan_engine::HealthConfig {
                    interval: s.health_interval,
                    timeout: s.health_timeout,
                },
                ..EngineConfig::default()
            },
            server: tartan_server::ServerOptions {
                header_timeout: s.header_timeout,
                body_timeout: s.body_timeout,
                shutdown_grace: s.shutdown_grace,
                max_connections: s
                    .max_connections
                    .unwrap_or(tartan_server::DEFAULT_MAX_CONNECTIONS),
                ui: s.ui,
            },
            max_connections: s.max_connections,
            worker_threads: s.worker_threads,
            security,
            pools: tartan_store::Pools {
                engine: s.db_pool,
                read: s.db_read_pool,
                read_timeout: s.db_read_timeout,
            },
            listen: s.listen,
            database_url: s.database_url,
            webhook_base_url: s.webhook_base_url,
            node_id: s.node_id,
            log_format: s.log_format,
        })
    }
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
    /// Argyll's settings that are set and ignored, and valid values that
    /// are most likely a slip (a lease of 30 ms), one line each: `config
    /// check` prints them, `serve` logs them.
    pub fn warnings(&self) -> Vec<String> {
        let c = &self.config;
        let mut out = sources::argyll_ignored();
        out.extend(lint::warnings(
            &self.figment,
            c.engine.lease,
            &[
                ("step_timeout", c.engine.step_timeout),
                ("script_timeout", c.engine.script_limits.wall),
                ("health_timeout", c.engine.health.timeout),
                ("header_timeout", c.server.header_timeout),
                ("body_timeout", c.server.body_timeout),
                ("db_read_timeout", c.pools.read_timeout),
            ],
        ));
        out
    }

    pub fn report(&self) -> Vec<Line> {
        SETTINGS
            .iter()
            .map(|k| {
                let value = self.figment.find_value(k.key).ok().map(|v| {
                    if SECRETS.contains(&k.key) {
                        "\"<redacted>\"".to_string()
                    } else if k.key == "database_url" {
                        toml_literal(&figment::value::Value::from(tartan_store::redact(
                            &self.config.database_url,
                        )))
                    } else {
                        toml_literal(&v)
                    }
                });
                Line {
                    key: k.key,
                    value,
                    origin: sources::origin(&self.figment, k.key),
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
        // An inline table (`lanes`), keys quoted as TOML needs.
        Value::Dict(_, dict) => format!(
            "{{{}}}",
            dict.iter()
                .map(|(k, v)| format!("{k:?} = {}", toml_literal(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Empty(_, _) => "{}".to_string(),
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
        for key in SETTINGS {
            let flag = key.key.replace('_', "-");
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
        let bounded: Vec<&str> = settings.bounded().iter().map(|d| d.0).collect();
        for key in SETTINGS {
            let default = defaults.find_value(key.key).ok().and_then(|v| v.into_string());
            let is_duration = default.is_some_and(|d| {
                tartan_core::duration::parse_duration_str(&d, tartan_core::duration::DurationKind::Delay)
                    .is_ok()
            });
            assert_eq!(is_duration, bounded.contains(&key.key), "{}", key.key);
        }
        for (key, _, ceiling) in settings.bounded() {
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
        let args = ServeArgs::default()
            .with("max_calls", "7")
            .with("retention", "0")
            .with("log_format", "JSON");
        let loaded = Config::load(&args).map_err(|e| e.to_string());
        let Ok(loaded) = loaded else {
            panic!("{loaded:?}", loaded = loaded.err());
        };
        assert_eq!(loaded.config.engine.max_calls, 7);
        assert_eq!(loaded.config.engine.retention, None);
        assert_eq!(loaded.config.log_format, LogFormat::Json);
    }

    /// Flags parse into the settings they name; a switch needs no value.
    #[test]
    fn flags_are_read_from_the_command_line() {
        use clap::Parser;
        let parsed = Cli::try_parse_from(["tartan", "--max-calls", "9", "--allow-unauthenticated"]);
        let Ok(cli) = parsed else {
            panic!("{parsed:?}", parsed = parsed.err());
        };
        assert_eq!(
            cli.args.given,
            [
                ("allow_unauthenticated", "true".to_string()),
                ("max_calls", "9".to_string())
            ]
        );
        let Ok(cli) = Cli::try_parse_from(["tartan", "--allow-unauthenticated", "false"]) else {
            panic!("--allow-unauthenticated false refused");
        };
        assert_eq!(cli.args.given, [("allow_unauthenticated", "false".to_string())]);
        assert!(Cli::try_parse_from(["tartan", "--max-callz", "9"]).is_err());
    }

    /// The value a setting's default has in the TOML file.
    fn literal(default: table::Default) -> Option<String> {
        match default {
            table::Default::Value(table::Fixed::Text(v)) => Some(format!("{v:?}")),
            table::Default::Value(v) => Some(v.shown()),
            table::Default::Unset(_) => None,
        }
    }

    /// `tartan.example.toml` shows every key with its default (`# key =
    /// default`), or, for a key without one, an example (`## key = ...`).
    #[test]
    fn the_example_file_shows_every_default() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tartan.example.toml");
        let Ok(text) = std::fs::read_to_string(path) else {
            panic!("reading {path}");
        };
        for s in SETTINGS {
            let line = match literal(s.default) {
                Some(value) => format!("# {} = {value}", s.key),
                None => format!("## {} = ", s.key),
            };
            assert!(
                text.lines().any(|l| l.starts_with(&line)),
                "tartan.example.toml: no line {line:?}"
            );
        }
    }

    /// docs/operating.md's table of every setting names each key, with its
    /// default and, for a duration, its ceiling.
    #[test]
    fn the_operating_guide_lists_every_setting() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operating.md");
        let Ok(text) = std::fs::read_to_string(path) else {
            panic!("reading {path}");
        };
        let Some(table) = text.split("### Every setting").nth(1) else {
            panic!("docs/operating.md has no \"Every setting\"");
        };
        let rows: Vec<&str> = table
            .lines()
            .take_while(|l| l.is_empty() || l.starts_with('|'))
            .collect();
        for s in SETTINGS {
            let name = format!("`{}`", s.key);
            let Some(row) = rows
                .iter()
                .find(|r| r.split('|').nth(1).is_some_and(|k| k.contains(&name)))
            else {
                panic!("docs/operating.md, \"Every setting\": no row for {name}");
            };
            let default = row.split('|').nth(2).unwrap_or_default();
            if let table::Default::Value(v) = s.default {
                let shown = v.shown();
                assert!(
                    default.contains(&shown),
                    "{name}: default {shown} not in {default:?}"
                );
            }
            if let Some(ceiling) = s.ceiling {
                let at_most = format!("at most `{}`", shown(ceiling));
                let and = format!("and `{}`", shown(ceiling));
                assert!(
                    row.contains(&at_most) || row.contains(&and),
                    "{name}: no {at_most:?} in {row:?}"
                );
            }
        }
    }
}
