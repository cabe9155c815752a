//! A broadcast queue bounded in entries and in bytes: the bus's channel
//! (docs/api.md, "Event streams").
//!
//! tokio's broadcast channel keeps each message until every receiver has
//! read it or `capacity` newer ones push it out, whatever their size: one
//! receiver that stops reading pins `capacity` messages, megabytes each when
//! steps answer large outputs. Here the queue holds at most `max_len`
//! entries and `max_bytes` bytes (as the publisher measured them; the newest
//! entry is always kept). Publishing past either bound drops the oldest
//! entries, and a receiver that had not read one of them is cut off there
//! and then: it no longer counts, so it holds nothing, and it learns it was
//! cut off (`RecvError::Lagged`) on its next read. Entries every receiver has
//! read are dropped at once, so the queue holds only what the slowest
//! attached receiver has yet to read.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::sync::lock;

/// Why a receiver got nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvError {
    /// It fell further behind than the queue holds and was cut off: what it
    /// missed is in the store. Every later read answers the same.
    Lagged,
    /// The publisher is gone: nothing more will come.
    Closed,
}

/// The publishing side; receivers are made by `subscribe`.
pub(crate) struct Ring<T> {
    shared: Arc<Shared<T>>,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Woken on every publish and when the ring closes.
    notify: Notify,
    max_len: usize,
    max_bytes: usize,
}

struct State<T> {
    /// Each entry and its size.
    entries: VecDeque<(Arc<T>, usize)>,
    /// The index of the front entry; every index below it is gone.
    head: u64,
    /// The sizes of `entries`, summed.
    bytes: usize,
    /// How many attached receivers read each index next. A receiver whose
    /// index falls below `head` is no longer here: it was cut off.
    cursors: BTreeMap<u64, usize>,
    closed: bool,
}

impl<T> State<T> {
    fn tail(&self) -> u64 {
        self.head + self.entries.len() as u64
    }

    fn pop_front(&mut self) {
        if let Some((_, bytes)) = self.entries.pop_front() {
            self.bytes -= bytes;
            self.head += 1;
        }
    }

    /// Drop the entries every attached receiver has read.
    fn trim(&mut self) {
        let needed = self.cursors.keys().next().copied().unwrap_or_else(|| self.tail());
        while self.head < needed {
            self.pop_front();
        }
    }

    fn leave(&mut self, index: u64) {
        if let Some(n) = self.cursors.get_mut(&index) {
            *n -= 1;
            if *n == 0 {
                self.cursors.remove(&index);
            }
        }
    }
}

impl<T> Ring<T> {
    /// At least one entry is always kept, whatever the bounds.
    pub(crate) fn new(max_len: usize, max_bytes: usize) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    entries: VecDeque::new(),
                    head: 0,
                    bytes: 0,
                    cursors: BTreeMap::new(),
                    closed: false,
                }),
                notify: Notify::new(),
                max_len: max_len.max(1),
                max_bytes,
            }),
        }
    }

    /// A receiver of what is published from now on.
    pub(crate) fn subscribe(&self) -> BusReceiver<T> {
        let mut state = lock(&self.shared.state);
        let next = state.tail();
        *state.cursors.entry(next).or_default() += 1;
        BusReceiver {
            shared: Arc::clone(&self.shared),
            next,
        }
    }

    /// Attached receivers (those not cut off).
    pub(crate) fn receiver_count(&self) -> usize {
        lock(&self.shared.state).cursors.values().sum()
    }

    /// Hand `value`, of `bytes` bytes, to every receiver; nothing is kept
    /// when none is attached.
    pub(crate) fn publish(&self, value: T, bytes: usize) {
        let mut state = lock(&self.shared.state);
        if state.cursors.is_empty() {
            return;
        }
        state.entries.push_back((Arc::new(value), bytes));
        state.bytes += bytes;
        let (max_len, max_bytes) = (self.shared.max_len, self.shared.max_bytes);
        while state.entries.len() > 1 && (state.entries.len() > max_len || state.bytes > max_bytes) {
            state.pop_front();
        }
        // Receivers that had not read what was dropped are cut off: they no
        // longer hold back what follows.
        let head = state.head;
        let attached = state.cursors.split_off(&head);
        let cut = std::mem::replace(&mut state.cursors, attached);
        if !cut.is_empty() {
            state.trim();
        }
        drop(state);
        self.shared.notify.notify_waiters();
    }

    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        let state = lock(&self.shared.state);
        (state.entries.len(), state.bytes)
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.notify.notify_waiters();
    }
}

/// One listener of a ring: the entries published since it subscribed, in
/// order, until it falls too far behind.
pub struct BusReceiver<T> {
    shared: Arc<Shared<T>>,
    /// The index it reads next.
    next: u64,
}

impl<T> BusReceiver<T> {
    /// The next entry, waiting for one. Cancel-safe: nothing is taken
    /// unless it is returned.
    pub async fn recv(&mut self) -> Result<Arc<T>, RecvError> {
        let shared = Arc::clone(&self.shared);
        loop {
            let notified = shared.notify.notified();
            tokio::pin!(notified);
            // Registered before looking, so a publish in between wakes it.
            notified.as_mut().enable();
            if let Some(got) = self.try_recv() {
                return got;
            }
            notified.await;
        }
    }

    /// The next entry if there is one.
    pub fn try_recv(&mut self) -> Option<Result<Arc<T>, RecvError>> {
        let mut state = lock(&self.shared.state);
        if self.next < state.head {
            return Some(Err(RecvError::Lagged));
        }
        let at = usize::try_from(self.next - state.head).unwrap_or(usize::MAX);
        if let Some((value, _)) = state.entries.get(at) {
            let value = Arc::clone(value);
            state.leave(self.next);
            self.next += 1;
            *state.cursors.entry(self.next).or_default() += 1;
            state.trim();
            return Some(Ok(value));
        }
        state.closed.then_some(Err(RecvError::Closed))
    }
}

impl<T> Drop for BusReceiver<T> {
    fn drop(&mut self) {
        let mut state = lock(&self.shared.state);
        if self.next >= state.head {
            state.leave(self.next);
            state.trim();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(got: Option<Result<Arc<u32>, RecvError>>) -> Option<Result<u32, RecvError>> {
        got.map(|r| r.map(|v| *v))
    }

    #[test]
    fn every_receiver_reads_everything_in_order_and_read_entries_go() {
        let ring = Ring::new(10, 1000);
        let mut a = ring.subscribe();
        let mut b = ring.subscribe();
        for k in 0..3 {
            ring.publish(k, 10);
        }
        assert_eq!(ring.held(), (3, 30));
        for k in 0..3 {
            assert_eq!(value(a.try_recv()), Some(Ok(k)));
        }
        assert_eq!(value(a.try_recv()), None);
        assert_eq!(ring.held(), (3, 30), "b has read nothing yet");
        assert_eq!(value(b.try_recv()), Some(Ok(0)));
        assert_eq!(ring.held(), (2, 20));
        drop(b);
        assert_eq!(ring.held(), (0, 0));
    }

    #[test]
    fn nothing_is_kept_without_receivers() {
        let ring = Ring::new(10, 1000);
        ring.publish(1, 10);
        assert_eq!(ring.held(), (0, 0));
        let mut late = ring.subscribe();
        ring.publish(2, 10);
        assert_eq!(value(late.try_recv()), Some(Ok(2)));
    }

    #[test]
    fn a_receiver_too_far_behind_in_bytes_is_cut_off_and_holds_nothing() {
        let ring = Ring::new(1000, 100);
        let mut slow = ring.subscribe();
        let mut quick = ring.subscribe();
        for k in 0..5 {
            ring.publish(k, 30);
            assert_eq!(value(quick.try_recv()), Some(Ok(k)));
        }
        // 150 bytes were published; `slow` read none: it was cut off when
        // the fourth went past 100, and nothing is kept for it.
        assert_eq!(ring.held(), (0, 0));
        assert_eq!(ring.receiver_count(), 1);
        assert_eq!(value(slow.try_recv()), Some(Err(RecvError::Lagged)));
        assert_eq!(value(slow.try_recv()), Some(Err(RecvError::Lagged)));
        drop(slow);
        ring.publish(9, 30);
        assert_eq!(value(quick.try_recv()), Some(Ok(9)));
    }

    #[test]
    fn a_receiver_too_far_behind_in_entries_is_cut_off() {
        let ring = Ring::new(2, usize::MAX);
        let mut slow = ring.subscribe();
        for k in 0..2 {
            ring.publish(k, 1);
        }
        assert_eq!(value(slow.try_recv()), Some(Ok(0)));
        ring.publish(2, 1);
        ring.publish(3, 1);
        assert_eq!(value(slow.try_recv()), Some(Err(RecvError::Lagged)));
        assert_eq!(ring.held(), (0, 0));
    }

    #[test]
    fn an_entry_over_the_byte_bound_is_kept_alone() {
        let ring = Ring::new(10, 100);
        let mut r = ring.subscribe();
        ring.publish(1, 500);
        assert_eq!(ring.held(), (1, 500));
        assert_eq!(value(r.try_recv()), Some(Ok(1)));
        assert_eq!(ring.held(), (0, 0));
    }

    #[tokio::test]
    async fn recv_waits_for_a_publish_and_ends_when_the_ring_goes() {
        let ring = Ring::new(10, 100);
        let mut r = ring.subscribe();
        let waiting = tokio::spawn(async move {
            let first = r.recv().await.map(|v| *v);
            let second = r.recv().await.map(|v| *v);
            (first, second)
        });
        tokio::task::yield_now().await;
        ring.publish(7_u32, 1);
        drop(ring);
        let got = waiting.await.ok();
        assert_eq!(got, Some((Ok(7), Err(RecvError::Closed))));
    }
}
