//! Flows held in memory that the database no longer agrees with
//! (docs/durability.md, "Failover"). A flow stays in memory while its
//! cached state has calls in flight; normally each of them ends in a
//! decision, whose commit finds any change another process made (a
//! sequence conflict) and reads the flow again. After a failover to a
//! standby that had not received this process's last commits, the cached
//! state can be ahead of the database: an async call accepted there waits
//! for a webhook the database knows nothing of (it is refused), so no
//! decision ever comes, and the flow would keep its place in
//! `max_active_flows` until a restart, while the database's own version
//! (a call it still thinks active, say) waits on this process's cache.
//!
//! So at each sweep the flows whose cached state has not changed since the
//! previous sweep are compared, in one read, with the version the database
//! holds (the sequence of the last event, and when its commit was decided:
//! another process may have committed the flow to the same sequence after
//! the lost commits). One the database moved away from is dropped from
//! memory (its next decision reads it again); one it no longer has is
//! reported lost and dropped. Flows decided on in between are left alone:
//! their decisions do the check themselves.

use std::collections::HashMap;
use std::sync::Arc;

use tartan_store::{from_us, to_us, FlowVersion};

use super::admission::FlowLocks;
use super::slot::Cached;
use super::slot::FlowSlot;
use super::Flows;

/// Which cached flows the last sweep saw, at which version: those still
/// there unchanged at the next have been idle for a whole sweep.
#[derive(Default)]
pub(crate) struct IdleFlows {
    seen: HashMap<String, FlowVersion>,
}

/// A cached flow: its id, its slot, the version of its cached state.
type Held = (String, Arc<FlowSlot>, FlowVersion);

/// The version a cached state is of, as the database stores it (to the
/// microsecond).
fn version(cached: &Cached) -> FlowVersion {
    FlowVersion {
        sequence: cached.sequence,
        updated_at: from_us(to_us(cached.state.last_updated)),
    }
}

impl FlowLocks {
    /// The flows with a cached state, but those being decided on now. A
    /// slot with none and nobody deciding is let go here: its last decision
    /// let go of it while this (or another) look held its lock for a moment,
    /// and `release` leaves a locked slot to whoever holds it.
    fn held(self: &Arc<Self>) -> Vec<Held> {
        let mut empty = Vec::new();
        let held = self.each_slot(|id, slot| {
            let cached = slot.cached.try_lock().ok()?;
            let Some(cached) = cached.as_ref() else {
                empty.push((id.to_string(), Arc::clone(slot)));
                return None;
            };
            Some((id.to_string(), Arc::clone(slot), version(cached)))
        });
        for (id, slot) in empty {
            self.release(&id, &slot);
        }
        held
    }
}

impl Flows {
    /// Compare the flows idle in memory since the last call with the
    /// database, and let go of those it moved away from or lost.
    pub(crate) async fn reconcile(&self, idle: &mut IdleFlows) {
        let held = self.locks.held();
        let previous = std::mem::replace(
            &mut idle.seen,
            held.iter()
                .map(|(id, _, version)| (id.clone(), *version))
                .collect(),
        );
        let idle_now: Vec<Held> = held
            .into_iter()
            .filter(|(id, _, version)| previous.get(id) == Some(version))
            .collect();
        if idle_now.is_empty() {
            return;
        }
        let ids: Vec<String> = idle_now.iter().map(|(id, _, _)| id.clone()).collect();
        let stored: HashMap<String, FlowVersion> = match self.store.flow_versions(&ids).await {
            Ok(found) => found.into_iter().collect(),
            Err(e) => {
                // The next sweep looks again.
                tracing::debug!("comparing the flows in memory with the database failed: {e}");
                return;
            }
        };
        for (id, slot, held) in idle_now {
            let in_database = stored.get(&id).copied();
            if in_database == Some(held) {
                continue;
            }
            {
                // Decided on since it was read: that decision saw the database.
                let Ok(mut cached) = slot.cached.try_lock() else {
                    continue;
                };
                if cached.as_ref().map(version) != Some(held) {
                    continue;
                }
                *cached = None;
            }
            idle.seen.remove(&id);
            match in_database {
                None => self.metrics.db.flow_lost(&id),
                // Another process decided on it (a webhook it took): usual.
                Some(stored) if stored.sequence > held.sequence => tracing::debug!(
                    flow_id = %id,
                    held = held.sequence,
                    stored = stored.sequence,
                    "a flow held in memory was moved on elsewhere; read again at its next decision"
                ),
                Some(stored) => tracing::warn!(
                    flow_id = %id,
                    held = held.sequence,
                    stored = stored.sequence,
                    "the database lost commits of a flow this process made (a failover to a standby that \
                     had not received them?); it goes on from what the database holds"
                ),
            }
            self.locks.release(&id, &slot);
        }
    }
}
