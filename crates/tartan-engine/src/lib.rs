#![forbid(unsafe_code)]
//! # Tartan engine
//!
//! The runtime around the pure state machine of `tartan-core`.
//!
//! # Layout
//! - `config`: what the engine is told at start-up.
//! - `sync`: the one way a `std` lock is taken (what a poisoned lock means).
//! - `clock`: where the time of decisions is read and what is due waited
//!   for; paused in tests, so that hours of backoff take no time.
//! - `catalog`: registering, updating and removing steps.
//! - `flows`: starting flows and moving them on; one lock per flow, so each
//!   decision sees the state the last one left. `flows::decide` applies a
//!   command with `tartan_core::machine::apply`, commits, then carries out
//!   the decision's effects in one loop; `flows::calls` makes the calls.
//! - `events`: the bus of committed flow events (and catalog changes) the
//!   API's streams and WebSocket read (docs/api.md, "Event streams").
//! - `ring`: the bus's channel, a broadcast queue bounded in entries and
//!   bytes that cuts off a listener too far behind.
//! - `notices`: what processes on one Postgres tell each other, announced
//!   in the background, heard on one connection and routed by kind.
//! - `relay`: the events other processes on one Postgres commit, put on
//!   this process's bus.
//! - `feed`: following one flow's events, or every flow's, from a resume
//!   point: the bus, and the store for what the bus skipped; the API's
//!   streams only encode its items.
//! - `reads`: what the API reads (listings, histories, pages), and the read
//!   models it speaks, so that the server never reaches the store.
//! - `writer`: the group-commit writer: every decision's events and
//!   projections go through it, batched into one commit (docs/durability.md,
//!   "Group commit").
//! - `dispatch`: the HTTP calls of work items.
//! - `in_flight`: the calls of this process until their result is recorded:
//!   listed by receipt token (numbers, aborts, started or not), their
//!   slots, their client, the calls deferred to their lease.
//! - `lanes`: limits calls share across flows and processes (a step's
//!   `limits`, a host's lane): the fair queues calls wait in first, the
//!   slots and start times held from the database, pauses, the breaker.
//! - `slots`: how many calls run at once, overall and per step, and the
//!   queues of calls waiting for a slot, served round-robin across steps.
//! - `outbound`: the client those calls go through: the step host policy
//!   on every resolved address, redirects kept to the first origin, no proxy.
//! - `leases`: renewing the leases of this process's calls, handing back
//!   those it will not call when it stops, taking over work whose lease ran
//!   out or was handed back (after a restart, its own too).
//! - `timers`: retries, inactivity windows and deadlines due later, in one
//!   ordered set; one task sleeps until the next.
//! - `bulk`: bulk retry and cancel jobs, run under a lease at a bounded
//!   rate (docs/api.md, "Bulk operations").
//! - `retention`: deleting finished flows past their retention, in the
//!   background (docs/operating.md, "Retention").
//! - `traces`: the trace a flow keeps, the `traceparent` of its calls, and
//!   the spans of starts, decisions and calls (docs/operating.md, "Traces").
//! - `webhook_key`: the database-held key that signs webhook URLs, so that a
//!   receipt token read from flow state cannot complete the work.
//! - `metrics`: this engine's Prometheus metrics, recorded by the engine
//!   and the server, rendered for `GET /metrics` (docs/operating.md, "Metrics").
//!
//! The hot path: a decision commits through the writer; the work it made
//! active is leased to this process in that same commit and dispatched from
//! memory right after it; the call's result is the next decision.

mod back;
mod budget;
mod bulk;
mod catalog;
mod clock;
mod config;
mod dispatch;
mod error;
mod failure_log;
pub mod feed;
mod flows;
mod health;
mod in_flight;
mod lanes;
mod leases;
mod memo;
pub mod metrics;
mod notices;
mod outbound;
pub mod reads;
mod retention;
mod scripts;
mod slots;
mod sweep;
mod sync;
mod timers;
mod traces;
mod webhook_key;
mod writer;

use std::sync::Arc;

pub use tartan_store::Readiness;
use tartan_store::Store;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use bulk::{Bulk, DEFAULT_MAX_BULK_FLOWS};
pub use catalog::{Catalog, CatalogView};
pub use clock::{Clock, Elapsed};
pub use config::{
    EngineConfig, HealthConfig, DEFAULT_MAX_ACTIVE_FLOWS, DEFAULT_MAX_CALLS, DEFAULT_MAX_INFLIGHT_BYTES,
    DEFAULT_MAX_QUEUED_CALLS, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MAX_RETRY_AFTER, DEFAULT_MAX_STREAMS,
    DEFAULT_MEMO_CACHE_SIZE, DEFAULT_MEMO_MAX_ENTRIES, DEFAULT_STREAM_BUFFER, DEFAULT_STREAM_BUFFER_BYTES,
};
pub use error::EngineError;
pub use feed::{BusReceiver, RecvError};
pub use feed::{CommittedCatalog, CommittedEvents, EventFeed, EventSubscription, Feed, FeedItem, FlowFeed};
pub use flows::{StartOutcome, WebhookError, WebhookRefusal, WebhookResult};
pub use health::{ClusterEvents, ClusterReceiver, ClusterView, Health, StepHealthView};
pub use lanes::{LaneView, LaneWait, Lanes, LocalLane};
pub use memo::MAX_MEMO_CACHE_SIZE;
pub use metrics::Metrics;
pub use outbound::StepTls;
pub use retention::purge_before;
pub use scripts::DEFAULT_MAX_SCRIPTS;
pub use slots::CallCounts;
pub use traces::{caller_context, trace_id_of, traceparent_of, CallerTrace, Tracer};

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

/// The engine: cheap to clone, shared by the API and the dispatcher.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    config: Arc<EngineConfig>,
    store: Arc<dyn Store>,
    catalog: Arc<catalog::Catalog>,
    flows: Arc<flows::FlowLocks>,
    writer: writer::Writer,
    timers: timers::Timers,
    /// Signs the webhook URLs handed to async steps.
    webhook_key: webhook_key::WebhookKey,
    /// The calls of this process, their slots and their client.
    calls: in_flight::InFlight,
    /// The lanes calls wait in before they take a slot (docs/lanes.md).
    lanes: lanes::Lanes,
    /// This engine's metrics (its own registry: engines never share one).
    metrics: Arc<metrics::Metrics>,
    /// Committed events, for the API's streams.
    feed: feed::Feed,
    /// What this process tells the others sharing the database.
    outbox: notices::Outbox,
    /// Tells subscribers which flows reached a terminal status.
    finished: tokio::sync::broadcast::Sender<FlowFinished>,
    /// Clients waiting for flows to finish.
    waiters: flows::Waiters,
    /// Bulk jobs, and the runner of this process's.
    bulk: Arc<bulk::Bulk>,
    /// This process's layer of memoized answers.
    memo: Arc<memo::Memo>,
    /// Step health, the dispatch gate and the cluster's live events.
    health: Arc<health::Health>,
    /// Fires when the engine stops taking new work.
    stopping: CancellationToken,
    /// Calls in flight, awaited on shutdown.
    tasks: TaskTracker,
}

impl Inner {
    /// The components, each with the handles it needs; those that ask
    /// something of the flows hold a weak way back (`back::Back`).
    async fn build(config: EngineConfig, store: Arc<dyn Store>) -> Result<Arc<Inner>, EngineError> {
        let http = outbound::client(&config.step_hosts, &config.step_tls)
            .map_err(|e| EngineError::HttpClient(e.to_string()))?;
        let webhook_key = webhook_key::WebhookKey::load(store.as_ref()).await?;
        let metrics = Arc::new(metrics::Metrics::new());
        let outbox = notices::Outbox::new(Arc::clone(&store));
        let cluster_head = store.cluster_head().await?;
        let stopping = CancellationToken::new();
        let feed = feed::Feed::new(
            feed::FeedParts {
                store: store.clone(),
                flows: store.clone(),
                outbox: outbox.clone(),
                node_id: config.node_id.clone(),
                peers_remembered: health::alive_for(&config),
                stopping: stopping.clone(),
            },
            &config,
        );
        let config = Arc::new(config);
        let tasks = TaskTracker::new();
        let memo = Arc::new(memo::Memo::new(
            config.memo_cache_size,
            store.clone(),
            config.clock.clone(),
            config.memo_max_entries,
            tasks.clone(),
        ));
        let catalog = Arc::new(
            catalog::Catalog::load(catalog::CatalogParts {
                store: store.clone(),
                feed: feed.clone(),
                outbox: outbox.clone(),
                metrics: Arc::clone(&metrics),
                config: Arc::clone(&config),
            })
            .await?,
        );
        let lanes = lanes::Lanes::new(
            store.clone(),
            outbox.clone(),
            &config,
            stopping.clone(),
            Arc::clone(&catalog),
        );
        lanes.start().await?;
        let inner = Arc::new_cyclic(|weak: &std::sync::Weak<Inner>| {
            let health = health::Health::new(
                health::HealthParts {
                    store: store.clone(),
                    work: store.clone(),
                    catalog: Arc::clone(&catalog),
                    feed: feed.clone(),
                    outbox: outbox.clone(),
                    config: Arc::clone(&config),
                    metrics: Arc::clone(&metrics),
                    http: http.clone(),
                    resume: Arc::new(back::Back(weak.clone())),
                    stopping: stopping.clone(),
                },
                cluster_head,
            );
            let bulk = bulk::Bulk::new(bulk::BulkParts {
                jobs: store.clone(),
                runs: store.clone(),
                flows: store.clone(),
                actions: Arc::new(back::Back(weak.clone())),
                config: Arc::clone(&config),
                metrics: Arc::clone(&metrics),
                stopping: stopping.clone(),
                tasks: tasks.clone(),
            });
            Inner {
                calls: in_flight::InFlight::new(
                    slots::CallSlots::new(
                        config.max_calls,
                        config.max_calls_per_step,
                        config.max_queued_calls,
                        config.max_inflight_bytes,
                    ),
                    http,
                    scripts::Scripts::new(config.script_limits, config.max_scripts),
                ),
                lanes,
                writer: writer::Writer::spawn(store.clone(), Arc::clone(&metrics), feed.writer_side()),
                feed,
                outbox,
                flows: Arc::new(flows::FlowLocks::new(
                    config.max_active_flows,
                    config.max_queued_calls,
                )),
                timers: timers::Timers::default(),
                finished: tokio::sync::broadcast::channel(FINISHED_BUFFER).0,
                waiters: flows::Waiters::default(),
                webhook_key,
                bulk: Arc::new(bulk),
                health: Arc::new(health),
                memo,
                metrics,
                config,
                store,
                catalog,
                stopping,
                tasks,
            }
        });
        // Weak: health holds the catalog that tells it.
        let health = Arc::downgrade(&inner.health);
        inner.catalog.on_changed(move |ids| {
            if let Some(health) = health.upgrade() {
                health.forget(ids);
            }
        });
        Ok(inner)
    }
}

impl Engine {
    /// Build the engine on a store, load the catalog and resume the work that
    /// was in flight when this node last stopped.
    pub async fn start(config: EngineConfig, store: Arc<dyn Store>) -> Result<Engine, EngineError> {
        let engine = Engine {
            inner: Inner::build(config, store).await?,
        };
        engine.recover().await?;
        engine.load_timers().await?;
        engine.spawn_timer_loop();
        engine.spawn_sweep();
        engine.spawn_lease_renewal();
        // In the cluster before it serves anything: a view read right after
        // start lists this engine.
        let inner = &engine.inner;
        inner
            .store
            .heartbeat(&inner.config.node_id, inner.config.clock.now())
            .await?;
        inner.health.spawn_checks();
        let inbox = notices::Inbox::open(inner.store.as_ref()).await;
        engine.spawn_abort_listener(inbox.aborts);
        engine.spawn_handback_listener(inbox.handbacks);
        inner.feed.spawn_relay(inbox.events).await;
        inner.catalog.spawn_relay(inbox.catalog, inner.stopping.clone());
        retention::Retention {
            store: inner.store.clone(),
            clock: inner.config.clock.clone(),
            stopping: inner.stopping.clone(),
        }
        .spawn(inner.config.retention, &inner.tasks);
        inner.bulk.spawn_runner(inbox.bulk_jobs);
        inner.health.spawn_listener(inbox.health);
        let lanes = engine.clone();
        notices::on_notices(inbox.lanes, inner.stopping.clone(), move |id: String| {
            lanes.inner.lanes.changed(&id);
            std::future::ready(())
        });
        Ok(engine)
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// The registered steps: their changes and the view flows plan with.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.inner.catalog
    }

    /// Bulk retry, cancel and resume jobs (docs/api.md, "Bulk operations").
    pub fn bulk(&self) -> &Bulk {
        &self.inner.bulk
    }

    /// Step health and the cluster (docs/operating.md).
    pub fn health(&self) -> &Health {
        &self.inner.health
    }

    /// The lanes calls share across flows and processes (docs/lanes.md).
    pub fn lanes(&self) -> &Lanes {
        &self.inner.lanes
    }

    /// Committed events as they come: the API's streams.
    pub fn feed(&self) -> &Feed {
        &self.inner.feed
    }

    /// Notices of the flows this process finishes from now on. Costs nothing
    /// when nobody listens.
    pub fn subscribe_finished(&self) -> tokio::sync::broadcast::Receiver<FlowFinished> {
        self.inner.finished.subscribe()
    }

    /// The webhook URL an async step is given for one attempt of a work
    /// item: the base URL, flow, step and token, and the signature that
    /// proves the caller was handed it (docs/security.md).
    pub fn webhook_url(&self, flow_id: &str, step_id: &str, token: &str, attempt: u32) -> String {
        tartan_core::webhook::signed_url(
            &self.inner.config.webhook_base_url,
            flow_id,
            step_id,
            token,
            &self.inner.webhook_key.sign(flow_id, step_id, token, attempt),
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
        self.inner.webhook_key.verify(flow_id, step_id, token, signature)
    }

    /// Flows this process holds in memory with work in progress: what
    /// `max_active_flows` is counted against.
    pub fn active_flows(&self) -> usize {
        self.inner.flows.len()
    }

    /// Timers this process holds: retries, inactivity windows, flow
    /// deadlines. Those of finished flows are dropped when they finish.
    pub fn timers(&self) -> usize {
        self.inner.timers.len()
    }

    /// Stop (docs/durability.md, "Shutting down"): no new work; hand back
    /// at once the leases of work this process holds but has not started;
    /// let running calls finish and record their results within `grace`;
    /// then abort those still running and hand their leases back too, so
    /// that another process takes them over at once instead of after the
    /// lease.
    pub async fn shutdown(&self, grace: std::time::Duration) {
        self.inner.stopping.cancel();
        self.inner.tasks.close();
        let running = self.started_calls();
        self.hand_back(&running).await;
        if tokio::time::timeout(grace, self.inner.tasks.wait())
            .await
            .is_err()
        {
            let aborted: Vec<String> = self.calls_in_flight().into_iter().map(|(t, _)| t).collect();
            tracing::warn!(
                calls = aborted.len(),
                "calls still running after {grace:?}: aborted, handed back to be called again"
            );
            for token in &aborted {
                self.abort_call(token);
            }
            // Aborted calls unwind at once; a result being recorded gets a
            // moment to land.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), self.inner.tasks.wait()).await;
        }
        self.hand_back(&[]).await;
        self.inner.lanes.stop().await;
    }
}
