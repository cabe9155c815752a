//! Async steps: a call answered `202` is accepted and waits for its webhook;
//! heartbeats restart its inactivity window; a window that passes is a
//! timeout of the attempt (docs/api.md, "Async steps and webhooks").

use std::sync::Arc;

use crate::flow::{ApplyError, FlowEvent, WorkStatus};
use crate::outcome::AttemptResult;
use crate::timeouts::TimeoutScope;

use super::{add_ms, commands, ms_between, policies, Context, Effect, Transition};

/// An async step accepted attempt `attempt`: no call is in flight any more
/// (after a restart it is not made again); its inactivity window starts, when
/// the step has one.
pub(super) fn accept(
    tx: &mut Transition,
    step_id: &str,
    token: &str,
    attempt: u32,
) -> Result<(), ApplyError> {
    let plan = Arc::clone(&tx.state.plan);
    let window = policies(&plan, step_id)?.timeouts.inactivity_ms;
    let running = tx.state.find_work(step_id, token).is_some_and(|w| {
        w.status == WorkStatus::Active && w.attempts.last().map(|a| a.number) == Some(attempt)
    });
    if !running {
        return Ok(());
    }
    let flow_id = tx.state.id.clone();
    let now = tx.now;
    tx.emit(FlowEvent::WorkAccepted {
        flow_id,
        step_id: step_id.to_string(),
        token: token.to_string(),
        attempt,
        inactive_until: window.map(|ms| add_ms(now, ms)),
    })
}

/// A heartbeat of an async step: its inactivity window starts again.
///
/// Recorded as `work_heartbeat` only once the recorded window is at least
/// half used; before that the heartbeat is noted in the item's row
/// (`Effect::Heard`) and the window's end is moved when the recorded one
/// comes (`inactivity_due`). A step heartbeating every second then costs
/// about two events per window, not one per heartbeat, and the state, which
/// only events change, still replays exactly.
pub(super) fn heartbeat(tx: &mut Transition, step_id: &str, token: &str) -> Result<(), ApplyError> {
    let plan = Arc::clone(&tx.state.plan);
    let window = policies(&plan, step_id)?.timeouts.inactivity_ms;
    // Only an accepted call waits for its webhook; a heartbeat for a call
    // still in flight must not arm a timer that would start a second one.
    let waiting = tx
        .state
        .find_work(step_id, token)
        .filter(|w| w.status == WorkStatus::Active && w.accepted_at.is_some())
        .map(|w| (w.inactive_until, w.attempts.last().map_or(0, |a| a.number)));
    let (Some(ms), Some((recorded, attempt))) = (window, waiting) else {
        return Ok(());
    };
    let until = add_ms(tx.now, ms);
    let half_left = recorded.is_some_and(|end| ms_between(tx.now, end) > ms / 2);
    if half_left {
        tx.push(Effect::Heard {
            step_id: step_id.to_string(),
            token: token.to_string(),
            attempt,
            until,
        });
        return Ok(());
    }
    let flow_id = tx.state.id.clone();
    tx.emit(FlowEvent::WorkHeartbeat {
        flow_id,
        step_id: step_id.to_string(),
        token: token.to_string(),
        inactive_until: until,
    })
}

/// The inactivity window of an accepted async call may have passed: if a
/// heartbeat not yet recorded (`heard_until`) keeps it open, that heartbeat
/// is recorded now, moving the window; else the attempt timed out.
pub(super) fn inactivity_due(
    tx: &mut Transition,
    step_id: &str,
    token: &str,
    heard_until: Option<crate::flow::Time>,
    ctx: &mut Context<'_>,
) -> Result<(), ApplyError> {
    let now = ctx.now;
    let Some(work) = tx.state.find_work(step_id, token) else {
        return Err(ApplyError::UnknownWork(token.to_string()));
    };
    // Whatever the flow's status: a call still open after its flow failed
    // ends by its window too, or the flow would wait for it forever.
    let expired = work.status == WorkStatus::Active && work.inactive_until.is_some_and(|t| t <= now);
    if !expired {
        return Ok(());
    }
    // A noted end is a heartbeat's time plus the window: one noted for an
    // earlier attempt ends before this attempt's window does, so one still
    // ahead of now was noted for this attempt.
    if let Some(until) = heard_until.filter(|t| *t > now && work.accepted_at.is_some()) {
        let flow_id = tx.state.id.clone();
        return tx.emit(FlowEvent::WorkHeartbeat {
            flow_id,
            step_id: step_id.to_string(),
            token: token.to_string(),
            inactive_until: until,
        });
    }
    let attempt = work.attempts.last().map(|a| a.number).unwrap_or(0);
    let elapsed = work.attempts.last().map_or(0, |a| ms_between(a.started_at, now));
    let plan = Arc::clone(&tx.state.plan);
    let limit = policies(&plan, step_id)?.timeouts.inactivity_ms.unwrap_or(0);
    let result = AttemptResult::TimedOut {
        scope: TimeoutScope::Inactivity,
        limit_ms: limit,
        elapsed_ms: elapsed,
    };
    commands::record(tx, step_id, token, attempt, result, ctx)
}
