//! Retention (docs/operating.md, "Retention"): finished flows deactivated
//! longer ago than `EngineConfig::retention` are deleted in the background,
//! a small batch at a time, straight through the store. The sweep takes no
//! flow lock and does not go through the writer: decisions and calls go on
//! beside it. Purged flows are in no cache (only flows with calls in flight
//! are kept in memory), so nothing of them stays behind in this process.

use std::sync::Arc;
use std::time::Duration;

use tartan_core::duration::format_duration;
use tartan_store::{RetentionStore, StoreError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::Clock;

/// Flows per batch: each batch is one short transaction.
const PURGE_BATCH: usize = 500;
/// Sweeps run at most this far apart.
const MAX_SWEEP_INTERVAL: Duration = Duration::from_secs(60);
/// Sweeps run at least this far apart, however short the retention.
const MIN_SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// The least pause between two batches of one sweep.
const MIN_BATCH_PAUSE: Duration = Duration::from_millis(100);

/// How often a sweep runs: every minute, or every tenth of a shorter
/// retention (at least a second), so that a flow outlives its retention by
/// little. An idle sweep is one indexed query that finds nothing.
fn sweep_interval(retention: Duration) -> Duration {
    (retention / 10).clamp(MIN_SWEEP_INTERVAL, MAX_SWEEP_INTERVAL)
}

/// `every`, give or take a tenth: processes started together do not sweep
/// together.
fn jittered(every: Duration) -> Duration {
    every.mul_f64(0.9 + 0.2 * rand::random::<f64>())
}

/// The background sweeps: what they need and nothing else.
pub(crate) struct Retention {
    pub store: Arc<dyn RetentionStore>,
    pub clock: Clock,
    pub stopping: CancellationToken,
}

impl Retention {
    /// Start the sweeps when `retention` is set; they stop with the engine
    /// (`stopping`), and shutdown waits for the one running (`tasks`).
    pub(crate) fn spawn(self, retention: Option<Duration>, tasks: &TaskTracker) {
        let Some(retention) = retention else {
            return;
        };
        let every = sweep_interval(retention);
        tracing::info!(
            retention = %format_duration(retention),
            "finished flows are deleted after the retention (TARTAN_RETENTION)"
        );
        tasks.spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(jittered(every)) => {}
                    _ = self.stopping.cancelled() => return,
                }
                self.sweep(retention).await;
            }
        });
    }

    /// Purge every flow past `retention` (see [`purge_before`]).
    async fn sweep(&self, retention: Duration) {
        // A retention past what a date can hold keeps everything.
        let Some(before) = chrono::Duration::from_std(retention)
            .ok()
            .and_then(|r| self.clock.now().checked_sub_signed(r))
        else {
            return;
        };
        let (total, result) = purge_before(&*self.store, before, &self.stopping).await;
        if let Err(e) = result {
            tracing::warn!("purging finished flows failed (the next sweep tries again): {e}");
        }
        if total > 0 {
            tracing::info!(
                flows = total,
                retention = %format_duration(retention),
                "purged finished flows past their retention"
            );
        }
    }
}

/// Purge every flow deactivated before `before`, a batch at a time, pausing
/// between batches at least as long as the last one took: a backlog
/// (retention just switched on, or `tartan purge`) is worked off without
/// taking more than half of the database's time from the flows. Bulk jobs
/// that finished before `before` go too (docs/api.md, "Bulk operations").
/// Ends early when `stop` is cancelled; how many flows were purged, and the
/// error that ended it, if one did.
pub async fn purge_before(
    store: &dyn RetentionStore,
    before: chrono::DateTime<chrono::Utc>,
    stop: &CancellationToken,
) -> (usize, Result<(), StoreError>) {
    let (total, result) = purge_flows_before(store, before, stop).await;
    if result.is_err() || stop.is_cancelled() {
        return (total, result);
    }
    loop {
        match store.purge_bulk_jobs(before, PURGE_BATCH).await {
            Ok(n) if n < PURGE_BATCH => return (total, Ok(())),
            Ok(_) => {}
            Err(e) => return (total, Err(e)),
        }
        if stop.is_cancelled() {
            return (total, Ok(()));
        }
    }
}

async fn purge_flows_before(
    store: &dyn RetentionStore,
    before: chrono::DateTime<chrono::Utc>,
    stop: &CancellationToken,
) -> (usize, Result<(), StoreError>) {
    let mut total = 0usize;
    loop {
        let started = Instant::now();
        let purged = tokio::select! {
            purged = store.purge_finished(before, PURGE_BATCH) => purged,
            _ = stop.cancelled() => return (total, Ok(())),
        };
        match purged {
            Ok(n) => {
                total += n;
                if n < PURGE_BATCH {
                    return (total, Ok(()));
                }
            }
            Err(e) => return (total, Err(e)),
        }
        tokio::select! {
            _ = tokio::time::sleep(started.elapsed().max(MIN_BATCH_PAUSE)) => {}
            _ = stop.cancelled() => return (total, Ok(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_every_minute_or_a_tenth_of_a_short_retention() {
        let day = Duration::from_secs(24 * 3600);
        assert_eq!(sweep_interval(30 * day), MAX_SWEEP_INTERVAL);
        assert_eq!(sweep_interval(Duration::from_secs(100)), Duration::from_secs(10));
        assert_eq!(sweep_interval(Duration::from_millis(1)), MIN_SWEEP_INTERVAL);
    }

    #[test]
    fn jitter_stays_within_a_tenth() {
        for _ in 0..1000 {
            let d = jittered(Duration::from_secs(60));
            assert!(
                d >= Duration::from_secs(54) && d <= Duration::from_secs(66),
                "{d:?}"
            );
        }
    }
}
