//! One lane in this process (docs/lanes.md): its calls running, the slots
//! and start times it holds from the database, and the calls waiting for
//! one, served fairly across flows. A call is admitted from memory while
//! what this process holds covers it; only when it does not does the lane
//! ask the database (`LaneStore::lane_take`), once for every call waiting.
//!
//! One small mutex guards the state; it is never held across an await.
//! The database is asked by one task at a time per lane. While calls wait,
//! the lane asks again at least every `LOOK_AGAIN`, and no more often
//! unless something changed (a slot freed here, a notice). Pauses and the
//! breaker are in `breaker`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tartan_core::lanes::{BreakerState, LaneLimits};
use tartan_store::{LaneGrant, LaneOutcome, LaneTake, Notice};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::queue::FairQueue;
use super::Shared;
use breaker::pause;

mod breaker;

/// How far ahead start times on a lane's rate are reserved.
const HORIZON: Duration = Duration::from_secs(1);
/// A reserved start time not used within this long is dropped: a call sent
/// late would bunch up with the next.
const STALE: Duration = Duration::from_millis(100);
/// How long slots no call waits for are kept before they are given back:
/// a steady trickle of calls takes them from memory.
const HOLD_IDLE: Duration = Duration::from_secs(1);
/// While calls wait, the lane is looked at again at least this often (a
/// lost notice, an engine killed while holding slots, a resume).
const LOOK_AGAIN: Duration = Duration::from_secs(1);
/// After a failed exchange with the database.
const AFTER_ERROR: Duration = Duration::from_millis(500);

pub(crate) struct Lane {
    pub(crate) id: String,
    shared: Arc<Shared>,
    state: Mutex<State>,
}

/// A call waiting in the lane.
struct Waiter {
    tx: oneshot::Sender<Permit>,
}

struct State {
    /// The limits as last declared (a step updated while flows of its old
    /// definition run may move them back and forth until those finish).
    limits: LaneLimits,
    limits_json: String,
    /// Calls of this process holding a permit.
    running: u32,
    /// Slots held in the database (lanes with a concurrency limit).
    held: u32,
    /// Until when those slots are this process's: the lease of its last
    /// exchange or renewal. Past it, nothing is admitted from memory.
    held_until: Option<Instant>,
    /// Start times reserved on the rate, in order.
    starts: VecDeque<Instant>,
    queue: FairQueue<Waiter>,
    /// When the first of the calls waiting now started to wait.
    waiting_since: Option<Instant>,
    /// The pause as the database last said.
    paused_until: Option<Instant>,
    pause_reason: Option<String>,
    /// A pause this process's own call was asked for: kept until it ends,
    /// whatever an answer read before it was recorded says.
    own_pause: Option<(Instant, String)>,
    breaker: BreakerState,
    breaker_until: Option<Instant>,
    /// The database made this process's next call the breaker's canary.
    canary_next: bool,
    /// The breaker counts failures now: a success resets them.
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
            self.lane.release(self.canary);
        }
    }
}

impl Permit {
    pub(crate) fn lane(&self) -> &Arc<Lane> {
        &self.lane
    }

    /// Report how the call ended to the lane's breaker, and give the
    /// permit back. Awaited before the call's result is recorded, so that a
    /// retry it schedules meets the breaker as this failure left it.
    pub(crate) async fn finish(mut self, succeeded: Option<bool>) {
        Arc::clone(&self.lane).outcome(succeeded, self.canary).await;
        // Reported: its drop need not say the canary went without one.
        self.canary = false;
    }
}

/// What the next call took to go: the canary's turn, a start time.
struct Taken {
    canary: bool,
    start: Option<Instant>,
}

/// Why the next call cannot go now.
enum Blocked {
    /// Only the database can say (slots, start times, pause, breaker).
    Ask,
    /// A wake-up is set for when it can.
    Later,
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

/// Clears `asking` however the exchange ends (a panic included), so that
/// the lane asks again.
struct Asking<'a>(&'a Lane);

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        self.0.lock().asking = false;
    }
}

impl Lane {
    pub(super) fn new(id: String, limits: LaneLimits, shared: Arc<Shared>) -> Lane {
        Lane {
            id,
            shared,
            state: Mutex::new(State {
                limits_json: limits.to_json().to_string(),
                limits,
                running: 0,
                held: 0,
                held_until: None,
                starts: VecDeque::new(),
                queue: FairQueue::default(),
                waiting_since: None,
                paused_until: None,
                pause_reason: None,
                own_pause: None,
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

    pub(crate) fn limits(&self) -> LaneLimits {
        self.lock().limits
    }

    /// The step's limits changed: the lane keeps its calls and slots.
    pub(super) fn set_limits(self: &Arc<Self>, limits: LaneLimits) {
        {
            let mut st = self.lock();
            if st.limits == limits {
                return;
            }
            st.limits_json = limits.to_json().to_string();
            st.limits = limits;
            st.ask_after = None;
        }
        self.pump();
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
        let (paused_until, reason) = pause(&st);
        LocalLane {
            running: st.running,
            waiting: st.queue.len(),
            held: st.held,
            waiting_since: st.waiting_since.map(|s| now.saturating_duration_since(s)),
            paused_for: paused_until.filter(|u| *u > now).map(|u| u - now),
            pause_reason: reason,
            breaker: st.breaker,
        }
    }

    /// Admit what the state allows, from memory; ask the database when more
    /// is needed; schedule a wake-up for what comes later.
    pub(crate) fn pump(self: &Arc<Self>) {
        let mut st = self.lock();
        let now = Instant::now();
        self.expire(&mut st, now);
        let mut need_ask = false;
        while !st.queue.is_empty() {
            let taken = match self.take_next(&mut st, now) {
                Ok(taken) => taken,
                Err(Blocked::Ask) => {
                    need_ask = true;
                    break;
                }
                Err(Blocked::Later) => break,
            };
            let Some((_, waiter)) = st.queue.pop() else {
                Self::untake(&mut st, taken);
                break;
            };
            let permit = Permit {
                lane: Arc::clone(self),
                canary: taken.canary,
                armed: true,
            };
            if let Err(mut permit) = waiter.tx.send(permit) {
                // The call went away while it waited: what it was given goes
                // to the next.
                permit.armed = false;
                Self::untake(&mut st, taken);
            }
        }
        if st.queue.is_empty() {
            st.waiting_since = None;
            need_ask = false;
        }
        self.schedule_trim(&mut st);
        if !need_ask || st.asking {
            return;
        }
        match st.ask_after.filter(|t| *t > now) {
            // Not yet: make sure something wakes the lane then.
            Some(after) => self.wake(&mut st, after),
            None => {
                st.asking = true;
                drop(st);
                let lane = Arc::clone(self);
                tokio::spawn(async move { lane.ask().await });
            }
        }
    }

    /// A call that may go at once, from what this process holds, without
    /// waiting or a task of its own: the way through an unsaturated lane.
    /// `None` when it must wait (`enter`): calls already waiting go first.
    pub(crate) fn try_admit(self: &Arc<Self>) -> Option<Permit> {
        let mut st = self.lock();
        if !st.queue.is_empty() {
            return None;
        }
        let now = Instant::now();
        self.expire(&mut st, now);
        let taken = self.take_next(&mut st, now).ok()?;
        Some(Permit {
            lane: Arc::clone(self),
            canary: taken.canary,
            armed: true,
        })
    }

    /// Drop what ran out: start times too late to use, and slots whose
    /// lease may have run out (not handed out again until renewed).
    fn expire(&self, st: &mut State, now: Instant) {
        while st.starts.front().is_some_and(|t| *t + STALE < now) {
            st.starts.pop_front();
        }
        if st.held_until.is_some_and(|until| until <= now) {
            let held = st.held.min(st.running);
            self.set_held(st, held);
        }
    }

    /// Take what the next call needs to go now (its canary's turn, a slot,
    /// a start time) from memory; or say why it cannot: the database must
    /// be asked, or a wake-up is set for when it can.
    fn take_next(self: &Arc<Self>, st: &mut State, now: Instant) -> Result<Taken, Blocked> {
        if let (Some(until), _) = pause(st) {
            if until > now {
                // Asked again meanwhile: a resume ends it early.
                self.wake(st, until.min(now + LOOK_AGAIN));
                return Err(Blocked::Ask);
            }
        }
        let canary = match st.breaker {
            BreakerState::Closed => false,
            _ if st.canary_next => true,
            _ => {
                if let Some(until) = st.breaker_until.filter(|u| *u > now) {
                    self.wake(st, until.min(now + LOOK_AGAIN));
                }
                return Err(Blocked::Ask);
            }
        };
        if st.limits.concurrency.is_some() && st.running >= st.held {
            // Asked even at the limit: the answer says whether others
            // wait, and so whether to give back beyond a fair share.
            return Err(Blocked::Ask);
        }
        let mut start = None;
        if st.limits.rate.is_some() {
            match st.starts.front().copied() {
                Some(t) if t <= now => start = st.starts.pop_front(),
                Some(t) => {
                    self.wake(st, t);
                    return Err(Blocked::Later);
                }
                None => return Err(Blocked::Ask),
            }
        }
        st.running += 1;
        if canary {
            st.canary_next = false;
        }
        Ok(Taken { canary, start })
    }

    /// Give back what `take_next` took for a call that did not go.
    fn untake(st: &mut State, taken: Taken) {
        st.running -= 1;
        st.canary_next |= taken.canary;
        if let Some(t) = taken.start {
            st.starts.push_front(t);
        }
    }

    /// Look at the lane again now: something changed (a notice, a trim, a
    /// share to give back).
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
            }
            lane.pump();
        });
    }

    /// Give back, after a while, the slots beyond what the calls here
    /// would hold now (`hold_target`).
    fn schedule_trim(self: &Arc<Self>, st: &mut State) {
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
    fn hold_target(st: &State) -> u32 {
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
    async fn ask(self: Arc<Self>) {
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
    fn set_held(&self, st: &mut State, held: u32) {
        let delta = i64::from(held) - i64::from(st.held);
        self.shared
            .held
            .fetch_add(delta, std::sync::atomic::Ordering::Relaxed);
        st.held = held;
    }

    /// A permit came back.
    fn release(self: &Arc<Self>, canary_unreported: bool) {
        let over_share = {
            let mut st = self.lock();
            st.running = st.running.saturating_sub(1);
            st.ask_after = None;
            st.contended && st.held > Self::hold_target(&st)
        };
        if canary_unreported {
            // The canary ended without saying anything of the endpoint (it
            // was cancelled, or answered from the memo): another is chosen.
            self.report(LaneOutcome::CanaryLost);
        }
        if over_share {
            self.look_again();
        } else {
            self.pump();
        }
    }
}
