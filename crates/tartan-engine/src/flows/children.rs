//! Flow steps' calls (docs/steps.md, "Sub-flows"): a call starts the item's
//! child flow (`tartan_core::machine::ChildStart`), waits for it to end and
//! records what its end means for the item (`machine::child_result`), like
//! any call's result. The call holds no call slot (a parent holding one
//! while its children wait for theirs could starve them all), but it is
//! listed in flight, so its lease is renewed while it waits: if this
//! process dies, whoever takes the item over waits for the same child
//! (`Command::Redispatch` of a flow step starts no new one).
//!
//! A child counts against `max_active_flows` like any flow, and its
//! parent's call waits for a place to start it; a parent whose only calls
//! wait for children holds none (it is not kept in memory), so a tree wider
//! than the limit goes on as its deeper flows finish. Recording a child's
//! end in such a parent takes a place for that decision too
//! (docs/steps.md, "Sub-flows").

use std::sync::Arc;
use std::time::Duration;

use tartan_core::flow::{FlowState, FlowStatus};
use tartan_core::machine::{self, AttemptResult, ChildOf, ChildStart, Command, Stop, Transition};
use tokio_util::sync::CancellationToken;

use super::admission::{Place, QueueFull, Rank, Waiting};
use super::Committed;
use super::Flows;
use crate::calls::dispatch::Call;
use crate::error::EngineError;
use crate::traces;

/// Longest wait between two looks at a child flow run by another process
/// (one run here wakes its parent's call at once); the first look is sooner.
const MAX_RECHECK: Duration = Duration::from_secs(5);

/// How the start of a flow step's call's child went.
enum Begun {
    /// Started now, or found started (a call taken up again).
    Started(String),
    /// The call ends at once with this result: a memo, a child that
    /// cannot start.
    Ended(AttemptResult),
    /// No place came: the call was aborted while it waited (or before the
    /// child started), or it was left to its lease because the queue for
    /// places was full.
    NoRoom,
}

impl Flows {
    /// Make a flow step's call: start its child and record how it ended.
    /// Starting the child, and recording its end in a parent that is not in
    /// memory, each wait for a place in `max_active_flows`
    /// (`admission::FlowLocks::enter`).
    pub(super) fn spawn_child_call(self: &Arc<Self>, tx: &Transition, call: Call) {
        if self.stopping.is_cancelled() {
            return;
        }
        // Queued at once, before the decision that made the call lets go of
        // its flow's place: that place goes to the most urgent call waiting,
        // this one included.
        let child = ChildOf::of(&tx.state, &call.spec, tx.now).map(|child| {
            let room = self.locks.enter(child.flow_id(), Rank::Start(child.nesting()));
            (child, room)
        });
        let parent_deadline = tx.state.deadline_at;
        let traceparent = tx.state.trace.as_deref().map(|t| {
            let flags = if t.sampled { "01" } else { "00" };
            format!("00-{}-{}-{flags}", t.trace_id, t.span_id)
        });
        let tracestate = tx.state.trace.as_deref().and_then(|t| t.state.clone());
        let (id, cancel) = self.calls.list(&call.spec.token);
        let flows = Arc::clone(self);
        self.tasks.spawn(async move {
            // Not cut short by an abort once the child starts: a child whose
            // start is being committed when its parent's item ends would run
            // on unseen. (Its wait for a place is, and an abort before the
            // commit starts no child: `commit_start`.)
            let started = tokio::select! {
                r = flows.begin_child(&call, child, &cancel, traces::CallerTrace {
                    traceparent: traceparent.as_deref(),
                    tracestate: tracestate.as_deref(),
                }) => Some(r),
                // Handed back with the process's other leases: whoever
                // takes the item over waits for the same child.
                _ = flows.stopping.cancelled() => None,
            };
            let outcome = match started {
                None | Some(Begun::NoRoom) => None,
                Some(Begun::Ended(result)) => Some(result),
                // Aborted while the child started: if the item ended, the
                // decision that ended it found no child to stop, so it is
                // stopped here. (An abort for a lost lease leaves the item
                // running: whoever holds it now waits for this child.)
                Some(Begun::Started(_)) if cancel.is_cancelled() => {
                    if let Ok(parent) = flows.flow(&call.spec.flow_id).await {
                        let waiting = parent
                            .find_work(&call.spec.step.id, &call.spec.token)
                            .is_some_and(|w| {
                                w.status == tartan_core::flow::WorkStatus::Active
                                    && w.attempts.last().map(|a| a.number) == Some(call.spec.attempt)
                            });
                        if !waiting {
                            flows.stop_child(&parent, &call.spec.step.id, &call.spec.token);
                        }
                    }
                    None
                }
                Some(Begun::Started(child_id)) => tokio::select! {
                    child = flows.child_end(&child_id) => {
                        let now = flows.config.clock.now();
                        machine::child_result(&call.spec.step, &call.spec, parent_deadline, &child, now)
                    }
                    // The item ended another way (the parent was cancelled
                    // or failed): the decision that ended it stops the child.
                    _ = cancel.cancelled() => None,
                    _ = flows.stopping.cancelled() => None,
                },
            };
            if let Some(result) = outcome {
                // The parent, not in memory while only its children ran, is
                // read back to record the end: that takes a place too.
                let room = flows.locks.enter(&call.spec.flow_id, Rank::Record);
                if let Some(_place) = flows.room(&call, room, &cancel).await {
                    cancel.cancel();
                    flows.conclude(&call, result, None).await;
                }
            }
            flows.calls.forget(&call.spec.token, id);
        });
    }

    /// Start the child unless it runs already, once it has a place: its
    /// id, or the result the call ends with at once (a memo, a child that
    /// cannot start), or no place.
    async fn begin_child(
        self: &Arc<Self>,
        call: &Call,
        child: Result<(ChildOf, Result<Waiting, QueueFull>), AttemptResult>,
        cancel: &CancellationToken,
        caller: traces::CallerTrace<'_>,
    ) -> Begun {
        if let Some(memo) = &call.spec.memo {
            if let Some(outputs) = self.memo.lookup(memo).await {
                return Begun::Ended(AttemptResult::Memoized { outputs });
            }
        }
        let (child, room) = match child {
            Ok(child) => child,
            Err(result) => return Begun::Ended(result),
        };
        let Some(place) = self.room(call, room, cancel).await else {
            return Begun::NoRoom;
        };
        let start = child.start(&call.spec);
        let child_id = start.flow_id.clone();
        let mut pause = Duration::from_millis(50);
        loop {
            match self.start_child(start.clone(), caller, cancel).await {
                Ok(Committed::Started | Committed::Exists) => break,
                Ok(Committed::Aborted) => return Begun::NoRoom,
                Err(e) if e.database_unreachable().is_some() => {
                    tracing::warn!(flow_id = %child_id, "starting a child flow waits for the database, trying again in {pause:?}: {e}");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(e) => {
                    return Begun::Ended(machine::child_refused(format!(
                        "child flow {child_id} could not start: {e}"
                    )))
                }
            }
        }
        // Held until the start is carried out: the child keeps its slot
        // (its place) while it has calls of its own in flight.
        drop(place);
        Begun::Started(child_id)
    }

    /// Wait for the place `room` asked for: `None` when the call was
    /// aborted meanwhile (nothing more to do), or when the queue was full
    /// or a more urgent call took its turn in it: the call is then left
    /// active under this process's lease, not renewed, and when the lease
    /// runs out the sweep takes it up again (`Command::Redispatch`, which
    /// starts no second child), like a call the call queue had no room for.
    async fn room(
        self: &Arc<Self>,
        call: &Call,
        room: Result<Waiting, QueueFull>,
        cancel: &CancellationToken,
    ) -> Option<Place> {
        let granted = match room {
            Ok(mut waiting) => tokio::select! {
                granted = waiting.granted() => granted,
                _ = cancel.cancelled() => return None,
                _ = self.stopping.cancelled() => return None,
            },
            Err(QueueFull) => None,
        };
        if granted.is_none() {
            self.calls.defer();
            self.metrics.call_deferred();
            tracing::warn!(flow_id = %call.spec.flow_id, step_id = %call.spec.step.id, token = %call.spec.token,
                "too many flow steps' calls wait for a place (TARTAN_MAX_QUEUED_CALLS); the call is made again when its lease runs out");
        }
        granted
    }

    /// The child's state once it is no longer active. Woken by the decision
    /// that ends it when that is taken in this process; else looked at
    /// again, at growing intervals up to [`MAX_RECHECK`].
    async fn child_end(self: &Arc<Self>, child_id: &str) -> FlowState {
        let waiting = self.waiters.watch(child_id);
        let mut recheck = Duration::from_millis(250);
        loop {
            let notified = waiting.notice.woken.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let ended = match waiting.notice.finished() {
                Some(_) => true,
                None => match self.flow_status(child_id).await {
                    Ok(status) => status != FlowStatus::Active,
                    Err(e) => {
                        tracing::warn!(flow_id = %child_id, "reading a child flow's status failed: {e}");
                        false
                    }
                },
            };
            if ended {
                match self.flow(child_id).await {
                    Ok(state) => return state,
                    Err(e) => tracing::warn!(flow_id = %child_id, "reading a child flow failed: {e}"),
                }
            }
            let _ = tokio::time::timeout(recheck, notified).await;
            recheck = (recheck * 2).min(MAX_RECHECK);
        }
    }

    /// Start a child flow as the parent's plan has it, unless its call is
    /// aborted by then; one that exists already (a call taken up again
    /// after a restart) is left as it is.
    async fn start_child(
        self: &Arc<Self>,
        start: ChildStart,
        caller: traces::CallerTrace<'_>,
        aborted: &CancellationToken,
    ) -> Result<Committed, EngineError> {
        let ChildStart {
            flow_id,
            plan,
            init,
            mut options,
        } = start;
        let mut trace = traces::new_flow_trace(caller);
        let _span = self
            .config
            .tracer
            .as_ref()
            .and_then(|tracer| traces::start_span(tracer, &flow_id, &mut trace));
        options.trace = Some(Arc::new(trace));
        let started = self.config.clock.now();
        let command = Command::Start {
            flow_id: flow_id.clone(),
            plan,
            init,
            options,
        };
        // One that exists already is the same child: nothing to do.
        self.commit_start(&flow_id, command, started, None, Some(aborted))
            .await
    }

    /// Stop the child of a flow step's item whose call a committed decision
    /// aborted (its parent was cancelled, killed, timed out or failed, or
    /// the item timed out): cancelled as the parent was, killed when the
    /// parent was killed. Wherever the child runs: the stop is a decision
    /// on it like any other. A child that is not there never started (its
    /// call waited for a place; it starts none once aborted,
    /// `commit_start`): the parent is told, so that it does not list an id
    /// no flow has (docs/steps.md, "Sub-flows"). (Only a call in another
    /// process, between its place and its commit as the abort reaches it,
    /// can still start the child then; it stops it at once, and the parent
    /// lists that one as not started.)
    pub(super) fn stop_child(self: &Arc<Self>, parent: &FlowState, step_id: &str, token: &str) {
        let Some(child_id) = parent
            .find_work(step_id, token)
            .and_then(|w| w.children.last())
            .cloned()
        else {
            return;
        };
        let reason = format!("its parent flow {} stopped waiting for it", parent.id);
        let stop = if parent.killed {
            Stop::Kill(reason)
        } else {
            Stop::Cancel(reason)
        };
        let never = Command::ChildNotStarted {
            step_id: step_id.to_string(),
            token: token.to_string(),
            child_flow_id: child_id.clone(),
        };
        let parent_id = parent.id.clone();
        let flows = Arc::clone(self);
        self.tasks.spawn(async move {
            match flows.decide(&child_id, Command::Stop(stop)).await {
                Ok(_) => {}
                Err(EngineError::FlowNotFound(_)) => flows.child_not_started(&parent_id, never).await,
                Err(e) => tracing::warn!(flow_id = %child_id, "stopping a child flow failed: {e}"),
            }
        });
    }

    /// Tell the parent its item's child never started (`never`), tried
    /// again for a while if the database is away: until it lands, the
    /// parent lists an id no flow has.
    async fn child_not_started(self: &Arc<Self>, parent_id: &str, never: Command) {
        let mut pause = Duration::from_millis(50);
        for _ in 0..8 {
            match self.decide(parent_id, never.clone()).await {
                Ok(_) => return,
                Err(e) if e.database_unreachable().is_some() && !self.stopping.is_cancelled() => {
                    tracing::warn!(flow_id = %parent_id, "noting a child that never started waits for the database, trying again in {pause:?}: {e}");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(e) => {
                    tracing::warn!(flow_id = %parent_id, "noting a child that never started failed: {e}");
                    return;
                }
            }
        }
    }
}
