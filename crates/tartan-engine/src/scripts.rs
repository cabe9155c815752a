//! Script steps (`type: script`): run by the engine instead of called over
//! HTTP, on a blocking thread so that a script that takes its whole time
//! limit holds no worker of the runtime. The sandbox bounds instructions,
//! memory and time (docs/steps.md, "Scripts"); a failure is permanent,
//! except running out of the attempt's own timeout, which is a timeout
//! like any call's.

use std::time::{Duration, Instant};

use tartan_core::machine::{AttemptResult, CallBody};
use tartan_core::outcome::FailureCause;
use tartan_core::step::{body_outputs, ScriptLimits};

/// Run a script step's call and say how it ended.
pub(crate) async fn run(spec: &tartan_core::machine::Call, limits: ScriptLimits) -> AttemptResult {
    let Some(script) = spec.step.scripts().body.clone() else {
        return failed("the step has no script".into());
    };
    let args = match &spec.body {
        Some(CallBody::Inputs(inputs)) => inputs.to_args(),
        _ => Default::default(),
    };
    let attempt = Duration::from_millis(spec.bound.timeout_ms);
    // The attempt's timeout, when shorter, is the time the script has.
    let cut_by_attempt = attempt < limits.wall;
    let limits = ScriptLimits {
        wall: limits.wall.min(attempt),
        ..limits
    };
    let started = Instant::now();
    let ran = tokio::task::spawn_blocking(move || script.value(&args, &limits)).await;
    match ran {
        Ok(Ok(value)) => AttemptResult::Success {
            outputs: body_outputs(value),
            http_status: None,
        },
        Ok(Err(e)) if cut_by_attempt && e.is_time_limit() => AttemptResult::TimedOut {
            scope: spec.bound.scope,
            limit_ms: spec.bound.limit_ms,
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        },
        Ok(Err(e)) => failed(e.to_string()),
        Err(e) => failed(format!("the script's task ended without an answer: {e}")),
    }
}

fn failed(error: String) -> AttemptResult {
    AttemptResult::Failure {
        cause: FailureCause::Script,
        error,
        retry_after_ms: None,
    }
}
