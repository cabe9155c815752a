//! The process's budget for bodies in flight, sent and received
//! (`TARTAN_MAX_INFLIGHT_BYTES`, docs/durability.md, "Bytes in flight").
//!
//! Every call's request body takes its size from the budget before it is
//! built, and gives it back once the response arrives (or the exchange
//! ends): the bodies being sent at once are bounded, however many calls a
//! for_each starts and however large the inputs they share. Every call's
//! response body takes its size from the budget before it is read, and
//! gives it back once its result is recorded: the bytes of outputs being
//! read, parsed, decided on and committed at once are bounded, however many
//! calls answer together. A response body whose size is announced
//! (Content-Length) takes that; one that is not takes the most a body may
//! be (`TARTAN_MAX_RESPONSE_BYTES`) and gives back what it did not use once
//! read. A call that finds the budget spent waits: calls are held back
//! rather than the process growing. Each body takes its whole share at
//! once, and a call gives its request's share back before its response
//! takes one, so no call holds part of what another needs while waiting for
//! more: nothing waits on itself or in a circle. A body larger than the
//! whole budget takes all of it, alone.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, SemaphorePermit, TryAcquireError};

/// The budget is counted in KiB: a semaphore takes at most `u32` permits
/// at once.
const UNIT: usize = 1024;

pub(crate) struct ByteBudget {
    units: Arc<Semaphore>,
    /// The whole budget, in units: what one body takes at most (a body
    /// larger than the budget waits for all of it).
    total: u32,
    /// Units held by request bodies, told apart from responses' for
    /// `/metrics`.
    sending: AtomicUsize,
    /// Where request bodies that do not fit wait, one of them at a time
    /// on `units`: a response waits on `units` directly, so it is behind
    /// at most one request, not every call a for_each started (its wait is
    /// part of its attempt; theirs is not).
    door: tokio::sync::Mutex<()>,
}

/// Bytes of a response held of the budget, given back when dropped.
#[derive(Debug)]
pub(crate) struct Held(OwnedSemaphorePermit);

/// Bytes of a request body held of the budget, given back when dropped.
#[derive(Debug)]
pub(crate) struct Sending<'a> {
    permit: SemaphorePermit<'a>,
    sending: &'a AtomicUsize,
}

impl ByteBudget {
    pub(crate) fn new(bytes: usize) -> Self {
        let total = u32::try_from(units(bytes)).unwrap_or(u32::MAX).max(1);
        Self {
            units: Arc::new(Semaphore::new(total as usize)),
            total,
            sending: AtomicUsize::new(0),
            door: tokio::sync::Mutex::new(()),
        }
    }

    /// Units for `bytes`: at least one, at most the whole budget.
    fn want(&self, bytes: usize) -> u32 {
        u32::try_from(units(bytes))
            .unwrap_or(u32::MAX)
            .clamp(1, self.total)
    }

    /// Take `bytes` of the budget for a response, waiting until they are
    /// free. (`None` only were the budget closed, which it never is: then
    /// nothing waits.)
    pub(crate) async fn take(&self, bytes: usize) -> Option<Held> {
        Arc::clone(&self.units)
            .acquire_many_owned(self.want(bytes))
            .await
            .ok()
            .map(Held)
    }

    /// Take `bytes` of the budget for a request body, waiting until they
    /// are free. While they are, this is one compare-and-swap on the
    /// semaphore's count; waiters queue in order, so a large body is not
    /// passed over by smaller ones forever.
    pub(crate) async fn send(&self, bytes: usize) -> Option<Sending<'_>> {
        let want = self.want(bytes);
        let permit = match self.units.try_acquire_many(want) {
            Ok(permit) => permit,
            Err(TryAcquireError::Closed) => return None,
            Err(TryAcquireError::NoPermits) => {
                let _turn = self.door.lock().await;
                self.units.acquire_many(want).await.ok()?
            }
        };
        self.sending.fetch_add(want as usize, Ordering::Relaxed);
        Some(Sending {
            permit,
            sending: &self.sending,
        })
    }

    /// Bytes of the budget response bodies hold now.
    pub(crate) fn held_bytes(&self) -> usize {
        (self.total as usize)
            .saturating_sub(self.units.available_permits())
            .saturating_sub(self.sending.load(Ordering::Relaxed))
            .saturating_mul(UNIT)
    }

    /// Bytes of the budget request bodies hold now.
    pub(crate) fn sending_bytes(&self) -> usize {
        self.sending.load(Ordering::Relaxed).saturating_mul(UNIT)
    }

    /// Bytes of the budget free now.
    #[cfg(test)]
    fn free_bytes(&self) -> usize {
        self.units.available_permits().saturating_mul(UNIT)
    }
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        self.sending
            .fetch_sub(self.permit.num_permits(), Ordering::Relaxed);
    }
}

impl Held {
    /// Keep only `bytes` of what is held; give the rest back now.
    pub(crate) fn shrink_to(&mut self, bytes: usize) {
        let keep = units(bytes).max(1);
        let held = self.0.num_permits();
        if keep < held {
            drop(self.0.split(held - keep));
        }
    }
}

fn units(bytes: usize) -> usize {
    bytes.div_ceil(UNIT)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_body_waits_until_the_budget_has_room_and_unused_bytes_come_back() {
        let budget = ByteBudget::new(100 * UNIT);
        let mut first = budget.take(80 * UNIT).await.unwrap();
        assert_eq!(budget.free_bytes(), 20 * UNIT);
        // 30 KiB do not fit beside 80: the second waits.
        let waiting = tokio::time::timeout(Duration::from_millis(50), budget.take(30 * UNIT)).await;
        assert!(waiting.is_err(), "taken past the budget");
        first.shrink_to(10 * UNIT);
        assert_eq!(budget.free_bytes(), 90 * UNIT);
        let second = budget.take(30 * UNIT).await.unwrap();
        assert_eq!(budget.free_bytes(), 60 * UNIT);
        drop((first, second));
        assert_eq!(budget.free_bytes(), 100 * UNIT);
    }

    #[tokio::test]
    async fn a_body_larger_than_the_budget_takes_all_of_it_not_forever() {
        let budget = ByteBudget::new(10 * UNIT);
        let all = budget.take(1 << 30).await.unwrap();
        assert_eq!(budget.free_bytes(), 0);
        drop(all);
        let small = budget.take(0).await.unwrap();
        assert_eq!(budget.free_bytes(), 9 * UNIT, "even an empty body takes a unit");
        drop(small);
    }

    #[tokio::test]
    async fn request_bodies_share_the_budget_with_responses_and_wait_their_turn() {
        let budget = ByteBudget::new(100 * UNIT);
        let first = budget.send(60 * UNIT).await.unwrap();
        let answer = budget.take(30 * UNIT).await.unwrap();
        assert_eq!(budget.sending_bytes(), 60 * UNIT);
        assert_eq!(budget.held_bytes(), 30 * UNIT);
        // 20 KiB do not fit beside 90: the second body waits.
        let waiting = tokio::time::timeout(Duration::from_millis(50), budget.send(20 * UNIT)).await;
        assert!(waiting.is_err(), "sent past the budget");
        drop(first);
        assert_eq!(budget.sending_bytes(), 0);
        let second = budget.send(20 * UNIT).await.unwrap();
        assert_eq!(budget.free_bytes(), 50 * UNIT);
        // A body larger than the whole budget waits for all of it, then
        // goes alone.
        let huge = budget.send(1 << 30);
        tokio::pin!(huge);
        assert!(tokio::time::timeout(Duration::from_millis(50), &mut huge)
            .await
            .is_err());
        drop((answer, second));
        let huge = huge.await.unwrap();
        assert_eq!(budget.sending_bytes(), 100 * UNIT);
        assert_eq!(budget.held_bytes(), 0);
        drop(huge);
        assert_eq!(budget.free_bytes(), 100 * UNIT);
    }

    #[tokio::test]
    async fn a_response_waits_behind_one_request_at_most() {
        let budget = Arc::new(ByteBudget::new(100 * UNIT));
        let first = budget.send(60 * UNIT).await.unwrap();
        let started = Arc::new(AtomicUsize::new(0));
        for _ in 0..5 {
            let (budget, started) = (Arc::clone(&budget), Arc::clone(&started));
            tokio::spawn(async move {
                let held = budget.send(60 * UNIT).await;
                started.fetch_add(1, Ordering::SeqCst);
                // Its exchange, until its response arrives.
                tokio::time::sleep(Duration::from_millis(100)).await;
                drop(held);
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        // The first request's response arrives: its share goes back and
        // the response takes one. The requests behind get in one at a
        // time; the response is behind the first of them only.
        drop(first);
        let answer = budget.take(10 * UNIT).await.unwrap();
        let ahead = started.load(Ordering::SeqCst);
        assert!(ahead <= 2, "the response waited behind {ahead} requests");
        drop(answer);
    }
}
