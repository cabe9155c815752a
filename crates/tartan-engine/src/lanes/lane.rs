//! One lane in this process (docs/lanes.md): its calls running, the slots
//! and start times it holds from the database, and the calls waiting for
//! one, served fairly across flows. A call is admitted from memory while
//! what this process holds covers it; only when it does not does the lane
//! ask the database (`LaneStore::lane_take`), once for every call waiting.
//!
//! One small mutex guards the state; it is never held across an await.
//! The database is asked by one task at a time per lane.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tartan_core::lanes::{BreakerState, LaneLimits};
use tartan_store::{LaneGrant, LaneOutcome, LaneTake, Notice};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::queue::FairQueue;
use super::Shared;

/// How far ahead start times on a lane's rate are reserved.
const HORIZON: Duration = Duration::from_secs(1);
/// A reserved start time not used within this long is dropped: a call sent
/// late would bunch up with the next.
const STALE: Duration = Duration::from_millis(100);
/// How long slots no call waits for are kept before they are given back:
/// a steady trickle of calls takes them from memory.
const HOLD_IDLE: Duration = Duration::from_secs(1);
/// While calls wait, the lane is looked at again at least this often (a
/// lost notice, an engine killed while holding slots).
const LOOK_AGAIN: Duration = Duration::from_secs(1);
/// After a failed exchange with the database.
const AFTER_ERROR: Duration = Duration::from_millis(500);

pub(crate) struct Lane {
    pub(crate) id: String,
    pub(crate) limits: LaneLimits,
    limits_json: String,
    shared: Arc<Shared>,
    state: Mutex<State>,
}

/// A call waiting in the lane.
struct Waiter {
    tx: oneshot::Sender<Permit>,
}

struct State {
    /// Calls of this process holding a permit.
    running: u32,
    /// Slots held in the database (lanes with a concurrency limit).
    held: u32,
    /// Start times reserved on the rate, in order.
    starts: VecDeque<Instant>,
    queue: FairQueue<Waiter>,
    /// When the first of the calls waiting now started to wait.
    waiting_since: Option<Instant>,
    paused_until: Option<Instant>,
    pause_reason: Option<String>,
    breaker: BreakerState,
    breaker_until: Option<Instant>,
    /// The database made this process's next call the breaker's canary.
    canary_next: bool,
    /// Failures were seen since the last success: a success resets them.
    failures_seen: bool,
    /// A `lane_take` is under way.
    asking: bool,
    /// Not before this unless something changed (a release, a notice).
    ask_after: Option<Instant>,
    /// Another engine wants more slots than it holds.
    contended: bool,
    sharers: u32,
    /// The earliest wake-up scheduled.
    wake_at: Option<Instant>,
    trim_scheduled: bool,
}

/// A call's right to go through the lane; given back when dropped.
pub(crate) struct Permit {
    lane: Arc<Lane>,
    canary: bool,
    armed: bool,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.armed {
            self.lane.release();
        }
    }
}

impl Permit {
    pub(crate) fn lane(&self) -> &Arc<Lane> {
        &self.lane
    }

    /// The breaker's canary: its outcome opens or closes it.
    pub(crate) fn is_canary(&self) -> bool {
        self.canary
    }
}

/// The lane was full: the call is left to its lease.
pub(crate) struct Full;

/// What the work view and `GET /engine/lanes` show of the lane here.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LocalLane {
    pub running: u32,
    pub waiting: usize,
    pub held: u32,
    pub waiting_since: Option<Duration>,
    pub paused_for: Option<Duration>,
    pub pause_reason: Option<String>,
    pub breaker: BreakerState,
}

fn at(base: Instant, grant_now: i64, t: i64) -> Instant {
    let ahead = t.saturating_sub(grant_now).clamp(0, 86_400_000_000);
    base + Duration::from_micros(u64::try_from(ahead).unwrap_or(0))
}

impl Lane {
    pub(super) fn new(id: String, limits: LaneLimits, shared: Arc<Shared>) -> Lane {
        Lane {
            limits_json: limits.to_json().to_string(),
            id,
            limits,
            shared,
            state: Mutex::new(State {
                running: 0,
                held: 0,
                starts: VecDeque::new(),
                queue: FairQueue::default(),
                waiting_since: None,
                paused_until: None,
                pause_reason: None,
                breaker: BreakerState::Closed,
                breaker_until: None,
                canary_next: false,
                failures_seen: false,
                asking: false,
                ask_after: None,
                contended: false,
                sharers: 1,
                wake_at: None,
                trim_scheduled: false,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        crate::sync::lock(&self.state)
    }

    /// Wait in the lane: the permit comes when the call may be sent.
    /// `Err(Full)` when the lane's queue is at its bound.
    pub(crate) fn enter(self: &Arc<Self>, flow_id: &str) -> Result<oneshot::Receiver<Permit>, Full> {
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.lock();
            if st.queue.len() >= self.shared.max_waiting {
                return Err(Full);
            }
            st.waiting_since.get_or_insert_with(Instant::now);
            st.queue.push(flow_id, Waiter { tx });
        }
        self.pump();
        Ok(rx)
    }

    /// The lane as this process sees it.
    pub(crate) fn local(&self) -> LocalLane {
        let st = self.lock();
        let now = Instant::now();
        LocalLane {
            running: st.running,
            waiting: st.queue.len(),
            held: st.held,
            waiting_since: st.waiting_since.map(|s| now.saturating_duration_since(s)),
            paused_for: st.paused_until.filter(|u| *u > now).map(|u| u - now),
            pause_reason: st.pause_reason.clone(),
            breaker: st.breaker,
        }
    }

    /// Admit what the state allows, from memory; ask the database when more
    /// is needed; schedule a wake-up for what comes later.
    pub(crate) fn pump(self: &Arc<Self>) {
        let mut st = self.lock();
        let now = Instant::now();
        while st.starts.front().is_some_and(|t| *t + STALE < now) {
            st.starts.pop_front();
        }
        let mut need_ask = false;
        while !st.queue.is_empty() {
            if let Some(until) = st.paused_until {
                if until > now {
                    self.wake(&mut st, until);
                    break;
                }
                st.paused_until = None;
                st.pause_reason = None;
            }
            let canary = match st.breaker {
                BreakerState::Closed => false,
                _ if st.canary_next => true,
                _ => {
                    match st.breaker_until.filter(|u| *u > now) {
                        Some(until) => self.wake(&mut st, until),
                        None => need_ask = true,
                    }
                    break;
                }
            };
            if let Some(limit) = self.limits.concurrency {
                if st.running >= st.held {
                    need_ask |= st.held < limit;
                    break;
                }
            }
            let mut start = None;
            if self.limits.rate.is_some() {
                match st.starts.front().copied() {
                    Some(t) if t <= now => start = st.starts.pop_front(),
                    Some(t) => {
                        self.wake(&mut st, t);
                        break;
                    }
                    None => {
                        need_ask = true;
                        break;
                    }
                }
            }
            let Some((_, waiter)) = st.queue.pop() else {
                break;
            };
            st.running += 1;
            if canary {
                st.canary_next = false;
            }
            let permit = Permit {
                lane: Arc::clone(self),
                canary,
                armed: true,
            };
            if let Err(mut permit) = waiter.tx.send(permit) {
                // The call went away while it waited: what it was given goes
                // to the next.
                permit.armed = false;
                st.running -= 1;
                st.canary_next |= canary;
                if let Some(t) = start {
                    st.starts.push_front(t);
                }
            }
        }
        if st.queue.is_empty() {
            st.waiting_since = None;
        }
        let may_ask = st.ask_after.is_none_or(|t| t <= now);
        if need_ask && !st.asking && may_ask {
            st.asking = true;
            drop(st);
            let lane = Arc::clone(self);
            tokio::spawn(async move { lane.ask().await });
        }
    }

    /// Look at the lane again soon: something changed (a notice).
    pub(crate) fn look_again(self: &Arc<Self>) {
        {
            let mut st = self.lock();
            st.ask_after = None;
            if st.asking {
                return;
            }
            st.asking = true;
        }
        let lane = Arc::clone(self);
        tokio::spawn(async move { lane.ask().await });
    }

    /// Wake the lane at `when` unless an earlier wake-up is set.
    fn wake(self: &Arc<Self>, st: &mut State, when: Instant) {
        if st.wake_at.is_some_and(|w| w <= when && w > Instant::now()) {
            return;
        }
        st.wake_at = Some(when);
        let lane = Arc::clone(self);
        let stopping = self.shared.stopping.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep_until(when) => {}
                _ = stopping.cancelled() => return,
            }
            {
                let mut st = lane.lock();
                if st.wake_at == Some(when) {
                    st.wake_at = None;
                }
                st.ask_after = st.ask_after.filter(|t| *t > when);
            }
            lane.pump();
        });
    }

    /// The slots this process would hold: its calls running and waiting,
    /// at most the limit, at most a fair share while others want more.
    fn hold_target(&self, st: &State) -> u32 {
        let Some(limit) = self.limits.concurrency else {
            return 0;
        };
        let want = st
            .running
            .saturating_add(u32::try_from(st.queue.len()).unwrap_or(u32::MAX))
            .min(limit);
        if st.contended {
            want.min(limit.div_ceil(st.sharers.max(1)).max(st.running.min(want)))
        } else {
            want
        }
    }

    /// One exchange with the database: hold what the calls here need, take
    /// start times for those waiting, and learn the pause and the breaker.
    async fn ask(self: Arc<Self>) {
        let take = {
            let st = self.lock();
            let waiting = u32::try_from(st.queue.len()).unwrap_or(u32::MAX);
            let reserved = u32::try_from(st.starts.len()).unwrap_or(u32::MAX);
            LaneTake {
                lane_id: self.id.clone(),
                node: self.shared.node.clone(),
                limits: self.limits_json.clone(),
                concurrency: self.limits.concurrency,
                hold: self.hold_target(&st),
                running: st.running,
                rate: self.limits.rate.map(|r| (r.interval_us(), self.limits.burst)),
                starts: waiting.saturating_sub(reserved),
                horizon_us: i64::try_from(HORIZON.as_micros()).unwrap_or(i64::MAX),
                lease_us: self.shared.lease_us,
                breaker: self.limits.breaker.is_some(),
            }
        };
        let answer = self.shared.store.lane_take(&take).await;
        let base = Instant::now();
        let gave_back = {
            let mut st = self.lock();
            st.asking = false;
            match answer {
                Ok(grant) => {
                    let before = st.held;
                    self.apply(&mut st, &grant, base);
                    // Given all it asked for: the next need asks at once.
                    // Short of it (the lane is saturated, paused or its
                    // breaker open): not before something may have changed.
                    let satisfied = grant.held >= take.hold
                        && grant.starts.len() >= take.starts as usize
                        && grant.paused_until_us.is_none()
                        && (grant.breaker == BreakerState::Closed || grant.canary);
                    st.ask_after = None;
                    if !satisfied && !st.queue.is_empty() {
                        let next = [grant.next_free_us, grant.next_start_us]
                            .into_iter()
                            .flatten()
                            .map(|t| at(base, grant.now_us, t))
                            .chain(st.paused_until)
                            .chain(st.breaker_until.filter(|_| st.breaker == BreakerState::Open))
                            .fold(base + LOOK_AGAIN, Instant::min);
                        st.ask_after = Some(next);
                        self.wake(&mut st, next);
                    }
                    st.held < before
                }
                Err(e) => {
                    tracing::warn!(lane = %self.id, "lane: the database did not answer: {e}");
                    if !st.queue.is_empty() {
                        st.ask_after = Some(base + AFTER_ERROR);
                        self.wake(&mut st, base + AFTER_ERROR);
                    }
                    false
                }
            }
        };
        if gave_back {
            self.shared.outbox.announce(Notice::Lane { id: self.id.clone() });
        }
        self.pump();
    }

    fn apply(&self, st: &mut State, grant: &LaneGrant, base: Instant) {
        let delta = i64::from(grant.held) - i64::from(st.held);
        self.shared
            .held
            .fetch_add(delta, std::sync::atomic::Ordering::Relaxed);
        st.held = grant.held;
        if grant.held > 0 {
            self.shared.holding.notify_one();
        }
        st.contended = grant.contended;
        st.sharers = grant.sharers;
        st.starts
            .extend(grant.starts.iter().map(|t| at(base, grant.now_us, *t)));
        st.paused_until = grant.paused_until_us.map(|t| at(base, grant.now_us, t));
        if st.paused_until.is_none() {
            st.pause_reason = None;
        }
        st.breaker = grant.breaker;
        st.breaker_until = grant.breaker_until_us.map(|t| at(base, grant.now_us, t));
        st.canary_next |= grant.canary;
    }

    /// A permit came back.
    fn release(self: &Arc<Self>) {
        let ask = {
            let mut st = self.lock();
            st.running = st.running.saturating_sub(1);
            st.ask_after = None;
            let over_share = st.contended && st.held > self.hold_target(&st);
            if st.queue.is_empty() && st.held > st.running && !st.trim_scheduled {
                st.trim_scheduled = true;
                let lane = Arc::clone(self);
                let stopping = self.shared.stopping.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = tokio::time::sleep(HOLD_IDLE) => {}
                        _ = stopping.cancelled() => return,
                    }
                    lane.trim();
                });
            }
            over_share && !st.asking
        };
        if ask {
            self.look_again();
        } else {
            self.pump();
        }
    }

    /// Give back the slots no call has used for a while.
    fn trim(self: &Arc<Self>) {
        let give_back = {
            let mut st = self.lock();
            st.trim_scheduled = false;
            st.queue.is_empty() && st.held > st.running && !st.asking
        };
        if give_back {
            self.look_again();
        }
    }

    /// The endpoint asked for a pause (`Retry-After` on a 429 or 503, or a
    /// `rate_limited` class): no call of the lane starts until then, here
    /// at once and in every other engine as soon as it hears.
    pub(crate) fn pause_for(self: &Arc<Self>, wait: Duration, reason: String) {
        let until = Instant::now() + wait;
        {
            let mut st = self.lock();
            if st.paused_until.is_some_and(|u| u >= until) {
                return;
            }
            st.paused_until = Some(until);
            st.pause_reason = Some(reason.clone());
        }
        let lane = Arc::clone(self);
        tokio::spawn(async move {
            let us = i64::try_from(wait.as_micros()).unwrap_or(i64::MAX);
            match lane.shared.store.lane_pause(&lane.id, Some(us), &reason).await {
                Ok(_) => lane.shared.outbox.announce(Notice::Lane { id: lane.id.clone() }),
                Err(e) => tracing::warn!(lane = %lane.id, "lane: recording the pause failed: {e}"),
            }
        });
    }

    /// How a call through the lane ended, for its breaker: `Some(true)` a
    /// success, `Some(false)` a retryable failure, `None` neither (a
    /// permanent failure says nothing of the endpoint's health).
    pub(crate) fn outcome(self: &Arc<Self>, succeeded: Option<bool>, canary: bool) {
        let Some(policy) = self.limits.breaker else {
            return;
        };
        let Some(succeeded) = succeeded else {
            return;
        };
        let outcome = {
            let mut st = self.lock();
            if succeeded {
                if !st.failures_seen && !canary && st.breaker == BreakerState::Closed {
                    return;
                }
                st.failures_seen = false;
                LaneOutcome::Succeeded
            } else {
                st.failures_seen = true;
                LaneOutcome::Failed {
                    failures: policy.failures,
                    cool_down_us: i64::try_from(policy.cool_down_ms.saturating_mul(1_000))
                        .unwrap_or(i64::MAX),
                }
            }
        };
        let lane = Arc::clone(self);
        tokio::spawn(async move {
            match lane
                .shared
                .store
                .lane_outcome(&lane.id, &lane.limits_json, outcome)
                .await
            {
                Ok(state) => {
                    let changed = {
                        let mut st = lane.lock();
                        let changed = st.breaker != state;
                        st.breaker = state;
                        if state == BreakerState::Open {
                            st.breaker_until =
                                Some(Instant::now() + Duration::from_millis(policy.cool_down_ms));
                        }
                        changed
                    };
                    if changed {
                        tracing::warn!(lane = %lane.id, breaker = state.as_str(), "lane: the circuit breaker changed");
                        lane.shared.outbox.announce(Notice::Lane { id: lane.id.clone() });
                        lane.pump();
                    }
                }
                Err(e) => tracing::warn!(lane = %lane.id, "lane: recording the breaker's count failed: {e}"),
            }
        });
    }
}
