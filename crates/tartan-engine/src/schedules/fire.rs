//! The clock of schedules' fires: the next time of each schedule this
//! engine knows, one task sleeping until the earliest (nothing polls; the
//! sweep tops it up with schedules other engines made or moved), and what
//! a fire does.
//!
//! Exactly once across engines: every engine may make a fire that is due;
//! the flow it starts has the id the fire's time gives it, so the database
//! starts it once (a second start of the same request is a repeat); the
//! fire is recorded once per time (the fires' primary key); and the
//! schedule is moved on from the version read, so only one engine's move
//! counts and the others read the schedule again.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use tartan_core::flow::FlowStatus;
use tartan_core::request::StartFlow;
use tartan_core::schedule::{Overlap, Schedule};
use tartan_store::{FireRecord, LastFire, ScheduleMove, ScheduleRecord, ScheduleStore};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{parse_record, time, us, Triggered};
use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::flows::Flows;
use crate::metrics::Metrics;
use crate::timers::HORIZON;

/// How soon a fire that could not be made (the database away, the engine
/// full) is tried again.
const TRY_AGAIN: Duration = Duration::from_secs(1);

/// Fires this engine makes at once.
const FIRES_AT_ONCE: usize = 16;

/// The clock: each schedule's next wake, earliest first.
#[derive(Default)]
struct Due {
    queue: BTreeSet<(i64, String)>,
    by_id: HashMap<String, i64>,
    /// Flows whose end starts a schedule's kept fire (`buffer_one`).
    watched: HashMap<String, String>,
}

impl Due {
    fn remove(&mut self, id: &str) {
        if let Some(at) = self.by_id.remove(id) {
            self.queue.remove(&(at, id.to_string()));
        }
    }

    fn insert(&mut self, id: &str, at: i64) {
        self.remove(id);
        self.queue.insert((at, id.to_string()));
        self.by_id.insert(id.to_string(), at);
    }
}

pub(crate) struct FireClock {
    due: Mutex<Due>,
    changed: Notify,
    store: Arc<dyn ScheduleStore>,
    flows: Arc<Flows>,
    config: Arc<EngineConfig>,
    metrics: Arc<Metrics>,
    stopping: CancellationToken,
}

/// What one fire came to.
struct Made {
    outcome: &'static str,
    flow_id: Option<String>,
    detail: Option<String>,
}

impl FireClock {
    pub(super) fn new(
        store: Arc<dyn ScheduleStore>,
        flows: Arc<Flows>,
        config: Arc<EngineConfig>,
        metrics: Arc<Metrics>,
        stopping: CancellationToken,
    ) -> Self {
        Self {
            due: Mutex::default(),
            changed: Notify::new(),
            store,
            flows,
            config,
            metrics,
            stopping,
        }
    }

    fn due(&self) -> std::sync::MutexGuard<'_, Due> {
        crate::sync::lock(&self.due)
    }

    /// Wake for `schedule` at `next` (and its jitter), or not at all.
    pub(super) fn set(&self, schedule: &Schedule, next: Option<DateTime<Utc>>) {
        match next {
            Some(at) => self.wake_at(&schedule.id, at + schedule.jitter_for(at)),
            None => self.forget(&schedule.id),
        }
    }

    fn wake_at(&self, id: &str, at: DateTime<Utc>) {
        self.due().insert(id, us(at));
        self.changed.notify_one();
    }

    pub(super) fn forget(&self, id: &str) {
        self.due().remove(id);
    }

    /// The schedules due within the timers' horizon, and those with a kept
    /// fire, from the database.
    pub(super) async fn load(&self) -> Result<(), EngineError> {
        let before = self.config.clock.now() + HORIZON;
        let due = self.store.schedules_due(us(before)).await?;
        let woken = !due.is_empty();
        {
            let mut clock = self.due();
            for (id, at) in due {
                // The earlier wins: a time this engine set stays.
                if clock.by_id.get(&id).is_none_or(|known| at < *known) {
                    clock.insert(&id, at);
                }
            }
        }
        if woken {
            self.changed.notify_one();
        }
        Ok(())
    }

    /// Sleep until the earliest wake, make the fires due; and start a kept
    /// fire when the flow it waits for ends here.
    pub(super) fn spawn(self: Arc<Self>) {
        let finished = self.flows.subscribe_finished();
        tokio::spawn(Arc::clone(&self).follow_ends(finished));
        tokio::spawn(async move {
            loop {
                let changed = self.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                let earliest = self.due().queue.first().map(|(at, _)| time(*at));
                tokio::select! {
                    _ = self.stopping.cancelled() => return,
                    _ = changed => continue,
                    _ = async {
                        match earliest {
                            Some(at) => self.config.clock.sleep_until(at).await,
                            None => std::future::pending().await,
                        }
                    } => {}
                }
                let now = us(self.config.clock.now());
                let ready: Vec<String> = {
                    let mut clock = self.due();
                    let ready: Vec<(i64, String)> = clock
                        .queue
                        .iter()
                        .take_while(|(at, _)| *at <= now)
                        .cloned()
                        .collect();
                    for (_, id) in &ready {
                        clock.remove(id);
                    }
                    ready.into_iter().map(|(_, id)| id).collect()
                };
                // Schedules due at one time (every one at 03:00) are made
                // a few at once, not one after another.
                let this = &self;
                futures::stream::iter(ready)
                    .for_each_concurrent(FIRES_AT_ONCE, |id| async move {
                        if let Err(e) = this.fire(&id).await {
                            tracing::warn!(schedule = %id, "a schedule's fire could not be made, trying again: {e}");
                            this.wake_at(&id, this.config.clock.now() + TRY_AGAIN);
                        }
                    })
                    .await;
            }
        });
    }

    /// A watched flow ended here: its schedule's kept fire starts.
    async fn follow_ends(
        self: Arc<Self>,
        mut finished: tokio::sync::broadcast::Receiver<crate::flows::FlowFinished>,
    ) {
        loop {
            let ended = tokio::select! {
                _ = self.stopping.cancelled() => return,
                ended = finished.recv() => ended,
            };
            let id = match ended {
                Ok(f) => self.due().watched.remove(&f.flow_id),
                // Missed ends are found by the sweep's top-up.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => None,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            if let Some(id) = id {
                self.wake_at(&id, self.config.clock.now());
            }
        }
    }

    /// Make what is due of schedule `id`: a kept fire whose flow ended,
    /// the fire times come (as `catchup` says), and move it on.
    async fn fire(&self, id: &str) -> Result<(), EngineError> {
        let Some(record) = self.store.schedule_get(id).await? else {
            return Ok(());
        };
        let now = self.config.clock.now();
        let (_, schedule) = parse_record(&record, now)?;
        let mut previous = record.last.as_ref().and_then(|l| l.flow_id.clone());
        let mut buffered = record.buffered_us;
        let mut last: Option<LastFire> = None;
        if let Some(kept) = buffered {
            if self.running(previous.as_deref()).await? {
                self.watch(previous.as_deref(), id);
            } else {
                let made = self.start(&schedule, time(kept)).await?;
                last = Some(
                    self.record(&schedule, time(kept), now, made, previous.as_deref())
                        .await?,
                );
                previous = last.as_ref().and_then(|l| l.flow_id.clone());
                buffered = None;
            }
        }
        let mut next_us = record.next_us;
        match record.next_us.map(time) {
            Some(due) if !record.paused && now >= due + schedule.jitter_for(due) => {
                let (made, next) = schedule.catch_up(due, now);
                if made.first() != Some(&due) {
                    let detail = format!(
                        "missed while no engine ran (catchup: {})",
                        <&str>::from(schedule.catchup)
                    );
                    let missed = Made {
                        outcome: "missed",
                        flow_id: None,
                        detail: Some(detail),
                    };
                    last = Some(
                        self.record(&schedule, due, now, missed, previous.as_deref())
                            .await?,
                    );
                }
                for at in made {
                    let fire = self
                        .make(&schedule, at, previous.as_deref(), &mut buffered)
                        .await?;
                    if fire.outcome == "buffered" {
                        self.watch(previous.as_deref(), id);
                    }
                    self.metrics
                        .schedules
                        .fired(fire.outcome, (now - at).to_std().unwrap_or_default());
                    last = Some(self.record(&schedule, at, now, fire, previous.as_deref()).await?);
                    previous = last.as_ref().and_then(|l| l.flow_id.clone());
                }
                next_us = next.map(us);
            }
            Some(due) if !record.paused => self.set(&schedule, Some(due)),
            _ => {}
        }
        if last.is_none() && buffered == record.buffered_us {
            return Ok(());
        }
        let moved = ScheduleMove {
            next_us,
            buffered_us: buffered,
            last,
            now_us: us(now),
        };
        if self.store.schedule_move(id, record.version, &moved).await? {
            self.set(&schedule, next_us.map(time));
        } else if let Some(current) = self.store.schedule_get(id).await? {
            // Another engine moved it first: its next time stands.
            self.set(&schedule, current.next_us.map(time));
        }
        Ok(())
    }

    /// `POST /engine/schedule/{id}/trigger`: a fire at this instant.
    pub(super) async fn trigger(
        &self,
        schedule: &Schedule,
        record: ScheduleRecord,
    ) -> Result<Triggered, EngineError> {
        let now = self.config.clock.now();
        let previous = record.last.as_ref().and_then(|l| l.flow_id.clone());
        let mut buffered = record.buffered_us;
        let fire = self
            .make(schedule, now, previous.as_deref(), &mut buffered)
            .await?;
        let answer = Triggered {
            outcome: fire.outcome.to_string(),
            flow_id: fire.flow_id.clone(),
            detail: fire.detail.clone(),
        };
        if fire.outcome == "buffered" {
            self.watch(previous.as_deref(), &schedule.id);
        }
        let last = self.record(schedule, now, now, fire, previous.as_deref()).await?;
        // The fire is recorded; the schedule's last fire is moved if no
        // other engine moved it meanwhile (its history has the trigger).
        let moved = ScheduleMove {
            next_us: record.next_us,
            buffered_us: buffered,
            last: Some(last),
            now_us: us(now),
        };
        self.store
            .schedule_move(&schedule.id, record.version, &moved)
            .await?;
        Ok(answer)
    }

    /// One fire at `at`: its overlap rule, then its flow.
    async fn make(
        &self,
        schedule: &Schedule,
        at: DateTime<Utc>,
        previous: Option<&str>,
        buffered: &mut Option<i64>,
    ) -> Result<Made, EngineError> {
        if schedule.overlap != Overlap::Allow && self.running(previous).await? {
            let previous = previous.unwrap_or_default();
            match schedule.overlap {
                Overlap::Skip | Overlap::Allow => {
                    return Ok(Made {
                        outcome: "skipped",
                        flow_id: None,
                        detail: Some(format!(
                            "the flow of the previous fire, {previous}, is still active"
                        )),
                    })
                }
                Overlap::BufferOne => {
                    if let Some(older) = buffered.replace(us(at)) {
                        let dropped = Made {
                            outcome: "skipped",
                            flow_id: None,
                            detail: Some("a later fire took its place (buffer_one keeps one)".into()),
                        };
                        self.record(schedule, time(older), self.config.clock.now(), dropped, None)
                            .await?;
                    }
                    return Ok(Made {
                        outcome: "buffered",
                        flow_id: None,
                        detail: Some(format!("starts when {previous} ends")),
                    });
                }
                Overlap::CancelPrevious => match self.flows.cancel_flow(previous, true, None).await {
                    Ok(()) | Err(EngineError::FlowTerminal(..) | EngineError::FlowNotFound(_)) => {}
                    Err(e) => return Err(e),
                },
            }
        }
        self.start(schedule, at).await
    }

    /// Start the flow of the fire at `at`; a start the engine cannot make
    /// now is tried again, one the request itself fails is recorded.
    async fn start(&self, schedule: &Schedule, at: DateTime<Utc>) -> Result<Made, EngineError> {
        let flow_id = schedule.flow_id(at);
        let request = StartFlow {
            id: flow_id.clone(),
            goals: schedule.goals.clone(),
            init: schedule.init.clone(),
            labels: schedule.flow_labels(at),
            timeout: None,
            deadline_at: None,
            max_step_attempts: None,
            start_at: None,
            start_in: None,
            concurrency: schedule.concurrency.clone(),
            priority: schedule.priority,
        };
        match self.flows.start_flow(request).await {
            Ok(_) => Ok(Made {
                outcome: "started",
                flow_id: Some(flow_id),
                detail: None,
            }),
            Err(e @ (EngineError::ShuttingDown | EngineError::Overloaded(_) | EngineError::Contended(_))) => {
                Err(e)
            }
            Err(e) if e.database_unavailable().is_some() => Err(e),
            Err(e) => Ok(Made {
                outcome: "failed",
                flow_id: None,
                detail: Some(e.to_string()),
            }),
        }
    }

    /// Whether the flow of the previous fire still runs.
    async fn running(&self, previous: Option<&str>) -> Result<bool, EngineError> {
        let Some(flow) = previous else {
            return Ok(false);
        };
        match self.flows.flow_status(flow).await {
            Ok(status) => Ok(status == FlowStatus::Active),
            Err(EngineError::FlowNotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn watch(&self, flow: Option<&str>, schedule: &str) {
        if let Some(flow) = flow {
            self.due().watched.insert(flow.to_string(), schedule.to_string());
        }
    }

    /// Record a fire (once per time, whichever engine made it). The last
    /// fire's flow is the one it started, or else the one still running
    /// (`previous`), which the next fire's overlap rule looks at.
    async fn record(
        &self,
        schedule: &Schedule,
        at: DateTime<Utc>,
        now: DateTime<Utc>,
        made: Made,
        previous: Option<&str>,
    ) -> Result<LastFire, EngineError> {
        let fire = FireRecord {
            fire_us: us(at),
            outcome: made.outcome.to_string(),
            flow_id: made.flow_id.clone(),
            detail: made.detail,
            made_us: us(now),
        };
        self.store.schedule_record_fire(&schedule.id, &fire).await?;
        Ok(LastFire {
            at_us: us(at),
            flow_id: made.flow_id.or_else(|| previous.map(str::to_string)),
            outcome: made.outcome.to_string(),
            flow_status: None,
        })
    }
}
