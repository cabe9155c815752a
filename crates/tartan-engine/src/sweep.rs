//! The sweep: the slow safety net behind timers, notices and leases
//! (docs/architecture.md, "Timers"). Every `SWEEP_EVERY`, or every lease
//! if that is shorter, it loads the timers due before the sweep after next
//! (those another process set, or beyond the last horizon) and the
//! schedules' next fires (docs/schedules.md), the concurrency keys'
//! turns a dead process left undone (docs/concurrency.md), reads again
//! the flows held in memory that sat idle (a commit a failover lost), and
//! takes over the calls whose lease ran out (a dead process's). A task of
//! its own, so that a slow database delays no due timer.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::flows::{Flows, IdleFlows};
use crate::leases::Leases;
use crate::lines::Lines;
use crate::schedules::Schedules;
use crate::timers::{Timers, HORIZON};

/// How often the database is swept for what this process does not hold:
/// twice per timer horizon, so that no timer is loaded late.
const SWEEP_EVERY: Duration = Duration::from_secs(HORIZON.as_secs() / 2);

/// What the sweep looks after.
pub(crate) struct Sweep {
    pub timers: Arc<Timers>,
    /// Schedules other engines made or moved.
    pub schedules: Arc<Schedules>,
    /// Concurrency keys' turns a dead process left undone.
    pub lines: Arc<Lines>,
    pub flows: Arc<Flows>,
    pub leases: Arc<Leases>,
    /// `TARTAN_LEASE`: an expired lease is noticed within one.
    pub lease: Duration,
    pub stopping: CancellationToken,
}

impl Sweep {
    /// Sweep until the engine stops.
    pub(crate) fn spawn(self) {
        tokio::spawn(async move {
            // Often enough that an expired lease is noticed within a lease.
            // On tokio's clock, not the engine's (paused in tests), so that
            // sweeps run whatever it shows.
            let every = SWEEP_EVERY.min(self.lease).max(Duration::from_millis(100));
            let mut idle = IdleFlows::default();
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = self.stopping.cancelled() => return,
                }
                if let Err(e) = self.timers.load().await {
                    tracing::warn!("sweep for timers failed: {e}");
                }
                if let Err(e) = self.schedules.load().await {
                    tracing::warn!("sweep for schedules failed: {e}");
                }
                if let Err(e) = self.lines.sweep().await {
                    tracing::warn!("sweep for concurrency keys' turns failed: {e}");
                }
                // Before taking work over: a cached flow the database
                // moved away from would take it over on a wrong state.
                self.flows.reconcile(&mut idle).await;
                // Calls whose node died: their leases have expired.
                if let Err(e) = self.leases.take_over(false).await {
                    tracing::warn!("sweep for orphaned calls failed: {e}");
                }
            }
        });
    }
}
