//! The engine's clock: where it reads the time of a decision and waits for
//! what is due (retries, inactivity windows, flow deadlines, attempt
//! timeouts). The system clock in production; a paused clock in tests,
//! which stands still until the test moves it, so that an hour of backoff
//! takes no time and every recorded delay is exact (docs/architecture.md,
//! "Time").
//!
//! Leases are not on this clock: they are set and compared on the
//! database's, which every process shares. Tokio's own paused time cannot
//! serve here: it jumps ahead whenever the runtime waits, and a test's
//! steps are real servers on sockets, so calls would time out while their
//! answer is on the wire.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use tokio::sync::watch;

/// Cheap to clone; the engine's configuration carries it.
#[derive(Clone, Default)]
pub struct Clock {
    /// The time of a paused clock, and what wakes its sleepers; `None`:
    /// the system clock.
    paused: Option<Arc<watch::Sender<DateTime<Utc>>>>,
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.paused {
            None => f.write_str("Clock::system"),
            Some(now) => write!(f, "Clock::paused({})", *now.borrow()),
        }
    }
}

/// An attempt, or anything else bounded on the clock, ran out of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl Clock {
    /// The system's wall clock, and tokio's timers to wait on it.
    pub fn system() -> Clock {
        Clock::default()
    }

    /// A clock that shows `start` until `advance` moves it.
    pub fn paused_at(start: DateTime<Utc>) -> Clock {
        Clock {
            paused: Some(Arc::new(watch::Sender::new(start.trunc_subsecs(6)))),
        }
    }

    /// The time now, to the microsecond the database keeps.
    pub fn now(&self) -> DateTime<Utc> {
        match &self.paused {
            None => Utc::now().trunc_subsecs(6),
            Some(now) => *now.borrow(),
        }
    }

    /// Move a paused clock on by `by`, waking what falls due; `false` for
    /// the system clock, which nobody moves.
    pub fn advance(&self, by: Duration) -> bool {
        let Some(now) = &self.paused else {
            return false;
        };
        let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        now.send_modify(|t| *t = t.checked_add_signed(by).unwrap_or(DateTime::<Utc>::MAX_UTC));
        true
    }

    /// Wait until the clock shows `at` (at once when it is past).
    pub async fn sleep_until(&self, at: DateTime<Utc>) {
        match &self.paused {
            None => {
                let left = (at - Utc::now()).to_std().unwrap_or(Duration::ZERO);
                tokio::time::sleep(left).await;
            }
            Some(now) => {
                let mut moved = now.subscribe();
                while *moved.borrow_and_update() < at {
                    if moved.changed().await.is_err() {
                        // The clock is gone with its engine: never due.
                        std::future::pending::<()>().await;
                    }
                }
            }
        }
    }

    /// `work`, unless `limit` passes on this clock first.
    pub async fn timeout<F: std::future::Future>(
        &self,
        limit: Duration,
        work: F,
    ) -> Result<F::Output, Elapsed> {
        match &self.paused {
            None => tokio::time::timeout(limit, work).await.map_err(|_| Elapsed),
            Some(_) => {
                let at = self
                    .now()
                    .checked_add_signed(chrono::Duration::from_std(limit).unwrap_or(chrono::Duration::MAX))
                    .unwrap_or(DateTime::<Utc>::MAX_UTC);
                tokio::select! {
                    out = work => Ok(out),
                    () = self.sleep_until(at) => Err(Elapsed),
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_paused_clock_stands_still_until_moved() {
        let start = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .to_utc();
        let clock = Clock::paused_at(start);
        assert_eq!(clock.now(), start);
        let due = start + chrono::Duration::hours(1);
        let sleeper = tokio::spawn({
            let clock = clock.clone();
            async move { clock.sleep_until(due).await }
        });
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished());
        assert!(clock.advance(Duration::from_secs(1800)));
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished());
        clock.advance(Duration::from_secs(1800));
        sleeper.await.unwrap();
        assert_eq!(clock.now(), due);
    }

    #[tokio::test]
    async fn a_timeout_on_a_paused_clock_ends_when_the_clock_passes_it() {
        let clock = Clock::paused_at(Utc::now());
        let never = std::future::pending::<()>();
        let bounded = tokio::spawn({
            let clock = clock.clone();
            async move { clock.timeout(Duration::from_secs(600), never).await }
        });
        tokio::task::yield_now().await;
        clock.advance(Duration::from_secs(600));
        assert_eq!(bounded.await.unwrap(), Err(Elapsed));
        assert_eq!(clock.timeout(Duration::from_secs(1), async { 7 }).await, Ok(7));
    }

    #[test]
    fn the_system_clock_is_not_moved() {
        assert!(!Clock::system().advance(Duration::from_secs(1)));
    }
}
