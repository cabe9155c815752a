//! Step health and the cluster (docs/operating.md, "Health checks and the
//! cluster"): every engine writes its heartbeat to the database and checks
//! its share of the steps' `http.health_check`s (`checker`); the views read
//! what all of them recorded, and resolve every step's health from it
//! (`tartan_core::health::resolve`).
//!
//! - this file: the cluster as the API shows it.
//! - `checker`: the rounds of checks and heartbeats.
//! - `gate`: the dispatch gate, the deferred work it holds back, and the
//!   cluster's live events.

mod checker;
mod gate;

pub use gate::{ClusterEvents, ClusterReceiver};

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tartan_core::health::HealthState;
use tartan_store::{ClusterStore, HealthRecord, NodeRecord, WorkKey, WorkStore};
use tokio_util::sync::CancellationToken;

use crate::catalog::Catalog;
use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::feed::Feed;
use crate::metrics::Metrics;
use crate::notices::Outbox;

/// Heartbeats older than this many rounds are of engines taken for gone:
/// they check nothing and the others share out their steps.
const ROUNDS_TO_GONE: u32 = 3;

/// The cluster as one engine reads it from the database.
#[derive(Debug, Clone)]
pub struct ClusterView {
    /// The engines whose heartbeat is recent, by id.
    pub nodes: BTreeMap<String, NodeRecord>,
    /// Every step of the catalog with its health, resolved.
    pub steps: BTreeMap<String, StepHealthView>,
    /// The newest heartbeat or health change.
    pub last_updated: Option<DateTime<Utc>>,
    /// By live engine, the work items whose lease it holds: its calls in
    /// flight or waiting for a slot (`ClusterStore::calls_by_node`). Read
    /// only by `Health::cluster_with_calls`, empty otherwise.
    pub calls: BTreeMap<String, u64>,
}

/// A step's health, and the check it comes from when it comes from one.
#[derive(Debug, Clone)]
pub struct StepHealthView {
    pub health: HealthState,
    /// The check: which engine made it, when, and since when the step has
    /// had this health.
    pub checked: Option<HealthRecord>,
}

/// What health asks of the flows: to start again, as a due retry, an item
/// deferred while its step was unhealthy.
pub(crate) trait Resume: Send + Sync {
    fn resume(&self, key: WorkKey);
}

/// Step health and the cluster: the rounds of checks and heartbeats, the
/// dispatch gate, and the cluster's live events.
pub struct Health {
    live: gate::Live,
    store: Arc<dyn ClusterStore>,
    /// Where the work deferred by the gate is found.
    work: Arc<dyn WorkStore>,
    catalog: Arc<Catalog>,
    feed: Feed,
    outbox: Outbox,
    config: Arc<EngineConfig>,
    metrics: Arc<Metrics>,
    /// The step calls' client: a check goes out as a call does.
    http: reqwest::Client,
    resume: Arc<dyn Resume>,
    stopping: CancellationToken,
}

/// What health is built from.
pub(crate) struct HealthParts {
    pub store: Arc<dyn ClusterStore>,
    pub work: Arc<dyn WorkStore>,
    pub catalog: Arc<Catalog>,
    pub feed: Feed,
    pub outbox: Outbox,
    pub config: Arc<EngineConfig>,
    pub metrics: Arc<Metrics>,
    pub http: reqwest::Client,
    pub resume: Arc<dyn Resume>,
    pub stopping: CancellationToken,
}

impl Health {
    /// Passing on the cluster's events after `head`, the last at start.
    pub(crate) fn new(parts: HealthParts, head: i64) -> Health {
        Health {
            live: gate::Live::new(head),
            store: parts.store,
            work: parts.work,
            catalog: parts.catalog,
            feed: parts.feed,
            outbox: parts.outbox,
            config: parts.config,
            metrics: parts.metrics,
            http: parts.http,
            resume: parts.resume,
            stopping: parts.stopping,
        }
    }

    /// The cluster: live engines and every step's health.
    pub async fn cluster(&self) -> Result<ClusterView, EngineError> {
        let store = &self.store;
        let records = store.step_health().await?;
        let all_nodes = store.nodes().await?;
        let view = self.catalog.view().await;
        let now = self.config.clock.now();
        let gone_after = alive_for(&self.config);
        let nodes: BTreeMap<String, NodeRecord> = all_nodes
            .into_iter()
            .filter(|n| live(n, now, gone_after))
            .map(|n| (n.node_id.clone(), n))
            .collect();
        let mut checked = with_checks(records, &view.catalog);
        let bases = checked
            .iter()
            .map(|(id, r)| (id.clone(), r.health.clone()))
            .collect();
        let resolved = tartan_core::health::resolve(&view.catalog, &bases);
        let last_updated = nodes
            .values()
            .map(|n| n.last_seen)
            .chain(checked.values().map(|r| r.changed_at))
            .max();
        let steps = resolved
            .into_iter()
            .map(|(id, health)| {
                let checked = checked.remove(&id);
                (id, StepHealthView { health, checked })
            })
            .collect();
        Ok(ClusterView {
            nodes,
            steps,
            last_updated,
            calls: BTreeMap::new(),
        })
    }

    /// The cluster with the calls each live engine holds, for what shows
    /// the engines (the API, the dashboard); the checks read `cluster`
    /// every round and need no count.
    pub async fn cluster_with_calls(&self) -> Result<ClusterView, EngineError> {
        let mut view = self.cluster().await?;
        let held = self.store.calls_by_node(self.config.clock.now()).await?;
        view.calls = held
            .into_iter()
            .filter(|(node, _)| view.nodes.contains_key(node))
            .collect();
        Ok(view)
    }

    /// Tell the event notices whether another engine is alive on the
    /// database (`relay::Peers`): a process alone sends none.
    pub(crate) async fn note_others(&self) {
        let feed = &self.feed;
        if !feed.shared() {
            return;
        }
        let me = &self.config.node_id;
        let now = self.config.clock.now();
        let gone_after = alive_for(&self.config);
        match self.store.nodes().await {
            Ok(nodes) => {
                feed.others_listed(nodes.iter().any(|n| &n.node_id != me && live(n, now, gone_after)))
            }
            // Kept as it was: a missed round changes nothing.
            Err(e) => tracing::debug!("reading the cluster's engines failed: {e}"),
        }
    }
}

/// How long a heartbeat counts its engine alive under `config`.
pub(crate) fn alive_for(config: &EngineConfig) -> std::time::Duration {
    checker::round_of(config) * ROUNDS_TO_GONE
}

/// The checks' results by step, of the steps that still have a health
/// check (one removed since keeps no result).
pub(crate) fn with_checks(
    records: Vec<HealthRecord>,
    catalog: &tartan_core::catalog::Catalog,
) -> BTreeMap<String, HealthRecord> {
    records
        .into_iter()
        .filter(|record| {
            catalog
                .get(&record.step_id)
                .and_then(|s| s.http.as_ref())
                .is_some_and(|h| !h.health_check.is_empty())
        })
        .map(|record| (record.step_id.clone(), record))
        .collect()
}

/// Whether an engine's heartbeat is recent enough to count it alive.
fn live(node: &NodeRecord, now: DateTime<Utc>, gone_after: std::time::Duration) -> bool {
    let gone_after = chrono::Duration::from_std(gone_after).unwrap_or(chrono::Duration::MAX);
    now.signed_duration_since(node.last_seen) <= gone_after
}
