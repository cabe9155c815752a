use async_trait::async_trait;

use crate::StoreError;

/// A schedule as stored (docs/schedules.md); times in microseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRecord {
    pub id: String,
    /// The schedule's request, sanitised (JSON).
    pub spec: String,
    pub paused: bool,
    pub created_us: i64,
    pub updated_us: i64,
    /// The first fire time not yet made.
    pub next_us: Option<i64>,
    /// A fire kept by `overlap: buffer_one`.
    pub buffered_us: Option<i64>,
    pub last: Option<LastFire>,
    /// Bumped by every change: a move is made only from the version read.
    pub version: i64,
}

/// The last fire a schedule made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastFire {
    pub at_us: i64,
    pub flow_id: Option<String>,
    pub outcome: String,
    /// That flow's status as read with the schedule (none once it is
    /// purged, or when moving a schedule on).
    pub flow_status: Option<String>,
}

/// One fire of a schedule and what it came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireRecord {
    pub fire_us: i64,
    /// `started`, `skipped`, `missed`, `buffered`.
    pub outcome: String,
    pub flow_id: Option<String>,
    pub detail: Option<String>,
    pub made_us: i64,
}

/// How a fire moves its schedule on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleMove {
    pub next_us: Option<i64>,
    pub buffered_us: Option<i64>,
    pub last: Option<LastFire>,
    pub now_us: i64,
}

/// Schedules and their fires (docs/schedules.md).
#[async_trait]
pub trait ScheduleStore: Send + Sync {
    /// Add a schedule; `false` when its id is taken.
    async fn schedule_create(&self, record: &ScheduleRecord) -> Result<bool, StoreError>;

    /// Replace a schedule's spec, pause and next time (a `PUT`, a pause,
    /// a resume), keeping its history; `false` when there is none.
    async fn schedule_replace(
        &self,
        id: &str,
        spec: &str,
        paused: bool,
        next_us: Option<i64>,
        now_us: i64,
    ) -> Result<bool, StoreError>;

    async fn schedule_get(&self, id: &str) -> Result<Option<ScheduleRecord>, StoreError>;

    /// Every schedule, by id, at most `limit`.
    async fn schedules(&self, limit: i64) -> Result<Vec<ScheduleRecord>, StoreError>;

    /// How many schedules there are.
    async fn schedule_count(&self) -> Result<i64, StoreError>;

    /// Delete a schedule and its history; `false` when there is none.
    async fn schedule_delete(&self, id: &str) -> Result<bool, StoreError>;

    /// The schedules with a fire time (or a kept fire) before `before_us`,
    /// as `(id, time)`.
    async fn schedules_due(&self, before_us: i64) -> Result<Vec<(String, i64)>, StoreError>;

    /// Move a schedule on from `version` (read with it); `false` when
    /// another engine moved it first.
    async fn schedule_move(&self, id: &str, version: i64, to: &ScheduleMove) -> Result<bool, StoreError>;

    /// Record what a fire came to, once per fire time (`false` when it is
    /// recorded already), keeping the last 100 of the schedule. A fire
    /// recorded `buffered` is recorded again once it starts or is dropped,
    /// and one that started a flow is `started` whatever another engine
    /// making the same fire recorded (it may have seen the previous flow
    /// still running).
    async fn schedule_record_fire(&self, id: &str, fire: &FireRecord) -> Result<bool, StoreError>;

    /// The schedule's last fires, newest first.
    async fn schedule_fires(&self, id: &str, limit: i64) -> Result<Vec<FireRecord>, StoreError>;
}
