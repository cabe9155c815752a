//! One lane in this process (docs/lanes.md): its calls running, the slots
//! and start times it holds from the database, and the calls waiting for
//! one, served fairly across flows. A call is admitted from memory while
//! what this process holds covers it; only when it does not does the lane
//! ask the database (`LaneStore::lane_take`), once for every call waiting.
//!
//! One small mutex guards the state; it is never held across an await.
//! The database is asked by one task at a time per lane. While calls wait,
//! the lane asks again at least every `LOOK_AGAIN`, and no more often
//! unless something changed (a slot freed here, a notice). That exchange
//! is in `holding`, pauses and the breaker in `breaker`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tartan_core::lanes::{BreakerState, LaneLimits};
use tartan_store::LaneOutcome;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::queue::FairQueue;
use super::Shared;
use breaker::pause;

mod breaker;
mod holding;

/// A reserved start time not used within this long is dropped: a call sent
/// late would bunch up with the next.
const STALE: Duration = Duration::from_millis(100);
/// While calls wait, the lane is looked at again at least this often (a
/// lost notice, an engine killed while holding slots, a resume).
const LOOK_AGAIN: Duration = Duration::from_secs(1);

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
    pub(crate) fn enter(
        self: &Arc<Self>,
        flow_id: &str,
        priority: i32,
    ) -> Result<oneshot::Receiver<Permit>, Full> {
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.lock();
            if st.queue.len() >= self.shared.max_waiting {
                return Err(Full);
            }
            st.waiting_since.get_or_insert_with(Instant::now);
            st.queue.push(flow_id, priority, Waiter { tx });
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
