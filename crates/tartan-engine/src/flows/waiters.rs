//! Clients waiting for a flow to finish (`GET /engine/flow/{id}/status?wait=`):
//! woken by the decision that finishes the flow in this process, which
//! hands them the status it committed, without polling or reading it back.
//! A flow another process finishes is seen when the waiter looks at the
//! store again, every [`RECHECK`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tartan_core::flow::FlowStatus;
use tokio::sync::Notify;

/// How often a waiter reads the flow's status again when nothing in this
/// process woke it: the flow may be finished by another process.
pub(crate) const RECHECK: Duration = Duration::from_millis(250);

/// Most clients waiting at once; more are refused (503) rather than queued.
pub const MAX_WAITERS: usize = 10_000;

/// The flows waited for, each with the notice its waiters share and how
/// many they are, and how many wait in all.
#[derive(Default)]
pub(crate) struct Waiters {
    flows: Mutex<Table>,
}

/// Each flow's notice and waiter count, and the count of all waiters.
type Table = (HashMap<String, (Arc<Notice>, usize)>, usize);

/// What the waiters of one flow share: the wake-up, and the status the
/// decision that finished the flow committed.
#[derive(Default)]
pub(crate) struct Notice {
    pub(crate) woken: Notify,
    finished: OnceLock<FlowStatus>,
}

impl Notice {
    /// The status the flow finished with in this process, once it has.
    pub(crate) fn finished(&self) -> Option<FlowStatus> {
        self.finished.get().copied()
    }
}

/// One client's place among the waiters, given up when dropped.
pub(crate) struct Waiting<'a> {
    waiters: &'a Waiters,
    flow_id: String,
    pub(crate) notice: Arc<Notice>,
    /// Counted against [`MAX_WAITERS`] (a client's wait).
    counted: bool,
}

impl Waiters {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        crate::sync::lock(&self.flows)
    }

    /// Wait for `flow_id`; `None` when [`MAX_WAITERS`] already wait.
    pub(crate) fn wait_for(&self, flow_id: &str) -> Option<Waiting<'_>> {
        let mut guard = self.lock();
        let (flows, total) = &mut *guard;
        if *total >= MAX_WAITERS {
            return None;
        }
        *total += 1;
        let entry = flows
            .entry(flow_id.to_string())
            .or_insert_with(|| (Arc::new(Notice::default()), 0));
        entry.1 += 1;
        Some(Waiting {
            waiters: self,
            flow_id: flow_id.to_string(),
            notice: Arc::clone(&entry.0),
            counted: true,
        })
    }

    /// Watch `flow_id` for the engine itself (a flow step's call waiting
    /// for its child): not counted against [`MAX_WAITERS`], which bounds
    /// clients; these are bounded by the work items in flight.
    pub(crate) fn watch(&self, flow_id: &str) -> Waiting<'_> {
        let mut guard = self.lock();
        let entry = guard
            .0
            .entry(flow_id.to_string())
            .or_insert_with(|| (Arc::new(Notice::default()), 0));
        entry.1 += 1;
        Waiting {
            waiters: self,
            flow_id: flow_id.to_string(),
            notice: Arc::clone(&entry.0),
            counted: false,
        }
    }

    /// The flow finished in this process with `status`, now committed:
    /// wake whoever waits for it, and tell them.
    /// Those who start waiting afterwards get a notice of their own: the
    /// flow may be retried meanwhile.
    pub(crate) fn finished(&self, flow_id: &str, status: FlowStatus) {
        let mut guard = self.lock();
        if let Some((notice, _)) = guard.0.get_mut(flow_id) {
            if status != FlowStatus::Active {
                let _ = notice.finished.set(status);
            }
            notice.woken.notify_waiters();
            *notice = Arc::new(Notice::default());
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut guard = self.waiters.lock();
        let (flows, total) = &mut *guard;
        if self.counted {
            *total = total.saturating_sub(1);
        }
        if let Some(entry) = flows.get_mut(&self.flow_id) {
            entry.1 = entry.1.saturating_sub(1);
            if entry.1 == 0 {
                flows.remove(&self.flow_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finish_tells_who_waits_then_and_nobody_after() {
        let waiters = Waiters::default();
        let Some(before) = waiters.wait_for("f") else {
            panic!("a first waiter is let in");
        };
        waiters.finished("f", FlowStatus::Failed);
        assert_eq!(before.notice.finished(), Some(FlowStatus::Failed));
        // The flow may have been retried since: a later waiter reads the store.
        let Some(after) = waiters.wait_for("f") else {
            panic!("a second waiter is let in");
        };
        assert_eq!(after.notice.finished(), None);
        // "Active" is never handed over as an end.
        waiters.finished("f", FlowStatus::Active);
        assert_eq!(after.notice.finished(), None);
        drop((before, after));
        assert!(
            waiters.lock().0.is_empty(),
            "the flow's entry goes with its last waiter"
        );
    }
}
