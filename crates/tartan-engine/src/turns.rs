//! Turn order where calls wait in this process (call slots, lanes): the
//! earliest turn time first, a wait's turn time being when it began moved
//! earlier by its priority (`tartan_core::concurrency::turn_us`,
//! docs/concurrency.md "Priority"). With one priority it is arrival order.

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::Instant;

/// What this process's turn times count from: a monotonic clock, so that
/// a change of the wall clock reorders nothing.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Now, in microseconds on the process's monotonic clock.
fn now_us() -> i64 {
    i64::try_from(EPOCH.elapsed().as_micros()).unwrap_or(i64::MAX)
}

/// Entries in turn order: turn time, then arrival (`seq`).
pub(crate) struct TurnQueue<T> {
    entries: BTreeMap<(i64, u64), T>,
    seq: u64,
}

impl<T> Default for TurnQueue<T> {
    fn default() -> Self {
        Self {
            entries: BTreeMap::new(),
            seq: 0,
        }
    }
}

impl<T> TurnQueue<T> {
    /// Add an entry that begins to wait now with `priority`.
    pub(crate) fn push(&mut self, priority: i32, entry: T) {
        let turn = tartan_core::concurrency::turn_us(now_us(), priority);
        self.seq += 1;
        self.entries.insert((turn, self.seq), entry);
    }

    /// The entry whose turn it is.
    pub(crate) fn pop(&mut self) -> Option<T> {
        self.entries.pop_first().map(|(_, entry)| entry)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.entries.retain(|_, entry| keep(entry));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn one_priority_is_arrival_order_and_a_higher_one_goes_first() {
        let mut q = TurnQueue::default();
        q.push(0, "a");
        q.push(0, "b");
        q.push(5, "urgent");
        q.push(-5, "later");
        q.push(0, "c");
        let order: Vec<&str> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, ["urgent", "a", "b", "c", "later"]);
        assert!(q.is_empty());
    }
}
