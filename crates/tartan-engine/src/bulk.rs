//! Bulk jobs (docs/api.md, "Bulk operations"): a retry or cancel of every
//! flow a filter matched when the job was created, run in the background at
//! a bounded rate.
//!
//! A job is run by one process at a time, under a lease on its row (the
//! node id is the owner), renewed with every flow it records. Each flow's
//! item is marked done, skipped or failed as it goes, so a job whose
//! process stopped or died is taken over where it was: at start-up (its own
//! jobs at once), or by another process once the lease ran out. A flow is
//! acted on once: a retry names the job in its `flow_retried` (`by`), a
//! cancel in its `flow_cancelled` (`reason`), and a taken-over job skips
//! the flows whose events name it, whatever happened to them since; a flow
//! cancelled already by someone else is skipped too.
//!
//! An idle engine does not poll: the runner wakes when this process creates
//! a job, when another one does (Postgres `NOTIFY`), when one of its jobs
//! ends, and, only while another process holds a job's lease, when that
//! lease runs out.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use tartan_core::bulk::{BulkAction, BulkItemState, BulkSpec, MAX_BULK_RATE};
use tartan_core::filter::FlowFilter;
use tartan_store::{BulkCreated, BulkEnd, BulkItem, BulkJob, NewBulkJob, StoreError};
use tokio::time::Instant;

use crate::{Engine, EngineError};

/// The most flows one job may match unless configured otherwise
/// (`EngineConfig::max_bulk_flows`); more is refused: narrow the filter.
pub const DEFAULT_MAX_BULK_FLOWS: u64 = 100_000;
/// Jobs one process runs at once; more wait their turn.
const MAX_RUNNING_JOBS: usize = 4;
/// Pending flows read at a time.
const PENDING_PAGE: usize = 200;
/// How long to wait before trying the database again after it failed.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// The jobs this process runs now, by id.
#[derive(Default)]
pub(crate) struct BulkRunner {
    running: Mutex<HashSet<String>>,
    wake: tokio::sync::Notify,
}

impl BulkRunner {
    fn running(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        crate::sync::lock(&self.running)
    }
}

impl Engine {
    /// How many flows a job with `filter` would act on now (a dry run).
    pub async fn count_bulk(&self, filter: &FlowFilter) -> Result<u64, EngineError> {
        Ok(self.inner.store.count_bulk_matches(filter).await?)
    }

    /// Create a bulk job (`queued`) and wake the runner; `TooMany` when the
    /// filter matches more than `max_bulk_flows`.
    pub async fn create_bulk_job(&self, spec: BulkSpec) -> Result<BulkCreated, EngineError> {
        if self.inner.stopping.is_cancelled() {
            return Err(EngineError::ShuttingDown);
        }
        let action = spec.action;
        let job = NewBulkJob {
            id: uuid::Uuid::new_v4().simple().to_string(),
            action,
            shown_filter: spec.shown_filter,
            filter: spec.filter,
            rate: spec.rate.clamp(1, MAX_BULK_RATE),
            created_at: self.inner.config.clock.now(),
        };
        let created = self
            .inner
            .store
            .create_bulk_job(&job, self.inner.config.max_bulk_flows)
            .await?;
        if matches!(created, BulkCreated::Created(_)) {
            self.inner.metrics.bulk_job_created(action.kind());
            self.inner.bulk.wake.notify_one();
        }
        Ok(created)
    }

    /// At most `limit` jobs, the most recent first.
    pub async fn bulk_jobs(&self, limit: usize) -> Result<Vec<BulkJob>, EngineError> {
        Ok(self.inner.store.bulk_jobs(limit).await?)
    }

    /// A job by id.
    pub async fn bulk_job(&self, id: &str) -> Result<Option<BulkJob>, EngineError> {
        Ok(self.inner.store.bulk_job(id).await?)
    }

    /// At most `limit` of the flows a job failed on, in the order it acted.
    pub async fn bulk_failures(&self, id: &str, limit: usize) -> Result<Vec<BulkItem>, EngineError> {
        Ok(self
            .inner
            .store
            .bulk_items(id, BulkItemState::Failed, limit)
            .await?)
    }

    /// Stop a job: it acts on no more flows. `None`: no such job.
    pub async fn cancel_bulk_job(&self, id: &str) -> Result<Option<BulkJob>, EngineError> {
        Ok(self.inner.store.cancel_bulk_job(id).await?)
    }

    /// Start the runner: it takes up unfinished jobs at once (its own from
    /// before a restart included), then whenever woken.
    pub(crate) fn spawn_bulk_runner(&self, mut notices: Option<tokio::sync::mpsc::Receiver<()>>) {
        let engine = self.clone();
        tokio::spawn(async move {
            loop {
                let wait = engine.claim_bulk_jobs().await;
                let timer = async {
                    match wait {
                        Some(wait) => tokio::time::sleep(wait).await,
                        None => std::future::pending().await,
                    }
                };
                let notice = async {
                    match notices.as_mut() {
                        Some(rx) => rx.recv().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = engine.inner.stopping.cancelled() => return,
                    _ = engine.inner.bulk.wake.notified() => {}
                    got = notice => if got.is_none() {
                        // The listener ended: wake-ups from this process and
                        // lease expiries still come.
                        notices = None;
                    },
                    _ = timer => {}
                }
            }
        });
    }

    /// Claim and start jobs while there are free places; how long until a
    /// lease held elsewhere runs out, if one is (when to look again).
    async fn claim_bulk_jobs(&self) -> Option<Duration> {
        let store = &self.inner.store;
        let node = &self.inner.config.node_id;
        loop {
            let running: Vec<String> = self.inner.bulk.running().iter().cloned().collect();
            if running.len() >= MAX_RUNNING_JOBS {
                break;
            }
            match store
                .claim_bulk_job(node, self.inner.config.lease, &running)
                .await
            {
                Ok(Some(job)) => {
                    // Not running here: the claim left those out.
                    self.inner.bulk.running().insert(job.id.clone());
                    let engine = self.clone();
                    self.inner.tasks.spawn(async move {
                        let id = job.id.clone();
                        engine.run_bulk_job(job).await;
                        engine.inner.bulk.running().remove(&id);
                        engine.inner.bulk.wake.notify_one();
                    });
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("looking for bulk jobs failed (trying again shortly): {e}");
                    return Some(RETRY_PAUSE);
                }
            }
        }
        match store.bulk_lease_elsewhere(node).await {
            // A little after it runs out, on the database's clock.
            Ok(wait) => wait.map(|w| w + Duration::from_millis(50)),
            Err(e) => {
                tracing::warn!("reading bulk job leases failed (trying again shortly): {e}");
                Some(RETRY_PAUSE)
            }
        }
    }

    /// Act on the job's pending flows in order, at its rate, until none is
    /// left (then it is `completed`), it is cancelled or its lease lost, or
    /// the engine stops (then its lease is handed back).
    async fn run_bulk_job(&self, job: BulkJob) {
        let store = &self.inner.store;
        let node = &self.inner.config.node_id;
        let lease = self.inner.config.lease;
        let action = job.action;
        tracing::info!(job = %job.id, kind = action.kind(), total = job.total, rate = job.rate, "running bulk job");
        let interval = Duration::from_secs_f64(1.0 / f64::from(job.rate.clamp(1, MAX_BULK_RATE)));
        let mut next = Instant::now();
        loop {
            let page = match store.bulk_pending(&job.id, PENDING_PAGE).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(job = %job.id, "reading a bulk job's flows failed: {e}");
                    if self.pause_or_stop(&job.id).await {
                        return;
                    }
                    // Still ours after the pause?
                    match store.renew_bulk_lease(&job.id, node, lease).await {
                        Ok(true) => continue,
                        Ok(false) => return,
                        Err(_) => continue,
                    }
                }
            };
            if page.is_empty() {
                match store.end_bulk_job(&job.id, node, BulkEnd::Completed).await {
                    Ok(true) => {
                        self.inner.metrics.bulk_job_ended(action.kind(), "completed");
                        tracing::info!(job = %job.id, "bulk job completed");
                    }
                    // Cancelled, or taken over, meanwhile.
                    Ok(false) => {}
                    // Left running: its lease runs out and it is taken up
                    // again, finds nothing pending and completes.
                    Err(e) => tracing::warn!(job = %job.id, "completing a bulk job failed: {e}"),
                }
                return;
            }
            for flow_id in page {
                tokio::select! {
                    _ = tokio::time::sleep_until(next) => {}
                    _ = self.inner.stopping.cancelled() => {}
                }
                if self.inner.stopping.is_cancelled() {
                    self.hand_back_bulk_job(&job.id).await;
                    return;
                }
                next = next.max(Instant::now()) + interval;
                let (state, detail) = loop {
                    match self.act_on(&job.id, action, &flow_id).await {
                        Acted::Ended(state, detail) => break (state, detail),
                        Acted::Stopping => {
                            self.hand_back_bulk_job(&job.id).await;
                            return;
                        }
                        // A failover or a restart of the database: the flow
                        // is acted on once it is back, not marked failed. An
                        // action that landed before its connection dropped
                        // is found then (`acted_already`).
                        Acted::Unavailable(e) => {
                            tracing::debug!(job = %job.id, %flow_id, "database unavailable, acting on the flow again shortly: {e}");
                            if self.pause_or_stop(&job.id).await {
                                return;
                            }
                            // Taken over by another process meanwhile: its now.
                            if let Ok(false) = store.renew_bulk_lease(&job.id, node, lease).await {
                                return;
                            }
                        }
                    }
                };
                // Recorded before the next flow, however long the database
                // takes: a flow acted on and not recorded is only found by a
                // takeover (retries: `by`; cancels: the flow is over).
                loop {
                    match store
                        .finish_bulk_item(&job.id, node, &flow_id, state, detail.as_deref(), lease)
                        .await
                    {
                        Ok(true) => {
                            self.inner.metrics.bulk_flow(action.kind(), state.as_str());
                            break;
                        }
                        Ok(false) => {
                            tracing::info!(job = %job.id, "bulk job cancelled, or taken over by another process: stopped here");
                            return;
                        }
                        Err(e) => {
                            tracing::warn!(job = %job.id, %flow_id, "recording a bulk job's flow failed: {e}");
                            if self.pause_or_stop(&job.id).await {
                                return;
                            }
                        }
                    }
                }
            }
        }
    }

    /// Wait a moment before trying the database again; `true` when the
    /// engine stops meanwhile (the job's lease is then handed back).
    async fn pause_or_stop(&self, id: &str) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(RETRY_PAUSE) => false,
            _ = self.inner.stopping.cancelled() => {
                self.hand_back_bulk_job(id).await;
                true
            }
        }
    }

    async fn hand_back_bulk_job(&self, id: &str) {
        if let Err(e) = self
            .inner
            .store
            .release_bulk_job(id, &self.inner.config.node_id)
            .await
        {
            tracing::warn!(job = %id, "handing a bulk job back failed (taken over when its lease runs out): {e}");
        }
    }

    /// Skipped when the flow's events say this job acted on it already (a
    /// process that died before recording it); failed when that cannot be
    /// read.
    async fn acted_already(&self, flow_id: &str, action: BulkAction, job_id: &str) -> Option<Acted> {
        match self.inner.store.flow_marked_by(flow_id, action, job_id).await {
            Ok(true) => Some(Acted::Ended(
                BulkItemState::Skipped,
                Some(format!("{} by this job already", action.marking_event())),
            )),
            Ok(false) => None,
            Err(StoreError::Unavailable(e)) => Some(Acted::Unavailable(e)),
            Err(e) => Some(Acted::Ended(BulkItemState::Failed, Some(e.to_string()))),
        }
    }

    /// Retry, cancel or resume one flow: how it went, and why when it was
    /// skipped or failed.
    async fn act_on(&self, job_id: &str, action: BulkAction, flow_id: &str) -> Acted {
        use tartan_core::flow::FlowStatus;
        if let Some(skip) = self.acted_already(flow_id, action, job_id).await {
            return skip;
        }
        let outcome = match action {
            BulkAction::Retry { reset_attempts } => {
                self.retry_flow(flow_id, reset_attempts, Some(job_id.to_string()))
                    .await
            }
            BulkAction::Cancel { compensate } => self.cancel_flow(flow_id, compensate, Some(job_id)).await,
            BulkAction::Resume { reset_attempts } => self
                .resume_flow(flow_id, reset_attempts, Some(job_id.to_string()))
                .await
                .map(|_| ()),
        };
        let (state, detail) = match outcome {
            Ok(()) => (BulkItemState::Done, None),
            Err(EngineError::ShuttingDown) => return Acted::Stopping,
            Err(EngineError::Store(StoreError::Unavailable(e))) => return Acted::Unavailable(e),
            Err(e @ EngineError::FlowNotFound(_)) => (BulkItemState::Skipped, Some(e.to_string())),
            // Nothing parked (any more): nothing to do.
            Err(e @ EngineError::NotResumable(..)) => (BulkItemState::Skipped, Some(e.to_string())),
            // Over already (cancelled by someone else, or finished).
            Err(e @ EngineError::FlowTerminal(..)) => (BulkItemState::Skipped, Some(e.to_string())),
            // Active or completed since the job was created: nothing to do.
            // Still deactivating: it could not be retried now.
            Err(e @ EngineError::NotRetryable(..)) => match self.inner.store.flow_status(flow_id).await {
                Ok(Some(FlowStatus::Active | FlowStatus::Completed)) => {
                    (BulkItemState::Skipped, Some(e.to_string()))
                }
                Err(StoreError::Unavailable(e)) => return Acted::Unavailable(e),
                _ => (BulkItemState::Failed, Some(e.to_string())),
            },
            Err(e) => (BulkItemState::Failed, Some(e.to_string())),
        };
        Acted::Ended(state, detail)
    }
}

/// How acting on one flow of a job went.
enum Acted {
    /// To be recorded: done, skipped or failed, and why.
    Ended(BulkItemState, Option<String>),
    /// The engine is stopping: the flow is left pending.
    Stopping,
    /// The database is unreachable: act on it again once it is back.
    Unavailable(String),
}
