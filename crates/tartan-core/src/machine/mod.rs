//! The flow state machine: given a flow and a command (start it, record a
//! call's result, a retry is due, stop it, ...), which events follow and
//! what the engine must do about them. There is one entry point, [`apply`];
//! every emitted event is applied at once, so later decisions in the same
//! transition see it, and its effects are derived as it is emitted
//! ([`Effect`]). The caller commits the events and then carries out the
//! effects.
//!
//! # Layout
//! - `transition`: the result of a decision, and the one match that derives
//!   each event's effects.
//! - `commands`: start, record a result, redispatch a cut-off call, a due
//!   retry or one asked for now, stop (cancel, kill, deadline), retry a finished flow.
//! - `settle`: the one loop that sequences the rooms below. They do not
//!   call one another: each leaves what follows (a `FollowUp`: fill a
//!   step's slots, finish it, fail an item, compensate, advance) and the
//!   loop carries it out, depth first, after the command.
//! - `readiness`: which pending steps can start, starting them and
//!   moving the flow as far as it can go (a look at the pending steps, each
//!   decided, the flow concluded); `inputs` says what a pending step's
//!   inputs are now, `predicate` judges each work item.
//! - `completion`: completing a step once its items are done, its answers
//!   mapped onto its outputs.
//! - `failure`: a failed or timed-out attempt: retry, or fail the item and
//!   its step, saying why (or park it); `parking` resumes parked items.
//! - `compensation`: undoing what a failed step's items did.
//! - `async_calls`: accepted async calls, heartbeats and inactivity.
//! - `call`: what a committed `Call` effect sends, whole (the engine signs
//!   the webhook URL and sends it).
//! - `subflow`: a flow step's call: the child flow it starts, and what the
//!   child's end means for the item.

mod async_calls;
mod call;
mod commands;
mod compensation;
mod completion;
mod failure;
mod inputs;
mod lifecycle;
mod parking;
mod predicate;
mod readiness;
mod settle;
mod subflow;
mod transition;

use crate::flow::{ApplyError, FlowOptions, FlowState, Time};
use crate::plan::{ExecutionPlan, InitArgs};
use crate::step::StepPolicies;

pub use crate::outcome::AttemptResult;
pub use call::{AttemptBound, Call, CallBody, CallMethod, MemoCall};
pub use inputs::{NOT_NEEDED, NO_MATCH, PREDICATE_FALSE, UNAVAILABLE};
pub use readiness::{check_fan_out, MAX_WORK_ITEMS};
pub use subflow::{child_refused, child_result, ChildOf, ChildStart};
pub use transition::{CallKind, Dispatch, Effect, Transition, Wake};

/// What the caller supplies: the clock, the webhook base and new tokens.
pub struct Context<'a> {
    pub now: Time,
    /// `http://host:port` that async steps are told to call back.
    pub webhook_base: &'a str,
    /// Fresh, unguessable receipt tokens.
    pub new_token: &'a mut (dyn FnMut() -> String + Send),
    /// Uniform in [0, 1), for jitter.
    pub random: &'a mut (dyn FnMut() -> f64 + Send),
    /// The most bytes of inputs and outputs a flow may hold
    /// (`TARTAN_MAX_FLOW_BYTES`): an output that would take it past fails
    /// its work item for good (docs/errors.md, "A flow's size").
    pub max_flow_bytes: u64,
    /// What one evaluation of a step's predicate, match or mapping script
    /// may spend (`TARTAN_SCRIPT_*`, docs/steps.md "Scripts").
    pub script_limits: crate::step::ScriptLimits,
    /// The steps whose work waits, unhealthy: an item of one is deferred
    /// instead of started (docs/operating.md, "Health gates dispatch").
    pub gate: &'a crate::health::DispatchGate,
}

/// Something that happened to a flow, for the machine to decide on.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Start the flow (the state given is [`FlowState::default`]).
    Start {
        flow_id: String,
        plan: ExecutionPlan,
        init: InitArgs,
        options: FlowOptions,
    },
    /// Attempt `attempt` of an item ended.
    Record {
        step_id: String,
        token: String,
        attempt: u32,
        result: AttemptResult,
        /// How long the call waited in its lanes before it was sent.
        waited: Option<LaneWaited>,
    },
    /// Compensation call `attempt` of an item ended.
    RecordCompensation {
        step_id: String,
        token: String,
        attempt: u32,
        result: AttemptResult,
    },
    /// An async step accepted attempt `attempt` (202): its webhook decides.
    Accept {
        step_id: String,
        token: String,
        attempt: u32,
    },
    /// An async step's heartbeat.
    Heartbeat { step_id: String, token: String },
    /// The item's call was cut off (restart, lease taken over): call again.
    Redispatch { step_id: String, token: String },
    /// A flow step's item's child `child_flow_id` never started: the
    /// engine, stopping the child of an item that ended, found no such
    /// flow. Changes nothing while the item still waits for that child.
    ChildNotStarted {
        step_id: String,
        token: String,
        child_flow_id: String,
    },
    /// The item's retry (or its compensation's) may be due.
    RetryDue { step_id: String, token: String },
    /// Start the item's next attempt now instead of when its retry is
    /// scheduled (docs/retries.md, "Retry now"). Changes nothing unless
    /// the flow is active and the item waits for a retry not yet due.
    RetryNow { step_id: String, token: String },
    /// The item's inactivity window may have passed. `heard_until`: the
    /// latest window end a heartbeat noted without an event
    /// (`Effect::Heard`), read from the item's row.
    InactivityDue {
        step_id: String,
        token: String,
        heard_until: Option<Time>,
    },
    /// The flow's deadline may have passed.
    DeadlineDue,
    /// The flow's turn on its concurrency key came (docs/concurrency.md),
    /// for its place in the line it joined at `joined_us` (microseconds
    /// since the epoch, as the line's row keeps it): a turn for an earlier
    /// place (the flow ended and was retried since) changes nothing.
    Admit { joined_us: i64 },
    /// Stop the flow before its steps are done.
    Stop(Stop),
    /// Run a finished, not completed flow again from where it stopped
    /// (docs/api.md, "Retry and kill"). Changes nothing unless the flow
    /// failed or was cancelled and is deactivated.
    Retry {
        reset_attempts: bool,
        /// The bulk job acting, recorded in the event.
        by: Option<String>,
    },
    /// Resume an active flow's parked items (docs/retries.md, "Parking").
    /// Changes nothing unless some are parked.
    Resume {
        reset_attempts: bool,
        /// The bulk job acting, recorded in the events.
        by: Option<String>,
    },
}

/// Why a flow stops before its steps are done.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// Its deadline passed.
    Timeout,
    /// A client cancelled it.
    Cancel(String),
    /// A client cancelled it without compensation (`compensate=false`).
    Kill(String),
}

/// Decide on `command`: the events that follow from `state`, the state they
/// lead to, and their effects. An error changes nothing.
pub fn apply(state: FlowState, command: Command, ctx: &mut Context<'_>) -> Result<Transition, ApplyError> {
    let mut tx = Transition::unchanged(state, ctx.now);
    if !ctx.gate.is_open() {
        tx.gate = Some(ctx.gate.clone());
    }
    match command {
        Command::Start {
            flow_id,
            plan,
            init,
            options,
        } => lifecycle::start(&mut tx, flow_id, plan, init, options, ctx)?,
        Command::Record {
            step_id,
            token,
            attempt,
            result,
            waited,
        } => {
            if let Some(waited) = waited {
                commands::lane_waited(&mut tx, &step_id, &token, attempt, waited)?;
            }
            commands::record(&mut tx, &step_id, &token, attempt, result, ctx)?
        }
        Command::RecordCompensation {
            step_id,
            token,
            attempt,
            result,
        } => compensation::record(&mut tx, &step_id, &token, attempt, result, ctx)?,
        Command::Accept {
            step_id,
            token,
            attempt,
        } => async_calls::accept(&mut tx, &step_id, &token, attempt)?,
        Command::Heartbeat { step_id, token } => async_calls::heartbeat(&mut tx, &step_id, &token)?,
        Command::Redispatch { step_id, token } => commands::redispatch(&mut tx, &step_id, &token, ctx)?,
        Command::ChildNotStarted {
            step_id,
            token,
            child_flow_id,
        } => subflow::child_not_started(&mut tx, &step_id, &token, &child_flow_id)?,
        Command::RetryDue { step_id, token } => commands::retry_due(&mut tx, &step_id, &token, ctx)?,
        Command::RetryNow { step_id, token } => commands::retry_now(&mut tx, &step_id, &token, ctx)?,
        Command::InactivityDue {
            step_id,
            token,
            heard_until,
        } => async_calls::inactivity_due(&mut tx, &step_id, &token, heard_until, ctx)?,
        Command::DeadlineDue => lifecycle::deadline_due(&mut tx, ctx)?,
        Command::Admit { joined_us } => lifecycle::admit(&mut tx, joined_us)?,
        Command::Stop(stop) => lifecycle::stop(&mut tx, stop)?,
        Command::Retry { reset_attempts, by } => lifecycle::retry(&mut tx, reset_attempts, by, ctx)?,
        Command::Resume { reset_attempts, by } => parking::resume(&mut tx, reset_attempts, by)?,
    }
    settle::settle(&mut tx, ctx)?;
    Ok(tx)
}

/// Leave the flow to move as far as it can go, once the command's own
/// events are in (the settle loop's `Advance`): a command's last word.
fn then_advance(tx: &mut Transition) -> Result<(), ApplyError> {
    tx.follow(transition::FollowUp::Advance { everything: false });
    Ok(())
}

/// The time a call waited in its lanes (docs/lanes.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneWaited {
    pub lanes: Vec<String>,
    pub ms: u64,
}

/// The typed policies of a step of the flow's plan.
fn policies<'a>(plan: &'a ExecutionPlan, step_id: &str) -> Result<&'a StepPolicies, ApplyError> {
    plan.steps
        .get(step_id)
        .ok_or_else(|| ApplyError::UnknownStep(step_id.to_string()))?
        .policies()
        .ok_or_else(|| ApplyError::Unparsed(step_id.to_string()))
}

/// A result for a call the item no longer waits for: recorded, changing
/// nothing. A step endpoint's late result is recorded once per attempt: a
/// step retrying its webhook POST would otherwise grow the log per delivery.
fn late_result(
    tx: &mut Transition,
    step_id: &str,
    token: &str,
    attempt: u32,
    compensation: bool,
    detail: &str,
) -> Result<(), ApplyError> {
    let seen = tx
        .state
        .find_work(step_id, token)
        .is_some_and(|w| w.late_results.contains(&attempt));
    if seen && !compensation {
        return Ok(());
    }
    let flow_id = tx.state.id.clone();
    tx.emit(crate::flow::FlowEvent::WorkLateResult {
        flow_id,
        step_id: step_id.to_string(),
        token: token.to_string(),
        attempt,
        detail: detail.to_string(),
        compensation,
    })
}

/// `t + ms`, saturating at the far future.
fn add_ms(t: Time, ms: u64) -> Time {
    chrono::Duration::try_milliseconds(i64::try_from(ms).unwrap_or(i64::MAX))
        .and_then(|d| t.checked_add_signed(d))
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC)
}

/// Milliseconds from `from` to `to`, 0 when `to` is earlier.
fn ms_between(from: Time, to: Time) -> u64 {
    u64::try_from((to - from).num_milliseconds()).unwrap_or(0)
}
