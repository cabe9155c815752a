//! A decision's result: the events, the state they lead to, and what the
//! engine must do about them (effects), derived from each event as it is
//! emitted.

use std::collections::BTreeSet;

use crate::concurrency::LineChange;
use crate::flow::{ApplyError, FlowEvent, FlowState, FlowStatus, Time, WorkStatus};
use crate::health::DispatchGate;

/// The events of one decision, the state they lead to and their effects.
#[derive(Debug, Clone)]
pub struct Transition {
    pub state: FlowState,
    pub events: Vec<FlowEvent>,
    /// What the engine carries out once the events are committed, in order.
    pub effects: Vec<Effect>,
    pub now: Time,
    /// The items already named by a `Touch` effect.
    touched: BTreeSet<(String, String)>,
    /// The tokens of the calls in `effects`.
    called: BTreeSet<String>,
    /// The decision's dispatch gate, when a step is closed
    /// (`Context::gate`).
    pub(crate) gate: Option<DispatchGate>,
    /// What the rooms of the machine left for the settle loop, in the
    /// order they left it (`settle.rs`).
    follow_ups: Vec<FollowUp>,
}

/// What one room of the machine leaves to another, instead of calling it:
/// the settle loop (`settle.rs`) carries each out, depth first, so that one
/// left at the end of a room's work runs where a call would have.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FollowUp {
    /// An item of the step ended, started or was added: start pending items
    /// while its parallelism allows, then complete the step if every item
    /// is done (a `FillSlots` and a `Finish`).
    Step(String),
    /// Start pending items of an active step while its parallelism allows.
    FillSlots(String),
    /// Complete the step if every item succeeded or was skipped.
    Finish(String),
    /// The step's predicate failed on the item: it fails for good.
    PredicateFailed {
        step_id: String,
        token: String,
        error: String,
    },
    /// Undo what the step's succeeded items did.
    Compensate(String),
    /// Move the flow as far as it can go; `everything`: look at every
    /// pending step, not only those the transition's events concern.
    Advance { everything: bool },
}

/// Something a committed transition asks of the engine.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Make a call: it was recorded as started, so it is durable before it
    /// goes out.
    Call(Dispatch),
    /// Abort the call in flight for this item, wherever it runs.
    Abort { step_id: String, token: String },
    /// Wake the flow at `at`.
    Arm { wake: Wake, at: Time },
    /// The item's row changed: the commit writes it.
    Touch { step_id: String, token: String },
    /// The flow finished (completed, failed or cancelled).
    Finished(FlowStatus),
    /// Its place in its concurrency key's line changed: written with the
    /// commit, and the key's next flows are let in (docs/concurrency.md).
    Line(LineChange),
    /// A memoizable step's item succeeded from a call: its answer is to
    /// be kept for identical calls (docs/steps.md, "Memoization").
    Memoize { step_id: String, token: String },
    /// A heartbeat kept attempt `attempt`'s accepted call alive until
    /// `until`, and no event records it: the engine notes it in the item's
    /// row, where the inactivity timer looks when the recorded window ends.
    Heard {
        step_id: String,
        token: String,
        attempt: u32,
        until: Time,
    },
}

/// A call that became due in a transition.
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatch {
    pub step_id: String,
    pub token: String,
    pub attempt: u32,
    /// The step's own call, or its compensation's.
    pub kind: CallKind,
}

/// Which endpoint of the step a call is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// The step itself (`http.endpoint`).
    Step,
    /// Undoing what an item did (`http.compensate`).
    Compensation,
}

/// Why a flow is to be woken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// The item's retry (or its compensation's) is due.
    Retry { step_id: String, token: String },
    /// The item's inactivity window ends.
    Inactivity { step_id: String, token: String },
    /// The flow's deadline, or a pending step's optional-input deadline,
    /// whichever is first (`FlowState::wake_at`).
    Deadline,
}

impl Transition {
    /// A transition that has changed nothing yet.
    pub fn unchanged(state: FlowState, now: Time) -> Self {
        Self {
            state,
            events: Vec::new(),
            effects: Vec::new(),
            now,
            touched: BTreeSet::new(),
            called: BTreeSet::new(),
            gate: None,
            follow_ups: Vec::new(),
        }
    }

    /// Leave `next` to the settle loop.
    pub(crate) fn follow(&mut self, next: FollowUp) {
        self.follow_ups.push(next);
    }

    /// What was left since the last call, in the order it was left.
    pub(crate) fn take_follow_ups(&mut self) -> Vec<FollowUp> {
        std::mem::take(&mut self.follow_ups)
    }

    /// Defer the item's attempt (or its compensation's retry) when its step
    /// is unhealthy: `true` when it waits (and `dispatch_deferred` says so
    /// once per wait), `false` when the call may start.
    pub(crate) fn defer_if_unhealthy(&mut self, step_id: &str, token: &str) -> Result<bool, ApplyError> {
        let Some(why) = self.gate.as_ref().and_then(|g| g.closed(step_id)) else {
            return Ok(false);
        };
        let why = why.to_string();
        let waiting = self.state.find_work(step_id, token).is_some_and(|w| {
            w.deferred_since.is_some() && matches!(w.status, WorkStatus::Pending | WorkStatus::Compensating)
        });
        if !waiting {
            self.emit(FlowEvent::DispatchDeferred {
                flow_id: self.state.id.clone(),
                step_id: step_id.to_string(),
                token: token.to_string(),
                error: why,
            })?;
        }
        Ok(true)
    }

    /// Begin a flow: `state` is what `flow_started` makes of nothing.
    pub(crate) fn begin(&mut self, state: FlowState, started: FlowEvent) {
        self.state = state;
        self.derive(&started, false);
        self.events.push(started);
    }

    /// Apply `event`, record it and derive its effects.
    pub(crate) fn emit(&mut self, event: FlowEvent) -> Result<(), ApplyError> {
        // Only an ended item's call may need aborting; the lookup is paid
        // for those events alone.
        let call_in_flight = match &event {
            FlowEvent::WorkCancelled { step_id, token, .. }
            | FlowEvent::WorkTimedOut { step_id, token, .. } => self
                .state
                .find_work(step_id, token)
                .is_some_and(|w| w.status == WorkStatus::Active),
            _ => false,
        };
        self.state.apply(&event, self.now)?;
        self.derive(&event, call_in_flight);
        self.events.push(event);
        Ok(())
    }

    /// Take on the events and effects of `next`, decided on this
    /// transition's state: several decisions committed as one.
    pub fn absorb(&mut self, next: Transition) {
        self.state = next.state;
        self.events.extend(next.events);
        for effect in next.effects {
            self.push(effect);
        }
        self.now = next.now;
    }

    /// The calls this transition makes.
    pub fn dispatches(&self) -> Vec<Dispatch> {
        self.effects
            .iter()
            .filter_map(|e| match e {
                Effect::Call(d) => Some(d.clone()),
                _ => None,
            })
            .collect()
    }

    /// The effects of one event, decided in one match over every event:
    /// a new event does not compile until someone decides what it does.
    fn derive(&mut self, event: &FlowEvent, call_in_flight: bool) {
        if let Some((step_id, token)) = event.work_item() {
            self.push(Effect::Touch {
                step_id: step_id.to_string(),
                token: token.to_string(),
            });
        }
        match event {
            // Its deadline, or its delayed start.
            // A flow with a key joins its line when it may start: a delayed
            // one at its start time, so that it holds no turn meanwhile.
            FlowEvent::FlowStarted {
                concurrency,
                starts_at,
                ..
            } => {
                self.arm_deadline(self.state.wake_at());
                if concurrency.is_some() && starts_at.is_none() {
                    self.push(Effect::Line(LineChange::Join));
                }
            }
            FlowEvent::FlowReleased { .. } if self.state.concurrency.is_some() => {
                self.push(Effect::Line(LineChange::Join));
            }
            FlowEvent::FlowAdmitted { .. } => self.push(Effect::Line(LineChange::Admitted)),
            FlowEvent::WorkStarted {
                step_id,
                token,
                attempt,
                ..
            } => self.call(step_id, token, *attempt, CallKind::Step),
            FlowEvent::CompStarted {
                step_id,
                token,
                attempt,
                ..
            } => self.call(step_id, token, *attempt, CallKind::Compensation),
            FlowEvent::WorkCancelled { step_id, token, .. }
            | FlowEvent::WorkTimedOut { step_id, token, .. } => {
                if call_in_flight {
                    self.push(Effect::Abort {
                        step_id: step_id.clone(),
                        token: token.clone(),
                    });
                }
            }
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
            } => self.arm(
                |step_id, token| Wake::Retry { step_id, token },
                step_id,
                token,
                *next_retry_at,
            ),
            FlowEvent::WorkAccepted {
                step_id,
                token,
                inactive_until,
                ..
            } => {
                if let Some(at) = inactive_until {
                    self.arm(
                        |step_id, token| Wake::Inactivity { step_id, token },
                        step_id,
                        token,
                        *at,
                    );
                }
            }
            FlowEvent::WorkHeartbeat {
                step_id,
                token,
                inactive_until,
                ..
            } => self.arm(
                |step_id, token| Wake::Inactivity { step_id, token },
                step_id,
                token,
                *inactive_until,
            ),
            FlowEvent::FlowRetried {
                work, deadline_at, ..
            } => {
                // Every item it starts over: their rows change.
                for w in work {
                    self.push(Effect::Touch {
                        step_id: w.step_id.clone(),
                        token: w.token.clone(),
                    });
                }
                self.arm_deadline(*deadline_at);
                if self.state.concurrency.is_some() {
                    self.push(Effect::Line(LineChange::Join));
                }
            }
            // One wake per flow: the earliest of its deadlines.
            FlowEvent::StepWaiting { .. } => self.arm_deadline(self.state.wake_at()),
            FlowEvent::FlowCompleted { .. }
            | FlowEvent::FlowFailed { .. }
            | FlowEvent::FlowCancelled { .. } => {
                self.push(Effect::Finished(self.state.status));
                if self.state.concurrency.is_some() {
                    self.push(Effect::Line(LineChange::Leave));
                }
            }
            FlowEvent::WorkSucceeded {
                step_id,
                token,
                memo: false,
                ..
            } if self.state.plan.steps.get(step_id).is_some_and(|s| s.memoizable) => {
                self.push(Effect::Memoize {
                    step_id: step_id.clone(),
                    token: token.clone(),
                });
            }
            // A flow timeout is followed by `flow_failed` or `flow_cancelled`,
            // which finish it; the rest change state only.
            FlowEvent::FlowTimedOut { .. }
            | FlowEvent::FlowReleased { .. }
            | FlowEvent::FlowDeactivated { .. }
            | FlowEvent::StepStarted { .. }
            | FlowEvent::WorkSucceeded { .. }
            | FlowEvent::WorkFailed { .. }
            | FlowEvent::WorkLateResult { .. }
            | FlowEvent::WorkChildNotStarted { .. }
            | FlowEvent::WorkNotCompleted { .. }
            | FlowEvent::DispatchDeferred { .. }
            | FlowEvent::WorkLaneWaited { .. }
            | FlowEvent::WorkParked { .. }
            | FlowEvent::WorkResumed { .. }
            // The retry's old wake finds the item started and does nothing.
            | FlowEvent::WorkRetryHastened { .. }
            | FlowEvent::StepTimedOut { .. }
            | FlowEvent::StepCancelled { .. }
            | FlowEvent::AttributeSet { .. }
            | FlowEvent::StepCompleted { .. }
            | FlowEvent::StepFailed { .. }
            | FlowEvent::CompSucceeded { .. }
            | FlowEvent::CompFailed { .. }
            | FlowEvent::StepSkipped { .. }
            | FlowEvent::WorkSkipped { .. } => {}
        }
    }

    /// Make the call of attempt `attempt` of an item, of `kind`.
    fn call(&mut self, step_id: &str, token: &str, attempt: u32, kind: CallKind) {
        self.push(Effect::Call(Dispatch {
            step_id: step_id.to_string(),
            token: token.to_string(),
            attempt,
            kind,
        }));
    }

    /// Wake the flow at `at` for its deadline, when there is one.
    fn arm_deadline(&mut self, at: Option<Time>) {
        if let Some(at) = at {
            self.push(Effect::Arm {
                wake: Wake::Deadline,
                at,
            });
        }
    }

    /// Wake the flow at `at` for one of its items.
    fn arm(&mut self, wake: impl FnOnce(String, String) -> Wake, step_id: &str, token: &str, at: Time) {
        self.push(Effect::Arm {
            wake: wake(step_id.to_string(), token.to_string()),
            at,
        });
    }

    /// Add an effect. An item is touched once; an abort of a call this
    /// transition itself made takes that call back instead (it never went
    /// out). A flow step's abort is kept even then: stopping the item's
    /// child is how the engine finds that it never started, and says so
    /// (`Command::ChildNotStarted`).
    pub(crate) fn push(&mut self, effect: Effect) {
        match &effect {
            Effect::Touch { step_id, token } => {
                if !self.touched.insert((step_id.clone(), token.clone())) {
                    return;
                }
            }
            Effect::Abort { step_id, token } => {
                // Rare (a flow stopped in the decision that started its
                // calls): the scan is paid only then.
                if self.called.remove(token) {
                    self.effects.retain(
                        |e| !matches!(e, Effect::Call(d) if d.token == *token && d.kind == CallKind::Step),
                    );
                    if !self.state.plan.steps.get(step_id).is_some_and(|s| s.is_flow()) {
                        return;
                    }
                }
            }
            Effect::Call(d) => {
                if d.kind == CallKind::Step {
                    self.called.insert(d.token.clone());
                }
            }
            Effect::Arm { .. }
            | Effect::Finished(_)
            | Effect::Line(_)
            | Effect::Heard { .. }
            | Effect::Memoize { .. } => {}
        }
        self.effects.push(effect);
    }
}
