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
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tartan_core::bulk::{BulkAction, BulkItemState, BulkSpec, MAX_BULK_RATE};
use tartan_core::filter::FlowFilter;
use tartan_store::{
    BulkCreated, BulkEnd, BulkItem, BulkJob, BulkJobStore, BulkRunStore, FlowStore, NewBulkJob,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::metrics::Metrics;

/// Jobs one process runs at once; more wait their turn.
const MAX_RUNNING_JOBS: usize = 4;
/// Pending flows read at a time.
const PENDING_PAGE: usize = 200;
/// How long to wait before trying the database again after it failed.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// One flow acted on, as the flows answer it.
pub(crate) type Acting<'a> = Pin<Box<dyn Future<Output = Result<(), EngineError>> + Send + 'a>>;

/// What a bulk job asks of the flows: the action on one flow, named by the
/// job (`by`).
pub(crate) trait FlowActions: Send + Sync {
    fn act<'a>(&'a self, flow_id: &'a str, action: BulkAction, by: &'a str) -> Acting<'a>;
}

/// Bulk jobs: created and listed for the API, run by this process's runner.
pub struct Bulk {
    /// The jobs this process runs now, by id.
    running: Mutex<HashSet<String>>,
    /// Wakes the runner: a job was created here, or one of ours ended.
    wake: tokio::sync::Notify,
    jobs: Arc<dyn BulkJobStore>,
    runs: Arc<dyn BulkRunStore>,
    /// Where a flow's status is read when an action was refused.
    flows: Arc<dyn FlowStore>,
    actions: Arc<dyn FlowActions>,
    config: Arc<EngineConfig>,
    metrics: Arc<Metrics>,
    stopping: CancellationToken,
    tasks: TaskTracker,
}

/// What bulk jobs are run with.
pub(crate) struct BulkParts {
    pub jobs: Arc<dyn BulkJobStore>,
    pub runs: Arc<dyn BulkRunStore>,
    pub flows: Arc<dyn FlowStore>,
    pub actions: Arc<dyn FlowActions>,
    pub config: Arc<EngineConfig>,
    pub metrics: Arc<Metrics>,
    pub stopping: CancellationToken,
    pub tasks: TaskTracker,
}

impl Bulk {
    pub(crate) fn new(parts: BulkParts) -> Bulk {
        Bulk {
            running: Mutex::default(),
            wake: tokio::sync::Notify::new(),
            jobs: parts.jobs,
            runs: parts.runs,
            flows: parts.flows,
            actions: parts.actions,
            config: parts.config,
            metrics: parts.metrics,
            stopping: parts.stopping,
            tasks: parts.tasks,
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        crate::sync::lock(&self.running)
    }

    /// How many flows a job with `filter` would act on now (a dry run).
    pub async fn count(&self, filter: &FlowFilter) -> Result<u64, EngineError> {
        Ok(self.jobs.count_bulk_matches(filter).await?)
    }

    /// Create a bulk job (`queued`) and wake the runner; `TooMany` when the
    /// filter matches more than `max_bulk_flows`.
    pub async fn create(&self, spec: BulkSpec) -> Result<BulkCreated, EngineError> {
        if self.stopping.is_cancelled() {
            return Err(EngineError::ShuttingDown);
        }
        let action = spec.action;
        let job = NewBulkJob {
            id: uuid::Uuid::new_v4().simple().to_string(),
            action,
            shown_filter: spec.shown_filter,
            filter: spec.filter,
            rate: spec.rate.clamp(1, MAX_BULK_RATE),
            created_at: self.config.clock.now(),
        };
        let created = self
            .jobs
            .create_bulk_job(&job, self.config.max_bulk_flows)
            .await?;
        if matches!(created, BulkCreated::Created(_)) {
            self.metrics.bulk_job_created(action.kind());
            self.wake.notify_one();
        }
        Ok(created)
    }

    /// At most `limit` jobs, the most recent first.
    pub async fn jobs(&self, limit: usize) -> Result<Vec<BulkJob>, EngineError> {
        Ok(self.jobs.bulk_jobs(limit).await?)
    }

    /// A job by id.
    pub async fn job(&self, id: &str) -> Result<Option<BulkJob>, EngineError> {
        Ok(self.jobs.bulk_job(id).await?)
    }

    /// At most `limit` of the flows a job failed on, in the order it acted.
    pub async fn failures(&self, id: &str, limit: usize) -> Result<Vec<BulkItem>, EngineError> {
        Ok(self.jobs.bulk_items(id, BulkItemState::Failed, limit).await?)
    }

    /// Stop a job: it acts on no more flows. `None`: no such job.
    pub async fn cancel(&self, id: &str) -> Result<Option<BulkJob>, EngineError> {
        Ok(self.jobs.cancel_bulk_job(id).await?)
    }

    /// Start the runner: it takes up unfinished jobs at once (its own from
    /// before a restart included), then whenever woken.
    pub(crate) fn spawn_runner(self: &Arc<Self>, mut notices: Option<tokio::sync::mpsc::Receiver<()>>) {
        let bulk = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                let wait = bulk.claim_jobs().await;
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
                    _ = bulk.stopping.cancelled() => return,
                    _ = bulk.wake.notified() => {}
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
    async fn claim_jobs(self: &Arc<Self>) -> Option<Duration> {
        let store = &self.runs;
        let node = &self.config.node_id;
        loop {
            let running: Vec<String> = self.running().iter().cloned().collect();
            if running.len() >= MAX_RUNNING_JOBS {
                break;
            }
            match store.claim_bulk_job(node, self.config.lease, &running).await {
                Ok(Some(job)) => {
                    // Not running here: the claim left those out.
                    self.running().insert(job.id.clone());
                    let bulk = Arc::clone(self);
                    self.tasks.spawn(async move {
                        let id = job.id.clone();
                        bulk.run_job(job).await;
                        bulk.running().remove(&id);
                        bulk.wake.notify_one();
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
    async fn run_job(&self, job: BulkJob) {
        let store = &self.runs;
        let node = &self.config.node_id;
        let lease = self.config.lease;
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
                        self.metrics.bulk_job_ended(action.kind(), "completed");
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
                    _ = self.stopping.cancelled() => {}
                }
                if self.stopping.is_cancelled() {
                    self.hand_back(&job.id).await;
                    return;
                }
                next = next.max(Instant::now()) + interval;
                let (state, detail) = loop {
                    match self.act_on(&job.id, action, &flow_id).await {
                        Acted::Ended(state, detail) => break (state, detail),
                        Acted::Stopping => {
                            self.hand_back(&job.id).await;
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
                            self.metrics.bulk_flow(action.kind(), state.as_str());
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
            _ = self.stopping.cancelled() => {
                self.hand_back(id).await;
                true
            }
        }
    }

    async fn hand_back(&self, id: &str) {
        if let Err(e) = self.runs.release_bulk_job(id, &self.config.node_id).await {
            tracing::warn!(job = %id, "handing a bulk job back failed (taken over when its lease runs out): {e}");
        }
    }

    /// Skipped when the flow's events say this job acted on it already (a
    /// process that died before recording it); failed when that cannot be
    /// read.
    async fn acted_already(&self, flow_id: &str, action: BulkAction, job_id: &str) -> Option<Acted> {
        match self.runs.flow_marked_by(flow_id, action, job_id).await {
            Ok(true) => Some(Acted::Ended(
                BulkItemState::Skipped,
                Some(format!("{} by this job already", action.marking_event())),
            )),
            Ok(false) => None,
            Err(e) => Some(match e.unavailable() {
                Some(cause) => Acted::Unavailable(cause.to_owned()),
                None => Acted::Ended(BulkItemState::Failed, Some(e.to_string())),
            }),
        }
    }

    /// Retry, cancel or resume one flow: how it went, and why when it was
    /// skipped or failed.
    async fn act_on(&self, job_id: &str, action: BulkAction, flow_id: &str) -> Acted {
        use tartan_core::flow::FlowStatus;
        if let Some(skip) = self.acted_already(flow_id, action, job_id).await {
            return skip;
        }
        let outcome = self.actions.act(flow_id, action, job_id).await;
        if let Some(cause) = outcome.as_ref().err().and_then(EngineError::database_unreachable) {
            return Acted::Unavailable(cause.to_owned());
        }
        let (state, detail) = match outcome {
            Ok(()) => (BulkItemState::Done, None),
            Err(EngineError::ShuttingDown) => return Acted::Stopping,
            Err(e @ EngineError::FlowNotFound(_)) => (BulkItemState::Skipped, Some(e.to_string())),
            // Nothing parked (any more): nothing to do.
            Err(e @ EngineError::NotResumable(..)) => (BulkItemState::Skipped, Some(e.to_string())),
            // Over already (cancelled by someone else, or finished).
            Err(e @ EngineError::FlowTerminal(..)) => (BulkItemState::Skipped, Some(e.to_string())),
            // Active or completed since the job was created: nothing to do.
            // Still deactivating: it could not be retried now.
            Err(e @ EngineError::NotRetryable(..)) => match self.flows.flow_status(flow_id).await {
                Ok(Some(FlowStatus::Active | FlowStatus::Completed)) => {
                    (BulkItemState::Skipped, Some(e.to_string()))
                }
                Err(found) => match found.unavailable() {
                    Some(cause) => return Acted::Unavailable(cause.to_owned()),
                    None => (BulkItemState::Failed, Some(e.to_string())),
                },
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
