//! After a restart: work that was in flight under this node's lease (or under
//! a lease that has expired) is started again, with the same receipt token,
//! as a new attempt. Nothing else needs recovering: every other state change
//! was committed together with the work it made due.

use tartan_core::machine::Command;
use tartan_store::Claim;

use crate::{Engine, EngineError};

/// Items taken over per claim.
const CLAIM_BATCH: usize = 10_000;

impl Engine {
    pub(crate) async fn recover(&self) -> Result<(), EngineError> {
        self.take_over(true).await
    }

    /// Call again the work whose lease expired (its node died), and at
    /// start-up (`own`) this node's own calls cut off by its last stop.
    pub(crate) async fn take_over(&self, own: bool) -> Result<(), EngineError> {
        let claimed = self
            .inner
            .store
            .claim_orphaned_work(&Claim {
                node: self.inner.config.node_id.clone(),
                at: None,
                lease: self.lease_length().to_std().unwrap_or_default(),
                limit: CLAIM_BATCH,
                include_own: own,
            })
            .await?;
        if !claimed.is_empty() {
            tracing::info!(count = claimed.len(), own, "resuming work that was in flight");
        }
        for key in claimed {
            if self.is_in_flight(&key.token) {
                // This process's own call, still running, whose lease lapsed
                // (renewal failed while the database was away): the claim
                // renewed it; calling again would run the step twice at once.
                continue;
            }
            self.inner.metrics.lease_taken_over();
            let redispatch = Command::Redispatch {
                step_id: key.step_id.clone(),
                token: key.token.clone(),
            };
            let outcome = self.decide(&key.flow_id, redispatch).await;
            if let Err(e) = outcome {
                tracing::error!(flow_id = %key.flow_id, token = %key.token, "resuming work failed: {e}");
            }
        }
        Ok(())
    }
}
