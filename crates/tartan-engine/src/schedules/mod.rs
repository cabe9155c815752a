//! Schedules (docs/schedules.md): what the API asks of them (create,
//! replace, read, delete, pause, resume, trigger), and the clock that makes
//! their fires (`fire.rs`). The core says when a schedule fires and what a
//! fire starts; the database holds each schedule's next time and moves it
//! on for one engine only; a fire's flow id, derived from its time, lets
//! the database start its flow once whichever engines make it.

mod fire;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tartan_core::error::ValidationError;
use tartan_core::schedule::{Schedule, ScheduleRequest};
use tartan_store::{FireRecord, ScheduleRecord, ScheduleStore};
use tokio_util::sync::CancellationToken;

use crate::catalog::Catalog;
use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::flows::Flows;
use crate::metrics::Metrics;

pub(crate) use fire::FireClock;

/// The most schedules a database holds: each is a timer in every engine.
pub const MAX_SCHEDULES: usize = 10_000;

/// The fires a schedule's view shows.
const SHOWN_FIRES: i64 = 20;

/// The next fire times a schedule's view shows.
const SHOWN_NEXT: usize = 5;

/// A schedule as `GET /engine/schedule/{id}` shows it.
#[derive(Debug, Clone)]
pub struct ScheduleView {
    /// The schedule as given (sanitised).
    pub spec: ScheduleRequest,
    pub paused: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The next fire times (none while paused, or once none is left).
    pub next: Vec<DateTime<Utc>>,
    /// A fire kept by `overlap: buffer_one`, started when the running
    /// flow ends.
    pub buffered: Option<DateTime<Utc>>,
    pub last: Option<LastFireView>,
    /// The latest fires, newest first (the single view only).
    pub fires: Vec<FireView>,
}

/// The last fire a schedule made, and its flow's status.
#[derive(Debug, Clone)]
pub struct LastFireView {
    pub at: DateTime<Utc>,
    pub outcome: String,
    pub flow_id: Option<String>,
    pub flow_status: Option<String>,
}

/// One fire: what it came to.
#[derive(Debug, Clone)]
pub struct FireView {
    pub at: DateTime<Utc>,
    /// `started`, `skipped`, `buffered`, `missed`, `failed`.
    pub outcome: String,
    pub flow_id: Option<String>,
    pub detail: Option<String>,
    pub made_at: DateTime<Utc>,
}

/// What `POST /engine/schedule/{id}/trigger` did.
#[derive(Debug, Clone)]
pub struct Triggered {
    pub outcome: String,
    pub flow_id: Option<String>,
    pub detail: Option<String>,
}

/// The schedules of the database, and this engine's clock of their fires.
pub struct Schedules {
    store: Arc<dyn ScheduleStore>,
    catalog: Arc<Catalog>,
    clock: Arc<FireClock>,
    config: Arc<EngineConfig>,
}

/// What the schedules are made with.
pub(crate) struct SchedulesParts {
    pub store: Arc<dyn ScheduleStore>,
    pub flows: Arc<Flows>,
    pub catalog: Arc<Catalog>,
    pub config: Arc<EngineConfig>,
    pub metrics: Arc<Metrics>,
    pub stopping: CancellationToken,
}

fn us(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

fn time(us: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(us).unwrap_or_default()
}

impl Schedules {
    pub(crate) fn new(parts: SchedulesParts) -> Self {
        let clock = Arc::new(FireClock::new(
            parts.store.clone(),
            parts.flows,
            Arc::clone(&parts.config),
            parts.metrics,
            parts.stopping,
        ));
        Self {
            store: parts.store,
            catalog: parts.catalog,
            clock,
            config: parts.config,
        }
    }

    /// Load the schedules due within the horizon, and run the clock.
    pub(crate) async fn start(&self) -> Result<(), EngineError> {
        self.clock.load().await?;
        Arc::clone(&self.clock).spawn();
        Ok(())
    }

    /// The sweep's top-up: schedules another engine made or moved.
    pub(crate) async fn load(&self) -> Result<(), EngineError> {
        self.clock.load().await
    }

    /// Add a schedule (`409` when its id is taken).
    pub async fn create(&self, request: ScheduleRequest) -> Result<ScheduleView, EngineError> {
        let now = self.config.clock.now();
        let (request, schedule) = request.parse(now, true)?;
        self.check_plan(&schedule).await?;
        let count = usize::try_from(self.store.schedule_count().await?).unwrap_or(usize::MAX);
        if count >= MAX_SCHEDULES {
            return Err(EngineError::TooManySchedules(count));
        }
        let next = (!schedule.paused).then(|| schedule.next_after(now)).flatten();
        let record = ScheduleRecord {
            id: schedule.id.clone(),
            spec: spec_text(&request)?,
            paused: schedule.paused,
            created_us: us(now),
            updated_us: us(now),
            next_us: next.map(us),
            buffered_us: None,
            last: None,
            version: 0,
        };
        if !self.store.schedule_create(&record).await? {
            return Err(EngineError::ScheduleExists(schedule.id));
        }
        self.clock.set(&schedule, next);
        self.get(&record.id).await
    }

    /// Replace a schedule with `request` (its id is the path's); its
    /// history stays.
    pub async fn replace(&self, id: &str, mut request: ScheduleRequest) -> Result<ScheduleView, EngineError> {
        let record = self.record(id).await?;
        if request.id.is_empty() {
            request.id = record.id.clone();
        }
        if tartan_core::ids::sanitize_id(&request.id) != record.id {
            return Err(ValidationError::new("id", "differs from the schedule's id in the path").into());
        }
        let now = self.config.clock.now();
        let (request, schedule) = request.parse(now, true)?;
        self.check_plan(&schedule).await?;
        let next = (!schedule.paused).then(|| schedule.next_after(now)).flatten();
        let spec = spec_text(&request)?;
        if !self
            .store
            .schedule_replace(id, &spec, schedule.paused, next.map(us), us(now))
            .await?
        {
            return Err(EngineError::ScheduleNotFound(id.to_string()));
        }
        self.drop_kept(&record, "the schedule was replaced").await?;
        self.clock.set(&schedule, next);
        self.get(id).await
    }

    /// Pause (nothing fires) or resume (fires from the next time after
    /// now: the times passed while paused are not made up for).
    pub async fn set_paused(&self, id: &str, paused: bool) -> Result<ScheduleView, EngineError> {
        let record = self.record(id).await?;
        let (mut request, _) = self.parsed(&record)?;
        request.paused = paused;
        let now = self.config.clock.now();
        let (request, schedule) = request.parse(now, false)?;
        let next = (!paused).then(|| schedule.next_after(now)).flatten();
        self.store
            .schedule_replace(id, &spec_text(&request)?, paused, next.map(us), us(now))
            .await?;
        let why = if paused {
            "the schedule was paused"
        } else {
            "the schedule was resumed"
        };
        self.drop_kept(&record, why).await?;
        self.clock.set(&schedule, next);
        self.get(id).await
    }

    pub async fn delete(&self, id: &str) -> Result<(), EngineError> {
        if !self.store.schedule_delete(id).await? {
            return Err(EngineError::ScheduleNotFound(id.to_string()));
        }
        self.clock.forget(id);
        Ok(())
    }

    /// Fire now, as a fire at this instant (its overlap rule applies);
    /// the schedule's next time stays.
    pub async fn trigger(&self, id: &str) -> Result<Triggered, EngineError> {
        let record = self.record(id).await?;
        let (_, schedule) = self.parsed(&record)?;
        self.clock.trigger(&schedule, record).await
    }

    pub async fn get(&self, id: &str) -> Result<ScheduleView, EngineError> {
        let record = self.record(id).await?;
        let fires = self.store.schedule_fires(id, SHOWN_FIRES).await?;
        let mut view = self.view(record)?;
        view.fires = fires.into_iter().map(fire_view).collect();
        Ok(view)
    }

    /// Every schedule, by id.
    pub async fn list(&self) -> Result<Vec<ScheduleView>, EngineError> {
        let records = self.store.schedules(MAX_SCHEDULES as i64).await?;
        records.into_iter().map(|r| self.view(r)).collect()
    }

    /// A fire kept by `buffer_one` goes with a replace or a pause: its
    /// history says so.
    async fn drop_kept(&self, record: &ScheduleRecord, why: &str) -> Result<(), EngineError> {
        if let Some(kept) = record.buffered_us {
            let fire = FireRecord {
                fire_us: kept,
                outcome: "skipped".into(),
                flow_id: None,
                detail: Some(format!("kept by buffer_one, dropped: {why}")),
                made_us: us(self.config.clock.now()),
            };
            self.store.schedule_record_fire(&record.id, &fire).await?;
        }
        Ok(())
    }

    async fn record(&self, id: &str) -> Result<ScheduleRecord, EngineError> {
        self.store
            .schedule_get(id)
            .await?
            .ok_or_else(|| EngineError::ScheduleNotFound(id.to_string()))
    }

    fn parsed(&self, record: &ScheduleRecord) -> Result<(ScheduleRequest, Schedule), EngineError> {
        parse_record(record, self.config.clock.now())
    }

    fn view(&self, record: ScheduleRecord) -> Result<ScheduleView, EngineError> {
        let (spec, schedule) = self.parsed(&record)?;
        let next = match record.next_us {
            Some(due) => {
                let due = time(due);
                let mut next = vec![due];
                next.extend(schedule.upcoming(due, SHOWN_NEXT - 1));
                next
            }
            None => Vec::new(),
        };
        Ok(ScheduleView {
            spec,
            paused: record.paused,
            created_at: time(record.created_us),
            updated_at: time(record.updated_us),
            next,
            buffered: record.buffered_us.map(time),
            last: record.last.map(|l| LastFireView {
                at: time(l.at_us),
                outcome: l.outcome,
                flow_id: l.flow_id,
                flow_status: l.flow_status,
            }),
            fires: Vec::new(),
        })
    }

    /// A schedule whose goals cannot be planned is refused when it is
    /// made, not at its first fire.
    async fn check_plan(&self, schedule: &Schedule) -> Result<(), EngineError> {
        let refused = |e: String| EngineError::from(ValidationError::new("flow.goals", e));
        let view = self
            .catalog
            .for_goals(&schedule.goals)
            .await
            .map_err(|e| refused(e.to_string()))?;
        tartan_core::plan::start_plan(&view.catalog, &schedule.goals, &schedule.init)
            .map_err(|e| refused(e.to_string()))?;
        Ok(())
    }
}

/// A stored schedule, parsed as it was checked when made.
fn parse_record(
    record: &ScheduleRecord,
    now: DateTime<Utc>,
) -> Result<(ScheduleRequest, Schedule), EngineError> {
    let request: ScheduleRequest = serde_json::from_str(&record.spec).map_err(|e| {
        EngineError::Store(tartan_store::StoreError::Corrupt(format!(
            "schedule {}: {e}",
            record.id
        )))
    })?;
    let mut parsed = request.parse(now, false)?;
    parsed.1.paused = record.paused;
    Ok(parsed)
}

fn spec_text(request: &ScheduleRequest) -> Result<String, EngineError> {
    serde_json::to_string(request).map_err(|e| ValidationError::new("schedule", e.to_string()).into())
}

fn fire_view(f: FireRecord) -> FireView {
    FireView {
        at: time(f.fire_us),
        outcome: f.outcome,
        flow_id: f.flow_id,
        detail: f.detail,
        made_at: time(f.made_us),
    }
}
