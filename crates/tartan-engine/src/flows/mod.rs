//! The engine's operations on flows: start one, read it, deliver an async
//! step's webhook or heartbeat, cancel it. Each change is a decision: the
//! flow's lock is taken, `tartan_core::machine::apply` decides, the writer
//! commits, and only then are the decision's effects carried out.
//!
//! # Layout
//! - this file: the component, reading a flow and acting on it (cancel,
//!   retry, resume).
//! - `start`: starting a flow.
//! - `webhooks`: an async step's webhook and heartbeats.
//! - `admission`: each flow's slot (its lock and cached state), the places
//!   of `max_active_flows`, and the flow steps' calls waiting for one.
//! - `decide`: deciding, committing (the rows a decision writes) and
//!   carrying out the effects.
//! - `waiters`: clients waiting for a flow to finish.
//! - `calls`: the calls in flight: making them from a decision's `Call`
//!   effects, the call slots, recording how they ended, aborting them.
//! - `children`: flow steps' calls: starting each item's child flow,
//!   waiting for its end, stopping it.
//! - `reconcile`: letting go of flows held in memory that the database
//!   moved away from or lost (a failover).

pub(crate) mod actions;
mod admission;
mod calls;
mod children;
mod decide;
mod reconcile;
mod slot;
mod start;
mod waiters;
mod webhooks;

use std::sync::Arc;

use tartan_core::flow::FlowState;
use tartan_store::{FlowStore, WorkStore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::calls::Calls;
use crate::catalog::Catalog;
use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::health::Health;
use crate::lines::{FlowTurn, Lines};
use crate::memo::Memo;
use crate::metrics::Metrics;
use crate::notices::Outbox;
use crate::timers::Timers;
use crate::webhook_key::WebhookKey;
use crate::writer::Writer;

pub(crate) use admission::FlowLocks;
pub(crate) use reconcile::IdleFlows;
pub(crate) use waiters::Waiters;
pub use waiters::MAX_WAITERS;
pub use webhooks::{WebhookError, WebhookRefusal, WebhookResult};

/// Notices of finished flows a slow subscriber may fall behind by before it
/// misses some (it is told how many).
const FINISHED_BUFFER: usize = 16_384;

/// A flow of this process reached a terminal status (completed, failed,
/// cancelled); sent once the decision is durable.
#[derive(Debug, Clone)]
pub struct FlowFinished {
    pub flow_id: String,
    pub status: tartan_core::flow::FlowStatus,
    pub at: chrono::DateTime<chrono::Utc>,
}

/// The flows of this process: deciding on them (one lock per flow, so each
/// decision sees the state the last one left), committing through the
/// writer, carrying out what was decided, and who waits for them.
pub struct Flows {
    /// Each flow's slot, and the places of `max_active_flows`.
    locks: Arc<FlowLocks>,
    writer: Writer,
    /// Clients waiting for flows to finish.
    waiters: Waiters,
    /// Tells subscribers which flows reached a terminal status.
    finished: tokio::sync::broadcast::Sender<FlowFinished>,
    store: Arc<dyn FlowStore>,
    /// The rows of work items a heartbeat moves on.
    work: Arc<dyn WorkStore>,
    catalog: Arc<Catalog>,
    /// The dispatch gate decisions are made with.
    health: Arc<Health>,
    calls: Arc<Calls>,
    timers: Arc<Timers>,
    memo: Arc<Memo>,
    /// Tells the other processes of calls of theirs a decision aborted.
    outbox: Outbox,
    /// Lets a concurrency key's next flows in when one joins or leaves.
    lines: Arc<Lines>,
    /// Signs the webhook URLs handed to async steps.
    webhook_key: WebhookKey,
    config: Arc<EngineConfig>,
    metrics: Arc<Metrics>,
    stopping: CancellationToken,
    /// Child flows' calls, awaited on shutdown.
    tasks: TaskTracker,
}

/// What the flows are decided with.
pub(crate) struct FlowsParts {
    pub writer: Writer,
    pub store: Arc<dyn FlowStore>,
    pub work: Arc<dyn WorkStore>,
    pub catalog: Arc<Catalog>,
    pub health: Arc<Health>,
    pub calls: Arc<Calls>,
    pub timers: Arc<Timers>,
    pub memo: Arc<Memo>,
    pub outbox: Outbox,
    pub lines: Arc<Lines>,
    pub webhook_key: WebhookKey,
    pub config: Arc<EngineConfig>,
    pub metrics: Arc<Metrics>,
    pub stopping: CancellationToken,
    pub tasks: TaskTracker,
}

impl Flows {
    pub(crate) fn new(parts: FlowsParts) -> Flows {
        Flows {
            locks: Arc::new(FlowLocks::new(
                parts.config.max_active_flows,
                parts.config.max_queued_calls,
            )),
            writer: parts.writer,
            waiters: Waiters::default(),
            finished: tokio::sync::broadcast::channel(FINISHED_BUFFER).0,
            store: parts.store,
            work: parts.work,
            catalog: parts.catalog,
            health: parts.health,
            calls: parts.calls,
            timers: parts.timers,
            memo: parts.memo,
            outbox: parts.outbox,
            lines: parts.lines,
            webhook_key: parts.webhook_key,
            config: parts.config,
            metrics: parts.metrics,
            stopping: parts.stopping,
            tasks: parts.tasks,
        }
    }

    /// Notices of the flows this process finishes from now on. Costs nothing
    /// when nobody listens.
    pub fn subscribe_finished(&self) -> tokio::sync::broadcast::Receiver<FlowFinished> {
        self.finished.subscribe()
    }

    /// The webhook URL an async step is given for one attempt of a work
    /// item: the base URL, flow, step and token, and the signature that
    /// proves the caller was handed it (docs/security.md).
    pub fn webhook_url(&self, flow_id: &str, step_id: &str, token: &str, attempt: u32) -> String {
        tartan_core::webhook::signed_url(
            &self.config.webhook_base_url,
            flow_id,
            step_id,
            token,
            &self.webhook_key.sign(flow_id, step_id, token, attempt),
        )
    }

    /// Which attempt `signature` was handed out for, when it is one the
    /// engine signed (`Some(None)`: a URL from before attempts were signed);
    /// `None` for a forgery.
    pub fn verify_webhook(
        &self,
        flow_id: &str,
        step_id: &str,
        token: &str,
        signature: &str,
    ) -> Option<Option<u32>> {
        self.webhook_key.verify(flow_id, step_id, token, signature)
    }

    /// Flows this process holds in memory with work in progress: what
    /// `max_active_flows` is counted against.
    pub fn active(&self) -> usize {
        self.locks.len()
    }

    /// Flow steps' calls waiting for a place in `max_active_flows`.
    pub(crate) fn waiting(&self) -> usize {
        self.locks.waiting()
    }
}

/// What `start_flow` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartOutcome {
    Started,
    /// The same request had already started this flow.
    AlreadyStarted,
}

/// What `commit_start` did.
pub(super) enum Committed {
    Started,
    /// The flow exists already: nothing changed.
    Exists,
    /// A child's call was aborted before its start: not started.
    Aborted,
}

impl Flows {
    /// The flow's status, without rebuilding its state (cheap to poll).
    pub async fn flow_status(
        self: &Arc<Self>,
        flow_id: &str,
    ) -> Result<tartan_core::flow::FlowStatus, EngineError> {
        self.store
            .flow_status(flow_id)
            .await?
            .ok_or_else(|| EngineError::FlowNotFound(flow_id.to_string()))
    }

    /// The flow's status as soon as it is no longer active, or after
    /// `wait` if it still is. Woken by the decision that finishes the flow
    /// in this process; one another process finishes is seen within
    /// `waiters::RECHECK`.
    pub async fn wait_for_flow(
        self: &Arc<Self>,
        flow_id: &str,
        wait: std::time::Duration,
    ) -> Result<tartan_core::flow::FlowStatus, EngineError> {
        let give_up = tokio::time::Instant::now() + wait;
        let waiting = self
            .waiters
            .wait_for(flow_id)
            .ok_or(EngineError::TooManyWaiters(MAX_WAITERS))?;
        let mut first = true;
        loop {
            // Listening before the status is read: a finish in between is
            // not missed.
            let notified = waiting.notice.woken.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // A finish in this process says its status: no read needed.
            // Nor on the first look at a flow this process holds active
            // (a client waiting on the flow it just started): a finish
            // here from now on wakes this waiter, and one by another
            // process is read at the next look, as while waiting. That
            // look is never the answer: a wait with no time left reads.
            let cached = first && self.locks.held_active(flow_id);
            first = false;
            let status = match waiting.notice.finished() {
                Some(status) => status,
                None if cached => tartan_core::flow::FlowStatus::Active,
                None => self.flow_status(flow_id).await?,
            };
            let now = tokio::time::Instant::now();
            if status != tartan_core::flow::FlowStatus::Active || (now >= give_up && !cached) {
                return Ok(status);
            }
            if now >= give_up {
                continue;
            }
            let _ = tokio::time::timeout_at(give_up.min(now + waiters::RECHECK), notified).await;
        }
    }

    /// The flow's projection, as stored.
    pub async fn flow(self: &Arc<Self>, flow_id: &str) -> Result<FlowState, EngineError> {
        match self.store.load_flow(flow_id).await? {
            Some(f) => Ok(f.state),
            None => Err(EngineError::FlowNotFound(flow_id.to_string())),
        }
    }

    /// The flow's place in its concurrency key's line: `None` when it has
    /// no key or has ended (docs/concurrency.md).
    pub async fn turn(self: &Arc<Self>, flow_id: &str) -> Result<Option<FlowTurn>, EngineError> {
        self.lines.place(flow_id).await
    }
}
