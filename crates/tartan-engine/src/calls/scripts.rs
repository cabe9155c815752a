//! Script steps (`type: script`): run by the engine instead of called over
//! HTTP, on a blocking thread so that a script that takes its whole time
//! limit holds no worker of the runtime. The sandbox bounds instructions,
//! memory and time (docs/steps.md, "Scripts"); a failure is permanent,
//! except running out of the attempt's own timeout, which is a timeout
//! like any call's. The evaluation runs under a cancel flag that the call's
//! future trips when it is dropped (the call aborted, its flow ended, the
//! engine shutting down), so nobody's thread stays busy with an answer
//! nobody waits for, and shutdown never waits for a script.
//!
//! Evaluations with the whole budget (script steps, and decisions whose
//! scripts outgrew the small inline budget) take one of
//! `TARTAN_SCRIPT_MAX_CONCURRENT` places first: each may hold
//! `TARTAN_SCRIPT_MAX_MEMORY`, and the blocking threads they run on number
//! up to 512, so without a cap 200 script items reached 2.2 GB.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tartan_core::machine::{AttemptResult, CallBody};
use tartan_core::outcome::FailureCause;
use tartan_core::step::{body_outputs, ScriptLimits};
use tokio::sync::Semaphore;

/// What every evaluation may spend, and the places of those that may
/// spend it all.
pub(crate) struct Scripts {
    limits: ScriptLimits,
    places: Arc<Semaphore>,
}

impl Scripts {
    pub(crate) fn new(limits: ScriptLimits, max_running: usize) -> Scripts {
        Scripts {
            limits,
            places: Arc::new(Semaphore::new(max_running.max(1))),
        }
    }

    /// What one evaluation may spend.
    pub(crate) fn limits(&self) -> ScriptLimits {
        self.limits
    }

    /// Run `f`, which evaluates with the whole budget, in a place of its
    /// own; from a blocking context (`block_in_place`): it waits for one.
    pub(crate) fn in_place<R>(&self, f: impl FnOnce() -> R) -> R {
        let place = tokio::runtime::Handle::try_current()
            .ok()
            .and_then(|runtime| runtime.block_on(self.places.acquire()).ok());
        let answer = f();
        drop(place);
        answer
    }

    /// Run a script step's call and say how it ended.
    pub(crate) async fn run(&self, spec: &tartan_core::machine::Call) -> AttemptResult {
        // Never closed: an error cannot come, and would leave the script unplaced.
        let _place = self.places.acquire().await.ok();
        run(spec, self.limits).await
    }
}

async fn run(spec: &tartan_core::machine::Call, limits: ScriptLimits) -> AttemptResult {
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
    let cancel = tartan_core::step::ScriptCancel::new();
    let _cancel_on_drop = cancel.on_drop();
    let ran = tokio::task::spawn_blocking(move || {
        tartan_core::step::under_cancel(&cancel, || script.value(&args, &limits))
    })
    .await;
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
