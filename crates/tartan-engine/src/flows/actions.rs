//! What an operator does to a flow that is running or ended: cancel or
//! kill it, retry it, resume its parked items, or start an item's retry
//! now (docs/api.md, "Retry and kill"; docs/retries.md, "Parking" and
//! "Retry now"). Each checks the flow as stored, to refuse with a reason,
//! then decides like any other command.

use std::sync::Arc;

use tartan_core::machine::{Command, Stop};

use super::Flows;
use crate::error::EngineError;

/// The item a "retry now" started.
#[derive(Debug, Clone, PartialEq)]
pub struct Hastened {
    pub step_id: String,
    /// The item's status after it: `active` with its next attempt running,
    /// or what the predicate or its step's health made of it.
    pub status: &'static str,
    /// The attempt now running.
    pub attempt: Option<u32>,
    /// When its retry had been scheduled.
    pub was_due_at: tartan_core::flow::Time,
}

impl Flows {
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

    /// Start a work item's next attempt now, instead of when its retry is
    /// scheduled (docs/retries.md, "Retry now"): for a wait an operator
    /// knows is pointless (the step was fixed). Refused unless the flow is
    /// active and the item waits for a retry that is not yet due.
    pub async fn retry_work_now(
        self: &Arc<Self>,
        flow_id: &str,
        token: &str,
    ) -> Result<Hastened, EngineError> {
        use tartan_core::flow::FlowStatus;
        let state = self.flow(flow_id).await?;
        let refuse = |why: String| Err(EngineError::NotWaitingForRetry(token.to_string(), why));
        let Some((step_id, work)) = state
            .executions
            .iter()
            .find_map(|(step_id, e)| e.work_items.get(token).map(|w| (step_id.clone(), w)))
        else {
            return Err(EngineError::WorkNotFound(flow_id.to_string(), token.to_string()));
        };
        if state.status != FlowStatus::Active {
            return refuse(format!("flow {flow_id} is {}", state.status.as_str()));
        }
        let Some(was_due_at) = work.next_retry_at.filter(|_| work.waits_for_retry()) else {
            let why = match work.deferred_since {
                Some(_) => "it waits for its step to be healthy, not for a retry".to_string(),
                None => format!("it is {}, not waiting for a retry", work.status.as_str()),
            };
            return refuse(why);
        };
        if self.stopping.is_cancelled() {
            return Err(EngineError::ShuttingDown);
        }
        let command = Command::RetryNow {
            step_id: step_id.clone(),
            token: token.to_string(),
        };
        if !self.decide(flow_id, command).await?.changed {
            // The retry came due, or another request started it, meanwhile.
            return refuse("its retry started meanwhile".into());
        }
        // Usually its next attempt is running; the predicate may have
        // skipped it, or its step become unhealthy (it waits for health).
        let state = self.flow(flow_id).await?;
        let work = state.find_work(&step_id, token);
        Ok(Hastened {
            status: work.map_or("pending", |w| w.status.as_str()),
            attempt: work
                .and_then(|w| w.attempts.last())
                .filter(|a| a.ended_at.is_none())
                .map(|a| a.number),
            step_id,
            was_due_at,
        })
    }
}
