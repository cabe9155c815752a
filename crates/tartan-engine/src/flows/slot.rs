//! A flow's slot in this process: its lock, its state as of this
//! process's last commit, and the calls that ended waiting to be recorded
//! (`decide` takes them all in one decision). `admission` hands slots out.

use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex as StdMutex};

use tartan_core::flow::FlowState;
use tartan_core::machine::{AttemptResult, Command};
use tokio::sync::Mutex;

/// One flow's lock, with its cached state, and the results of its calls
/// that wait for the lock: whoever takes the lock next decides on all of
/// them in one commit, so that results arriving together (the items of a
/// for_each step) share one instead of queueing for one each.
#[derive(Default)]
pub(super) struct FlowSlot {
    pub(super) cached: Mutex<Option<Cached>>,
    pub(super) pending: StdMutex<Vec<Concluded>>,
    /// Places given out on this slot (`Place`) and not yet handed back:
    /// the slot is kept while any is held. Changed under `FlowLocks`'s lock.
    pub(super) reserved: AtomicUsize,
    /// Its key in `Table::idle` while listed there (0: not listed).
    /// Changed under `FlowLocks`'s lock.
    pub(super) idle_since: AtomicU64,
}

pub(super) type Slot = Arc<FlowSlot>;

/// A flow's state as of its last commit by this process.
pub(super) struct Cached {
    /// The same allocation as the last commit's state: keeping it costs no copy.
    pub(super) state: Arc<FlowState>,
    pub(super) sequence: i64,
}

/// A call of this process that ended, waiting to be recorded.
pub(super) struct Concluded {
    pub(super) step_id: String,
    pub(super) token: String,
    pub(super) attempt: u32,
    pub(super) kind: tartan_core::machine::CallKind,
    /// `None`: an async step accepted the call; its webhook will decide.
    pub(super) result: Option<AttemptResult>,
    /// How long the call waited in its lanes.
    pub(super) waited: Option<tartan_core::machine::LaneWaited>,
    pub(super) reply: tokio::sync::oneshot::Sender<Result<(), Unrecorded>>,
}

/// Why a concluded call was not recorded.
pub(super) enum Unrecorded {
    /// The database was unreachable: worth trying again.
    Unavailable(String),
    Failed(String),
}

impl Concluded {
    /// What the machine is told about this call.
    pub(super) fn command(&self) -> Command {
        let (step_id, token, attempt) = (self.step_id.clone(), self.token.clone(), self.attempt);
        match &self.result {
            None => Command::Accept {
                step_id,
                token,
                attempt,
            },
            Some(result) if self.kind == tartan_core::machine::CallKind::Compensation => {
                Command::RecordCompensation {
                    step_id,
                    token,
                    attempt,
                    result: result.clone(),
                }
            }
            Some(result) => Command::Record {
                step_id,
                token,
                attempt,
                result: result.clone(),
                waited: self.waited.clone(),
            },
        }
    }
}
