//! An async step's webhook and heartbeats (docs/api.md, "Async steps and
//! webhooks"): which attempt of which item they may act on, and the
//! decision they make.

use std::sync::Arc;

use tartan_core::flow::{FlowState, WorkStatus};
use tartan_core::machine::{AttemptResult, Command, Effect};
use tartan_core::outcome::FailureCause;
use tartan_core::step::Args;
use tartan_store::{StoreError, WorkKey};

use super::Flows;
use crate::error::EngineError;

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
