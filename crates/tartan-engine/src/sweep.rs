//! The sweep: the slow safety net behind timers, notices and leases
//! (docs/architecture.md, "Timers"). Every `SWEEP_EVERY`, or every lease
//! if that is shorter, it loads the timers due before the sweep after next
//! (those another process set, or beyond the last horizon), reads again
//! the flows held in memory that sat idle (a commit a failover lost), and
//! takes over the calls whose lease ran out (a dead process's). A task of
//! its own, so that a slow database delays no due timer.

use std::time::Duration;

use tartan_store::ScheduledTimer;

use crate::timers::Timer;
use crate::Engine;

/// How often the database is swept for what this process does not hold.
pub(crate) const SWEEP_EVERY: Duration = Duration::from_secs(30);

impl Engine {
    /// Sweep until the engine stops.
    pub(crate) fn spawn_sweep(&self) {
        let engine = self.clone();
        tokio::spawn(async move {
            // Often enough that an expired lease is noticed within a lease.
            // On tokio's clock, not the engine's (paused in tests), so that
            // sweeps run whatever it shows.
            let every = SWEEP_EVERY
                .min(engine.inner.config.lease)
                .max(Duration::from_millis(100));
            let mut idle = crate::flows::IdleFlows::default();
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = engine.inner.stopping.cancelled() => return,
                }
                if let Err(e) = engine.load_timers().await {
                    tracing::warn!("sweep for timers failed: {e}");
                }
                // Before taking work over: a cached flow the database
                // moved away from would take it over on a wrong state.
                engine.reconcile_flows(&mut idle).await;
                // Calls whose node died: their leases have expired.
                if let Err(e) = engine.take_over(false).await {
                    tracing::warn!("sweep for orphaned calls failed: {e}");
                }
            }
        });
    }

    /// Load the timers due before the sweep after next from the database.
    pub(crate) async fn load_timers(&self) -> Result<(), crate::EngineError> {
        let horizon = self.inner.config.clock.now()
            + chrono::Duration::from_std(SWEEP_EVERY * 2).unwrap_or(chrono::Duration::MAX);
        for t in self.inner.store.scheduled_work(horizon).await? {
            let (timer, due) = match t {
                ScheduledTimer::Retry(key, due) => (Timer::Retry { key, claim: true }, due),
                ScheduledTimer::Inactivity(key, due) => (Timer::Inactivity(key), due),
                ScheduledTimer::FlowDeadline(flow, due) => (Timer::FlowDeadline(flow), due),
            };
            self.inner.timers.schedule(timer, due);
        }
        Ok(())
    }
}
