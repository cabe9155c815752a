//! Deciding on a flow: a decision takes the flow's lock (its slot, from
//! `admission`), applies a command with `tartan_core::machine::apply`,
//! commits the events and the rows the effects touched through the
//! writer, and only then carries out the effects. A commit that finds the
//! flow changed by another process (sequence conflict) reloads the flow
//! and decides again.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tartan_core::concurrency::LineChange;
use tartan_core::flow::{ApplyError, FlowState, WorkStatus};
use tartan_core::machine::{self, Command, Context, Effect, Transition, Wake};
use tartan_store::{FlowCommit, LineWrite, StoreError, WorkKey, WorkRow};

use super::admission::Released;
use super::slot::{Cached, Concluded, FlowSlot, Unrecorded};
use super::Flows;
use crate::error::EngineError;
use crate::timers::Timer;
use crate::traces::{self, Decision};

/// How a decision went: the windows heartbeats kept open without an event
/// (`Effect::Heard`), and whether it committed a change.
pub(crate) struct Decided {
    /// The windows heartbeats kept open without an event
    /// (`Effect::Heard`), for the caller to note.
    pub(crate) heard: Vec<Effect>,
    /// Whether the decision changed the flow: `false` when the command
    /// found nothing to do on the flow as it is (another request did it
    /// first).
    pub(crate) changed: bool,
}

/// The script budget of a decision made on the runtime's worker
/// (`Flows::decision_context`): about a millisecond of Lua.
const INLINE_INSTRUCTIONS: u64 = 200_000;
const INLINE_WALL: std::time::Duration = std::time::Duration::from_millis(5);

/// A work item's receipt token: a random UUID, hyphenated as Argyll's.
pub(super) fn new_token() -> String {
    uuid::Uuid::new_v4().hyphenated().to_string()
}

impl Flows {
    /// Decide on every concluded call waiting in the flow's slot, in one
    /// decision and one commit, and answer each. `about` names the call
    /// that asked, for the decision's span (others may be taken along).
    pub(super) async fn decide_pending(
        self: &Arc<Self>,
        slot: &FlowSlot,
        flow_id: &str,
        about: Decision<'_>,
    ) {
        let mut taken: Vec<Concluded> = Vec::new();
        let mut refused: Vec<Option<String>> = Vec::new();
        let outcome = self
            .decide_in(slot, flow_id, about, |state, ctx| {
                taken.extend(crate::sync::lock(&slot.pending).drain(..));
                refused.clear();
                let mut merged = Transition::unchanged(state, ctx.now);
                for c in &taken {
                    // Each on a copy: one refused leaves the others standing.
                    match machine::apply(merged.state.clone(), c.command(), ctx) {
                        Ok(tx) => {
                            merged.absorb(tx);
                            refused.push(None);
                        }
                        Err(e) => refused.push(Some(e.to_string())),
                    }
                }
                Ok(merged)
            })
            .await
            .map(drop);
        if outcome.is_err() {
            // A decision that failed before it took them (the flow could
            // not be loaded: the database is away) would leave them waiting
            // with nobody to answer: they get its answer, and try again.
            taken.extend(crate::sync::lock(&slot.pending).drain(..));
        }
        for (c, refusal) in taken
            .into_iter()
            .zip(refused.into_iter().chain(std::iter::repeat(None)))
        {
            let answer = match (&outcome, refusal) {
                (Ok(()), None) => Ok(()),
                (Ok(()), Some(e)) => Err(Unrecorded::Failed(e)),
                (Err(e), _) => Err(match e.database_unreachable() {
                    Some(cause) => Unrecorded::Unavailable(cause.to_owned()),
                    None => Unrecorded::Failed(e.to_string()),
                }),
            };
            let _ = c.reply.send(answer);
        }
    }

    /// Take the flow's lock, apply `command`, commit, carry out the
    /// effects; what the decision did.
    pub(crate) async fn decide(
        self: &Arc<Self>,
        flow_id: &str,
        command: Command,
    ) -> Result<Decided, EngineError> {
        let slot = self.locks.slot(flow_id);
        self.decide_in(&slot, flow_id, Decision::of(&command), |state, ctx| {
            machine::apply(state, command.clone(), ctx)
        })
        .await
    }

    /// Decide in the flow's slot. Whichever way the decision ends (nothing
    /// to do, a refusal, a failed commit), the slot is let go unless the flow
    /// still has calls in flight.
    async fn decide_in<F>(
        self: &Arc<Self>,
        slot: &FlowSlot,
        flow_id: &str,
        about: Decision<'_>,
        mut decide: F,
    ) -> Result<Decided, EngineError>
    where
        F: FnMut(FlowState, &mut Context<'_>) -> Result<Transition, ApplyError>,
    {
        let _release = Released::on_exit(&self.locks, flow_id, slot);
        // Whether a commit found the flow moved on: reloaded then, a flow
        // that is gone was lost by the database, not never there.
        let mut conflicted = false;
        for _ in 0..5 {
            let mut guard = slot.cached.lock().await;
            if guard.is_none() {
                match self.store.load_flow(flow_id).await? {
                    Some(f) => {
                        *guard = Some(Cached {
                            state: Arc::new(f.state),
                            sequence: f.sequence,
                        })
                    }
                    None => {
                        if conflicted {
                            self.metrics.db.flow_lost(flow_id);
                        }
                        return Err(EngineError::FlowNotFound(flow_id.to_string()));
                    }
                }
            }
            let Some(cached) = guard.as_ref() else {
                continue;
            };
            // Ended when dropped, at the end of this round; the parent of
            // the calls this decision makes.
            let span = self
                .config
                .tracer
                .as_ref()
                .and_then(|tracer| traces::decision_span(tracer, &cached.state, about));
            let base = cached.sequence;
            let scripted = cached.state.plan.is_scripted();
            let mut tx = self.decision_context(self.config.clock.now(), scripted, |ctx| {
                decide(FlowState::clone(&cached.state), ctx)
            })?;
            let heard: Vec<Effect> = tx
                .effects
                .iter()
                .filter(|e| matches!(e, Effect::Heard { .. }))
                .cloned()
                .collect();
            if tx.events.is_empty() {
                // A cached state ahead of the database (commits a failover
                // lost) changes nothing here either: the sweep finds such a
                // flow idle and reads it again (`reconcile`).
                // A flow step's call taken up again (`Redispatch`) changes
                // nothing in the flow, but the call is made.
                if tx.effects.iter().any(|e| matches!(e, Effect::Call(_))) {
                    drop(guard);
                    self.carry_out(&tx, span.as_ref());
                }
                return Ok(Decided {
                    heard,
                    changed: false,
                });
            }
            let sequence = base + tx.events.len() as i64;
            let commit = self.commit_for(&mut tx, base, None);
            let state = Arc::clone(&commit.state);
            match self.writer.commit(commit).await {
                Ok(()) => {
                    let busy = tx.state.has_active_work();
                    // Keep in memory only flows with calls in flight: those get
                    // their next decision soon. A flow waiting for a retry (maybe
                    // hours) is read back from the database when it is due, and
                    // does not count against `max_active_flows`. (One whose calls
                    // all wait for children gives its place up when another
                    // needs it: `FlowLocks::release`.) (A task that still holds
                    // the forgotten slot decides under the sequence check like
                    // any other process.)
                    *guard = busy.then_some(Cached { sequence, state });
                    drop(guard);
                    self.carry_out(&tx, span.as_ref());
                    return Ok(Decided { heard, changed: true });
                }
                Err(StoreError::Conflict(_)) => {
                    // Another process moved the flow on: reload and decide again.
                    *guard = None;
                    conflicted = true;
                }
                Err(e) => {
                    *guard = None;
                    return Err(e.into());
                }
            }
        }
        Err(EngineError::Contended(format!("flow {flow_id}")))
    }

    /// The context of one decision: the clock, webhook base, token and
    /// randomness sources. A decision that may evaluate scripts
    /// (`scripted`) is first made on the runtime's worker with a small
    /// script budget ([`INLINE_INSTRUCTIONS`], [`INLINE_WALL`]): the
    /// predicates and mappings of a step are tiny, and handing the worker
    /// off for each of them cost a third of a scripted flow's throughput.
    /// When a script runs out of that budget, the decision (which has
    /// changed nothing yet) is made again off the workers with the whole
    /// budget, so that a script using its whole time limit delays only its
    /// own flow.
    pub(super) fn decision_context<R>(
        self: &Arc<Self>,
        at: DateTime<Utc>,
        scripted: bool,
        mut decide: impl FnMut(&mut Context<'_>) -> R,
    ) -> R {
        let mut token = new_token;
        let mut random = rand::random::<f64>;
        let whole = self.calls.scripts().limits();
        let gate = self.health.dispatch_gate();
        let mut ctx = Context {
            now: at,
            webhook_base: &self.config.webhook_base_url,
            new_token: &mut token,
            random: &mut random,
            max_flow_bytes: self.config.max_flow_bytes,
            script_limits: whole,
            gate: &gate,
        };
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if !scripted || !multi_thread {
            return decide(&mut ctx);
        }
        let hits = tartan_core::step::script_limits_hit();
        ctx.script_limits = tartan_core::step::ScriptLimits {
            instructions: whole.instructions.min(INLINE_INSTRUCTIONS),
            wall: whole.wall.min(INLINE_WALL),
            ..whole
        };
        let inline = decide(&mut ctx);
        if tartan_core::step::script_limits_hit() == hits {
            return inline;
        }
        drop(inline);
        ctx.script_limits = whole;
        let scripts = self.calls.scripts();
        tokio::task::block_in_place(|| scripts.in_place(|| decide(&mut ctx)))
    }

    /// The rows and events one transition writes.
    pub(super) fn commit_for(
        self: &Arc<Self>,
        tx: &mut Transition,
        base_sequence: i64,
        request: Option<String>,
    ) -> FlowCommit {
        let lease_len = self.config.lease_length();
        let work = tx
            .effects
            .iter()
            .filter_map(|effect| match effect {
                Effect::Touch { step_id, token } => Some((step_id.clone(), token.clone())),
                Effect::Call(_)
                | Effect::Abort { .. }
                | Effect::Arm { .. }
                | Effect::Finished(_)
                | Effect::Line(_)
                | Effect::Heard { .. }
                | Effect::Memoize { .. } => None,
            })
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
                    // A compensation waiting for its step's health has no
                    // call to lease; the health gate starts it again.
                    (WorkStatus::Compensating, None) if w.deferred_since.is_some() => (None, None),
                    (WorkStatus::Active, _) | (WorkStatus::Compensating, None) => (None, Some(call_lease)),
                    // A retry may be due at the end of time (a backoff
                    // without a cap): the lease saturates there.
                    (
                        WorkStatus::Pending | WorkStatus::NotCompleted | WorkStatus::Compensating,
                        Some(due),
                    ) => (
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
                    lease_owner: active.then(|| self.config.node_id.clone()),
                    lease_expires_at: lease_until,
                    lease_for,
                    created_at: tx.now,
                    detail: w.bookkeeping(),
                    deferred_at: w
                        .deferred_since
                        .filter(|_| matches!(w.status, WorkStatus::Pending | WorkStatus::Compensating)),
                })
            })
            .collect();
        FlowCommit {
            flow_id: tx.state.id.clone(),
            base_sequence,
            at: tx.now,
            // Moved: what the engine does next needs the effects, not the events.
            events: std::mem::take(&mut tx.events),
            state: Arc::new(tx.state.clone()),
            request,
            work,
            line: line_write(tx),
        }
    }

    /// Carry out a committed transition's effects, in one loop: abort the
    /// calls it cancelled, arm the timers it set, make the calls it started,
    /// tell who waits that the flow finished. `decision`: the span of the
    /// decision, parent of the calls' spans (none: the flow's start span).
    pub(super) fn carry_out(self: &Arc<Self>, tx: &Transition, decision: Option<&crate::traces::Span>) {
        let flow_id = &tx.state.id;
        let key = |step_id: &String, token: &String| WorkKey {
            flow_id: flow_id.clone(),
            step_id: step_id.clone(),
            token: token.clone(),
        };
        // Calls cancelled that are not this process's are another's (a flow
        // is cancelled where the request arrives): tell it.
        let mut elsewhere = Vec::new();
        let mut calls = Vec::new();
        let mut finished = None;
        let aborts: Vec<&String> = tx
            .effects
            .iter()
            .filter_map(|effect| match effect {
                Effect::Abort { token, .. } => Some(token),
                _ => None,
            })
            .collect();
        if !aborts.is_empty() {
            // With the slots held, a call that ends while these land cannot
            // give its slot to a waiting call this decision aborts too.
            let _held = self.calls.hold_slots();
            for token in aborts {
                if !self.calls.abort(token) {
                    elsewhere.push(token.clone());
                }
            }
        }

        for effect in &tx.effects {
            match effect {
                Effect::Call(d) => calls.push(d),
                // A flow step's call waits for a child flow: stopped too.
                Effect::Abort { step_id, token } => {
                    if tx.state.plan.steps.get(step_id).is_some_and(|s| s.is_flow()) {
                        self.stop_child(&tx.state, step_id, token);
                    }
                }
                Effect::Arm { wake, at } => {
                    let timer = match wake {
                        Wake::Retry { step_id, token } => Timer::Retry {
                            key: key(step_id, token),
                            claim: false,
                        },
                        Wake::Inactivity { step_id, token } => Timer::Inactivity(key(step_id, token)),
                        Wake::Deadline => Timer::FlowDeadline(flow_id.clone()),
                    };
                    self.timers.schedule(timer, *at);
                }
                // Written by the commit; a heard window by the heartbeat's
                // request (`Flows::heartbeat`), before it is answered.
                Effect::Touch { .. } | Effect::Heard { .. } => {}
                Effect::Finished(status) => finished = Some(*status),
                Effect::Line(change) => self.line_changed(&tx.state, *change),
                Effect::Memoize { step_id, token } => self.memo.memoize(&tx.state, step_id, token),
            }
        }
        if !elsewhere.is_empty() {
            self.outbox.announce(tartan_store::Notice::Aborts(elsewhere));
        }
        if let Some(status) = finished {
            self.waiters.finished(flow_id, status);
            if self.finished.receiver_count() > 0 {
                let _ = self.finished.send(super::FlowFinished {
                    flow_id: flow_id.clone(),
                    status,
                    at: tx.now,
                });
            }
            // Only a compensation's retries outlive the flow (those armed
            // by this decision included, hence after arming them).
            self.timers.retain_flow(flow_id, |timer| match timer {
                Timer::Retry { key, .. } => tx
                    .state
                    .find_work(&key.step_id, &key.token)
                    .is_some_and(|w| w.status == WorkStatus::Compensating),
                Timer::Inactivity(_) | Timer::FlowDeadline(_) => false,
            });
        }
        for call in calls {
            self.make_call(tx, call, decision);
        }
    }
}

/// What a transition changes in its flow's row of its concurrency key's
/// line: an end wins over a join in the same decision (a flow cancelled
/// as it starts has no row to keep).
fn line_write(tx: &Transition) -> Option<LineWrite> {
    let changes = tx.effects.iter().filter_map(|e| match e {
        Effect::Line(change) => Some(*change),
        _ => None,
    });
    let change = changes.max_by_key(|c| match c {
        LineChange::Admitted => 0,
        LineChange::Join => 1,
        LineChange::Leave => 2,
    })?;
    let state = &tx.state;
    Some(match change {
        LineChange::Leave => LineWrite::Leave,
        LineChange::Admitted => LineWrite::Admitted,
        LineChange::Join => {
            let key = state.concurrency.as_ref()?;
            LineWrite::Join {
                key: key.key.clone(),
                limit: key.limit,
                turn_us: tartan_core::concurrency::turn_at(tx.now, state.priority),
                queued_us: tx.now.timestamp_micros(),
            }
        }
    })
}

impl Flows {
    /// A committed change to the flow's place in its key's line: the next
    /// flows are let in when it joined or left; one let in is counted.
    fn line_changed(self: &Arc<Self>, state: &FlowState, change: LineChange) {
        let Some(key) = &state.concurrency else {
            return;
        };
        match change {
            LineChange::Join | LineChange::Leave => self.lines.nudge(&key.key),
            LineChange::Admitted => {
                let since = state.retried_at.unwrap_or(state.created_at);
                let waited = (self.config.clock.now() - since).to_std().unwrap_or_default();
                self.metrics.lines.admitted(waited);
            }
        }
    }
}
