use async_trait::async_trait;
use tartan_core::lanes::BreakerState;

use crate::StoreError;

/// What one engine asks of a lane in one transaction on its row
/// (docs/lanes.md, "Across processes").
#[derive(Debug, Clone, PartialEq)]
pub struct LaneTake {
    pub lane_id: String,
    pub node: String,
    /// The lane's limits as this engine knows them (JSON), stored with it.
    pub limits: String,
    /// The concurrency limit, when the lane has one.
    pub concurrency: Option<u32>,
    /// The slots this engine would hold: its calls running and waiting,
    /// at most the limit. Fewer than it holds gives the rest back.
    pub hold: u32,
    /// Its calls running (each holds a slot).
    pub running: u32,
    /// Its calls waiting: with a breaker open past its cool-down, one of
    /// them may be the canary.
    pub waiting: u32,
    /// Start times wanted on the rate: `(interval µs, burst)`, when the
    /// lane has a rate.
    pub rate: Option<(i64, u32)>,
    /// How many start times are wanted, at most this far ahead.
    pub starts: u32,
    pub horizon_us: i64,
    /// How long this engine's hold lasts unless renewed, in µs.
    pub lease_us: i64,
    /// The lane has a breaker: an open one whose cool-down ended makes this
    /// engine's next call its canary.
    pub breaker: bool,
}

/// The lane as one `lane_take` left it.
#[derive(Debug, Clone, PartialEq)]
pub struct LaneGrant {
    /// The database's clock when it answered, in µs: `starts` and the
    /// times below are on it.
    pub now_us: i64,
    /// Slots this engine holds now.
    pub held: u32,
    /// Another engine wants more slots than it holds: give back what is
    /// beyond a fair share instead of reusing it.
    pub contended: bool,
    /// The engines that want slots of the lane, this one included: a fair
    /// share is the limit divided among them.
    pub sharers: u32,
    /// When a slot held by another engine comes back at the latest (its
    /// lease), when none is free.
    pub next_free_us: Option<i64>,
    /// Start times reserved on the rate, in order.
    pub starts: Vec<i64>,
    /// When the next start time could be had, when none was.
    pub next_start_us: Option<i64>,
    pub paused_until_us: Option<i64>,
    pub paused_reason: Option<String>,
    pub breaker: BreakerState,
    pub breaker_until_us: Option<i64>,
    /// The breaker's consecutive failures counted.
    pub failures: u64,
    /// This engine's next call is the breaker's canary.
    pub canary: bool,
}

/// A lane as `GET /engine/lanes` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct LaneRecord {
    pub id: String,
    /// JSON, as last declared.
    pub limits: String,
    /// Slots held by live engines.
    pub held: u64,
    /// Calls the engines holding slots would run.
    pub wanted: u64,
    pub paused_until_us: Option<i64>,
    pub paused_reason: Option<String>,
    pub breaker: BreakerState,
    pub failures: u64,
    pub breaker_until_us: Option<i64>,
    pub now_us: i64,
}

/// How a call through a lane with a breaker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneOutcome {
    Succeeded,
    /// A retryable failure: one more towards opening the breaker.
    Failed {
        failures: u32,
        cool_down_us: i64,
    },
    /// The canary ended saying nothing of the endpoint (cancelled, or
    /// answered from the memo): the next engine to ask sends another.
    CanaryLost,
}

/// The lanes' shared state (docs/lanes.md): every change is one short
/// transaction on the lane's row, so that the limits hold across every
/// engine on the database with no leader.
#[async_trait]
pub trait LaneStore: Send + Sync {
    /// Take slots and start times, and learn the lane's pause and breaker.
    /// Creates the lane on first use.
    async fn lane_take(&self, take: &LaneTake) -> Result<LaneGrant, StoreError>;

    /// Extend `node`'s holds whose lease has not run out by `lease_us` from
    /// the database's now (those that ran out may be another's already).
    /// The lanes whose holds were renewed.
    async fn lane_renew(&self, node: &str, lease_us: i64) -> Result<Vec<String>, StoreError>;

    /// Drop every hold of `node` (it starts, or stops).
    async fn lane_release_all(&self, node: &str) -> Result<(), StoreError>;

    /// Pause `id` for `for_us` from the database's now (`None`: until
    /// resumed), unless it is paused longer already; the lane is created
    /// with `limits` if no call went through it yet.
    async fn lane_pause(
        &self,
        id: &str,
        limits: &str,
        for_us: Option<i64>,
        reason: &str,
    ) -> Result<(), StoreError>;

    /// End `id`'s pause and close its breaker. `false`: no such lane.
    async fn lane_resume(&self, id: &str) -> Result<bool, StoreError>;

    /// Record how a call through `id`'s breaker ended (creating the lane
    /// with `limits` on its first failure); the breaker after it.
    async fn lane_outcome(
        &self,
        id: &str,
        limits: &str,
        outcome: LaneOutcome,
    ) -> Result<BreakerState, StoreError>;

    /// Every lane, by id.
    async fn lanes(&self) -> Result<Vec<LaneRecord>, StoreError>;
}
