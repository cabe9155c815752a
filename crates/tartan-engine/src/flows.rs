//! Starting flows and moving them on. Each flow has one lock in this process;
//! a decision takes it, computes the events with `tartan-core`, commits them
//! through the writer and only then releases it and dispatches the calls the
//! decision started. A commit that finds the flow changed by another process
//! (sequence conflict) reloads the flow and decides again.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex as StdMutex};

use chrono::{DateTime, SubsecRound, Utc};
use tartan_core::error::{PlanError, ValidationError};
use tartan_core::flow::FlowOptions;
use tartan_core::flow::{ApplyError, FlowEvent, FlowState, WorkStatus};
use tartan_core::machine::{self, AttemptResult, Context, Stop, Transition};
use tartan_core::outcome::{default_retryable, PERMANENT, RETRYABLE};
use tartan_core::plan::start_plan;
use tartan_core::request::StartFlow;
use tartan_core::step::Args;
use tartan_core::timeouts::TimeoutScope;
use tartan_store::{FlowCommit, StoreError, WorkRow};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::dispatch::{self, Call};
use crate::slots::{Admission, Admitted};
use crate::timers::Timer;
use crate::{Engine, EngineError};

/// What `start_flow` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartOutcome {
    Started,
    /// The same request had already started this flow.
    AlreadyStarted,
}

struct Cached {
    /// The same allocation as the last commit's state: keeping it costs no copy.
    state: Arc<FlowState>,
    sequence: i64,
}

/// One flow's lock, with its cached state, and the results of its calls
/// that wait for the lock: whoever takes the lock next decides on all of
/// them in one commit, so that results arriving together (the items of a
/// for_each step) share one instead of queueing for one each.
#[derive(Default)]
struct FlowSlot {
    cached: Mutex<Option<Cached>>,
    pending: StdMutex<Vec<Concluded>>,
}

type Slot = Arc<FlowSlot>;

/// Releases a flow's slot when dropped (`FlowLocks::release`): on every way
/// out of a start or a decision, early returns and errors included.
struct Released<'a> {
    flows: &'a FlowLocks,
    flow_id: &'a str,
    slot: &'a FlowSlot,
}

impl<'a> Released<'a> {
    fn on_exit(flows: &'a FlowLocks, flow_id: &'a str, slot: &'a FlowSlot) -> Self {
        Self { flows, flow_id, slot }
    }
}

impl Drop for Released<'_> {
    fn drop(&mut self) {
        self.flows.release(self.flow_id, self.slot);
    }
}

/// A call of this process that ended, waiting to be recorded.
struct Concluded {
    step_id: String,
    token: String,
    attempt: u32,
    compensate: bool,
    /// `None`: an async step accepted the call; its webhook will decide.
    result: Option<AttemptResult>,
    reply: tokio::sync::oneshot::Sender<Result<(), Unrecorded>>,
}

/// Why a concluded call was not recorded.
enum Unrecorded {
    /// The database was unreachable: worth trying again.
    Unavailable(String),
    Failed(String),
}

impl Concluded {
    fn apply(&self, state: FlowState, ctx: &mut Context<'_>) -> Result<Transition, ApplyError> {
        let (step, token, attempt) = (&self.step_id, &self.token, self.attempt);
        match &self.result {
            None => machine::accept_async(state, step, token, attempt, ctx.now),
            Some(r) if self.compensate => {
                machine::record_comp_result(state, step, token, attempt, r.clone(), ctx)
            }
            Some(r) => machine::record_result(state, step, token, attempt, r.clone(), ctx),
        }
    }
}

/// A call of this process, from its dispatch until its result is recorded.
pub(crate) struct InFlight {
    /// Which call: a retry of the same token is a new one.
    id: u64,
    /// Aborts it.
    cancel: CancellationToken,
    /// It got a slot and went out; on shutdown, the calls that did not are
    /// handed back at once.
    started: bool,
}

/// One lock (and cached state) per flow that is being worked on.
#[derive(Default)]
pub(crate) struct FlowLocks {
    slots: StdMutex<HashMap<String, Slot>>,
}

impl FlowLocks {
    fn slot(&self, flow_id: &str) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(flow_id.to_string()).or_default().clone()
    }

    /// Flows with work in progress (their slots are kept only while busy).
    pub(crate) fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Drop the flow's slot unless it is still needed: a decision holds its
    /// lock (that one releases it when done), results wait in it, or its
    /// cached state has calls in flight. Called on every path out of a
    /// decision or a start, so a flow that finished, or was never created,
    /// never keeps a place in `max_active_flows`.
    fn release(&self, flow_id: &str, slot: &FlowSlot) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        // A newer slot of the same flow is not this caller's to drop.
        if !slots
            .get(flow_id)
            .is_some_and(|s| std::ptr::eq(Arc::as_ptr(s), slot))
        {
            return;
        }
        let Ok(cached) = slot.cached.try_lock() else {
            return;
        };
        let busy = cached.as_ref().is_some_and(|c| c.state.has_active_work());
        let waiting = !slot.pending.lock().unwrap_or_else(|p| p.into_inner()).is_empty();
        if !busy && !waiting {
            slots.remove(flow_id);
        }
    }
}

fn new_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Times are kept at microsecond precision, as stored.
fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
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

/// How long a webhook that arrives before its call's `202` is recorded
/// waits for it: a step may post its result the moment it answers, and the
/// engine records the answer a moment later.
const ACCEPTANCE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What a webhook or heartbeat may do to a work item (docs/api.md, "Async
/// steps and webhooks"): `Ok(attempt)` it may go ahead, for that attempt.
fn webhook_target(
    state: &FlowState,
    step_id: &str,
    token: &str,
    signed: Option<u32>,
) -> Result<Result<u32, WebhookRefusal>, WaitForAcceptance> {
    let Some(exec) = state.executions.get(step_id) else {
        return Ok(Err(WebhookRefusal::UnknownStep));
    };
    let Some(work) = exec.work_items.get(token) else {
        return Ok(Err(WebhookRefusal::UnknownToken));
    };
    if !state.plan.steps.get(step_id).is_some_and(|s| s.is_async()) {
        return Ok(Err(WebhookRefusal::Synchronous));
    }
    let current = work.attempts.last().map(|a| a.number).unwrap_or(0);
    let attempt = signed.unwrap_or(current);
    if attempt < current {
        return Ok(Err(WebhookRefusal::OlderAttempt {
            given: attempt,
            current,
        }));
    }
    let running =
        work.status == WorkStatus::Active && work.attempts.last().is_some_and(|a| a.ended_at.is_none());
    if running && work.accepted_at.is_none() {
        return Err(WaitForAcceptance(attempt));
    }
    Ok(Ok(attempt))
}

/// The call a webhook belongs to is still running, not yet accepted.
struct WaitForAcceptance(u32);

impl Engine {
    /// Start a flow. An identical repeat of an earlier start is accepted; a
    /// different request under the same id is `FlowExists`.
    pub async fn start_flow(&self, request: StartFlow) -> Result<StartOutcome, EngineError> {
        if self.inner.stopping.is_cancelled() {
            return Err(EngineError::ShuttingDown);
        }
        let request = request.normalize()?;
        // The operator's setting is the default and the ceiling: a request
        // may lower it, never raise it (docs/retries.md).
        let cap = self.inner.config.max_step_attempts;
        if let Some(asked) = request.max_step_attempts.filter(|n| *n > cap) {
            return Err(ValidationError::new(
                "max_step_attempts",
                format!("{asked} is above this engine's cap of {cap} (TARTAN_MAX_STEP_ATTEMPTS)"),
            )
            .into());
        }
        let active = self.inner.flows.len();
        if active >= self.inner.config.max_active_flows {
            return Err(EngineError::Overloaded(active));
        }
        let text = serde_json::to_string(&request).map_err(|e| EngineError::Internal(e.to_string()))?;
        // Validate the deadline before anything else can answer. The flow
        // starts at this instant: its deadline is measured from it.
        let started = now();
        let (deadline_at, on_timeout) = request.deadline(started)?;
        if let Some(existing) = self.inner.store.flow_request(&request.id).await? {
            return same_request(&request.id, &existing, &text);
        }
        let mut view = self.catalog().await;
        let plan = match start_plan(&view.catalog, &request.goals, &request.init) {
            Err(PlanError::UnknownGoals(_)) => {
                // Another process may have registered the step just now.
                view = self.refresh_catalog().await?;
                start_plan(&view.catalog, &request.goals, &request.init)?
            }
            other => other?,
        };
        machine::check_fan_out(&plan, &request.init)?;
        let slot = self.inner.flows.slot(&request.id);
        // Declared before the lock's guard, so dropped after it.
        let _release = Released::on_exit(&self.inner.flows, &request.id, &slot);
        let mut guard = slot.cached.lock().await;
        let options = FlowOptions {
            labels: request.labels.clone(),
            max_step_attempts: request
                .max_step_attempts
                .unwrap_or(self.inner.config.max_step_attempts),
            deadline_at,
            on_timeout,
        };
        let tx = self.decision_context(started, |ctx| {
            machine::start_flow(&request.id, plan, request.init.clone(), options, ctx)
        })?;
        let commit = self.commit_for(&tx, 0, Some(text.clone()));
        let state = Arc::clone(&commit.state);
        match self.inner.writer.commit(commit).await {
            Ok(()) => {}
            Err(StoreError::FlowExists(_)) => {
                drop(guard);
                let existing = self
                    .inner
                    .store
                    .flow_request(&request.id)
                    .await?
                    .unwrap_or_default();
                return same_request(&request.id, &existing, &text);
            }
            Err(e) => return Err(e.into()),
        }
        let sequence = tx.events.len() as i64;
        let busy = tx.state.has_active_work();
        *guard = busy.then_some(Cached { state, sequence });
        drop(guard);
        self.after_commit(&tx);
        Ok(StartOutcome::Started)
    }

    /// The flow's status, without rebuilding its state (cheap to poll).
    pub async fn flow_status(&self, flow_id: &str) -> Result<tartan_core::flow::FlowStatus, EngineError> {
        self.inner
            .store
            .flow_status(flow_id)
            .await?
            .ok_or_else(|| EngineError::FlowNotFound(flow_id.to_string()))
    }

    /// The flow's projection, as stored.
    pub async fn flow(&self, flow_id: &str) -> Result<FlowState, EngineError> {
        match self.inner.store.load_flow(flow_id).await? {
            Some(f) => Ok(f.state),
            None => Err(EngineError::FlowNotFound(flow_id.to_string())),
        }
    }

    /// Deliver an async step's result, for the attempt its URL was signed
    /// for (`None`: a URL from before attempts were signed, taken as the
    /// current one). A result for the current attempt that arrives after it
    /// ended is recorded as late and changes nothing.
    pub async fn deliver_webhook(
        &self,
        flow_id: &str,
        step_id: &str,
        token: &str,
        signed: Option<u32>,
        result: WebhookResult,
    ) -> Result<Result<(), WebhookRefusal>, EngineError> {
        let attempt = match self.webhook_target(flow_id, step_id, token, signed).await? {
            Ok((attempt, _)) => attempt,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let result = match result {
            WebhookResult::Outputs(outputs) => AttemptResult::Success {
                outputs,
                http_status: None,
            },
            WebhookResult::Problem { status, error } => AttemptResult::Failure {
                class: if status.is_some_and(default_retryable) {
                    RETRYABLE.into()
                } else {
                    PERMANENT.into()
                },
                error,
                http_status: status,
                retry_after_ms: None,
            },
        };
        self.decide(flow_id, |state, ctx| {
            machine::record_result(state, step_id, token, attempt, result.clone(), ctx)
        })
        .await?;
        Ok(Ok(()))
    }

    /// Check a webhook against the stored flow: which attempt it may act on,
    /// and the item's status. A call still running (its `202` not recorded
    /// yet) is waited for, briefly; then it is refused as not accepted.
    async fn webhook_target(
        &self,
        flow_id: &str,
        step_id: &str,
        token: &str,
        signed: Option<u32>,
    ) -> Result<Result<(u32, WorkStatus), WebhookRefusal>, EngineError> {
        let give_up = tokio::time::Instant::now() + ACCEPTANCE_WAIT;
        loop {
            let Some(loaded) = self.inner.store.load_flow(flow_id).await? else {
                return Ok(Err(WebhookRefusal::UnknownFlow));
            };
            let status = |state: &FlowState| {
                state
                    .find_work(step_id, token)
                    .map_or(WorkStatus::Pending, |w| w.status)
            };
            match webhook_target(&loaded.state, step_id, token, signed) {
                Ok(target) => return Ok(target.map(|a| (a, status(&loaded.state)))),
                Err(WaitForAcceptance(attempt)) if tokio::time::Instant::now() >= give_up => {
                    return Ok(Err(WebhookRefusal::NotAccepted { attempt }));
                }
                // Rare (a step that answers and calls back at once), and
                // bounded: no notice to wait on spans processes, so look again.
                Err(WaitForAcceptance(_)) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
    }

    /// Record how a call of this process ended: its result, or for an async
    /// step its acceptance. Tried again while the database is unreachable (a
    /// restart, a failover), for as long as this node's lease on the call
    /// holds: a result the step already produced is worth more than a new
    /// call. A commit that did land before its connection dropped is found on
    /// reload and not repeated.
    async fn conclude(&self, call: &Call, result: AttemptResult) {
        let accepted =
            call.step.is_async() && !call.compensate && matches!(result, AttemptResult::Success { .. });
        let give_up = tokio::time::Instant::now() + self.lease_length().to_std().unwrap_or_default();
        let mut pause = std::time::Duration::from_millis(50);
        loop {
            let (reply, answer) = tokio::sync::oneshot::channel();
            let slot = self.inner.flows.slot(&call.flow_id);
            slot.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Concluded {
                    step_id: call.step.id.clone(),
                    token: call.token.clone(),
                    attempt: call.attempt,
                    compensate: call.compensate,
                    result: (!accepted).then(|| result.clone()),
                    reply,
                });
            self.decide_pending(&slot, &call.flow_id).await;
            // Recorded by this decision, or by one that took it along.
            let error = match answer.await {
                Ok(Ok(())) => return,
                Ok(Err(Unrecorded::Unavailable(e)))
                    if tokio::time::Instant::now() + pause < give_up
                        && !self.inner.stopping.is_cancelled() =>
                {
                    tracing::warn!(flow_id = %call.flow_id, "database unavailable, trying again in {pause:?}: {e}");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_secs(2));
                    continue;
                }
                Ok(Err(Unrecorded::Unavailable(e) | Unrecorded::Failed(e))) => e,
                Err(_) => "the deciding task went away".to_string(),
            };
            // The item stays active under this node's lease; when the lease
            // expires the sweep calls it again. Nothing is lost.
            tracing::error!(flow_id = %call.flow_id, step_id = %call.step.id, token = %call.token, "recording the call's end failed: {error}");
            return;
        }
    }

    /// Decide on every concluded call waiting in the flow's slot, in one
    /// decision and one commit, and answer each.
    async fn decide_pending(&self, slot: &FlowSlot, flow_id: &str) {
        let mut taken: Vec<Concluded> = Vec::new();
        let mut refused: Vec<Option<String>> = Vec::new();
        let outcome = self
            .decide_in(slot, flow_id, |state, ctx| {
                taken.extend(slot.pending.lock().unwrap_or_else(|p| p.into_inner()).drain(..));
                refused.clear();
                let mut merged = Transition {
                    state,
                    events: Vec::new(),
                    now: ctx.now,
                };
                for c in &taken {
                    match c.apply(merged.state.clone(), ctx) {
                        Ok(tx) => {
                            merged.events.extend(tx.events);
                            merged.state = tx.state;
                            refused.push(None);
                        }
                        Err(e) => refused.push(Some(e.to_string())),
                    }
                }
                Ok(merged)
            })
            .await;
        for (c, refusal) in taken
            .into_iter()
            .zip(refused.into_iter().chain(std::iter::repeat(None)))
        {
            let answer = match (&outcome, refusal) {
                (Ok(()), None) => Ok(()),
                (Ok(()), Some(e)) => Err(Unrecorded::Failed(e)),
                (Err(EngineError::Store(StoreError::Unavailable(e))), _) => {
                    Err(Unrecorded::Unavailable(e.clone()))
                }
                (Err(e), _) => Err(Unrecorded::Failed(e.to_string())),
            };
            let _ = c.reply.send(answer);
        }
    }

    /// Take the flow's lock, decide, commit, dispatch what started.
    pub(crate) async fn decide<F>(&self, flow_id: &str, decide: F) -> Result<(), EngineError>
    where
        F: FnMut(FlowState, &mut Context<'_>) -> Result<Transition, ApplyError>,
    {
        let slot = self.inner.flows.slot(flow_id);
        self.decide_in(&slot, flow_id, decide).await
    }

    /// Decide in the flow's slot. Whichever way the decision ends (nothing
    /// to do, a refusal, a failed commit), the slot is let go unless the flow
    /// still has calls in flight.
    async fn decide_in<F>(&self, slot: &FlowSlot, flow_id: &str, mut decide: F) -> Result<(), EngineError>
    where
        F: FnMut(FlowState, &mut Context<'_>) -> Result<Transition, ApplyError>,
    {
        let _release = Released::on_exit(&self.inner.flows, flow_id, slot);
        for _ in 0..5 {
            let mut guard = slot.cached.lock().await;
            if guard.is_none() {
                match self.inner.store.load_flow(flow_id).await? {
                    Some(f) => {
                        *guard = Some(Cached {
                            state: Arc::new(f.state),
                            sequence: f.sequence,
                        })
                    }
                    None => return Err(EngineError::FlowNotFound(flow_id.to_string())),
                }
            }
            let Some(cached) = guard.as_ref() else {
                continue;
            };
            let base = cached.sequence;
            let tx = self.decision_context(now(), |ctx| decide(FlowState::clone(&cached.state), ctx))?;
            if tx.events.is_empty() {
                return Ok(());
            }
            let commit = self.commit_for(&tx, base, None);
            let state = Arc::clone(&commit.state);
            match self.inner.writer.commit(commit).await {
                Ok(()) => {
                    let busy = tx.state.has_active_work();
                    // Keep in memory only flows with calls in flight: those get
                    // their next decision soon. A flow waiting for a retry (maybe
                    // hours) is read back from the database when it is due, and
                    // does not count against `max_active_flows`. (A task that
                    // still holds the forgotten slot decides under the
                    // sequence check like any other process.)
                    *guard = busy.then(|| Cached {
                        sequence: base + tx.events.len() as i64,
                        state,
                    });
                    drop(guard);
                    self.after_commit(&tx);
                    return Ok(());
                }
                Err(StoreError::Conflict(_)) => {
                    // Another process moved the flow on: reload and decide again.
                    *guard = None;
                }
                Err(e) => {
                    *guard = None;
                    return Err(e.into());
                }
            }
        }
        Err(EngineError::Internal(format!(
            "flow {flow_id} kept changing under this decision"
        )))
    }

    /// The context of one decision: the clock, webhook base, token and
    /// randomness sources.
    fn decision_context<R>(&self, at: DateTime<Utc>, decide: impl FnOnce(&mut Context<'_>) -> R) -> R {
        let mut token = new_token;
        let mut random = rand::random::<f64>;
        let mut ctx = Context {
            now: at,
            webhook_base: &self.inner.config.webhook_base_url,
            new_token: &mut token,
            random: &mut random,
        };
        decide(&mut ctx)
    }

    /// The rows and events one transition writes.
    fn commit_for(&self, tx: &Transition, base_sequence: i64, request: Option<String>) -> FlowCommit {
        let touched: BTreeSet<(String, String)> = tx
            .events
            .iter()
            .filter_map(FlowEvent::work_item)
            .map(|(step_id, token)| (step_id.to_string(), token.to_string()))
            .collect();
        let lease_len = self.lease_length();
        let work = touched
            .into_iter()
            .filter_map(|(step_id, token)| {
                let w = tx.state.find_work(&step_id, &token)?;
                // Active work, and retries this process scheduled, are leased to
                // it in the same commit: it calls them from memory, no claim needed.
                // An accepted async call waits for its webhook: its row carries
                // the inactivity deadline (or "never") as its timer, which
                // also keeps it from being taken for an orphaned call.
                let waiting_webhook = (w.status == WorkStatus::Active && w.accepted_at.is_some())
                    .then(|| w.inactive_until.unwrap_or(DateTime::<Utc>::MAX_UTC));
                // A call's lease runs from the commit, on the database's
                // clock (`lease_for`); the others are anchored to a due time.
                let call_lease = lease_len.to_std().unwrap_or_default();
                let (lease_until, lease_for) = match (w.status, w.next_retry_at) {
                    _ if waiting_webhook.is_some() => (
                        waiting_webhook.map(|due| due.checked_add_signed(lease_len).unwrap_or(due)),
                        None,
                    ),
                    (WorkStatus::Active, _) | (WorkStatus::Compensating, None) => (None, Some(call_lease)),
                    // A retry may be due at the end of time (a backoff
                    // without a cap): the lease saturates there.
                    (WorkStatus::NotCompleted | WorkStatus::Compensating, Some(due)) => (
                        Some(
                            due.checked_add_signed(lease_len)
                                .unwrap_or(DateTime::<Utc>::MAX_UTC),
                        ),
                        None,
                    ),
                    _ => (None, None),
                };
                let active = lease_until.is_some() || lease_for.is_some();
                Some(WorkRow {
                    flow_id: tx.state.id.clone(),
                    step_id,
                    token,
                    status: w.status,
                    attempt: w.attempts.last().map(|a| a.number).unwrap_or(0),
                    retry_count: w.retry_count,
                    due_at: w.next_retry_at.or(waiting_webhook),
                    lease_owner: active.then(|| self.inner.config.node_id.clone()),
                    lease_expires_at: lease_until,
                    lease_for,
                    created_at: tx.now,
                    detail: w.clone(),
                })
            })
            .collect();
        FlowCommit {
            flow_id: tx.state.id.clone(),
            base_sequence,
            at: tx.now,
            events: tx.events.clone(),
            state: Arc::new(tx.state.clone()),
            request,
            work,
        }
    }

    /// What a committed transition asks of this process: abort the calls it
    /// cancelled, arm the timers it set, start the calls it made active.
    fn after_commit(&self, tx: &Transition) {
        // Calls this decision cancelled that are not this process's are
        // another's (a flow is cancelled where the request arrives): tell it.
        let elsewhere: Vec<String> = machine::cancelled_calls(tx)
            .into_iter()
            .filter(|token| !self.abort_call(token))
            .collect();
        if !elsewhere.is_empty() {
            let store = self.inner.store.clone();
            tokio::spawn(async move {
                if let Err(e) = store.announce_aborts(&elsewhere).await {
                    tracing::warn!("announcing aborts failed (lease renewal will catch them): {e}");
                }
            });
        }
        let finished = tx.events.iter().any(|e| {
            matches!(
                e,
                FlowEvent::FlowCompleted { .. }
                    | FlowEvent::FlowFailed { .. }
                    | FlowEvent::FlowTimedOut { .. }
                    | FlowEvent::FlowCancelled { .. }
            )
        });
        if finished && self.inner.finished.receiver_count() > 0 {
            let _ = self.inner.finished.send(crate::FlowFinished {
                flow_id: tx.state.id.clone(),
                status: tx.state.status,
                at: tx.now,
            });
        }
        let key = |step_id: &String, token: &String| tartan_store::WorkKey {
            flow_id: tx.state.id.clone(),
            step_id: step_id.clone(),
            token: token.clone(),
        };
        for e in &tx.events {
            match e {
                FlowEvent::WorkRetryScheduled {
                    step_id,
                    token,
                    next_retry_at,
                    ..
                }
                | FlowEvent::CompRetryScheduled {
                    step_id,
                    token,
                    next_retry_at,
                    ..
                } => self.inner.timers.schedule(
                    Timer::Retry {
                        key: key(step_id, token),
                        claim: false,
                    },
                    *next_retry_at,
                ),
                FlowEvent::WorkAccepted {
                    step_id,
                    token,
                    inactive_until: Some(until),
                    ..
                }
                | FlowEvent::WorkHeartbeat {
                    step_id,
                    token,
                    inactive_until: until,
                    ..
                } => self
                    .inner
                    .timers
                    .schedule(Timer::Inactivity(key(step_id, token)), *until),
                FlowEvent::FlowStarted {
                    flow_id,
                    deadline_at: Some(deadline),
                    ..
                } => self
                    .inner
                    .timers
                    .schedule(Timer::FlowDeadline(flow_id.clone()), *deadline),
                _ => {}
            }
        }
        if finished {
            // Only a compensation's retries outlive the flow (those of this
            // decision included, hence after scheduling them).
            self.inner.timers.retain_flow(&tx.state.id, |timer| match timer {
                Timer::Retry { key, .. } => tx
                    .state
                    .find_work(&key.step_id, &key.token)
                    .is_some_and(|w| w.status == WorkStatus::Compensating),
                Timer::Inactivity(_) | Timer::FlowDeadline(_) => false,
            });
        }
        self.dispatch(tx);
    }

    /// How long a lease holds: the attempt timeout plus `TARTAN_LEASE`.
    pub(crate) fn lease_length(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.inner.config.step_timeout + self.inner.config.lease)
            .unwrap_or(chrono::Duration::MAX)
    }

    /// Start the calls a committed transition made active.
    fn dispatch(&self, tx: &Transition) {
        let mut steps: HashMap<String, Arc<tartan_core::step::Step>> = HashMap::new();
        for d in tx.dispatches() {
            let Some(step) = tx.state.plan.steps.get(&d.step_id) else {
                continue;
            };
            let Some(work) = tx.state.find_work(&d.step_id, &d.token) else {
                continue;
            };
            // Several decisions may share one transition: a call one of them
            // started may already be cancelled by a later one.
            let live = if d.compensate {
                work.status == WorkStatus::Compensating
            } else {
                work.status == WorkStatus::Active && work.attempts.last().map(|a| a.number) == Some(d.attempt)
            };
            if !live {
                continue;
            }
            // The attempt timeout, cut short by the step's total deadline
            // when that comes first (then the total timeout is what fires).
            let default_ms = u64::try_from(self.inner.config.step_timeout.as_millis()).unwrap_or(u64::MAX);
            let policy = step.timeout_policy().ok();
            let attempt_ms = policy.as_ref().map_or(default_ms, |p| p.attempt_or(default_ms));
            let mut bound = (attempt_ms, TimeoutScope::Attempt, attempt_ms, tx.now);
            let total = policy.as_ref().and_then(|p| p.total_ms).filter(|_| !d.compensate);
            if let (Some(deadline), Some(total)) = (work.deadline_at, total) {
                let remaining = u64::try_from((deadline - tx.now).num_milliseconds()).unwrap_or(0);
                if remaining <= attempt_ms {
                    let first = work.attempts.first().map_or(tx.now, |a| a.started_at);
                    bound = (remaining, TimeoutScope::Total, total, first);
                }
            }
            let (timeout_ms, timeout_scope, timeout_limit_ms, scope_start) = bound;
            let Some(http) = step.http.as_ref() else {
                continue;
            };
            let (endpoint, placeholders, body) = if d.compensate {
                // Placeholders from inputs and outputs, outputs win.
                let outputs = work.outputs.clone().unwrap_or_default();
                let mut values = work.inputs.clone();
                values.extend(outputs.clone());
                let body = serde_json::json!({ "input": work.inputs, "output": outputs });
                (http.compensate.clone(), values, Some(body))
            } else {
                let body = (step.method() != "GET").then(|| serde_json::Value::Object(work.inputs.clone()));
                (http.endpoint.clone(), work.inputs.clone(), body)
            };
            let webhook_url = (step.is_async() && !d.compensate)
                .then(|| self.webhook_url(&tx.state.id, &step.id, &d.token, d.attempt));
            // Flow state keeps the unsigned URL in a `webhook_url` meta
            // input; the step alone is given the signed one.
            let body = match (&webhook_url, body) {
                (Some(url), Some(serde_json::Value::Object(mut inputs))) => {
                    for (name, attr) in &step.attributes {
                        if attr.is_meta() && attr.meta_key() == "webhook_url" {
                            inputs.insert(step.inner_name(name).to_string(), url.clone().into());
                        }
                    }
                    Some(serde_json::Value::Object(inputs))
                }
                (_, body) => body,
            };
            let step = steps
                .entry(d.step_id.clone())
                .or_insert_with(|| Arc::new(step.clone()))
                .clone();
            self.spawn_call(Call {
                flow_id: tx.state.id.clone(),
                step,
                token: d.token,
                attempt: d.attempt,
                endpoint,
                placeholders,
                body,
                compensate: d.compensate,
                webhook_url,
                timeout: std::time::Duration::from_millis(timeout_ms),
                timeout_scope,
                timeout_limit_ms,
                scope_start,
            });
        }
    }

    /// Admit a call to the call slots (`slots.rs`): it runs now, or waits
    /// for a slot listed in flight (so its lease is renewed and an abort
    /// finds it). When the queue is full it is left active under this
    /// node's lease, not called: when that lease runs out the sweep takes
    /// it over like the call of a dead node (docs/durability.md, "Call slots").
    fn spawn_call(&self, call: Call) {
        if self.inner.stopping.is_cancelled() {
            // Left active under this node's lease, which `shutdown` hands
            // back: another process (or the next start) calls it.
            return;
        }
        let cancel = CancellationToken::new();
        let id = self
            .inner
            .call_ids
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.in_flight().insert(
            call.token.clone(),
            InFlight {
                id,
                cancel: cancel.clone(),
                started: false,
            },
        );
        match self.inner.slots.admit(Admitted { call, id, cancel }) {
            Admission::Run(admitted) => self.run_call(admitted),
            Admission::Queued => {}
            Admission::Full(Admitted { call, id, .. }) => {
                self.forget_call(&call.token, id);
                self.inner
                    .deferred_calls
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(flow_id = %call.flow_id, step_id = %call.step.id, token = %call.token,
                    "call queue full (TARTAN_MAX_QUEUED_CALLS); the call is made when its lease runs out");
            }
        }
    }

    /// Make a call that holds a slot; the slot is given back (and the next
    /// waiting calls started) as soon as the exchange ends or is aborted.
    fn run_call(&self, admitted: Admitted) {
        let engine = self.clone();
        self.inner.tasks.spawn(async move {
            let Admitted { call, id, cancel } = admitted;
            let slot = SlotHeld {
                engine: &engine,
                step_id: &call.step.id,
            };
            let outcome = tokio::select! {
                r = async {
                    // Not started when the process stops: handed back (see
                    // `Engine::shutdown`).
                    if !engine.mark_started(&call.token, id) {
                        return None;
                    }
                    let config = &engine.inner.config;
                    let limits = dispatch::Limits {
                        max_response_bytes: config.max_response_bytes,
                        max_retry_after_ms: u64::try_from(config.max_retry_after.as_millis())
                            .unwrap_or(u64::MAX),
                    };
                    Some(dispatch::perform(&engine.inner.http, &config.step_hosts, limits, &call).await)
                } => r,
                // The flow was cancelled or timed out: dropping the request
                // closes its connection; the decision is already recorded.
                _ = cancel.cancelled() => None,
            };
            drop(slot);
            // The call stays listed in flight (its lease renewed) until its
            // result is recorded, which may wait out a database outage. Its
            // token is cancelled now that it answered: there is nothing left
            // to abort, and a renewal that finds the row already recorded
            // must not take it for a lost lease.
            if let Some(result) = outcome {
                cancel.cancel();
                engine.conclude(&call, result).await;
            }
            engine.forget_call(&call.token, id);
        });
    }

    /// Drop call `id` from the calls in flight, unless a retry of the same
    /// token already took its entry.
    fn forget_call(&self, token: &str, id: u64) {
        let mut in_flight = self.in_flight();
        if in_flight.get(token).is_some_and(|c| c.id == id) {
            in_flight.remove(token);
        }
    }

    /// Calls holding a slot and waiting for one; calls left to their lease
    /// because the queue was full, since start.
    pub fn call_counts(&self) -> (crate::CallCounts, u64) {
        (
            self.inner.slots.counts(),
            self.inner
                .deferred_calls
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// Mark call `id` as going out, unless the process is stopping. Under the
    /// `in_flight` lock, as `started_calls` reads: a call either is marked
    /// before the stop is seen, or does not start.
    fn mark_started(&self, token: &str, id: u64) -> bool {
        let mut in_flight = self.in_flight();
        if self.inner.stopping.is_cancelled() {
            return false;
        }
        if let Some(c) = in_flight.get_mut(token).filter(|c| c.id == id) {
            c.started = true;
        }
        true
    }

    /// The receipt tokens of the calls that went out and are still running.
    pub(crate) fn started_calls(&self) -> Vec<String> {
        self.in_flight()
            .iter()
            .filter(|(_, c)| c.started)
            .map(|(token, _)| token.clone())
            .collect()
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<String, InFlight>> {
        self.inner.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This process's calls in flight: receipt token and call number.
    pub(crate) fn calls_in_flight(&self) -> Vec<(String, u64)> {
        self.in_flight()
            .iter()
            .map(|(token, c)| (token.clone(), c.id))
            .collect()
    }

    /// Abort the calls whose lease this process no longer holds: another
    /// process took the work over (this one was presumed dead), or cancelled
    /// or timed out the flow. Its result could not be recorded anyway, and
    /// two processes must not run one call at once. A call that ended or was
    /// replaced by a newer call of its token since `calls` was read is left.
    pub(crate) fn abandon_lost_calls(&self, calls: Vec<(String, u64)>, renewed: &[String]) {
        let renewed: std::collections::HashSet<&str> = renewed.iter().map(String::as_str).collect();
        let mut in_flight = self.in_flight();
        for (token, id) in calls {
            let running = in_flight
                .get(&token)
                .is_some_and(|c| c.id == id && !c.cancel.is_cancelled());
            if renewed.contains(token.as_str()) || !running {
                continue;
            }
            if let Some(c) = in_flight.remove(&token) {
                tracing::warn!(%token, "lease lost to another process or decision; call abandoned");
                c.cancel.cancel();
            }
        }
    }

    /// Whether this process has a call in flight for `token`.
    pub(crate) fn is_in_flight(&self, token: &str) -> bool {
        self.in_flight().contains_key(token)
    }

    /// Abort the call in flight for `token`, if this process has one;
    /// whether it had.
    pub(crate) fn abort_call(&self, token: &str) -> bool {
        match self.in_flight().remove(token) {
            Some(c) => {
                c.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Cancel an active flow: no new work, calls in flight aborted.
    pub async fn cancel_flow(&self, flow_id: &str) -> Result<(), EngineError> {
        let state = self.flow(flow_id).await?;
        if state.status != tartan_core::flow::FlowStatus::Active {
            return Err(EngineError::FlowTerminal(
                flow_id.to_string(),
                state.status.as_str(),
            ));
        }
        self.decide(flow_id, |state, ctx| {
            machine::stop_flow(state, Stop::Cancel("cancelled by request".into()), ctx)
        })
        .await
    }

    /// An async step's heartbeat: its inactivity window starts again. Only
    /// for an accepted call of the current attempt that is still waiting.
    pub async fn heartbeat(
        &self,
        flow_id: &str,
        step_id: &str,
        token: &str,
        signed: Option<u32>,
    ) -> Result<Result<(), WebhookRefusal>, EngineError> {
        match self.webhook_target(flow_id, step_id, token, signed).await? {
            Ok((_, WorkStatus::Active)) => {}
            Ok((_, status)) => {
                return Ok(Err(WebhookRefusal::NotWaiting {
                    status: status.as_str(),
                }))
            }
            Err(refusal) => return Ok(Err(refusal)),
        }
        self.decide(flow_id, |state, ctx| {
            machine::heartbeat(state, step_id, token, ctx.now)
        })
        .await?;
        Ok(Ok(()))
    }
}

/// A call's slot, given back when dropped (the call ended, was aborted, or
/// its task panicked); the calls that get a slot then are started, unless
/// the engine is stopping (they stay leased; the next start resumes them).
struct SlotHeld<'a> {
    engine: &'a Engine,
    step_id: &'a str,
}

impl Drop for SlotHeld<'_> {
    fn drop(&mut self) {
        for next in self.engine.inner.slots.release(self.step_id) {
            if self.engine.inner.stopping.is_cancelled() {
                self.engine.forget_call(&next.call.token, next.id);
                continue;
            }
            self.engine.run_call(next);
        }
    }
}

fn same_request(flow_id: &str, existing: &str, new: &str) -> Result<StartOutcome, EngineError> {
    if existing == new {
        Ok(StartOutcome::AlreadyStarted)
    } else {
        Err(EngineError::FlowExists(flow_id.to_string()))
    }
}
