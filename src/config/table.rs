//! Every setting, once: its key, how its value is read, its default, its
//! ceiling, Argyll's name for it and its help text. From this one table come
//! the flags (`ServeArgs`), the environment variables, the defaults the
//! loader starts from, the typed `Settings` it fills, `tartan config check`'s
//! order, and the tests that hold `tartan.example.toml` and
//! docs/operating.md to it. `Config::check` turns `Settings` into the
//! engine's and the server's configuration.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use tartan_core::hosts::StepHosts;
use tartan_core::lanes::HostLanes;
use tartan_core::retry::BackoffType;
use tartan_server::AllowedHosts;

use super::{values, LogFormat, DAY, HOUR, MINUTE};

/// A built-in value, as the TOML file would write it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fixed {
    Text(&'static str),
    Int(i64),
    Bool(bool),
}

impl Fixed {
    /// As the documentation and `--help` show it: `30s`, `1024`, `false`.
    pub fn shown(self) -> String {
        match self {
            Fixed::Text(v) => v.to_string(),
            Fixed::Int(v) => v.to_string(),
            Fixed::Bool(v) => v.to_string(),
        }
    }
}

/// What a setting is when no source gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Default {
    Value(Fixed),
    /// Unset: nothing, or a value worked out at start-up, as this says
    /// (empty when there is nothing to say).
    Unset(&'static str),
}

const fn text(v: &'static str) -> Default {
    Default::Value(Fixed::Text(v))
}

const fn int(v: i64) -> Default {
    Default::Value(Fixed::Int(v))
}

const fn flag(v: bool) -> Default {
    Default::Value(Fixed::Bool(v))
}

const fn unset(shown: &'static str) -> Default {
    Default::Unset(shown)
}

/// One setting.
#[derive(Debug)]
pub struct Setting {
    /// The key in the file; `TARTAN_<KEY>` and `--<key-with-dashes>`.
    pub key: &'static str,
    /// The flag's help, without its default.
    pub help: &'static str,
    pub default: Default,
    /// Argyll's name for it, read when the `TARTAN_` one is not set.
    pub fallback_env: Option<&'static str>,
    /// The longest a duration may be (docs/operating.md, "Every setting").
    pub ceiling: Option<Duration>,
    /// A flag that may be given without a value (`--allow-unauthenticated`).
    pub switch: bool,
}

impl Setting {
    /// The help shown by `--help`: the text, then the default and the
    /// ceiling.
    pub fn shown_help(&self) -> String {
        let default = match self.default {
            Default::Value(v) => v.shown(),
            Default::Unset(shown) => shown.to_string(),
        };
        // Each line of a doc comment starts with its space.
        let help = self.help.trim();
        match (default.is_empty(), self.ceiling) {
            (true, _) => help.to_string(),
            (false, None) => format!("{help} [default: {default}]"),
            (false, Some(c)) => format!("{help} [default: {default}; at most {}]", super::shown(c)),
        }
    }
}

macro_rules! optional {
    () => {
        None
    };
    ($value:expr) => {
        Some($value)
    };
}

macro_rules! or_false {
    () => {
        false
    };
    ($value:expr) => {
        $value
    };
}

/// Declares `Settings` (every value after merging, each read and checked
/// by its reader in `values`) and `SETTINGS` (what is known of each) from
/// one list. Every field takes `serde(default)`: a key with a built-in
/// value always has one, a key without stays at its type's empty value.
macro_rules! settings {
    ($(
        $(#[doc = $doc:literal])+
        $key:ident: $ty:ty = $read:tt, $default:expr
            $(, fallback $env:literal)? $(, at_most $ceiling:expr)? $(, switch $switch:literal)?;
    )*) => {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(super) struct Settings {
            $( #[serde(default, deserialize_with = $read)] pub(super) $key: $ty, )*
        }

        /// Every setting, in the order `tartan config check` prints them.
        pub const SETTINGS: &[Setting] = &[$(
            Setting {
                key: stringify!($key),
                help: concat!($($doc),+),
                default: $default,
                fallback_env: optional!($($env)?),
                ceiling: optional!($($ceiling)?),
                switch: or_false!($($switch)?),
            },
        )*];

        impl Settings {
            /// Every known setting whose value does not read, each as an
            /// error of its own (one extract stops at the first), with the
            /// key and the source it came from.
            pub(super) fn each_error(figment: &figment::Figment) -> Vec<figment::Error> {
                let mut errors = Vec::new();
                $(
                    if let Ok(value) = figment.find_value(stringify!($key)) {
                        #[derive(Deserialize)]
                        struct One {
                            #[serde(deserialize_with = $read)]
                            #[allow(dead_code)]
                            value: $ty,
                        }
                        let mut dict = figment::value::Dict::new();
                        dict.insert("value".to_string(), value);
                        if let Err(e) = One::deserialize(&figment::value::Value::from(dict)) {
                            for mut e in e {
                                e.path = vec![stringify!($key).to_string()];
                                e.metadata = figment.find_metadata(stringify!($key)).cloned();
                                errors.push(e);
                            }
                        }
                    }
                )*
                errors
            }

            /// Each setting with a ceiling: its key, its value, its ceiling.
            pub(super) fn bounded(&self) -> Vec<(&'static str, Duration, Duration)> {
                vec![$( $( (stringify!($key), self.$key, $ceiling), )? )*]
            }
        }
    };
}

settings! {
    /// Address to listen on; port 0 picks a free port
    listen: String = "values::text", text("127.0.0.1:8080");
    /// sqlite://path (created if missing) or postgres://... (env TARTAN_DATABASE_URL, then DATABASE_URL)
    database_url: String = "values::text", text("sqlite://tartan.db"), fallback "DATABASE_URL";
    /// Base URL async steps call back
    webhook_base_url: Option<String> = "values::opt_http_url", unset("http://<listen address>"),
        fallback "WEBHOOK_BASE_URL";
    /// Stable id of this engine process
    node_id: Option<String> = "values::opt_text", unset("<hostname>-<port>"), fallback "RAFT_NODE_ID";
    /// Log lines as `text` or `json`
    log_format: LogFormat = "values::parsed", text("text");
    /// Bearer tokens granting every route, comma-separated (rotation: list old and new)
    api_token: Vec<String> = "values::list", unset("");
    /// File holding the API tokens (e.g. a mounted Kubernetes secret)
    api_token_file: Option<PathBuf> = "values::opt_path", unset("");
    /// Bearer tokens granting reads only (GET routes, plan previews, flow queries), comma-separated
    read_token: Vec<String> = "values::list", unset("");
    /// File holding the read tokens
    read_token_file: Option<PathBuf> = "values::opt_path", unset("");
    /// Serve without tokens on a non-loopback address (anyone who reaches it may drive the engine)
    allow_unauthenticated: bool = "values::flag", flag(false), switch true;
    /// Serve the dashboard at /ui (docs/ui.md); false leaves only the API
    ui: bool = "values::flag", flag(true);
    /// Origins browsers may call the API from, comma-separated exact origins or *
    cors_origins: Vec<String> = "values::list", unset("none");
    /// Host names requests may address besides loopback, localhost and the listen address,
    /// comma-separated, each with or without :port, *.domain, or * for any (DNS rebinding)
    allowed_hosts: AllowedHosts = "values::allowed_hosts",
        unset("none; with tokens, the Host is checked only when this is set");
    /// Where steps may call: comma-separated host names, *.domain patterns,
    /// IP addresses and CIDR ranges
    step_hosts: Option<StepHosts> = "values::hosts", unset("any address but link-local");
    /// PEM file of CAs step endpoints' certificates may chain to, besides the public ones
    step_ca_file: Option<PathBuf> = "values::opt_path", unset("");
    /// PEM file of the client certificate (chain) step calls present to endpoints that ask for one
    step_client_cert_file: Option<PathBuf> = "values::opt_path", unset("");
    /// PEM file of that certificate's private key
    step_client_key_file: Option<PathBuf> = "values::opt_path", unset("");
    /// Lanes of endpoint hosts (docs/lanes.md): host or host:port to {concurrency, rate, burst,
    /// breaker}, shared by every step calling the host; from the environment, as JSON
    lanes: HostLanes = "values::lanes", unset("none");
    /// Attempt timeout of a step that sets none
    step_timeout: Duration = "values::timeout", text("30s"), fallback "STEP_TIMEOUT", at_most DAY;
    /// Retries of a step that sets none; -1 for no limit
    retry_max_retries: i64 = "values::max_retries", int(10), fallback "RETRY_MAX_RETRIES";
    /// First retry delay of a step that sets none
    retry_initial_backoff: Duration = "values::timeout", text("1s"), fallback "RETRY_INITIAL_BACKOFF",
        at_most DAY;
    /// Longest retry delay of a step that sets none
    retry_max_backoff: Duration = "values::timeout", text("60s"), fallback "RETRY_MAX_BACKOFF", at_most DAY;
    /// fixed, linear or exponential
    retry_backoff_type: BackoffType = "values::parsed", text("exponential"), fallback "RETRY_BACKOFF_TYPE";
    /// Attempts of one flow's work items together, default and ceiling
    max_step_attempts: u32 = "values::count", int(tartan_core::flow::DEFAULT_MAX_STEP_ATTEMPTS as i64);
    /// Flows with work in progress in this process at most; beyond it starts get 503
    max_active_flows: usize = "values::count", int(tartan_engine::DEFAULT_MAX_ACTIVE_FLOWS as i64);
    /// How long a lease outlives the attempt timeout
    lease: Duration = "values::timeout", text("30s"), at_most HOUR;
    /// Calls in flight in this process at most
    max_calls: usize = "values::count", int(tartan_engine::DEFAULT_MAX_CALLS as i64);
    /// Calls of one step in flight at most, a hard cap on top of the rule
    /// that a step holds at most half of the slots the other steps leave
    max_calls_per_step: Option<usize> = "values::opt_count", unset("unset");
    /// Calls waiting for a slot at most; one beyond it is made when its lease runs out
    max_queued_calls: usize = "values::count", int(tartan_engine::DEFAULT_MAX_QUEUED_CALLS as i64);
    /// Event streams (SSE and WebSocket) open at once at most; one more is answered 503
    max_streams: usize = "values::count", int(tartan_engine::DEFAULT_MAX_STREAMS as i64);
    /// Decisions' events a stream may fall behind by before it is dropped (it resumes with Last-Event-ID)
    stream_buffer: usize = "values::count", int(tartan_engine::DEFAULT_STREAM_BUFFER as i64);
    /// Bytes of events (as JSON) a stream may fall behind by before it is dropped; what the bus holds for slow streams at most
    stream_buffer_bytes: usize = "values::count", int(tartan_engine::DEFAULT_STREAM_BUFFER_BYTES as i64);
    /// Flows one bulk retry or cancel may match at most; a filter matching more is refused
    max_bulk_flows: u64 = "values::count", int(tartan_engine::DEFAULT_MAX_BULK_FLOWS as i64);
    /// Bytes of a step's response body (or webhook body) at most; past it the attempt fails
    max_response_bytes: usize = "values::count", int(tartan_engine::DEFAULT_MAX_RESPONSE_BYTES as i64);
    /// Bytes of step request and response bodies held at once (requests while sent, responses from reading to recording); calls past it wait
    max_inflight_bytes: usize = "values::count", int(tartan_engine::DEFAULT_MAX_INFLIGHT_BYTES as i64);
    /// Bytes of JSON of one flow's inputs and outputs at most; an output past it fails its work item for good
    max_flow_bytes: u64 = "values::count", int(tartan_core::json::DEFAULT_MAX_FLOW_BYTES as i64);
    /// Lua safepoints (calls, loop iterations, pattern steps) or Ale evaluation steps one evaluation of a step's script may run
    script_max_instructions: u64 = "values::count", int(10_000_000);
    /// Bytes one evaluation of a step's script may allocate
    script_max_memory: usize = "values::count", int(32 * 1024 * 1024);
    /// How long one evaluation of a step's script may run
    script_timeout: Duration = "values::timeout", text("1s"), at_most MINUTE;
    /// Script evaluations with the whole budget running at once at most (each may use script_max_memory); more wait
    script_max_concurrent: usize = "values::count", int(tartan_engine::DEFAULT_MAX_SCRIPTS as i64);
    /// How often each step's http.health_check is called (shared out among the engines); 0 turns checks off
    health_interval: Duration = "values::delay", text("30s"), at_most DAY;
    /// How long one health check may take before the step counts as unhealthy
    health_timeout: Duration = "values::timeout", text("3s"), at_most MINUTE;
    /// Memoized step answers this process keeps in memory at most
    memo_cache_size: usize = "values::count", int(tartan_engine::DEFAULT_MEMO_CACHE_SIZE as i64),
        fallback "MEMO_CACHE_SIZE";
    /// Memoized step answers the database keeps at most (the newest)
    memo_max_entries: u64 = "values::count", int(tartan_engine::DEFAULT_MEMO_MAX_ENTRIES as i64);
    /// The longest wait a step's Retry-After may ask for, e.g. 1h or 300ms
    max_retry_after: Duration = "values::timeout", text("1h"), at_most DAY;
    /// Threads running the engine and the API (the async runtime's workers); 1 suits a
    /// machine of two cores that also runs its database
    worker_threads: Option<usize> = "values::opt_count", unset("one per core");
    /// Database connections of the engine
    db_pool: Option<u32> = "values::opt_count", unset("16 Postgres, 4 SQLite");
    /// Database connections of the API's listings and histories
    db_read_pool: Option<u32> = "values::opt_count", unset("4");
    /// Postgres: how long one listing or history statement may run
    db_read_timeout: Duration = "values::timeout", text("30s"), at_most HOUR;
    /// How long a client may take to send a request's headers, and how long a connection may stay idle
    header_timeout: Duration = "values::timeout", text("10s"), at_most Duration::from_secs(10 * MINUTE.as_secs());
    /// How long a client may take to send a request's body after its headers
    body_timeout: Duration = "values::timeout", text("30s"), at_most HOUR;
    /// Connections open at once at most; more wait to be accepted
    max_connections: Option<usize> = "values::opt_count", unset("half the open-file limit, at most 10000");
    /// How long calls in flight may finish after SIGTERM before they are handed back
    shutdown_grace: Duration = "values::timeout", text("10s"), at_most HOUR;
    /// Finished flows older than this are deleted; 0 keeps everything
    retention: Duration = "values::delay", text("30d"), at_most Duration::from_secs(3650 * DAY.as_secs());
}
