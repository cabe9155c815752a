#![forbid(unsafe_code)]
//! # Tartan engine
//!
//! The runtime around the pure state machine of `tartan-core`.
//!
//! # Layout
//! The components (docs/architecture.md, "The engine's components"), each
//! holding the handles it needs, built and started here:
//! - `flows`: starting flows and moving them on; one lock per flow, so each
//!   decision sees the state the last one left. `flows::decide` applies a
//!   command with `tartan_core::machine::apply`, commits, then carries out
//!   the decision's effects in one loop.
//! - `calls`: the HTTP calls of work items: in flight until recorded, the
//!   call slots and the byte budget, the exchange (`dispatch`), the client
//!   (`outbound`: the step host policy on every address), script steps.
//! - `lanes`: limits calls share across flows and processes (a step's
//!   `limits`, a host's lane): the fair queues calls wait in first, the
//!   slots and start times held from the database, pauses, the breaker.
//! - `timers`: retries, inactivity windows and deadlines due later, in one
//!   ordered set; one task sleeps until the next.
//! - `leases`: renewing the leases of this process's calls, handing back
//!   those it will not call when it stops, taking over work whose lease ran
//!   out or was handed back (after a restart, its own too).
//! - `sweep`: the slow safety net behind timers, notices and leases.
//! - `catalog`: registering, updating and removing steps.
//! - `health`: step health checks, the dispatch gate, the cluster.
//! - `feed`: committed events for the API's streams: the bus (bounded,
//!   `feed::ring`), the relay of other processes' events (Postgres), and
//!   following one flow or every flow from a resume point.
//! - `bulk`: bulk retry and cancel jobs, run under a lease at a bounded
//!   rate (docs/api.md, "Bulk operations").
//! - `memo`: memoized answers of memoizable steps.
//! - `schedules`: flows started on a clock (docs/schedules.md): the
//!   API's operations, and the clock of their fires.
//! - `retention`: deleting finished flows past their retention, in the
//!   background (docs/operating.md, "Retention").
//!
//! And what they share:
//! - `config`: what the engine is told at start-up, and its defaults.
//! - `sync`: the one way a `std` lock is taken (what a poisoned lock means).
//! - `clock`: where the time of decisions is read and what is due waited
//!   for; paused in tests, so that hours of backoff take no time.
//! - `notices`: what processes on one Postgres tell each other, announced
//!   in the background, heard on one connection and routed by kind.
//! - `writer`: the group-commit writer: every decision's events and
//!   projections go through it, batched into one commit (docs/durability.md,
//!   "Group commit").
//! - `reads`: the read facade: what the API reads (listings, histories,
//!   pages, metrics), and the read models it speaks, so that the server
//!   never reaches the store.
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

mod bulk;
mod calls;
mod catalog;
mod clock;
mod config;
mod error;
mod failure_log;
pub mod feed;
mod flows;
mod health;
mod lanes;
mod leases;
mod lines;
mod memo;
pub mod metrics;
mod notices;
pub mod reads;
mod retention;
mod schedules;
mod sweep;
mod sync;
mod timers;
mod traces;
mod turns;
mod webhook_key;
mod writer;

use std::sync::Arc;

pub use tartan_store::Readiness;
use tartan_store::Store;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use bulk::Bulk;
pub use calls::{CallCounts, Calls};
pub use catalog::{Catalog, CatalogView};
pub use clock::{Clock, Elapsed};
pub use config::{
    EngineConfig, HealthConfig, StepTls, DEFAULT_MAX_ACTIVE_FLOWS, DEFAULT_MAX_BULK_FLOWS, DEFAULT_MAX_CALLS,
    DEFAULT_MAX_INFLIGHT_BYTES, DEFAULT_MAX_QUEUED_CALLS, DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRY_AFTER, DEFAULT_MAX_SCRIPTS, DEFAULT_MAX_STREAMS, DEFAULT_MEMO_CACHE_SIZE,
    DEFAULT_MEMO_MAX_ENTRIES, DEFAULT_STREAM_BUFFER, DEFAULT_STREAM_BUFFER_BYTES,
};
pub use error::EngineError;
pub use feed::{BusReceiver, RecvError};
pub use feed::{CommittedCatalog, CommittedEvents, EventFeed, EventSubscription, Feed, FeedItem, FlowFeed};
pub use flows::actions::Hastened;
pub use flows::{FlowFinished, Flows, StartOutcome, WebhookError, WebhookRefusal, WebhookResult};
pub use health::{ClusterEvents, ClusterReceiver, ClusterView, Health, StepHealthView};
pub use lanes::{LaneView, LaneWait, Lanes, LocalLane};
pub use lines::FlowTurn;
pub use memo::MAX_MEMO_CACHE_SIZE;
pub use metrics::Metrics;
pub use retention::purge_before;
pub use schedules::{FireView, LastFireView, ScheduleView, Schedules, Triggered, MAX_SCHEDULES};
pub use traces::{caller_context, trace_id_of, traceparent_of, CallerTrace, Tracer};

/// The engine: cheap to clone, shared by the API and the dispatcher.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

/// The components (docs/architecture.md, "The engine"). Each holds the
/// handles it needs; those that ask something of the flows hold a weak
/// way back (`Back`, below) instead of the flows.
struct Inner {
    config: Arc<EngineConfig>,
    /// For the read facade (`reads.rs`) and start-up only.
    store: Arc<dyn Store>,
    catalog: Arc<catalog::Catalog>,
    flows: Arc<flows::Flows>,
    calls: Arc<calls::Calls>,
    timers: Arc<timers::Timers>,
    leases: Arc<leases::Leases>,
    /// The lanes calls wait in before they take a slot (docs/lanes.md).
    lanes: Arc<lanes::Lanes>,
    /// Committed events, for the API's streams.
    feed: feed::Feed,
    /// Step health, the dispatch gate and the cluster's live events.
    health: Arc<health::Health>,
    /// Bulk jobs, and the runner of this process's.
    bulk: Arc<bulk::Bulk>,
    /// Schedules, and the clock of their fires.
    schedules: Arc<schedules::Schedules>,
    /// Concurrency keys' lines: letting their next flows in.
    lines: Arc<lines::Lines>,
    /// This engine's metrics (its own registry: engines never share one).
    metrics: Arc<metrics::Metrics>,
    /// Fires when the engine stops taking new work.
    stopping: CancellationToken,
    /// Calls in flight and other work shutdown waits for.
    tasks: TaskTracker,
}

/// What every component is built from.
struct Common {
    config: Arc<EngineConfig>,
    store: Arc<dyn Store>,
    metrics: Arc<metrics::Metrics>,
    outbox: notices::Outbox,
    stopping: CancellationToken,
    tasks: TaskTracker,
}

impl Inner {
    /// The components, each with the handles it needs.
    async fn build(config: EngineConfig, store: Arc<dyn Store>) -> Result<Arc<Inner>, EngineError> {
        let http = calls::outbound::client(&config.step_hosts, &config.step_tls)
            .map_err(|e| EngineError::HttpClient(e.to_string()))?;
        let candidate = webhook_key::WebhookKey::candidate();
        let stored = store.secret(webhook_key::KEY_NAME, &candidate).await?;
        let webhook_key = webhook_key::WebhookKey::of_stored(&stored)?;
        let cluster_head = store.cluster_head().await?;
        let outbox = notices::Outbox::new(store.clone(), store.backend() == "postgres");
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
        let c = Common {
            config: Arc::new(config),
            store,
            metrics: Arc::new(metrics::Metrics::new()),
            outbox,
            stopping,
            tasks: TaskTracker::new(),
        };
        let catalog = Arc::new(
            catalog::Catalog::load(catalog::CatalogParts {
                store: c.store.clone(),
                feed: feed.clone(),
                outbox: c.outbox.clone(),
                metrics: Arc::clone(&c.metrics),
                config: Arc::clone(&c.config),
            })
            .await?,
        );
        let lanes = Arc::new(lanes::Lanes::new(
            c.store.clone(),
            c.outbox.clone(),
            &c.config,
            c.stopping.clone(),
            Arc::clone(&catalog),
        ));
        lanes.start().await?;
        let memo = Arc::new(memo::Memo::new(
            c.config.memo_cache_size,
            c.store.clone(),
            c.config.clock.clone(),
            c.config.memo_max_entries,
            c.tasks.clone(),
        ));
        let inner = Arc::new_cyclic(|weak: &std::sync::Weak<Inner>| {
            let back = || Arc::new(Back(weak.clone()));
            let health = Arc::new(health::Health::new(
                health::HealthParts {
                    store: c.store.clone(),
                    work: c.store.clone(),
                    catalog: Arc::clone(&catalog),
                    feed: feed.clone(),
                    outbox: c.outbox.clone(),
                    config: Arc::clone(&c.config),
                    metrics: Arc::clone(&c.metrics),
                    http: http.clone(),
                    resume: back(),
                    stopping: c.stopping.clone(),
                },
                cluster_head,
            ));
            let calls = Arc::new(calls::Calls::new(calls::CallsParts {
                http,
                lanes: Arc::clone(&lanes),
                memo: Arc::clone(&memo),
                config: Arc::clone(&c.config),
                metrics: Arc::clone(&c.metrics),
                ended: back(),
                stopping: c.stopping.clone(),
                tasks: c.tasks.clone(),
            }));
            let timers = Arc::new(timers::Timers::new(timers::TimersParts {
                store: c.store.clone(),
                config: Arc::clone(&c.config),
                metrics: Arc::clone(&c.metrics),
                decide: back(),
                stopping: c.stopping.clone(),
                tasks: c.tasks.clone(),
            }));
            let leases = Arc::new(leases::Leases::new(leases::LeasesParts {
                store: c.store.clone(),
                calls: Arc::clone(&calls),
                timers: Arc::clone(&timers),
                decide: back(),
                config: Arc::clone(&c.config),
                metrics: Arc::clone(&c.metrics),
                stopping: c.stopping.clone(),
            }));
            let lines = Arc::new(lines::Lines::new(lines::LinesParts {
                store: c.store.clone(),
                decide: back(),
                config: Arc::clone(&c.config),
                metrics: Arc::clone(&c.metrics),
                stopping: c.stopping.clone(),
            }));
            let flows = Arc::new(flows::Flows::new(flows::FlowsParts {
                writer: writer::Writer::spawn(c.store.clone(), Arc::clone(&c.metrics), feed.writer_side()),
                store: c.store.clone(),
                work: c.store.clone(),
                catalog: Arc::clone(&catalog),
                health: Arc::clone(&health),
                calls: Arc::clone(&calls),
                timers: Arc::clone(&timers),
                memo,
                outbox: c.outbox.clone(),
                lines: Arc::clone(&lines),
                webhook_key,
                config: Arc::clone(&c.config),
                metrics: Arc::clone(&c.metrics),
                stopping: c.stopping.clone(),
                tasks: c.tasks.clone(),
            }));
            let bulk = Arc::new(bulk::Bulk::new(bulk::BulkParts {
                jobs: c.store.clone(),
                runs: c.store.clone(),
                flows: c.store.clone(),
                actions: back(),
                config: Arc::clone(&c.config),
                metrics: Arc::clone(&c.metrics),
                stopping: c.stopping.clone(),
                tasks: c.tasks.clone(),
            }));
            let schedules = Arc::new(schedules::Schedules::new(schedules::SchedulesParts {
                store: c.store.clone(),
                flows: Arc::clone(&flows),
                catalog: Arc::clone(&catalog),
                config: Arc::clone(&c.config),
                metrics: Arc::clone(&c.metrics),
                stopping: c.stopping.clone(),
            }));
            Inner {
                config: c.config,
                store: c.store,
                catalog,
                flows,
                calls,
                timers,
                leases,
                lanes,
                feed,
                health,
                bulk,
                schedules,
                lines,
                metrics: c.metrics,
                stopping: c.stopping,
                tasks: c.tasks,
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

    /// Run what runs in the background, and listen to the other processes.
    async fn run(&self) -> Result<(), EngineError> {
        self.leases.recover().await?;
        self.timers.load().await?;
        self.timers.spawn_loop();
        self.schedules.start().await?;
        sweep::Sweep {
            timers: Arc::clone(&self.timers),
            schedules: Arc::clone(&self.schedules),
            lines: Arc::clone(&self.lines),
            flows: Arc::clone(&self.flows),
            leases: Arc::clone(&self.leases),
            lease: self.config.lease,
            stopping: self.stopping.clone(),
        }
        .spawn();
        self.leases.spawn_renewal();
        // In the cluster before it serves anything: a view read right after
        // start lists this engine.
        self.store
            .heartbeat(&self.config.node_id, self.config.clock.now())
            .await?;
        self.health.spawn_checks();
        let inbox = notices::Inbox::open(self.store.as_ref()).await;
        self.calls.spawn_abort_listener(inbox.aborts);
        self.leases.spawn_handback_listener(inbox.handbacks);
        self.feed.spawn_relay(inbox.events).await;
        self.catalog.spawn_relay(inbox.catalog, self.stopping.clone());
        retention::Retention {
            store: self.store.clone(),
            clock: self.config.clock.clone(),
            stopping: self.stopping.clone(),
        }
        .spawn(self.config.retention, &self.tasks);
        self.bulk.spawn_runner(inbox.bulk_jobs);
        self.health.spawn_listener(inbox.health);
        let lanes = Arc::clone(&self.lanes);
        notices::on_notices(inbox.lanes, self.stopping.clone(), move |id: String| {
            lanes.changed(&id);
            std::future::ready(())
        });
        Ok(())
    }
}

impl Engine {
    /// Build the engine on a store, load the catalog and resume the work that
    /// was in flight when this node last stopped.
    pub async fn start(config: EngineConfig, store: Arc<dyn Store>) -> Result<Engine, EngineError> {
        let inner = Inner::build(config, store).await?;
        inner.run().await?;
        Ok(Engine { inner })
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// The flows: starting them, reading them, acting on them.
    pub fn flows(&self) -> &Arc<Flows> {
        &self.inner.flows
    }

    /// The calls of this process.
    pub fn calls(&self) -> &Calls {
        &self.inner.calls
    }

    /// The registered steps: their changes and the view flows plan with.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.inner.catalog
    }

    /// Bulk retry, cancel and resume jobs (docs/api.md, "Bulk operations").
    pub fn bulk(&self) -> &Bulk {
        &self.inner.bulk
    }

    /// Schedules (docs/schedules.md).
    pub fn schedules(&self) -> &Schedules {
        &self.inner.schedules
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
        let inner = &self.inner;
        inner.stopping.cancel();
        inner.tasks.close();
        let running = inner.calls.started();
        inner.leases.hand_back(&running).await;
        if tokio::time::timeout(grace, inner.tasks.wait()).await.is_err() {
            let aborted: Vec<String> = inner.calls.in_flight().into_iter().map(|(t, _)| t).collect();
            tracing::warn!(
                calls = aborted.len(),
                "calls still running after {grace:?}: aborted, handed back to be called again"
            );
            for token in &aborted {
                inner.calls.abort(token);
            }
            // Aborted calls unwind at once; a result being recorded gets a
            // moment to land.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), inner.tasks.wait()).await;
        }
        inner.leases.hand_back(&[]).await;
        inner.lanes.stop().await;
    }
}

/// The components' way back to the flows: what a component below them
/// asks of them (start deferred work again, record a call's end, decide
/// a due timer, act on a flow for a bulk job) without holding them. Weak,
/// since the engine owns the components that hold it; once the engine is
/// gone there is nothing to ask.
struct Back(std::sync::Weak<Inner>);

impl health::Resume for Back {
    fn resume(&self, key: tartan_store::WorkKey) {
        if let Some(inner) = self.0.upgrade() {
            inner.timers.fire(timers::Timer::Retry { key, claim: false });
        }
    }
}

impl calls::Ended for Back {
    fn conclude<'a>(
        &'a self,
        call: &'a calls::dispatch::Call,
        result: tartan_core::machine::AttemptResult,
        waited: Option<tartan_core::machine::LaneWaited>,
    ) -> calls::Recording<'a> {
        Box::pin(async move {
            if let Some(inner) = self.0.upgrade() {
                inner.flows.conclude(call, result, waited).await;
            }
        })
    }
}

impl timers::Decide for Back {
    fn decide<'a>(
        &'a self,
        flow_id: &'a str,
        command: tartan_core::machine::Command,
    ) -> timers::Deciding<'a> {
        Box::pin(async move {
            let Some(inner) = self.0.upgrade() else {
                return Err(EngineError::ShuttingDown);
            };
            inner.flows.decide(flow_id, command).await.map(drop)
        })
    }
}

impl bulk::FlowActions for Back {
    fn act<'a>(
        &'a self,
        flow_id: &'a str,
        action: tartan_core::bulk::BulkAction,
        by: &'a str,
    ) -> bulk::Acting<'a> {
        use tartan_core::bulk::BulkAction;
        Box::pin(async move {
            let Some(inner) = self.0.upgrade() else {
                return Err(EngineError::ShuttingDown);
            };
            let flows = &inner.flows;
            match action {
                BulkAction::Retry { reset_attempts } => {
                    flows
                        .retry_flow(flow_id, reset_attempts, Some(by.to_string()))
                        .await
                }
                BulkAction::Cancel { compensate } => flows.cancel_flow(flow_id, compensate, Some(by)).await,
                BulkAction::Resume { reset_attempts } => flows
                    .resume_flow(flow_id, reset_attempts, Some(by.to_string()))
                    .await
                    .map(|_| ()),
            }
        })
    }
}
