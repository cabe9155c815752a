use std::time::Duration;

use tartan_core::hosts::StepHosts;
use tartan_core::retry::RetryDefaults;

/// The most flows one bulk job may match unless configured otherwise
/// (`EngineConfig::max_bulk_flows`); more is refused: narrow the filter.
pub const DEFAULT_MAX_BULK_FLOWS: u64 = 100_000;

/// Script evaluations with the whole budget at once, by default
/// (`EngineConfig::max_scripts`).
pub const DEFAULT_MAX_SCRIPTS: usize = 16;

/// What the engine needs to know; built by the binary from flags, env and file.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Stable id of this process, used as lease owner: a node that restarts
    /// takes its own leases back at once.
    pub node_id: String,
    /// Base URL async steps call back (`http://host:port`).
    pub webhook_base_url: String,
    /// Retry defaults filled into every step.
    pub work_defaults: RetryDefaults,
    /// Attempt timeout when a step sets none.
    pub step_timeout: Duration,
    /// How long a lease holds beyond the attempt timeout.
    pub lease: Duration,
    /// Calls in flight in this process at most (`TARTAN_MAX_CALLS`).
    pub max_calls: usize,
    /// Calls of one step in flight at most (`TARTAN_MAX_CALLS_PER_STEP`), a
    /// hard cap on top of the rule that a step holds at most half of the
    /// slots the other steps leave (docs/durability.md, "Call slots");
    /// `None`: the rule alone.
    pub max_calls_per_step: Option<usize>,
    /// Calls waiting for a slot at most (`TARTAN_MAX_QUEUED_CALLS`); a call
    /// beyond it is made when its lease runs out (docs/durability.md).
    pub max_queued_calls: usize,
    /// Default cap on the attempts of one flow's work items together.
    pub max_step_attempts: u32,
    /// The most bytes of inputs and outputs one flow may hold
    /// (`TARTAN_MAX_FLOW_BYTES`, docs/errors.md "A flow's size").
    pub max_flow_bytes: u64,
    /// Flows with work in progress in this process at most; a start beyond
    /// it is refused (503, Retry-After) instead of queueing without bound.
    pub max_active_flows: usize,
    /// Where steps may call (`TARTAN_STEP_HOSTS`): checked when a step is
    /// registered or updated and on every call, after placeholders are
    /// filled in and names resolved. The default allows every address but
    /// link-local.
    pub step_hosts: StepHosts,
    /// CAs and a client certificate for step calls over TLS.
    pub step_tls: StepTls,
    /// The lanes of endpoint hosts (`TARTAN_LANES`, docs/lanes.md): limits
    /// every step calling the host shares, across processes.
    pub lanes: tartan_core::lanes::HostLanes,
    /// Bytes of a step's response body (or an async step's webhook body) at
    /// most (`TARTAN_MAX_RESPONSE_BYTES`); past it the attempt fails
    /// permanently (docs/errors.md).
    pub max_response_bytes: usize,
    /// The bytes of step bodies this process holds at once, requests while
    /// they are sent and responses from reading to recording
    /// (`TARTAN_MAX_INFLIGHT_BYTES`, docs/durability.md, "Bytes in flight"):
    /// calls past it wait.
    pub max_inflight_bytes: usize,
    /// The longest wait a step's `Retry-After` may ask for
    /// (`TARTAN_MAX_RETRY_AFTER`); longer asks are cut to it (docs/retries.md).
    pub max_retry_after: Duration,
    /// How long finished flows are kept (`TARTAN_RETENTION`): a background
    /// task deletes those deactivated longer ago, with their events, work
    /// items, labels and stored values (docs/operating.md, "Retention"). `None` keeps every
    /// flow.
    pub retention: Option<Duration>,
    /// Where the spans of starts, decisions and calls go
    /// (docs/operating.md, "Traces"); `None`: no spans are made.
    pub tracer: Option<crate::traces::Tracer>,
    /// Event streams open at once at most (docs/api.md, "Event streams");
    /// one more is refused (503, Retry-After).
    pub max_streams: usize,
    /// Decisions' events a stream may fall behind by before it is dropped
    /// (told where it stopped, so it resumes without loss); also the
    /// messages a WebSocket client may leave unread before it is dropped.
    pub stream_buffer: usize,
    /// Bytes of events (as JSON) the bus holds for streams that are behind
    /// (`TARTAN_STREAM_BUFFER_BYTES`): a stream further behind is dropped
    /// the same way, so one client that stops reading holds at most this
    /// much, whatever the size of the steps' outputs.
    pub stream_buffer_bytes: usize,
    /// The most flows one bulk job may match; a filter that matches more is
    /// refused (docs/api.md, "Bulk operations").
    pub max_bulk_flows: u64,
    /// What one evaluation of a step's script may spend: instructions,
    /// memory, wall time (`TARTAN_SCRIPT_*`, docs/steps.md "Scripts").
    pub script_limits: tartan_core::step::ScriptLimits,
    /// Evaluations with the whole budget running at once at most
    /// (`TARTAN_SCRIPT_MAX_CONCURRENT`); more wait for a place.
    pub max_scripts: usize,
    /// Memoized answers this process keeps in memory at most
    /// (`TARTAN_MEMO_CACHE_SIZE`, or Argyll's `MEMO_CACHE_SIZE`).
    pub memo_cache_size: usize,
    /// Memoized answers the database keeps at most, the newest
    /// (`TARTAN_MEMO_MAX_ENTRIES`).
    pub memo_max_entries: u64,
    /// Health checks of step endpoints (`TARTAN_HEALTH_*`, docs/operating.md,
    /// "Health checks and the cluster").
    pub health: HealthConfig,
    /// Where the engine reads the time and waits for what is due: the
    /// system clock, or a paused one in tests (`Clock::paused_at`).
    pub clock: crate::clock::Clock,
}

/// How the engines check their steps' `http.health_check` (Argyll's
/// defaults: every 30 s, 3 s each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthConfig {
    /// One round over every step checked; zero turns checks off.
    pub interval: Duration,
    /// How long one check may take.
    pub timeout: Duration,
}

impl Default for HealthConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(30),
            timeout: Duration::from_secs(3),
        }
    }
}

/// `max_streams` unless set.
pub const DEFAULT_MAX_STREAMS: usize = 1000;
/// `stream_buffer` unless set.
pub const DEFAULT_STREAM_BUFFER: usize = 1024;
/// `stream_buffer_bytes` unless set: 64 MiB.
pub const DEFAULT_STREAM_BUFFER_BYTES: usize = 64 * 1024 * 1024;

/// Flows with work in progress in this process at most unless configured
/// otherwise (`TARTAN_MAX_ACTIVE_FLOWS`).
pub const DEFAULT_MAX_ACTIVE_FLOWS: usize = 10_000;

/// `TARTAN_MAX_CALLS` unless set.
pub const DEFAULT_MAX_CALLS: usize = 1024;
/// `TARTAN_MAX_QUEUED_CALLS` unless set.
pub const DEFAULT_MAX_QUEUED_CALLS: usize = 10_000;

impl EngineConfig {
    /// How long a lease holds: the attempt timeout plus `TARTAN_LEASE`
    /// (each bounded by the configuration; saturating for an engine built
    /// in code with larger values, where `+` would panic).
    pub(crate) fn lease_length(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.step_timeout.saturating_add(self.lease))
            .unwrap_or(chrono::Duration::MAX)
    }

    /// The call slots one step may hold while no other step holds any:
    /// half of them (at least 1), or the explicit cap when lower.
    pub fn max_calls_per_step(&self) -> usize {
        let max = self.max_calls.max(1);
        let cap = self.max_calls_per_step.unwrap_or(max).clamp(1, max);
        (max / 2).clamp(1, cap)
    }
}

/// `TARTAN_MAX_RESPONSE_BYTES` when not set: 8 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
/// `TARTAN_MAX_INFLIGHT_BYTES` when not set: 64 MiB, eight bodies of the
/// largest default size.
pub const DEFAULT_MAX_INFLIGHT_BYTES: usize = 64 * 1024 * 1024;
/// `TARTAN_MEMO_CACHE_SIZE` when not set (Argyll's default).
pub const DEFAULT_MEMO_CACHE_SIZE: usize = 65_536;
/// `TARTAN_MEMO_MAX_ENTRIES` when not set.
pub const DEFAULT_MEMO_MAX_ENTRIES: u64 = 1_000_000;

/// `TARTAN_MAX_RETRY_AFTER` when not set: one hour.
pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            node_id: "tartan".into(),
            webhook_base_url: "http://127.0.0.1:8080".into(),
            work_defaults: RetryDefaults::default(),
            step_timeout: Duration::from_secs(30),
            lease: Duration::from_secs(30),
            max_calls: DEFAULT_MAX_CALLS,
            max_calls_per_step: None,
            max_queued_calls: DEFAULT_MAX_QUEUED_CALLS,
            max_step_attempts: tartan_core::flow::DEFAULT_MAX_STEP_ATTEMPTS,
            max_flow_bytes: tartan_core::json::DEFAULT_MAX_FLOW_BYTES,
            max_active_flows: DEFAULT_MAX_ACTIVE_FLOWS,
            step_hosts: StepHosts::unrestricted(),
            step_tls: StepTls::default(),
            lanes: tartan_core::lanes::HostLanes::default(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_inflight_bytes: DEFAULT_MAX_INFLIGHT_BYTES,
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
            retention: None,
            tracer: None,
            max_streams: DEFAULT_MAX_STREAMS,
            stream_buffer: DEFAULT_STREAM_BUFFER,
            stream_buffer_bytes: DEFAULT_STREAM_BUFFER_BYTES,
            max_bulk_flows: DEFAULT_MAX_BULK_FLOWS,
            script_limits: tartan_core::step::ScriptLimits::default(),
            max_scripts: DEFAULT_MAX_SCRIPTS,
            memo_cache_size: DEFAULT_MEMO_CACHE_SIZE,
            memo_max_entries: DEFAULT_MEMO_MAX_ENTRIES,
            health: HealthConfig::default(),
            clock: crate::clock::Clock::system(),
        }
    }
}

/// TLS of step calls beyond the public roots (docs/security.md, "Step
/// endpoints over TLS"): more CAs to trust, and a client certificate for
/// endpoints that require one (mutual TLS). PEM text, as read from files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepTls {
    /// Certificates of CAs trusted besides the public ones
    /// (`TARTAN_STEP_CA_FILE`).
    pub ca_pem: Option<Vec<u8>>,
    /// The client's certificate chain and its private key, one after the
    /// other (`TARTAN_STEP_CLIENT_CERT_FILE`, `_KEY_FILE`).
    pub identity_pem: Option<Vec<u8>>,
}

impl StepTls {
    /// The CAs, each certificate of the bundle; an error says why it does
    /// not read.
    pub fn roots(&self) -> Result<Vec<reqwest::Certificate>, String> {
        let Some(pem) = &self.ca_pem else {
            return Ok(Vec::new());
        };
        let roots = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| e.to_string())?;
        if roots.is_empty() {
            return Err("no PEM certificate in it".into());
        }
        Ok(roots)
    }

    /// The client identity, when one is set; an error says why it does not
    /// read.
    pub fn identity(&self) -> Result<Option<reqwest::Identity>, String> {
        self.identity_pem
            .as_deref()
            .map(reqwest::Identity::from_pem)
            .transpose()
            .map_err(|e| format!("{e} (a PEM certificate chain and its PKCS#8, PKCS#1 or SEC1 key)"))
    }
}
