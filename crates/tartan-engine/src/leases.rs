//! Leases (docs/durability.md, "Leases"): a work item being called is
//! leased to one process in the commit that made it due, so that several
//! processes on one database never call it twice at once. This process
//! renews the leases of its calls while they run, hands back those it will
//! not call when it stops, and takes over the work whose lease ran out
//! (its process died) or was handed back — and, after a restart, its own
//! calls cut off by the stop, with the same receipt token, as new attempts.
//! Nothing else needs recovering: every other state change was committed
//! together with the work it made due.

use std::sync::Arc;
use std::time::Duration;

use tartan_core::machine::Command;
use tartan_store::{Claim, WorkStore};
use tokio_util::sync::CancellationToken;

use crate::calls::Calls;
use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::metrics::Metrics;
use crate::timers::{Decide, Timers};

/// Items taken over per claim.
const CLAIM_BATCH: usize = 10_000;

/// The leases of this process's calls, and the work it takes over.
pub(crate) struct Leases {
    store: Arc<dyn WorkStore>,
    calls: Arc<Calls>,
    timers: Arc<Timers>,
    decide: Arc<dyn Decide>,
    config: Arc<EngineConfig>,
    metrics: Arc<Metrics>,
    stopping: CancellationToken,
}

/// What the leases are kept with.
pub(crate) struct LeasesParts {
    pub store: Arc<dyn WorkStore>,
    pub calls: Arc<Calls>,
    pub timers: Arc<Timers>,
    pub decide: Arc<dyn Decide>,
    pub config: Arc<EngineConfig>,
    pub metrics: Arc<Metrics>,
    pub stopping: CancellationToken,
}

impl Leases {
    pub(crate) fn new(parts: LeasesParts) -> Leases {
        Leases {
            store: parts.store,
            calls: parts.calls,
            timers: parts.timers,
            decide: parts.decide,
            config: parts.config,
            metrics: parts.metrics,
            stopping: parts.stopping,
        }
    }

    pub(crate) async fn recover(&self) -> Result<(), EngineError> {
        self.take_over(true).await
    }

    /// Call again the work whose lease expired (its node died), and at
    /// start-up (`own`) this node's own calls cut off by its last stop.
    pub(crate) async fn take_over(&self, own: bool) -> Result<(), EngineError> {
        let claimed = self
            .store
            .claim_orphaned_work(&Claim {
                node: self.config.node_id.clone(),
                at: None,
                lease: self.config.lease_length().to_std().unwrap_or_default(),
                limit: CLAIM_BATCH,
                include_own: own,
            })
            .await?;
        if !claimed.is_empty() {
            tracing::info!(count = claimed.len(), own, "resuming work that was in flight");
        }
        for key in claimed {
            if self.calls.is_in_flight(&key.token) {
                // This process's own call, still running, whose lease lapsed
                // (renewal failed while the database was away): the claim
                // renewed it; calling again would run the step twice at once.
                continue;
            }
            self.metrics.lease_taken_over();
            let redispatch = Command::Redispatch {
                step_id: key.step_id.clone(),
                token: key.token.clone(),
            };
            let outcome = self.decide.decide(&key.flow_id, redispatch).await;
            if let Err(e) = outcome {
                tracing::error!(flow_id = %key.flow_id, token = %key.token, "resuming work failed: {e}");
            }
        }
        Ok(())
    }

    /// Renew the leases of this process's calls in flight, so that a call
    /// that waits for a slot or runs long is not taken over while it is alive.
    pub(crate) fn spawn_renewal(self: &Arc<Self>) {
        let leases = Arc::clone(self);
        let every = (leases.config.lease / 3).max(Duration::from_millis(100));
        // Renewal failing this long (on this process's monotonic clock) means
        // the lease may have run out on the database's: stop the calls before
        // another process takes them over, so that no call runs twice at once.
        let lease = leases.config.lease_length().to_std().unwrap_or_default();
        let give_up = lease.saturating_sub(every);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // When the last renewal that held was sent: the leases it set run
            // at least `lease` from then.
            let mut held_since = tokio::time::Instant::now();
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = leases.stopping.cancelled() => return,
                }
                let sent = tokio::time::Instant::now();
                let calls = leases.calls.in_flight();
                if calls.is_empty() {
                    // Calls started from now on are leased by their commit.
                    held_since = sent;
                    continue;
                }
                let tokens: Vec<String> = calls.iter().map(|(token, _)| token.clone()).collect();
                let lease = leases.config.lease_length().to_std().unwrap_or_default();
                // Bounded by the point where the lease may run out: a renewal
                // that hangs (a database gone away, a pool waiting for a
                // connection) must not keep the calls running past it.
                let renewal = leases.store.renew_leases(&leases.config.node_id, &tokens, lease);
                match tokio::time::timeout_at(held_since + give_up, renewal).await {
                    Ok(Ok(renewed)) => {
                        held_since = sent;
                        leases.abandon_lost_calls(calls, &renewed)
                    }
                    Ok(Err(e)) if sent.duration_since(held_since) < give_up => {
                        tracing::warn!("renewing leases failed: {e}")
                    }
                    failed => {
                        let why = match failed {
                            Ok(Err(e)) => e.to_string(),
                            _ => "no answer".to_string(),
                        };
                        tracing::error!(
                            calls = calls.len(),
                            "renewing leases has failed for {:?} ({why}): the leases may run out, \
                             so these calls are stopped before another process takes them over",
                            held_since.elapsed()
                        );
                        leases.abandon_lost_calls(calls, &[]);
                    }
                }
            }
        });
    }

    /// Take over at once the work another process handed back when it
    /// stopped (Postgres `NOTIFY`); without it, the sweep finds it within
    /// `min(30 s, TARTAN_LEASE)`.
    pub(crate) fn spawn_handback_listener(
        self: &Arc<Self>,
        notices: Option<tokio::sync::mpsc::Receiver<()>>,
    ) {
        let leases = Arc::clone(self);
        crate::notices::on_notices(notices, self.stopping.clone(), move |()| {
            let leases = Arc::clone(&leases);
            async move {
                if let Err(e) = leases.timers.load().await {
                    tracing::warn!("loading handed-back retries failed: {e}");
                }
                if let Err(e) = leases.take_over(false).await {
                    tracing::warn!("taking over handed-back calls failed: {e}");
                }
            }
        });
    }

    /// Abort the calls whose lease this process no longer holds: another
    /// process took the work over (this one was presumed dead), or cancelled
    /// or timed out the flow. Its result could not be recorded anyway, and
    /// two processes must not run one call at once. A call that ended or was
    /// replaced by a newer call of its token since `calls` was read is left.
    pub(crate) fn abandon_lost_calls(&self, calls: Vec<(String, u64)>, renewed: &[String]) {
        for token in self.calls.abort_unrenewed(calls, renewed) {
            tracing::warn!(%token, "lease lost to another process or decision; call abandoned");
            self.metrics.lease_lost();
        }
    }

    /// Hand back this node's leases but those of `keep` (see `WorkStore::hand_back`).
    pub(crate) async fn hand_back(&self, keep: &[String]) {
        match self.store.hand_back(&self.config.node_id, keep).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(work_items = n, "handed back work this process will not call"),
            Err(e) => tracing::warn!("handing back leases failed (they expire after the lease): {e}"),
        }
    }
}
