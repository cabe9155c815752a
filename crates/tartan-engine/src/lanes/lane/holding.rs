//! What a lane holds from the database (docs/lanes.md): one exchange at a
//! time (`ask`) takes the slots and start times the calls here need and
//! learns the pause and the breaker; renewals keep the slots, and what no
//! call waits for goes back after a while (`schedule_trim`).

use std::sync::Arc;
use std::time::Duration;

use tartan_core::lanes::BreakerState;
use tartan_store::{LaneGrant, LaneTake, Notice};
use tokio::time::Instant;

use super::{Lane, State, LOOK_AGAIN};

/// How far ahead start times on a lane's rate are reserved.
const HORIZON: Duration = Duration::from_secs(1);
/// How long slots no call waits for are kept before they are given back:
/// a steady trickle of calls takes them from memory.
const HOLD_IDLE: Duration = Duration::from_secs(1);
/// After a failed exchange with the database.
const AFTER_ERROR: Duration = Duration::from_millis(500);

/// A time the database gave (its clock, in µs) as an instant here,
/// counted from `base`, when its answer came.
fn at(base: Instant, grant_now: i64, t: i64) -> Instant {
    let ahead = t.saturating_sub(grant_now).clamp(0, 86_400_000_000);
    base + Duration::from_micros(u64::try_from(ahead).unwrap_or(0))
}

/// Clears `asking` however the exchange ends (a panic included), so that
/// the lane asks again.
struct Asking<'a>(&'a Lane);

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        self.0.lock().asking = false;
    }
}

impl Lane {
    /// Give back, after a while, the slots beyond what the calls here
    /// would hold now (`hold_target`).
    pub(super) fn schedule_trim(self: &Arc<Self>, st: &mut State) {
        if !st.queue.is_empty() || st.held <= Self::hold_target(st) || st.trim_scheduled {
            return;
        }
        st.trim_scheduled = true;
        let lane = Arc::clone(self);
        let stopping = self.shared.stopping.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(HOLD_IDLE) => {}
                _ = stopping.cancelled() => return,
            }
            let give_back = {
                let mut st = lane.lock();
                st.trim_scheduled = false;
                st.queue.is_empty() && st.held > Self::hold_target(&st)
            };
            if give_back {
                lane.look_again();
            }
        });
    }

    /// The slots this process would hold: twice its calls running and
    /// waiting (at least 8 more), so that a load that grows or wobbles is
    /// admitted from memory; at most the limit; while others want more, at
    /// most a fair share (never fewer than it runs).
    pub(super) fn hold_target(st: &State) -> u32 {
        let Some(limit) = st.limits.concurrency else {
            return 0;
        };
        let want = st
            .running
            .saturating_add(u32::try_from(st.queue.len()).unwrap_or(u32::MAX));
        if want == 0 {
            return 0;
        }
        let ahead = want.saturating_mul(2).max(want.saturating_add(8)).min(limit);
        if st.contended {
            want.min(limit)
                .min(limit.div_ceil(st.sharers.max(1)).max(st.running))
        } else {
            ahead
        }
    }

    /// One exchange with the database: hold what the calls here need, take
    /// start times for those waiting, and learn the pause and the breaker.
    pub(super) async fn ask(self: Arc<Self>) {
        let asking = Asking(&self);
        let wanted_then;
        let take = {
            let mut st = self.lock();
            let waiting = u32::try_from(st.queue.len()).unwrap_or(u32::MAX);
            let reserved = u32::try_from(st.starts.len()).unwrap_or(u32::MAX);
            let hold = Self::hold_target(&st);
            // What the calls here needed when asking: an answer short of
            // it means the lane is saturated (or shared) and the next ask
            // waits; calls that came during the exchange do not count.
            wanted_then = match st.limits.concurrency {
                Some(limit) => st.running.saturating_add(waiting).min(limit),
                None => 0,
            };
            // What is given back is no longer handed out from memory while
            // the database hears of it.
            let held = st.held.min(hold.max(st.running));
            self.set_held(&mut st, held);
            LaneTake {
                lane_id: self.id.clone(),
                node: self.shared.node.clone(),
                limits: st.limits_json.clone(),
                concurrency: st.limits.concurrency,
                hold,
                running: st.running,
                waiting,
                rate: st.limits.rate.map(|r| (r.interval_us(), st.limits.burst)),
                // Start times only where there is a rate to reserve them on.
                starts: if st.limits.rate.is_some() {
                    waiting.saturating_sub(reserved)
                } else {
                    0
                },
                horizon_us: i64::try_from(HORIZON.as_micros()).unwrap_or(i64::MAX),
                lease_us: self.shared.lease_us,
                breaker: st.limits.breaker.is_some(),
            }
        };
        // The hold's lease runs from before the ask was sent: the database's
        // runs out after this process's view of it, never before.
        let sent = Instant::now();
        let answer = self.shared.store.lane_take(&take).await;
        let base = Instant::now();
        let mut over_share = false;
        // Slots given back, or too few: the other engines look again.
        let announce = {
            let mut st = self.lock();
            match answer {
                Ok(grant) => {
                    let before = st.held;
                    self.apply(&mut st, &grant, base, sent);
                    // Given all its calls need: the next need asks at once.
                    // Short of it (saturated, contended, paused, broken):
                    // not before something may have changed.
                    let satisfied = grant.held >= wanted_then
                        && grant.starts.len() >= take.starts as usize
                        && grant.paused_until_us.is_none()
                        && (grant.breaker == BreakerState::Closed || grant.canary);
                    st.ask_after = None;
                    if !satisfied && !st.queue.is_empty() {
                        let next = [grant.next_free_us, grant.next_start_us]
                            .into_iter()
                            .flatten()
                            .map(|t| at(base, grant.now_us, t))
                            .fold(base + LOOK_AGAIN, Instant::min);
                        st.ask_after = Some(next);
                        self.wake(&mut st, next);
                    }
                    // Short of slots others hold: they are told (at most
                    // once per ask, so once a second while this lasts), so
                    // that one holding slots ahead of its need gives back
                    // what is beyond its fair share.
                    let short = grant.held < wanted_then && !st.queue.is_empty();
                    // Others want slots: what this holds beyond its share
                    // goes back now, not at its next call's end.
                    over_share = st.contended && st.held > Self::hold_target(&st);
                    st.held < before || short
                }
                Err(e) => {
                    tracing::warn!(lane = %self.id, "lane: the database did not answer: {e}");
                    st.ask_after = Some(base + AFTER_ERROR);
                    if !st.queue.is_empty() {
                        self.wake(&mut st, base + AFTER_ERROR);
                    }
                    false
                }
            }
        };
        drop(asking);
        if announce {
            self.shared.outbox.announce(Notice::Lane { id: self.id.clone() });
        }
        if over_share {
            self.look_again();
        } else {
            self.pump();
        }
    }

    fn apply(&self, st: &mut State, grant: &LaneGrant, base: Instant, sent: Instant) {
        self.set_held(st, grant.held);
        st.held_until =
            (grant.held > 0).then(|| sent + Duration::from_micros(self.shared.lease_us.unsigned_abs()));
        if grant.held > 0 {
            self.shared.holding.notify_one();
        }
        st.contended = grant.contended;
        st.sharers = grant.sharers;
        st.starts
            .extend(grant.starts.iter().map(|t| at(base, grant.now_us, *t)));
        st.paused_until = grant.paused_until_us.map(|t| at(base, grant.now_us, t));
        st.pause_reason = grant.paused_reason.clone();
        st.breaker = grant.breaker;
        st.breaker_until = grant.breaker_until_us.map(|t| at(base, grant.now_us, t));
        // A canary granted and not yet used stays one only while the
        // breaker is still half open.
        st.canary_next = grant.canary || (st.canary_next && grant.breaker == BreakerState::HalfOpen);
        st.failures_seen = grant.failures > 0;
    }

    /// A renewal kept this process's slots until `until`, or found they
    /// had run out (`None`): then none is handed out until the next
    /// exchange takes them anew.
    pub(crate) fn renewed(self: &Arc<Self>, until: Option<Instant>) {
        let lapsed = {
            let mut st = self.lock();
            if st.held == 0 {
                return;
            }
            match until {
                Some(until) => {
                    st.held_until = Some(until);
                    false
                }
                None => {
                    let running = st.running;
                    self.set_held(&mut st, running);
                    st.held_until = None;
                    st.ask_after = None;
                    true
                }
            }
        };
        if lapsed {
            self.pump();
        }
    }

    /// Change the slots held here, keeping the process's total in step.
    pub(super) fn set_held(&self, st: &mut State, held: u32) {
        let delta = i64::from(held) - i64::from(st.held);
        self.shared
            .held
            .fetch_add(delta, std::sync::atomic::Ordering::Relaxed);
        st.held = held;
    }
}
