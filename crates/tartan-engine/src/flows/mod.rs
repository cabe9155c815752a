//! The engine's operations on flows: start one, read it, deliver an async
//! step's webhook or heartbeat, cancel it. Each change is a decision: the
//! flow's lock is taken, `tartan_core::machine::apply` decides, the writer
//! commits, and only then are the decision's effects carried out.
//!
//! # Layout
//! - this file: the public operations.
//! - `admission`: each flow's slot (its lock and cached state), the places
//!   of `max_active_flows`, and the flow steps' calls waiting for one.
//! - `decide`: deciding, committing (the rows a decision writes) and
//!   carrying out the effects.
//! - `waiters`: clients waiting for a flow to finish.
//! - `calls`: the calls in flight: making them from a decision's `Call`
//!   effects, the call slots, recording how they ended, aborting them.
//! - `children`: flow steps' calls: starting each item's child flow,
//!   waiting for its end, stopping it.
//! - `reconcile`: letting go of flows held in memory that the database
//!   moved away from or lost (a failover).

mod admission;
mod calls;
mod children;
mod decide;
mod reconcile;
mod slot;
mod waiters;

use std::sync::Arc;
use tartan_core::flow::{ApplyError, FlowState, WorkStatus};
use tartan_core::machine::{self, AttemptResult, Command, Effect, Stop};
use tartan_core::outcome::FailureCause;
use tartan_core::plan::start_plan;
use tartan_core::request::{FlowStart, StartFlow};
use tartan_core::step::Args;
use tartan_store::{StoreError, WorkKey};

use tartan_store::{FlowStore, WorkStore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::calls::Calls;
use crate::catalog::Catalog;
use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::health::Health;
use crate::memo::Memo;
use crate::metrics::Metrics;
use crate::notices::Outbox;
use crate::timers::Timers;
use crate::traces;
use crate::webhook_key::WebhookKey;
use crate::writer::Writer;

pub(crate) use admission::FlowLocks;
use admission::Released;
pub(crate) use reconcile::IdleFlows;
use slot::Cached;
pub(crate) use waiters::Waiters;
pub use waiters::MAX_WAITERS;

/// Notices of finished flows a slow subscriber may fall behind by before it
/// misses some (it is told how many).
const FINISHED_BUFFER: usize = 16_384;

/// A flow of this process reached a terminal status (completed, failed,
/// cancelled); sent once the decision is durable.
#[derive(Debug, Clone)]
pub struct FlowFinished {
    pub flow_id: String,
    pub status: tartan_core::flow::FlowStatus,
    pub at: chrono::DateTime<chrono::Utc>,
}

/// The flows of this process: deciding on them (one lock per flow, so each
/// decision sees the state the last one left), committing through the
/// writer, carrying out what was decided, and who waits for them.
pub struct Flows {
    /// Each flow's slot, and the places of `max_active_flows`.
    locks: Arc<FlowLocks>,
    writer: Writer,
    /// Clients waiting for flows to finish.
    waiters: Waiters,
    /// Tells subscribers which flows reached a terminal status.
    finished: tokio::sync::broadcast::Sender<FlowFinished>,
    store: Arc<dyn FlowStore>,
    /// The rows of work items a heartbeat moves on.
    work: Arc<dyn WorkStore>,
    catalog: Arc<Catalog>,
    /// The dispatch gate decisions are made with.
    health: Arc<Health>,
    calls: Arc<Calls>,
    timers: Arc<Timers>,
    memo: Arc<Memo>,
    /// Tells the other processes of calls of theirs a decision aborted.
    outbox: Outbox,
    /// Signs the webhook URLs handed to async steps.
    webhook_key: WebhookKey,
    config: Arc<EngineConfig>,
    metrics: Arc<Metrics>,
    stopping: CancellationToken,
    /// Child flows' calls, awaited on shutdown.
    tasks: TaskTracker,
}

/// What the flows are decided with.
pub(crate) struct FlowsParts {
    pub writer: Writer,
    pub store: Arc<dyn FlowStore>,
    pub work: Arc<dyn WorkStore>,
    pub catalog: Arc<Catalog>,
    pub health: Arc<Health>,
    pub calls: Arc<Calls>,
    pub timers: Arc<Timers>,
    pub memo: Arc<Memo>,
    pub outbox: Outbox,
    pub webhook_key: WebhookKey,
    pub config: Arc<EngineConfig>,
    pub metrics: Arc<Metrics>,
    pub stopping: CancellationToken,
    pub tasks: TaskTracker,
}

impl Flows {
    pub(crate) fn new(parts: FlowsParts) -> Flows {
        Flows {
            locks: Arc::new(FlowLocks::new(
                parts.config.max_active_flows,
                parts.config.max_queued_calls,
            )),
            writer: parts.writer,
            waiters: Waiters::default(),
            finished: tokio::sync::broadcast::channel(FINISHED_BUFFER).0,
            store: parts.store,
            work: parts.work,
            catalog: parts.catalog,
            health: parts.health,
            calls: parts.calls,
            timers: parts.timers,
            memo: parts.memo,
            outbox: parts.outbox,
            webhook_key: parts.webhook_key,
            config: parts.config,
            metrics: parts.metrics,
            stopping: parts.stopping,
            tasks: parts.tasks,
        }
    }

    /// Notices of the flows this process finishes from now on. Costs nothing
    /// when nobody listens.
    pub fn subscribe_finished(&self) -> tokio::sync::broadcast::Receiver<FlowFinished> {
        self.finished.subscribe()
    }

    /// The webhook URL an async step is given for one attempt of a work
    /// item: the base URL, flow, step and token, and the signature that
    /// proves the caller was handed it (docs/security.md).
    pub fn webhook_url(&self, flow_id: &str, step_id: &str, token: &str, attempt: u32) -> String {
        tartan_core::webhook::signed_url(
            &self.config.webhook_base_url,
            flow_id,
            step_id,
            token,
            &self.webhook_key.sign(flow_id, step_id, token, attempt),
        )
    }

    /// Which attempt `signature` was handed out for, when it is one the
    /// engine signed (`Some(None)`: a URL from before attempts were signed);
    /// `None` for a forgery.
    pub fn verify_webhook(
        &self,
        flow_id: &str,
        step_id: &str,
        token: &str,
        signature: &str,
    ) -> Option<Option<u32>> {
        self.webhook_key.verify(flow_id, step_id, token, signature)
    }

    /// Flows this process holds in memory with work in progress: what
    /// `max_active_flows` is counted against.
    pub fn active(&self) -> usize {
        self.locks.len()
    }

    /// Flow steps' calls waiting for a place in `max_active_flows`.
    pub(crate) fn waiting(&self) -> usize {
        self.locks.waiting()
    }
}

/// What `start_flow` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartOutcome {
    Started,
    /// The same request had already started this flow.
    AlreadyStarted,
}

/// What `commit_start` did.
pub(super) enum Committed {
    Started,
    /// The flow exists already: nothing changed.
    Exists,
    /// A child's call was aborted before its start: not started.
    Aborted,
}

/// What an async step's webhook delivered.
#[derive(Debug, Clone)]
pub enum WebhookResult {
    Outputs(Args),
    Problem { status: Option<u16>, error: String },
}

/// Why a webhook or heartbeat was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookRefusal {
    UnknownFlow,
    UnknownStep,
    UnknownToken,
    /// Not an async step: its results come from the call's response.
    Synchronous,
    /// The call of the current attempt has not been accepted (202) yet.
    NotAccepted {
        attempt: u32,
    },
    /// The URL belongs to an attempt a newer one replaced.
    OlderAttempt {
        given: u32,
        current: u32,
    },
    /// A heartbeat for a work item no call of which is waiting any more.
    NotWaiting {
        status: &'static str,
    },
}

/// Why a webhook or heartbeat was not taken: refused for what it names
/// (the API answers 400 or 409), or the engine could not act on it.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("webhook refused: {0:?}")]
    Refused(WebhookRefusal),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl From<StoreError> for WebhookError {
    fn from(e: StoreError) -> Self {
        WebhookError::Engine(e.into())
    }
}

/// Why a webhook cannot act on its item now.
enum NotNow {
    Refused(WebhookRefusal),
    /// The call of this attempt is still running, its `202` not recorded
    /// yet.
    WaitForAcceptance(u32),
}

/// How long a webhook that arrives before its call's `202` is recorded
/// waits for it: a step may post its result the moment it answers, and the
/// engine records the answer a moment later.
const ACCEPTANCE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What a webhook or heartbeat may do to a work item (docs/api.md, "Async
/// steps and webhooks"): `Ok(attempt)` it may go ahead, for that attempt.
fn webhook_target(state: &FlowState, step_id: &str, token: &str, signed: Option<u32>) -> Result<u32, NotNow> {
    let Some(exec) = state.executions.get(step_id) else {
        return Err(NotNow::Refused(WebhookRefusal::UnknownStep));
    };
    let Some(work) = exec.work_items.get(token) else {
        return Err(NotNow::Refused(WebhookRefusal::UnknownToken));
    };
    if !state.plan.steps.get(step_id).is_some_and(|s| s.is_async()) {
        return Err(NotNow::Refused(WebhookRefusal::Synchronous));
    }
    let current = work.attempts.last().map(|a| a.number).unwrap_or(0);
    let attempt = signed.unwrap_or(current);
    if attempt < current {
        return Err(NotNow::Refused(WebhookRefusal::OlderAttempt {
            given: attempt,
            current,
        }));
    }
    let running =
        work.status == WorkStatus::Active && work.attempts.last().is_some_and(|a| a.ended_at.is_none());
    if running && work.accepted_at.is_none() {
        return Err(NotNow::WaitForAcceptance(attempt));
    }
    Ok(attempt)
}

impl Flows {
    /// Start a flow. An identical repeat of an earlier start is accepted; a
    /// different request under the same id is `FlowExists`.
    pub async fn start_flow(self: &Arc<Self>, request: StartFlow) -> Result<StartOutcome, EngineError> {
        self.start_flow_traced(request, traces::CallerTrace::default())
            .await
    }

    /// `start_flow`, continuing the caller's trace when its `traceparent`
    /// is a valid W3C one (with its `tracestate`); else (and when absent)
    /// the flow gets a trace of its own. Kept with the flow
    /// (docs/operating.md, "Traces").
    pub async fn start_flow_traced(
        self: &Arc<Self>,
        request: StartFlow,
        caller: traces::CallerTrace<'_>,
    ) -> Result<StartOutcome, EngineError> {
        if self.stopping.is_cancelled() {
            return Err(EngineError::ShuttingDown);
        }
        // The flow starts at this instant: its deadline is measured from it.
        let started = self.config.clock.now();
        let mut start = request.parse(started, self.config.max_step_attempts)?;
        let mut trace = traces::new_flow_trace(caller);
        // The request's log lines name the flow's trace (docs/operating.md,
        // "Logs"), its own when the caller sent none.
        let request = tracing::Span::current();
        request.record("trace_id", trace.trace_id.as_str());
        request.record("span_id", trace.span_id.as_str());
        // Ended when dropped, once the start is done (or refused).
        let _span = self
            .config
            .tracer
            .as_ref()
            .and_then(|tracer| traces::start_span(tracer, &start.id, &mut trace));
        start.options.trace = Some(Arc::new(trace));
        let active = self.locks.len();
        if active >= self.config.max_active_flows {
            return Err(EngineError::Overloaded(active));
        }
        // A repeated id is found by the commit (the flow row exists): no
        // read before every start to look for one.
        let view = self.catalog.for_goals(&start.goals).await?;
        let plan = start_plan(&view.catalog, &start.goals, &start.init)?;
        machine::check_fan_out(&plan, &start.init)?;
        let init_bytes = tartan_core::json::json_len(&start.init);
        let max_bytes = self.config.max_flow_bytes;
        if init_bytes > max_bytes {
            return Err(tartan_core::error::ValidationError::new(
                "init",
                format!(
                    "the initial inputs take {init_bytes} bytes of JSON, more than a flow may hold \
                     ({max_bytes} bytes, TARTAN_MAX_FLOW_BYTES)"
                ),
            )
            .into());
        }
        let FlowStart {
            id,
            init,
            options,
            text,
            ..
        } = start;
        let command = Command::Start {
            flow_id: id.clone(),
            plan,
            init,
            options,
        };
        match self
            .commit_start(&id, command, started, Some(request_digest(&text)), None)
            .await?
        {
            Committed::Started => Ok(StartOutcome::Started),
            // (A client's start has no call to be aborted.)
            Committed::Exists | Committed::Aborted => {
                let existing = self.store.flow_request(&id).await?.unwrap_or_default();
                same_request(&id, &existing, &text)
            }
        }
    }

    /// Decide a flow's start (`command`, at `started`), commit it with the
    /// request's digest and carry it out. A client's start (with its
    /// `request`) takes a place in `max_active_flows` if one is free, else
    /// is `Overloaded`; a child's start holds one already
    /// (`admission::Place`), and is given up if its call is `aborted` by
    /// then.
    pub(super) async fn commit_start(
        self: &Arc<Self>,
        id: &str,
        command: Command,
        started: chrono::DateTime<chrono::Utc>,
        request: Option<String>,
        aborted: Option<&tokio_util::sync::CancellationToken>,
    ) -> Result<Committed, EngineError> {
        let slot = match &request {
            Some(_) => self.locks.admit(id).map_err(EngineError::Overloaded)?,
            None => self.locks.slot(id),
        };
        // Declared before the lock's guard, so dropped after it.
        let _release = Released::on_exit(&self.locks, id, &slot);
        let mut guard = slot.cached.lock().await;
        // Looked at under the child's lock, which stopping the child takes
        // too (`stop_child`): either that stop finds the child, or the child
        // never starts and the stop says so to its parent.
        if aborted.is_some_and(|a| a.is_cancelled()) {
            return Ok(Committed::Aborted);
        }
        let scripted = matches!(&command, Command::Start { plan, .. } if plan.is_scripted());
        // A scripted start may be decided twice (`decision_context`): only
        // then is the command kept for the second time.
        let spare = scripted.then(|| command.clone());
        let mut command = Some(command);
        let mut tx = self.decision_context(started, scripted, |ctx| {
            let command = command
                .take()
                .or_else(|| spare.clone())
                .ok_or(ApplyError::AlreadyStarted)?;
            machine::apply(FlowState::default(), command, ctx)
        })?;
        let sequence = tx.events.len() as i64;
        let commit = self.commit_for(&mut tx, 0, request);
        let state = Arc::clone(&commit.state);
        match self.writer.commit(commit).await {
            Ok(()) => {}
            Err(StoreError::FlowExists(_)) => return Ok(Committed::Exists),
            Err(e) => return Err(e.into()),
        }
        let busy = tx.state.has_active_work();
        *guard = busy.then_some(Cached { state, sequence });
        drop(guard);
        self.carry_out(&tx, None);
        Ok(Committed::Started)
    }

    /// The flow's status, without rebuilding its state (cheap to poll).
    pub async fn flow_status(
        self: &Arc<Self>,
        flow_id: &str,
    ) -> Result<tartan_core::flow::FlowStatus, EngineError> {
        self.store
            .flow_status(flow_id)
            .await?
            .ok_or_else(|| EngineError::FlowNotFound(flow_id.to_string()))
    }

    /// The flow's status as soon as it is no longer active, or after
    /// `wait` if it still is. Woken by the decision that finishes the flow
    /// in this process; one another process finishes is seen within
    /// `waiters::RECHECK`.
    pub async fn wait_for_flow(
        self: &Arc<Self>,
        flow_id: &str,
        wait: std::time::Duration,
    ) -> Result<tartan_core::flow::FlowStatus, EngineError> {
        let give_up = tokio::time::Instant::now() + wait;
        let waiting = self
            .waiters
            .wait_for(flow_id)
            .ok_or(EngineError::TooManyWaiters(MAX_WAITERS))?;
        let mut first = true;
        loop {
            // Listening before the status is read: a finish in between is
            // not missed.
            let notified = waiting.notice.woken.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // A finish in this process says its status: no read needed.
            // Nor on the first look at a flow this process holds active
            // (a client waiting on the flow it just started): a finish
            // here from now on wakes this waiter, and one by another
            // process is read at the next look, as while waiting. That
            // look is never the answer: a wait with no time left reads.
            let cached = first && self.locks.held_active(flow_id);
            first = false;
            let status = match waiting.notice.finished() {
                Some(status) => status,
                None if cached => tartan_core::flow::FlowStatus::Active,
                None => self.flow_status(flow_id).await?,
            };
            let now = tokio::time::Instant::now();
            if status != tartan_core::flow::FlowStatus::Active || (now >= give_up && !cached) {
                return Ok(status);
            }
            if now >= give_up {
                continue;
            }
            let _ = tokio::time::timeout_at(give_up.min(now + waiters::RECHECK), notified).await;
        }
    }

    /// The flow's projection, as stored.
    pub async fn flow(self: &Arc<Self>, flow_id: &str) -> Result<FlowState, EngineError> {
        match self.store.load_flow(flow_id).await? {
            Some(f) => Ok(f.state),
            None => Err(EngineError::FlowNotFound(flow_id.to_string())),
        }
    }

    /// Deliver an async step's result, for the attempt its URL was signed
    /// for (`None`: a URL from before attempts were signed, taken as the
    /// current one). A result for the current attempt that arrives after it
    /// ended is recorded as late and changes nothing.
    pub async fn deliver_webhook(
        self: &Arc<Self>,
        flow_id: &str,
        step_id: &str,
        token: &str,
        signed: Option<u32>,
        result: WebhookResult,
    ) -> Result<(), WebhookError> {
        let (attempt, _) = self.webhook_target(flow_id, step_id, token, signed).await?;
        let result = match result {
            WebhookResult::Outputs(outputs) => AttemptResult::Success {
                outputs,
                http_status: None,
            },
            WebhookResult::Problem { status, error } => AttemptResult::Failure {
                cause: status.map_or(FailureCause::Reported, FailureCause::Status),
                error,
                retry_after_ms: None,
            },
        };
        let record = Command::Record {
            step_id: step_id.to_string(),
            token: token.to_string(),
            attempt,
            result,
            waited: None,
        };
        self.decide(flow_id, record).await?;
        Ok(())
    }

    /// Check a webhook against the stored flow: which attempt it may act on,
    /// and the item's status. A call still running (its `202` not recorded
    /// yet) is waited for, briefly; then it is refused as not accepted.
    async fn webhook_target(
        self: &Arc<Self>,
        flow_id: &str,
        step_id: &str,
        token: &str,
        signed: Option<u32>,
    ) -> Result<(u32, WorkStatus), WebhookError> {
        let give_up = tokio::time::Instant::now() + ACCEPTANCE_WAIT;
        loop {
            let Some(loaded) = self.store.load_flow(flow_id).await? else {
                return Err(WebhookError::Refused(WebhookRefusal::UnknownFlow));
            };
            let status = |state: &FlowState| {
                state
                    .find_work(step_id, token)
                    .map_or(WorkStatus::Pending, |w| w.status)
            };
            match webhook_target(&loaded.state, step_id, token, signed) {
                Ok(attempt) => return Ok((attempt, status(&loaded.state))),
                Err(NotNow::Refused(refusal)) => return Err(WebhookError::Refused(refusal)),
                Err(NotNow::WaitForAcceptance(attempt)) if tokio::time::Instant::now() >= give_up => {
                    return Err(WebhookError::Refused(WebhookRefusal::NotAccepted { attempt }));
                }
                // Rare (a step that answers and calls back at once), and
                // bounded: no notice to wait on spans processes, so look again.
                Err(NotNow::WaitForAcceptance(_)) => {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await
                }
            }
        }
    }

    /// Cancel an active flow: no new work, calls in flight aborted; with
    /// `compensate: false` it is killed: the succeeded work of its steps is
    /// not compensated. Works wherever the flow runs (its calls elsewhere
    /// are told to abort, docs/api.md "Retry and kill"). `by`: the bulk job
    /// cancelling it, which the `flow_cancelled` event's reason names, so
    /// that a job taken over after a crash can tell the flows it cancelled
    /// already (docs/api.md, "Bulk operations").
    pub async fn cancel_flow(
        self: &Arc<Self>,
        flow_id: &str,
        compensate: bool,
        by: Option<&str>,
    ) -> Result<(), EngineError> {
        let state = self.flow(flow_id).await?;
        if state.status != tartan_core::flow::FlowStatus::Active {
            return Err(EngineError::FlowTerminal(
                flow_id.to_string(),
                state.status.as_str(),
            ));
        }
        let reason = match by {
            Some(job) => format!("cancelled by bulk job {job}"),
            None => "cancelled by request".to_string(),
        };
        let stop = if compensate {
            Stop::Cancel(reason)
        } else {
            Stop::Kill(reason)
        };
        self.decide(flow_id, Command::Stop(stop)).await.map(drop)
    }

    /// Run a failed or cancelled (timed-out included) flow again from where
    /// it stopped (docs/api.md, "Retry and kill"). Any process may: the
    /// decision is checked against the stored sequence like every other,
    /// and the calls it starts are leased to this process.
    pub async fn retry_flow(
        self: &Arc<Self>,
        flow_id: &str,
        reset_attempts: bool,
        by: Option<String>,
    ) -> Result<(), EngineError> {
        use tartan_core::flow::FlowStatus;
        let state = self.flow(flow_id).await?;
        let refuse = |why: &str| Err(EngineError::NotRetryable(flow_id.to_string(), why.to_string()));
        // Its parent's item decides whether it runs again (a new child).
        if let Some(parent) = &state.parent {
            return refuse(&format!(
                "it is the child flow of flow {}'s step {}; retry the parent instead",
                parent.parent_flow_id, parent.parent_step_id
            ));
        }
        match state.status {
            FlowStatus::Active => return refuse("it is active"),
            FlowStatus::Completed => return refuse("it completed"),
            FlowStatus::Failed | FlowStatus::Cancelled => {}
        }
        if state.deactivated_at.is_none() || state.has_active_work() {
            return refuse(
                "it is still deactivating (calls or compensations in flight); retry once it is deactivated",
            );
        }
        if self.stopping.is_cancelled() {
            return Err(EngineError::ShuttingDown);
        }
        let retry = Command::Retry { reset_attempts, by };
        // Another decision may have raced this one (another bulk job, a
        // request): the retry found nothing to do on the flow as that left
        // it, and this request did not retry it.
        if self.decide(flow_id, retry).await?.changed {
            Ok(())
        } else {
            refuse("another request changed it first")
        }
    }

    /// Resume an active flow's parked work items (docs/retries.md,
    /// "Parking"): how many were parked. Its other work is untouched.
    pub async fn resume_flow(
        self: &Arc<Self>,
        flow_id: &str,
        reset_attempts: bool,
        by: Option<String>,
    ) -> Result<usize, EngineError> {
        use tartan_core::flow::{FlowStatus, WorkStatus};
        let state = self.flow(flow_id).await?;
        let refuse = |why: String| Err(EngineError::NotResumable(flow_id.to_string(), why));
        if state.status != FlowStatus::Active {
            return refuse(format!(
                "it is {}; only an active flow's parked work resumes",
                state.status.as_str()
            ));
        }
        let parked = state
            .executions
            .values()
            .flat_map(|e| e.work_items.values())
            .filter(|w| w.status == WorkStatus::Parked)
            .count();
        if parked == 0 {
            return refuse("it has no parked work".into());
        }
        if self.stopping.is_cancelled() {
            return Err(EngineError::ShuttingDown);
        }
        self.decide(flow_id, Command::Resume { reset_attempts, by })
            .await?;
        Ok(parked)
    }

    /// An async step's heartbeat: its inactivity window starts again. Only
    /// for an accepted call of the current attempt that is still waiting.
    pub async fn heartbeat(
        self: &Arc<Self>,
        flow_id: &str,
        step_id: &str,
        token: &str,
        signed: Option<u32>,
    ) -> Result<(), WebhookError> {
        let (_, status) = self.webhook_target(flow_id, step_id, token, signed).await?;
        if status != WorkStatus::Active {
            return Err(WebhookError::Refused(WebhookRefusal::NotWaiting {
                status: status.as_str(),
            }));
        }
        let heartbeat = Command::Heartbeat {
            step_id: step_id.to_string(),
            token: token.to_string(),
        };
        // Most heartbeats append no event: the window they keep open is
        // noted in the item's row before the answer, where the inactivity
        // timer looks. The core notes one only while more than half of the
        // recorded window is left, so the note has that long to land.
        for heard in self.decide(flow_id, heartbeat).await?.heard {
            if let Effect::Heard {
                step_id,
                token,
                attempt,
                until,
            } = heard
            {
                let key = WorkKey {
                    flow_id: flow_id.to_string(),
                    step_id,
                    token,
                };
                let lease_until = until
                    .checked_add_signed(self.config.lease_length())
                    .unwrap_or(until);
                self.work.note_heard(&key, attempt, until, lease_until).await?;
            }
        }
        Ok(())
    }
}

fn same_request(flow_id: &str, existing: &str, new: &str) -> Result<StartOutcome, EngineError> {
    // Flows started before requests were kept as digests kept the text.
    if existing == request_digest(new) || existing == new {
        Ok(StartOutcome::AlreadyStarted)
    } else {
        Err(EngineError::FlowExists(flow_id.to_string()))
    }
}

/// What a flow keeps of its start request, to tell a repeat from another
/// start under the same id: its digest, not the text. Kept whole, a 1 MB
/// start was stored again beside the events that hold its inputs.
fn request_digest(text: &str) -> String {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(text.as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}
