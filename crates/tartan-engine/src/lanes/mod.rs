//! Lanes (docs/lanes.md): the limits the calls of one step (its `limits`)
//! or of every step calling one endpoint host (the `lanes` setting) share
//! across flows and every engine on the database. A call waits in its
//! lanes before it takes a call slot (`slots`), using no attempt; the
//! attempt's timeout starts when it is sent.
//!
//! - `lane`: one lane in this process: admission from memory, the
//!   exchanges with the database, pauses and the breaker.
//! - `queue`: the calls waiting in a lane, fair across flows.
//! - `ops`: what operators see and do: the lanes' state, pause, resume.
//!
//! Here: which lanes a call is in, the lanes this process knows, the
//! renewal of the slots it holds, and the calls waiting now (for the work
//! view).

mod lane;
mod ops;
mod queue;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tartan_core::lanes::{step_lane, HostLanes, LaneLimits};
use tartan_core::step::Step;
use tartan_store::LaneStore;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::notices::Outbox;

pub use lane::LocalLane;
pub(crate) use lane::{Lane, Permit};
pub use ops::{LaneView, LaneWait};

/// What every lane of this process shares.
pub(crate) struct Shared {
    store: Arc<dyn LaneStore>,
    node: String,
    /// How long a hold on slots lasts unless renewed, in µs (`TARTAN_LEASE`).
    lease_us: i64,
    outbox: Outbox,
    /// Calls waiting in one lane at most (`TARTAN_MAX_QUEUED_CALLS`).
    max_waiting: usize,
    /// Some lane holds slots: the renewal runs.
    holding: Notify,
    /// The slots every lane of this process holds together.
    held: AtomicI64,
    stopping: CancellationToken,
}

pub struct Lanes {
    shared: Arc<Shared>,
    /// Where the lanes steps declare are read, for the operators' view.
    catalog: Arc<crate::catalog::Catalog>,
    hosts: HostLanes,
    lanes: Arc<Mutex<HashMap<String, Arc<Lane>>>>,
    /// The calls waiting in a lane now: receipt token to lane id.
    waiting: Mutex<HashMap<String, String>>,
}

/// A call's way through its lanes: the permits it holds and how long it
/// waited for them, all told.
#[derive(Default)]
pub(crate) struct Passage {
    pub permits: Vec<Permit>,
    pub waited: Duration,
    /// Times the call was sent again after its lane was paused for it.
    pub resent: u32,
}

impl Passage {
    /// What the machine is told of the wait (`work_lane_waited`), when the
    /// call waited at all.
    pub(crate) fn waited(&self, lanes: &[Arc<Lane>]) -> Option<tartan_core::machine::LaneWaited> {
        let ms = u64::try_from(self.waited.as_millis()).unwrap_or(u64::MAX);
        (ms > 0).then(|| tartan_core::machine::LaneWaited {
            lanes: lanes.iter().map(|l| l.id.clone()).collect(),
            ms,
        })
    }
}

/// A lane as this process knows it, for `GET /engine/lanes`.
pub(crate) struct KnownLane {
    pub id: String,
    pub limits: LaneLimits,
    pub local: Option<LocalLane>,
}

impl Lanes {
    pub(crate) fn new(
        store: Arc<dyn LaneStore>,
        outbox: Outbox,
        config: &crate::config::EngineConfig,
        stopping: CancellationToken,
        catalog: Arc<crate::catalog::Catalog>,
    ) -> Lanes {
        Lanes {
            catalog,
            shared: Arc::new(Shared {
                store,
                node: config.node_id.clone(),
                lease_us: i64::try_from(config.lease.as_micros()).unwrap_or(i64::MAX),
                outbox,
                max_waiting: config.max_queued_calls.max(1),
                holding: Notify::new(),
                held: AtomicI64::new(0),
                stopping,
            }),
            hosts: config.lanes.clone(),
            lanes: Arc::default(),
            waiting: Mutex::default(),
        }
    }

    /// The lane `id`, made on first use. One lane per id: when a step's
    /// limits change, the lane keeps its calls and slots and takes the new
    /// limits (flows started before the change carry the old ones, so the
    /// two may alternate until those finish).
    fn lane(&self, id: String, limits: &LaneLimits) -> Arc<Lane> {
        let lane = {
            let mut lanes = crate::sync::lock(&self.lanes);
            match lanes.get(&id) {
                Some(lane) => Arc::clone(lane),
                None => {
                    let lane = Arc::new(Lane::new(id.clone(), *limits, Arc::clone(&self.shared)));
                    lanes.insert(id, Arc::clone(&lane));
                    return lane;
                }
            }
        };
        lane.set_limits(*limits);
        lane
    }

    /// The lanes a call of `step` to `url` goes through: the step's own,
    /// then its host's. Usually none.
    pub(crate) fn of(&self, step: &Step, url: Option<&reqwest::Url>) -> Vec<Arc<Lane>> {
        let mut out = Vec::new();
        if let Some(limits) = step.policies().and_then(|p| p.lane.as_ref()) {
            out.push(self.lane(step_lane(&step.id), limits));
        }
        if self.hosts.is_empty() {
            return out;
        }
        if let Some((id, limits)) =
            url.and_then(|u| self.hosts.find(u.host_str()?, u.port_or_known_default()))
        {
            out.push(self.lane(id, limits));
        }
        out
    }

    /// Whether any host has a lane: only then is a call's URL looked at.
    pub(crate) fn by_host(&self) -> bool {
        !self.hosts.is_empty()
    }

    /// A lane this process knows by id, or the configured host lane.
    pub(crate) fn find(&self, id: &str) -> Option<Arc<Lane>> {
        if let Some(lane) = crate::sync::lock(&self.lanes).get(id) {
            return Some(Arc::clone(lane));
        }
        let (host_id, limits) = self.hosts.iter().find(|(host_id, _)| host_id == id)?;
        Some(self.lane(host_id, limits))
    }

    /// Every lane this process knows: the configured ones and those its
    /// calls went through.
    pub(crate) fn known(&self) -> Vec<KnownLane> {
        let lanes = crate::sync::lock(&self.lanes).clone();
        let mut out: Vec<KnownLane> = self
            .hosts
            .iter()
            .filter(|(id, _)| !lanes.contains_key(id))
            .map(|(id, limits)| KnownLane {
                id,
                limits: *limits,
                local: None,
            })
            .collect();
        out.extend(lanes.values().map(|lane| KnownLane {
            id: lane.id.clone(),
            limits: lane.limits(),
            local: Some(lane.local()),
        }));
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    /// Another process changed lane `id`: look at it again.
    pub(crate) fn changed(&self, id: &str) {
        if let Some(lane) = crate::sync::lock(&self.lanes).get(id).cloned() {
            lane.look_again();
        }
    }

    /// `token`'s call waits in `lane` (`None`: it stopped waiting).
    pub(crate) fn note_waiting(&self, token: &str, lane: Option<&str>) {
        let mut waiting = crate::sync::lock(&self.waiting);
        match lane {
            Some(id) => {
                waiting.insert(token.to_string(), id.to_string());
            }
            None => {
                waiting.remove(token);
            }
        }
    }

    /// The lane `token`'s call waits in, with the lane as this process
    /// sees it.
    pub(crate) fn waiting_in(&self, token: &str) -> Option<(String, LocalLane)> {
        let id = crate::sync::lock(&self.waiting).get(token).cloned()?;
        let lane = crate::sync::lock(&self.lanes).get(&id).cloned()?;
        Some((id, lane.local()))
    }

    /// Forget the holds this node left in the database (it starts: none of
    /// its calls runs), and renew those it takes from now on while it
    /// holds any: an idle engine does not write.
    pub(crate) async fn start(&self) -> Result<(), tartan_store::StoreError> {
        self.shared.store.lane_release_all(&self.shared.node).await?;
        let shared = Arc::clone(&self.shared);
        let lanes = Arc::clone(&self.lanes);
        let every = Duration::from_micros(u64::try_from(shared.lease_us / 4).unwrap_or(1_000_000))
            .max(Duration::from_millis(100));
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = shared.holding.notified() => {}
                    _ = shared.stopping.cancelled() => return,
                }
                // Renew while holds may remain: each grant of a slot wakes
                // this again; a renewal that finds none lets it sleep.
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(every) => {}
                        _ = shared.stopping.cancelled() => return,
                    }
                    let asked = tokio::time::Instant::now();
                    match shared.store.lane_renew(&shared.node, shared.lease_us).await {
                        // The lease runs from before the renewal was sent.
                        Ok(renewed) => {
                            let until = asked + Duration::from_micros(shared.lease_us.unsigned_abs());
                            let all: Vec<Arc<Lane>> = crate::sync::lock(&lanes).values().cloned().collect();
                            for lane in all {
                                // A hold that was not renewed ran out: its
                                // slots may be another engine's already.
                                lane.renewed(renewed.contains(&lane.id).then_some(until));
                            }
                        }
                        // The slots are not handed out past their lease
                        // (`Lane::pump`); the next exchange takes them anew.
                        Err(e) => tracing::warn!("lanes: renewing this node's slots failed: {e}"),
                    }
                    if !shared.holds_any() {
                        break;
                    }
                }
            }
        });
        Ok(())
    }

    /// Give back every slot (the engine stops).
    pub(crate) async fn stop(&self) {
        if let Err(e) = self.shared.store.lane_release_all(&self.shared.node).await {
            tracing::debug!("lanes: giving back this node's slots failed (their lease covers it): {e}");
        }
    }
}

impl Shared {
    fn holds_any(&self) -> bool {
        self.held.load(Ordering::Relaxed) > 0
    }
}
