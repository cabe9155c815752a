//! Timers: work items waiting for their retry, in a heap ordered by due
//! time. One task sleeps until the earliest is due; nothing polls. The heap
//! is a cache of the `due_us` column: it is rebuilt from the database at start
//! and topped up by a slow sweep (the safety net for retries another process
//! scheduled).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tartan_core::machine;
use tartan_store::{Claim, WorkKey};
use tokio::sync::Notify;

use crate::Engine;

/// How often the database is swept for retries due soon that this process
/// does not hold in memory (scheduled by another process, or hours ago).
const SWEEP_EVERY: Duration = Duration::from_secs(30);

#[derive(Default)]
pub(crate) struct Timers {
    state: Mutex<TimerState>,
    /// Woken when an earlier timer is added.
    changed: Notify,
}

#[derive(Default)]
struct TimerState {
    /// (due time, item, whether it must be claimed first).
    heap: BinaryHeap<Reverse<(i64, WorkKey, bool)>>,
    /// Tokens in the heap, so that a sweep does not add them twice.
    known: HashSet<String>,
}

impl Timers {
    /// Fire `key` at `due`. `claim`: the item was found in the database
    /// (after a restart, or scheduled by another process) and must be leased
    /// before it starts; retries this process scheduled already hold its lease.
    pub(crate) fn schedule(&self, key: WorkKey, due: DateTime<Utc>, claim: bool) {
        let due_us = due.timestamp_micros();
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !st.known.insert(key.token.clone()) {
            return;
        }
        let earliest = st.heap.peek().map(|Reverse((t, _, _))| *t);
        st.heap.push(Reverse((due_us, key, claim)));
        drop(st);
        if earliest.is_none_or(|t| due_us < t) {
            self.changed.notify_one();
        }
    }

    /// Everything due by `now_us`, removed from the heap (split into items to
    /// claim and items already leased here); and the next due time.
    fn take_due(&self, now_us: i64) -> (Vec<WorkKey>, Vec<WorkKey>, Option<i64>) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (mut to_claim, mut owned) = (Vec::new(), Vec::new());
        while let Some(Reverse((t, _, _))) = st.heap.peek() {
            if *t > now_us {
                break;
            }
            if let Some(Reverse((_, key, claim))) = st.heap.pop() {
                st.known.remove(&key.token);
                if claim {
                    to_claim.push(key);
                } else {
                    owned.push(key);
                }
            }
        }
        let next = st.heap.peek().map(|Reverse((t, _, _))| *t);
        (to_claim, owned, next)
    }

    pub(crate) fn len(&self) -> usize {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).heap.len()
    }
}

impl Engine {
    /// Load every scheduled retry from the database into the heap.
    pub(crate) async fn load_timers(&self) -> Result<(), crate::EngineError> {
        // Only what falls due before the sweep after next: later retries
        // are picked up by later sweeps, so the heap holds minutes, not hours.
        let horizon =
            Utc::now() + chrono::Duration::from_std(SWEEP_EVERY * 2).unwrap_or(chrono::Duration::MAX);
        for (key, due) in self.inner.store.scheduled_work(horizon).await? {
            self.inner.timers.schedule(key, due, true);
        }
        Ok(())
    }

    /// The timer loop: sleep until the earliest due item, start it, repeat.
    pub(crate) fn spawn_timer_loop(&self) {
        let engine = self.clone();
        tokio::spawn(async move {
            let mut next_sweep = tokio::time::Instant::now() + SWEEP_EVERY;
            loop {
                let now = Utc::now();
                let (to_claim, owned, next) = engine.inner.timers.take_due(now.timestamp_micros());
                for key in owned {
                    engine.start_retry(key);
                }
                if !to_claim.is_empty() {
                    engine.claim_and_fire(to_claim);
                }
                let wait = next
                    .map(|t| {
                        Duration::from_micros(u64::try_from(t - Utc::now().timestamp_micros()).unwrap_or(0))
                    })
                    .unwrap_or(SWEEP_EVERY);
                let wake = (tokio::time::Instant::now() + wait).min(next_sweep);
                tokio::select! {
                    _ = tokio::time::sleep_until(wake) => {}
                    _ = engine.inner.timers.changed.notified() => {}
                    _ = engine.inner.stopping.cancelled() => return,
                }
                if tokio::time::Instant::now() >= next_sweep {
                    next_sweep = tokio::time::Instant::now() + SWEEP_EVERY;
                    if let Err(e) = engine.load_timers().await {
                        tracing::warn!("sweep for scheduled retries failed: {e}");
                    }
                }
            }
        });
    }

    /// Claim due work items by lease (another process sharing the database
    /// may have them in its heap too) and start the retries this one got.
    fn claim_and_fire(&self, due: Vec<WorkKey>) {
        let engine = self.clone();
        self.inner.tasks.spawn(async move {
            let now = Utc::now();
            let lease =
                chrono::Duration::from_std(engine.inner.config.step_timeout + engine.inner.config.lease)
                    .unwrap_or(chrono::Duration::MAX);
            let claim = Claim {
                node: engine.inner.config.node_id.clone(),
                now,
                lease_until: now + lease,
                limit: due.len(),
            };
            let tokens: Vec<String> = due.iter().map(|k| k.token.clone()).collect();
            match engine.inner.store.claim_due_work(&claim, &tokens).await {
                Ok(claimed) => claimed.into_iter().for_each(|key| engine.start_retry(key)),
                // The due times are in the database: the next sweep retries.
                Err(e) => tracing::error!("claiming due retries failed: {e}"),
            }
        });
    }

    /// Start the next attempt of a due item. Each retry is its own decision;
    /// started together, their commits share the writer's batches.
    fn start_retry(&self, key: WorkKey) {
        let engine = self.clone();
        self.inner.tasks.spawn(async move {
            let outcome = engine
                .decide(&key.flow_id, |state, ctx| {
                    machine::start_retry(state, &key.step_id, &key.token, ctx.now)
                })
                .await;
            if let Err(e) = outcome {
                tracing::error!(flow_id = %key.flow_id, token = %key.token, "starting a retry failed: {e}");
            }
        });
    }
}
