//! A lane's pauses and its circuit breaker (docs/lanes.md): a pause an
//! endpoint asked for, told to every engine, and the outcomes of calls
//! counted toward opening and closing the breaker.

use std::sync::Arc;
use std::time::Duration;

use tartan_core::lanes::BreakerState;
use tartan_store::{LaneOutcome, Notice};
use tokio::time::Instant;

use super::{Lane, State};

impl Lane {
    /// The endpoint asked for a pause (`Retry-After` on a 429 or 503, or a
    /// `rate_limited` class): no call of the lane starts until then, here
    /// at once and in every other engine as soon as it hears.
    pub(crate) fn pause_for(self: &Arc<Self>, wait: Duration, reason: String) {
        let until = Instant::now() + wait;
        let limits = {
            let mut st = self.lock();
            if st.own_pause.as_ref().is_some_and(|(u, _)| *u >= until) {
                return;
            }
            st.own_pause = Some((until, reason.clone()));
            st.limits_json.clone()
        };
        let lane = Arc::clone(self);
        tokio::spawn(async move {
            let us = i64::try_from(wait.as_micros()).unwrap_or(i64::MAX);
            match lane
                .shared
                .store
                .lane_pause(&lane.id, &limits, Some(us), &reason)
                .await
            {
                Ok(()) => lane.shared.outbox.announce(Notice::Lane { id: lane.id.clone() }),
                Err(e) => tracing::warn!(lane = %lane.id, "lane: recording the pause failed: {e}"),
            }
        });
    }

    /// How a call through the lane ended, for its breaker: `Some(true)` a
    /// success, `Some(false)` a retryable failure, `None` neither (a
    /// permanent failure says nothing of the endpoint's health).
    pub(super) async fn outcome(self: Arc<Self>, succeeded: Option<bool>, canary: bool) {
        let outcome = {
            let mut st = self.lock();
            let Some(policy) = st.limits.breaker else {
                return;
            };
            match succeeded {
                Some(true) if st.failures_seen || canary || st.breaker != BreakerState::Closed => {
                    st.failures_seen = false;
                    LaneOutcome::Succeeded
                }
                Some(true) => return,
                Some(false) => {
                    st.failures_seen = true;
                    LaneOutcome::Failed {
                        failures: policy.failures,
                        cool_down_us: i64::try_from(policy.cool_down_ms.saturating_mul(1_000))
                            .unwrap_or(i64::MAX),
                    }
                }
                None if canary => LaneOutcome::CanaryLost,
                None => return,
            }
        };
        self.record(outcome).await;
    }

    /// Record an outcome in the background (a permit dropped).
    pub(super) fn report(self: &Arc<Self>, outcome: LaneOutcome) {
        let lane = Arc::clone(self);
        tokio::spawn(async move { lane.record(outcome).await });
    }

    /// Record an outcome in the database; a change of the breaker is told
    /// to the other engines.
    async fn record(self: Arc<Self>, outcome: LaneOutcome) {
        let lane = self;
        {
            let limits = lane.lock().limits_json.clone();
            match lane.shared.store.lane_outcome(&lane.id, &limits, outcome).await {
                Ok(state) => {
                    let changed = {
                        let mut st = lane.lock();
                        let changed = st.breaker != state;
                        st.breaker = state;
                        if let (BreakerState::Open, LaneOutcome::Failed { cool_down_us, .. }) =
                            (state, outcome)
                        {
                            if changed {
                                st.breaker_until =
                                    Some(Instant::now() + Duration::from_micros(cool_down_us.unsigned_abs()));
                            }
                        }
                        if state != BreakerState::HalfOpen {
                            st.canary_next = false;
                        }
                        changed
                    };
                    if changed {
                        tracing::warn!(lane = %lane.id, breaker = state.as_str(), "lane: the circuit breaker changed");
                        lane.shared.outbox.announce(Notice::Lane { id: lane.id.clone() });
                    }
                    if changed || outcome == LaneOutcome::CanaryLost {
                        lane.look_again();
                    }
                }
                Err(e) => tracing::warn!(lane = %lane.id, "lane: recording the breaker's count failed: {e}"),
            }
        }
    }
}

/// The lane's pause: the later of the database's and this process's own.
pub(super) fn pause(st: &State) -> (Option<Instant>, Option<String>) {
    let own = st.own_pause.as_ref().filter(|(u, _)| *u > Instant::now());
    match (st.paused_until, own) {
        (Some(db), Some((mine, reason))) if *mine > db => (Some(*mine), Some(reason.clone())),
        (Some(db), _) => (Some(db), st.pause_reason.clone()),
        (None, Some((mine, reason))) => (Some(*mine), Some(reason.clone())),
        (None, None) => (None, None),
    }
}
