//! The flows' side of a call: making it from a decision's `Call` effect,
//! and recording how it ended (`crate::calls` runs it in between).

use std::sync::Arc;

use tartan_core::machine::{AttemptResult, Dispatch, LaneWaited, Transition};

use super::slot::{Concluded, Unrecorded};
use super::Flows;
use crate::calls::dispatch::Call;
use crate::traces::Decision;

impl Flows {
    /// Record how a call of this process ended: its result, or for an async
    /// step its acceptance. Tried again while the database is unreachable (a
    /// restart, a failover), for as long as this node's lease on the call
    /// holds: a result the step already produced is worth more than a new
    /// call. A commit that did land before its connection dropped is found on
    /// reload and not repeated.
    pub(crate) async fn conclude(
        self: &Arc<Self>,
        call: &Call,
        result: AttemptResult,
        waited: Option<LaneWaited>,
    ) {
        let accepted = call.spec.expects_webhook && matches!(result, AttemptResult::Success { .. });
        let give_up = tokio::time::Instant::now() + self.config.lease_length().to_std().unwrap_or_default();
        let mut pause = std::time::Duration::from_millis(50);
        loop {
            let (reply, answer) = tokio::sync::oneshot::channel();
            let slot = self.locks.slot(&call.spec.flow_id);
            crate::sync::lock(&slot.pending).push(Concluded {
                step_id: call.spec.step.id.clone(),
                token: call.spec.token.clone(),
                attempt: call.spec.attempt,
                kind: call.spec.kind,
                result: (!accepted).then(|| result.clone()),
                waited: waited.clone(),
                reply,
            });
            let about = Decision {
                command: match (call.spec.is_compensation(), accepted) {
                    (true, _) => "record_compensation",
                    (false, true) => "accept",
                    (false, false) => "record",
                },
                step_id: Some(&call.spec.step.id),
                token: Some(&call.spec.token),
                attempt: Some(call.spec.attempt),
            };
            self.decide_pending(&slot, &call.spec.flow_id, about).await;
            // Recorded by this decision, or by one that took it along.
            let error = match answer.await {
                Ok(Ok(())) => return,
                Ok(Err(Unrecorded::Unavailable(e)))
                    if tokio::time::Instant::now() + pause < give_up && !self.stopping.is_cancelled() =>
                {
                    tracing::warn!(flow_id = %call.spec.flow_id, "database unavailable, trying again in {pause:?}: {e}");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_secs(2));
                    continue;
                }
                Ok(Err(Unrecorded::Unavailable(e) | Unrecorded::Failed(e))) => e,
                Err(_) => "the deciding task went away".to_string(),
            };
            // The item stays active under this node's lease; when the lease
            // expires the sweep calls it again. Nothing is lost.
            tracing::error!(flow_id = %call.spec.flow_id, step_id = %call.spec.step.id, token = %call.spec.token, "recording the call's end failed: {error}");
            return;
        }
    }

    /// Make a call a committed decision started (`Effect::Call`): the
    /// core builds it whole (`tartan_core::machine::Call`); here its
    /// webhook URL is signed, and it is admitted to a slot and sent.
    /// `decision`: the span of the decision that made the call, its
    /// span's parent (docs/operating.md, "Traces").
    pub(super) fn make_call(
        self: &Arc<Self>,
        tx: &Transition,
        d: &Dispatch,
        decision: Option<&crate::traces::Span>,
    ) {
        let default_ms = tartan_core::duration::as_millis_u64(self.config.step_timeout);
        let Some(mut spec) = tartan_core::machine::Call::of(&tx.state, d, tx.now, default_ms) else {
            return;
        };
        let webhook_url = spec
            .expects_webhook
            .then(|| self.webhook_url(&spec.flow_id, &spec.step.id, &spec.token, spec.attempt));
        if let Some(url) = &webhook_url {
            spec.hand_webhook(url);
        }
        let kept = tx.state.trace.as_deref();
        let call = Call {
            spec,
            webhook_url,
            trace: kept
                .and_then(crate::traces::FlowIds::of)
                .map(|ids| ids.under(decision)),
            tracestate: kept.and_then(|t| t.state.as_deref()).map(std::sync::Arc::from),
        };
        if call.spec.step.is_flow() {
            return self.spawn_child_call(tx, call);
        }
        self.calls.send(call);
    }
}
