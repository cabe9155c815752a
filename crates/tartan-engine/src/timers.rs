//! Timers: retries due later, inactivity windows of accepted async calls,
//! flow deadlines, in one ordered set by due time, indexed by flow so that a
//! flow that finishes takes its timers with it. One task sleeps until the
//! earliest is due; nothing polls. The set is a cache of timestamps in the
//! database (`work_items.due_us`, `flows.deadline_us`): it is rebuilt at start
//! and topped up by the sweep (`sweep.rs`), the safety net for timers
//! another process set or that lie further ahead than its horizon.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tartan_core::machine::Command;
use tartan_store::{Claim, ScheduledTimer, WorkKey, WorkStore};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::metrics::Metrics;

/// How far ahead the database's timers are loaded: to the sweep after
/// next (the sweep runs every half of it, `sweep.rs`).
pub(crate) const HORIZON: Duration = Duration::from_secs(60);

/// A command being decided on a flow.
pub(crate) type Deciding<'a> = Pin<Box<dyn Future<Output = Result<(), EngineError>> + Send + 'a>>;

/// What due timers (and leases taken over) ask of the flows: decide a
/// command on a flow.
pub(crate) trait Decide: Send + Sync {
    fn decide<'a>(&'a self, flow_id: &'a str, command: Command) -> Deciding<'a>;
}

/// How soon a timer that found the database unreachable fires again.
const UNREACHABLE_PAUSE: Duration = Duration::from_secs(1);

/// What a timer does when it fires.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Timer {
    /// Start a retry. `claim`: found in the database, so lease it first;
    /// retries this process scheduled already hold its lease.
    Retry { key: WorkKey, claim: bool },
    /// Fail an accepted async call that went quiet.
    Inactivity(WorkKey),
    /// Time the flow out.
    FlowDeadline(String),
}

impl Timer {
    /// One entry per thing: a sweep does not add what is already there.
    /// An inactivity window moved by a heartbeat moves its entry (`schedule`)
    /// instead of adding one per heartbeat.
    fn identity(&self) -> String {
        match self {
            Timer::Retry { key, .. } => format!("r:{}", key.token),
            Timer::Inactivity(key) => format!("i:{}", key.token),
            Timer::FlowDeadline(flow) => format!("f:{flow}"),
        }
    }

    fn flow_id(&self) -> &str {
        match self {
            Timer::Retry { key, .. } | Timer::Inactivity(key) => &key.flow_id,
            Timer::FlowDeadline(flow) => flow,
        }
    }
}

#[derive(Default)]
struct TimerSet {
    state: Mutex<TimerState>,
    /// Woken when an earlier timer is added.
    changed: Notify,
}

/// The timers of this process, and the task that fires them.
pub(crate) struct Timers {
    set: TimerSet,
    store: Arc<dyn WorkStore>,
    config: Arc<EngineConfig>,
    metrics: Arc<Metrics>,
    decide: Arc<dyn Decide>,
    stopping: CancellationToken,
    tasks: TaskTracker,
}

/// What the timers are made with.
pub(crate) struct TimersParts {
    pub store: Arc<dyn WorkStore>,
    pub config: Arc<EngineConfig>,
    pub metrics: Arc<Metrics>,
    pub decide: Arc<dyn Decide>,
    pub stopping: CancellationToken,
    pub tasks: TaskTracker,
}

#[derive(Default)]
struct TimerState {
    /// Every timer, earliest first.
    queue: BTreeSet<(i64, Timer)>,
    /// The due time of each timer in `queue`, by identity.
    known: HashMap<String, i64>,
    /// The entries of `queue`, by flow.
    by_flow: HashMap<String, BTreeSet<(i64, Timer)>>,
    /// The retries in `queue` (a gauge of docs/operating.md, "Metrics").
    retries: usize,
}

impl TimerState {
    fn remove(&mut self, entry: &(i64, Timer)) {
        if self.queue.remove(entry) && matches!(entry.1, Timer::Retry { .. }) {
            self.retries = self.retries.saturating_sub(1);
        }
        let identity = entry.1.identity();
        if self.known.get(&identity) == Some(&entry.0) {
            self.known.remove(&identity);
        }
        let flow = entry.1.flow_id();
        if let Some(timers) = self.by_flow.get_mut(flow) {
            timers.remove(entry);
            if timers.is_empty() {
                self.by_flow.remove(flow);
            }
        }
    }
}

impl TimerSet {
    fn schedule(&self, timer: Timer, due: DateTime<Utc>) {
        let due_us = due.timestamp_micros();
        let mut st = crate::sync::lock(&self.state);
        let identity = timer.identity();
        match (st.known.get(&identity).copied(), &timer) {
            (None, _) => {}
            // A window only ever moves later (heartbeats): the entry moves
            // with it, so a chatty step keeps one timer. An earlier due
            // (a sweep that read the row before the move) is stale.
            (Some(old), Timer::Inactivity(_)) if old < due_us => st.remove(&(old, timer.clone())),
            (Some(_), _) => return,
        }
        st.known.insert(identity, due_us);
        let earliest = st.queue.first().map(|(t, _)| *t);
        st.by_flow
            .entry(timer.flow_id().to_string())
            .or_default()
            .insert((due_us, timer.clone()));
        let retry = matches!(timer, Timer::Retry { .. });
        if st.queue.insert((due_us, timer)) && retry {
            st.retries += 1;
        }
        drop(st);
        if earliest.is_none_or(|t| due_us < t) {
            self.changed.notify_one();
        }
    }

    /// Everything due by `now_us`, removed, with its due time; and the next
    /// due time.
    fn take_due(&self, now_us: i64) -> (Vec<(i64, Timer)>, Option<i64>) {
        let mut st = crate::sync::lock(&self.state);
        let mut due = Vec::new();
        while let Some(entry) = st.queue.first().filter(|(t, _)| *t <= now_us).cloned() {
            st.remove(&entry);
            due.push(entry);
        }
        (due, st.queue.first().map(|(t, _)| *t))
    }

    /// Drop the timers of a flow that `keep` does not want: those of a
    /// finished flow have nothing left to do, and would otherwise stay in
    /// memory until they fire (a deadline may be days away).
    fn retain_flow(&self, flow_id: &str, keep: impl Fn(&Timer) -> bool) {
        let mut st = crate::sync::lock(&self.state);
        let Some(timers) = st.by_flow.get(flow_id) else {
            return;
        };
        let gone: Vec<(i64, Timer)> = timers.iter().filter(|(_, t)| !keep(t)).cloned().collect();
        for entry in &gone {
            st.remove(entry);
        }
    }

    fn counts(&self) -> (usize, usize) {
        let st = crate::sync::lock(&self.state);
        (st.queue.len(), st.retries)
    }
}

impl Timers {
    pub(crate) fn new(parts: TimersParts) -> Timers {
        Timers {
            set: TimerSet::default(),
            store: parts.store,
            config: parts.config,
            metrics: parts.metrics,
            decide: parts.decide,
            stopping: parts.stopping,
            tasks: parts.tasks,
        }
    }

    /// Arm `timer` for `due` (a timer armed already keeps its due time, but
    /// an inactivity window that moved later moves).
    pub(crate) fn schedule(&self, timer: Timer, due: DateTime<Utc>) {
        self.set.schedule(timer, due)
    }

    /// Drop the timers of a flow that `keep` does not want (see `TimerSet`).
    pub(crate) fn retain_flow(&self, flow_id: &str, keep: impl Fn(&Timer) -> bool) {
        self.set.retain_flow(flow_id, keep)
    }

    pub(crate) fn len(&self) -> usize {
        self.set.counts().0
    }

    /// Timers armed, and how many of them are retries.
    pub(crate) fn counts(&self) -> (usize, usize) {
        self.set.counts()
    }

    /// Load the timers due within [`HORIZON`] from the database.
    pub(crate) async fn load(&self) -> Result<(), EngineError> {
        let horizon =
            self.config.clock.now() + chrono::Duration::from_std(HORIZON).unwrap_or(chrono::Duration::MAX);
        for t in self.store.scheduled_work(horizon).await? {
            let (timer, due) = match t {
                ScheduledTimer::Retry(key, due) => (Timer::Retry { key, claim: true }, due),
                ScheduledTimer::Inactivity(key, due) => (Timer::Inactivity(key), due),
                ScheduledTimer::FlowDeadline(flow, due) => (Timer::FlowDeadline(flow), due),
            };
            self.schedule(timer, due);
        }
        Ok(())
    }

    /// The timer loop: sleep until the earliest timer, fire what is due, repeat.
    pub(crate) fn spawn_loop(self: &Arc<Self>) {
        let timers = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                let clock = &timers.config.clock;
                let now_us = clock.now().timestamp_micros();
                let (due, next) = timers.set.take_due(now_us);
                let mut to_claim = Vec::new();
                for (due_us, timer) in due {
                    if let Timer::Retry { .. } = timer {
                        let late = u64::try_from(now_us - due_us).unwrap_or(0);
                        timers.metrics.retry_fired(Duration::from_micros(late));
                    }
                    match timer {
                        Timer::Retry { key, claim: true } => to_claim.push(key),
                        other => timers.fire(other),
                    }
                }
                if !to_claim.is_empty() {
                    timers.claim_and_fire(to_claim);
                }
                // Due times are on the engine's clock (paused in tests).
                let due = async {
                    match next.and_then(DateTime::from_timestamp_micros) {
                        Some(at) => clock.sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = due => {}
                    _ = timers.set.changed.notified() => {}
                    _ = timers.stopping.cancelled() => return,
                }
            }
        });
    }

    /// Claim due retries by lease (another process sharing the database may
    /// hold them among its timers too) and start the ones this process got.
    fn claim_and_fire(self: &Arc<Self>, due: Vec<WorkKey>) {
        let timers = Arc::clone(self);
        self.tasks.spawn(async move {
            let claim = Claim {
                node: timers.config.node_id.clone(),
                at: None,
                lease: timers.config.lease_length().to_std().unwrap_or_default(),
                limit: due.len(),
                include_own: true,
            };
            let tokens: Vec<String> = due.iter().map(|k| k.token.clone()).collect();
            match timers.store.claim_due_work(&claim, &tokens).await {
                Ok(claimed) => claimed
                    .into_iter()
                    .for_each(|key| timers.fire(Timer::Retry { key, claim: false })),
                Err(e) if e.unavailable().is_some() => {
                    tracing::debug!("claiming due retries waits for the database: {e}");
                    for key in due {
                        timers.fire_again(Timer::Retry { key, claim: true });
                    }
                }
                // The due times are in the database: the next sweep retries.
                Err(e) => tracing::error!("claiming due retries failed: {e}"),
            }
        });
    }

    /// Carry out one due timer as its own decision; fired together, their
    /// commits share the writer's batches.
    pub(crate) fn fire(self: &Arc<Self>, timer: Timer) {
        let timers = Arc::clone(self);
        self.tasks.spawn(async move {
            let (flow_id, outcome) = match &timer {
                Timer::Retry { key, .. } => {
                    let due = Command::RetryDue {
                        step_id: key.step_id.clone(),
                        token: key.token.clone(),
                    };
                    (&key.flow_id, timers.decide.decide(&key.flow_id, due).await)
                }
                Timer::Inactivity(key) => {
                    // Heartbeats the flow's events do not hold yet.
                    let outcome = match timers.store.heard_until(key).await {
                        Ok(heard_until) => {
                            let due = Command::InactivityDue {
                                step_id: key.step_id.clone(),
                                token: key.token.clone(),
                                heard_until,
                            };
                            timers.decide.decide(&key.flow_id, due).await
                        }
                        Err(e) => Err(e.into()),
                    };
                    (&key.flow_id, outcome)
                }
                Timer::FlowDeadline(flow_id) => {
                    (flow_id, timers.decide.decide(flow_id, Command::DeadlineDue).await)
                }
            };
            match outcome {
                Ok(_) => {}
                Err(e) if e.database_unreachable().is_some() => {
                    tracing::debug!(%flow_id, "timer {timer:?} waits for the database: {e}");
                    timers.fire_again(timer);
                }
                // Purged, or lost by the database after a failover (that
                // is reported once, as the flow is found missing).
                Err(e @ EngineError::FlowNotFound(_)) => {
                    tracing::warn!(%flow_id, "timer {timer:?} dropped: {e}")
                }
                Err(e) => tracing::error!(%flow_id, "timer {timer:?} failed: {e}"),
            }
        });
    }

    /// Arm again, shortly, a timer that found the database unreachable (a
    /// restart, a failover): it fires within [`UNREACHABLE_PAUSE`] of the
    /// database's return rather than at the next sweep, up to 30 s later
    /// (docs/durability.md, "When the database goes away").
    fn fire_again(&self, timer: Timer) {
        let at = self.config.clock.now()
            + chrono::Duration::from_std(UNREACHABLE_PAUSE).unwrap_or(chrono::Duration::MAX);
        self.schedule(timer, at);
    }
}
