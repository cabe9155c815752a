//! What operators see and do of the lanes (docs/lanes.md, "Operating"):
//! every lane with its limits, its state in the database (shared by every
//! engine) and in this process; pausing and resuming one.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tartan_core::lanes::{step_lane, BreakerState, LaneLimits};
use tartan_store::{from_us, Notice};

use super::{Lanes, LocalLane};
use crate::error::EngineError;

/// A lane as `GET /engine/lanes` shows it.
#[derive(Debug, Clone)]
pub struct LaneView {
    pub id: String,
    pub limits: LaneLimits,
    /// Slots held, and wanted, by the live engines (lanes with a
    /// concurrency limit).
    pub slots_held: u64,
    pub slots_wanted: u64,
    pub paused: bool,
    /// `None` while paused: until an operator resumes it.
    pub paused_until: Option<DateTime<Utc>>,
    pub pause_reason: Option<String>,
    pub breaker: BreakerState,
    pub failures: u64,
    pub breaker_until: Option<DateTime<Utc>>,
    /// The lane in this process: its calls running and waiting.
    pub here: Option<LocalLane>,
}

/// The lane a waiting call waits in, for the work view.
#[derive(Debug, Clone)]
pub struct LaneWait {
    pub lane: String,
    pub here: LocalLane,
}

impl Lanes {
    /// Every lane: configured for a host, declared by a step, or in the
    /// database from earlier calls.
    pub async fn list(&self) -> Result<Vec<LaneView>, EngineError> {
        let mut known: BTreeMap<String, (LaneLimits, Option<LocalLane>)> = BTreeMap::new();
        for step in self.catalog.view().await.catalog.steps().values() {
            if let Some(limits) = step.policies().and_then(|p| p.lane) {
                known.insert(step_lane(&step.id), (limits, None));
            }
        }
        for lane in self.known() {
            known.insert(lane.id, (lane.limits, lane.local));
        }
        let mut out = Vec::new();
        for record in self.shared.store.lanes().await? {
            let (limits, here) = match known.remove(&record.id) {
                Some(k) => k,
                None => {
                    // A lane no step or setting declares any more: shown
                    // with the limits it last had.
                    let json = serde_json::from_str(&record.limits).unwrap_or_default();
                    match LaneLimits::parse("limits", &json) {
                        Ok(limits) => (limits, None),
                        Err(_) => continue,
                    }
                }
            };
            let forever = record.paused_until_us == Some(i64::MAX);
            out.push(LaneView {
                id: record.id,
                limits,
                slots_held: record.held,
                slots_wanted: record.wanted,
                paused: record.paused_until_us.is_some(),
                paused_until: record.paused_until_us.filter(|_| !forever).map(from_us),
                pause_reason: record.paused_reason.filter(|_| record.paused_until_us.is_some()),
                breaker: record.breaker,
                failures: record.failures,
                breaker_until: record
                    .breaker_until_us
                    .filter(|_| record.breaker != BreakerState::Closed)
                    .map(from_us),
                here,
            });
        }
        out.extend(known.into_iter().map(|(id, (limits, here))| LaneView {
            id,
            limits,
            slots_held: 0,
            slots_wanted: 0,
            paused: false,
            paused_until: None,
            pause_reason: None,
            breaker: BreakerState::Closed,
            failures: 0,
            breaker_until: None,
            here,
        }));
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// The lane a call of `token` waits in now, in this process.
    pub fn lane_wait(&self, token: &str) -> Option<LaneWait> {
        let (lane, here) = self.waiting_in(token)?;
        Some(LaneWait { lane, here })
    }

    /// Pause lane `id` for `wait` (`None`: until resumed): no call of it
    /// starts meanwhile, in any engine.
    pub async fn pause_lane(&self, id: &str, wait: Option<Duration>) -> Result<LaneView, EngineError> {
        let limits = self.lane_limits(id).await?;
        let us = wait.map(|w| i64::try_from(w.as_micros()).unwrap_or(i64::MAX));
        self.shared
            .store
            .lane_pause(id, &limits.to_json().to_string(), us, "paused by an operator")
            .await?;
        self.lane_changed(id).await
    }

    /// End lane `id`'s pause and close its breaker.
    pub async fn resume_lane(&self, id: &str) -> Result<LaneView, EngineError> {
        self.lane_limits(id).await?;
        self.shared.store.lane_resume(id).await?;
        self.lane_changed(id).await
    }

    async fn lane_changed(&self, id: &str) -> Result<LaneView, EngineError> {
        self.changed(id);
        self.shared.outbox.announce(Notice::Lane { id: id.to_string() });
        self.list()
            .await?
            .into_iter()
            .find(|l| l.id == id)
            .ok_or_else(|| EngineError::LaneNotFound(id.to_string()))
    }

    /// The limits of a lane some step or setting declares, or that the
    /// database holds.
    async fn lane_limits(&self, id: &str) -> Result<LaneLimits, EngineError> {
        if let Some(lane) = self.find(id) {
            return Ok(lane.limits());
        }
        if let Some(step_id) = id.strip_prefix("step:") {
            if let Some(limits) = self
                .catalog
                .view()
                .await
                .catalog
                .get(step_id)
                .and_then(|s| s.policies().and_then(|p| p.lane))
            {
                return Ok(limits);
            }
        }
        for record in self.shared.store.lanes().await? {
            if record.id == id {
                let json = serde_json::from_str(&record.limits).unwrap_or_default();
                if let Ok(limits) = LaneLimits::parse("limits", &json) {
                    return Ok(limits);
                }
            }
        }
        Err(EngineError::LaneNotFound(id.to_string()))
    }
}
