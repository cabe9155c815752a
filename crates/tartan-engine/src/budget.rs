//! The process's budget for response bodies in flight
//! (`TARTAN_MAX_INFLIGHT_BYTES`, docs/durability.md, "Bytes in flight").
//!
//! Every call's response body takes its size from the budget before it is
//! read, and gives it back once its result is recorded: the bytes of
//! outputs being read, parsed, decided on and committed at once are bounded,
//! however many calls answer together. A body whose size is announced
//! (Content-Length) takes that; one that is not takes the most a body may
//! be (`TARTAN_MAX_RESPONSE_BYTES`) and gives back what it did not use once
//! read. A call that finds the budget spent waits (its attempt timeout still
//! runs): calls are held back rather than the process growing. Each body
//! takes its whole share at once, so two bodies can never each hold part of
//! what both need and wait for each other.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget is counted in KiB: a semaphore takes at most `u32` permits
/// at once.
const UNIT: usize = 1024;

pub(crate) struct ResponseBudget {
    units: Arc<Semaphore>,
    /// The whole budget, in units: what one body takes at most (a body
    /// larger than the budget waits for all of it).
    total: u32,
}

/// Bytes held of the budget, given back when dropped.
#[derive(Debug)]
pub(crate) struct Held(OwnedSemaphorePermit);

impl ResponseBudget {
    pub(crate) fn new(bytes: usize) -> Self {
        let total = u32::try_from(units(bytes)).unwrap_or(u32::MAX).max(1);
        Self {
            units: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }

    /// Take `bytes` of the budget, waiting until they are free. (`None`
    /// only were the budget closed, which it never is: then nothing waits.)
    pub(crate) async fn take(&self, bytes: usize) -> Option<Held> {
        let want = u32::try_from(units(bytes))
            .unwrap_or(u32::MAX)
            .clamp(1, self.total);
        Arc::clone(&self.units)
            .acquire_many_owned(want)
            .await
            .ok()
            .map(Held)
    }

    /// Bytes of the budget held now.
    pub(crate) fn held_bytes(&self) -> usize {
        (self.total as usize)
            .saturating_sub(self.units.available_permits())
            .saturating_mul(UNIT)
    }

    /// Bytes of the budget free now.
    #[cfg(test)]
    fn free_bytes(&self) -> usize {
        self.units.available_permits().saturating_mul(UNIT)
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
        let budget = ResponseBudget::new(100 * UNIT);
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
        let budget = ResponseBudget::new(10 * UNIT);
        let all = budget.take(1 << 30).await.unwrap();
        assert_eq!(budget.free_bytes(), 0);
        drop(all);
        let small = budget.take(0).await.unwrap();
        assert_eq!(budget.free_bytes(), 9 * UNIT, "even an empty body takes a unit");
        drop(small);
    }
}
