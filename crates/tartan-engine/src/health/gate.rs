//! The dispatch gate and the cluster's live events (docs/operating.md,
//! "Health gates dispatch"): which steps' work this engine does not call
//! now, read from the checks every engine records; the work deferred while
//! a step was unhealthy, started again once it is not; and the cluster's
//! events, passed on to this process's WebSocket subscribers.
//!
//! Every engine reads the gate again at each round, when it records a
//! change itself, when a step's health is forgotten and, on Postgres, when
//! another engine announces a change. The engine that sees a step healthy
//! first starts its deferred work, wherever it was deferred; each round
//! looks again, so work deferred by an engine that stopped is not lost.

use std::sync::{Arc, RwLock};

use tartan_core::health::DispatchGate;
use tartan_store::StoredEvent;
use tokio::sync::broadcast;

use super::Health;

/// Batches of cluster events a slow WebSocket subscriber may fall behind
/// by (health changes are rare: a round changes each step at most once).
const EVENTS_BUFFER: usize = 256;

/// Deferred items started again per look; the rest at the next round.
const RESUME_BATCH: usize = 10_000;

/// Cluster events read per page when passing them on.
const RELAY_PAGE: usize = 200;
const RELAY_PAGE_BYTES: usize = 1 << 20;

/// A batch of the cluster's events, as `GET /engine/cluster/events` has
/// them.
#[derive(Debug)]
pub struct ClusterEvents {
    pub events: Vec<StoredEvent>,
}

/// Where a WebSocket connection hears the cluster's events.
pub type ClusterReceiver = broadcast::Receiver<Arc<ClusterEvents>>;

/// What this engine holds of the cluster's health between reads.
pub(crate) struct Live {
    gate: RwLock<Arc<DispatchGate>>,
    /// The cluster's events up to this sequence were passed on; one
    /// relay at a time, so none is passed on twice.
    relayed: tokio::sync::Mutex<i64>,
    events: broadcast::Sender<Arc<ClusterEvents>>,
}

impl Live {
    /// Passing on the cluster's events after `head`, the last at start.
    pub(crate) fn new(head: i64) -> Self {
        Self {
            gate: RwLock::new(Arc::new(DispatchGate::default())),
            relayed: tokio::sync::Mutex::new(head),
            events: broadcast::channel(EVENTS_BUFFER).0,
        }
    }
}

impl Health {
    /// The gate decisions are made with now.
    pub(crate) fn dispatch_gate(&self) -> Arc<DispatchGate> {
        match self.live.gate.read() {
            Ok(gate) => Arc::clone(&gate),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// This engine's own check found `step_id` unhealthy: its work waits
    /// from now, before the check is recorded (and so shown by the API),
    /// not only once the gate is read again after the record.
    pub(crate) fn close_gate(&self, step_id: &str, why: &str) {
        let mut held = match self.live.gate.write() {
            Ok(held) => held,
            Err(poisoned) => poisoned.into_inner(),
        };
        if held.closed(step_id) != Some(why) {
            *held = Arc::new(held.closing(step_id, why));
        }
    }

    /// The cluster's events (`step_health_changed`) from now on, in
    /// batches: this engine's and, once read, the others'.
    pub fn subscribe_cluster(&self) -> ClusterReceiver {
        self.live.events.subscribe()
    }

    /// A step's health changed, here or elsewhere, or a round looks again:
    /// read the gate, start the deferred work of the steps it opens when
    /// `resume`, and pass the cluster's new events on.
    pub(crate) async fn changed(&self, resume: bool) {
        match self.read_gate().await {
            Ok(gate) => {
                let gate = Arc::new(gate);
                match self.live.gate.write() {
                    Ok(mut held) => *held = Arc::clone(&gate),
                    Err(poisoned) => *poisoned.into_inner() = Arc::clone(&gate),
                }
                if resume {
                    self.resume_deferred(&gate).await;
                }
            }
            Err(e) => tracing::warn!("reading the steps' health failed (the gate stays as it was): {e}"),
        }
        self.relay_cluster_events().await;
    }

    /// The gate of the checks recorded for steps that still have a health
    /// check.
    async fn read_gate(&self) -> Result<DispatchGate, crate::error::EngineError> {
        // With checks off here, nothing is gated: no check of this engine's
        // would open the gate again (another engine's result may be stale
        // for good).
        if self.config.health.interval.is_zero() {
            return Ok(DispatchGate::default());
        }
        let records = self.store.step_health().await?;
        let view = self.catalog.view().await;
        let checked = super::with_checks(records, &view.catalog);
        Ok(DispatchGate::of_checks(
            checked.iter().map(|(id, r)| (id, &r.health)),
        ))
    }

    /// Start the deferred items of every step `gate` leaves open, as due
    /// retries: the decision defers again any that a stale gate let through.
    async fn resume_deferred(&self, gate: &DispatchGate) {
        let closed: Vec<String> = gate.closed_steps().cloned().collect();
        match self.work.deferred_work(&closed, RESUME_BATCH).await {
            Ok(keys) => {
                if !keys.is_empty() {
                    tracing::info!(
                        items = keys.len(),
                        "starting work deferred while its step was unhealthy"
                    );
                }
                for key in keys {
                    self.resume.resume(key);
                }
            }
            Err(e) => tracing::warn!("reading deferred work failed (the next round looks again): {e}"),
        }
    }

    /// Pass the cluster's events committed since the last relay on to the
    /// WebSocket subscribers.
    async fn relay_cluster_events(&self) {
        let mut relayed = self.live.relayed.lock().await;
        loop {
            let page = match self
                .store
                .cluster_events_page(*relayed, RELAY_PAGE, RELAY_PAGE_BYTES)
                .await
            {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!("reading the cluster's events failed: {e}");
                    return;
                }
            };
            let Some(last) = page.events.last().map(|e| e.sequence) else {
                return;
            };
            *relayed = last;
            // Nobody listening: nothing to send.
            let _ = self
                .live
                .events
                .send(Arc::new(ClusterEvents { events: page.events }));
            if page.next.is_none() {
                return;
            }
        }
    }

    /// Forget the health of steps registered again, updated or removed
    /// (Argyll resets it to unknown): their work is no longer gated.
    pub(crate) fn forget(self: &Arc<Self>, ids: Vec<String>) {
        let health = Arc::clone(self);
        tokio::spawn(async move {
            let node = &health.config.node_id;
            let mut changed = false;
            for id in ids {
                let now = health.config.clock.now();
                match health.store.forget_health(&id, node, now).await {
                    Ok(forgot) => changed |= forgot,
                    Err(e) => tracing::warn!(step_id = %id, "forgetting a step's health failed: {e}"),
                }
            }
            if changed {
                health.announce_change().await;
            }
        });
    }

    /// This engine changed a step's health: read the gate again, start
    /// what it opens, and tell the others.
    pub(crate) async fn announce_change(&self) {
        self.changed(true).await;
        self.outbox.announce(tartan_store::Notice::Health {
            node: self.config.node_id.clone(),
        });
    }

    /// Another engine changed a step's health: read the gate again. It
    /// starts the deferred work itself.
    pub(crate) fn spawn_listener(self: &Arc<Self>, notices: Option<tokio::sync::mpsc::Receiver<()>>) {
        let health = Arc::clone(self);
        crate::notices::on_notices(notices, self.stopping.clone(), move |()| {
            let health = Arc::clone(&health);
            async move { health.changed(false).await }
        });
    }
}
