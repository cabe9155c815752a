//! Ending an evaluation from outside: a flag another thread sets and the
//! evaluation reads at its every safepoint (docs/steps.md, "The sandbox").
//!
//! The engine runs a script step's evaluation under a `Cancel` that it
//! trips when it stops waiting for the answer (the call was aborted, its
//! flow ended, the engine is shutting down), so an evaluation nobody waits
//! for holds its thread no longer than its next safepoint.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A flag that ends the evaluations run under it.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// End every evaluation under this flag at its next safepoint, and
    /// refuse any that would start under it.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// A guard that cancels this flag when dropped: held by whoever waits
    /// for the answer, so that giving up the wait (an aborted task) ends
    /// the evaluation too.
    pub fn on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(self.clone())
    }
}

/// Cancels its flag when dropped (see [`Cancel::on_drop`]).
#[derive(Debug)]
pub struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

thread_local! {
    /// The flag evaluations on this thread run under, if any.
    static CURRENT: RefCell<Option<Cancel>> = const { RefCell::new(None) };
}

/// Run `f` with every evaluation it makes on this thread under `cancel`.
/// (A thread-local rather than a parameter: predicates and mappings are
/// evaluated deep in the core's decisions, which need not know of it.)
pub fn under<R>(cancel: &Cancel, f: impl FnOnce() -> R) -> R {
    let _restore = Restore(CURRENT.with(|c| c.replace(Some(cancel.clone()))));
    f()
}

/// Puts back the flag that was current, even when `f` unwinds.
struct Restore(Option<Cancel>);

impl Drop for Restore {
    fn drop(&mut self) {
        let previous = self.0.take();
        let _ = CURRENT.try_with(|c| *c.borrow_mut() = previous);
    }
}

/// The flag an evaluation starting now on this thread runs under.
pub(crate) fn current() -> Option<Cancel> {
    CURRENT.with(|c| c.borrow().clone())
}
