//! Registering, updating and removing steps. The catalog is cached in
//! memory; every change is checked against the whole catalog (through its
//! attribute index, so at the cost of the change, not of the catalog) and
//! committed with optimistic concurrency on the catalog's event sequence, so
//! that two processes sharing a database cannot both add conflicting steps.
//! Changes that arrive while one is being committed are decided in order and
//! committed together in one transaction (group commit), so many clients
//! registering at once pay one database round trip per batch, not per step.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tartan_core::catalog::{Catalog as Steps, Registration};
use tartan_core::retry::RetryDefaults;
use tartan_core::step::Step;
use tartan_store::{CatalogChange, CatalogStore, StoreError};
use tokio::sync::{mpsc, oneshot, Mutex, RwLock};

use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::feed::Feed;
use crate::metrics::{CatalogReload, Metrics};
use crate::notices::Outbox;

/// The catalog: the cached view, the changes of this process (decided and
/// committed in batches), and the other processes' changes taken in.
pub struct Catalog {
    current: RwLock<Arc<CatalogView>>,
    /// Held by the one batch of changes being decided and committed.
    pub(crate) change: Arc<Mutex<()>>,
    /// Changes waiting for the next batch.
    pending: std::sync::Mutex<Vec<Pending>>,
    /// Held by the one refresh running.
    refreshing: Mutex<()>,
    /// When an unknown goal last had the catalog read again.
    rechecked: std::sync::Mutex<Option<Instant>>,
    store: Arc<dyn CatalogStore>,
    feed: Feed,
    outbox: Outbox,
    metrics: Arc<Metrics>,
    config: Arc<EngineConfig>,
    /// Told the ids of the steps each committed batch registered again,
    /// updated or removed (their health is forgotten: Argyll resets it).
    on_changed: std::sync::OnceLock<Box<dyn Fn(Vec<String>) + Send + Sync>>,
}

/// What the catalog is built from.
pub(crate) struct CatalogParts {
    pub store: Arc<dyn CatalogStore>,
    pub feed: Feed,
    pub outbox: Outbox,
    pub metrics: Arc<Metrics>,
    pub config: Arc<EngineConfig>,
}

/// An unknown goal has the catalog read again at most this often, however
/// many requests name one: a client may send them as fast as it likes, and
/// each read is the whole catalog.
const UNKNOWN_GOAL_RECHECK: Duration = Duration::from_secs(1);

/// Catalog events read per statement when passing another process's on.
const CATALOG_PAGE: usize = 1000;
/// Bytes of the catalog's events (their data) read per statement.
const CATALOG_PAGE_BYTES: usize = 4 * 1024 * 1024;

struct Pending {
    change: Change,
    reply: oneshot::Sender<Result<Step, EngineError>>,
}

/// The catalog as of one sequence.
pub struct CatalogView {
    pub catalog: Steps,
    pub sequence: i64,
    pub last_updated: Option<chrono::DateTime<Utc>>,
}

impl Catalog {
    pub(crate) async fn load(parts: CatalogParts) -> Result<Self, EngineError> {
        Ok(Self {
            current: RwLock::new(Arc::new(Self::read(parts.store.as_ref()).await?)),
            change: Arc::new(Mutex::new(())),
            pending: std::sync::Mutex::new(Vec::new()),
            refreshing: Mutex::new(()),
            rechecked: std::sync::Mutex::new(None),
            store: parts.store,
            feed: parts.feed,
            outbox: parts.outbox,
            metrics: parts.metrics,
            config: parts.config,
            on_changed: std::sync::OnceLock::new(),
        })
    }

    /// Who is told which steps a committed batch changed (set once, at start).
    pub(crate) fn on_changed(&self, tell: impl Fn(Vec<String>) + Send + Sync + 'static) {
        let _ = self.on_changed.set(Box::new(tell));
    }

    /// Whether an unknown goal may have the catalog read again now; if so,
    /// the next may only after [`UNKNOWN_GOAL_RECHECK`].
    fn recheck_due(&self) -> bool {
        // A plain instant, set whole: a panic elsewhere cannot leave it torn.
        let mut last = crate::sync::lock(&self.rechecked);
        let now = Instant::now();
        if last.is_some_and(|at| now.duration_since(at) < UNKNOWN_GOAL_RECHECK) {
            return false;
        }
        *last = Some(now);
        true
    }

    async fn read(store: &dyn CatalogStore) -> Result<CatalogView, EngineError> {
        let snap = store.load_catalog().await?;
        // The typed policies and `effective_retry` are not stored: parse
        // them again, once per step. A stored step was valid when it was
        // registered; one this version cannot read (stored by another) is
        // left out of the catalog, loudly, rather than run without a policy.
        let steps = snap.steps.into_iter().filter_map(|s| {
            let id = s.id.clone();
            match s.with_effective_retry(&RetryDefaults::default()) {
                Ok(step) => Some(step),
                Err(e) => {
                    tracing::error!(step_id = %id, "stored step left out of the catalog: its policy is invalid: {e}");
                    None
                }
            }
        });
        Ok(CatalogView {
            catalog: Steps::new(steps),
            sequence: snap.sequence,
            last_updated: snap.last_updated,
        })
    }
}

enum Change {
    Register(Step),
    Update(Step),
    Remove(String),
}

/// Why a batch of catalog changes was not committed: told to each change
/// of it that changed something.
enum Unstored {
    /// Other processes kept changing the catalog.
    Contended,
    /// Reading it again after one did failed.
    Reload(String),
}

impl Unstored {
    fn error(&self) -> EngineError {
        match self {
            Unstored::Contended => EngineError::Contended("the catalog".into()),
            Unstored::Reload(why) => EngineError::CatalogReload(why.clone()),
        }
    }
}

impl Catalog {
    /// The catalog as this process knows it.
    pub async fn view(&self) -> Arc<CatalogView> {
        self.current.read().await.clone()
    }

    /// The catalog to plan `goals` with (a start, a plan preview). A goal
    /// the cached catalog does not hold is answered from it, not looked for
    /// in the database per request:
    /// - with SQLite this process is the only one on the database, so every
    ///   change went through this cache;
    /// - with Postgres, other processes' changes arrive by notice
    ///   (`feed/relay.rs`). One committed a moment ago may not have (nor one
    ///   whose notice was lost while the listener reconnected), so an
    ///   unknown goal reads the catalog again, at most once every
    ///   [`UNKNOWN_GOAL_RECHECK`]; requests meanwhile wait for a read under
    ///   way, if any, and answer from the view it leaves.
    pub async fn for_goals(&self, goals: &[String]) -> Result<Arc<CatalogView>, EngineError> {
        let view = self.view().await;
        if goals.iter().all(|g| view.catalog.contains(g)) || !self.feed.shared() {
            return Ok(view);
        }
        if self.recheck_due() {
            return self.reload_catalog(CatalogReload::UnknownGoal).await;
        }
        drop(self.refreshing.lock().await);
        Ok(self.view().await)
    }

    /// Re-read the catalog (another process changed it), and pass the
    /// events between the two views on to the catalog's listeners
    /// (docs/api.md, "WebSocket"). One refresh at a time; the view never
    /// moves back.
    pub async fn refresh_catalog(&self) -> Result<Arc<CatalogView>, EngineError> {
        self.reload_catalog(CatalogReload::OtherProcess).await
    }

    /// `refresh_catalog`, counted by why (docs/operating.md, "Metrics").
    pub(crate) async fn reload_catalog(
        &self,
        reason: CatalogReload,
    ) -> Result<Arc<CatalogView>, EngineError> {
        let _one = self.refreshing.lock().await;
        let before = self.view().await.sequence;
        self.metrics.catalog_reloaded(reason);
        let view = Arc::new(Self::read(self.store.as_ref()).await?);
        if view.sequence < before {
            return Ok(self.view().await);
        }
        *self.current.write().await = view.clone();
        if view.sequence > before && self.feed.catalog_listened() {
            // Every event up to the view's sequence is stored by now.
            if let Err(e) = self.publish_stored_catalog(before, view.sequence).await {
                tracing::warn!("passing on catalog changes of another process: {e}");
            }
        }
        Ok(view)
    }

    /// Read the catalog's events in `(after, upto]` and pass them on, a
    /// page (one batch of the bus) at a time.
    async fn publish_stored_catalog(&self, mut after: i64, upto: i64) -> Result<(), EngineError> {
        while after < upto {
            let page = self
                .store
                .catalog_events_page(after, CATALOG_PAGE, CATALOG_PAGE_BYTES)
                .await?;
            let Some(last) = page.events.last().map(|e| e.sequence) else {
                break;
            };
            self.feed
                .publish_catalog_events(page.events.into_iter().filter(|e| e.sequence <= upto).collect());
            after = last;
        }
        Ok(())
    }

    /// Register a step. Returns the stored definition; an identical
    /// re-registration is accepted and changes nothing.
    pub async fn register_step(self: &Arc<Self>, step: Step) -> Result<Step, EngineError> {
        self.change_catalog(Change::Register(step)).await
    }

    /// Replace a step's definition.
    pub async fn update_step(self: &Arc<Self>, step: Step) -> Result<Step, EngineError> {
        self.change_catalog(Change::Update(step)).await
    }

    /// Remove a step; running flows keep the plan they started with.
    pub async fn unregister_step(self: &Arc<Self>, id: &str) -> Result<(), EngineError> {
        self.change_catalog(Change::Remove(id.to_string()))
            .await
            .map(|_| ())
    }

    async fn change_catalog(self: &Arc<Self>, change: Change) -> Result<Step, EngineError> {
        let (reply, answer) = oneshot::channel();
        lock_pending(self).push(Pending { change, reply });
        // Whoever holds the lock next takes every change queued by then,
        // ours included unless an earlier batch already took it. The batch
        // runs on a task of its own so that a client going away cannot stop
        // it half way.
        let guard = self.change.clone().lock_owned().await;
        let batch = std::mem::take(&mut *lock_pending(self));
        if batch.is_empty() {
            drop(guard);
        } else {
            let catalog = Arc::clone(self);
            tokio::spawn(async move {
                catalog.commit_changes(batch).await;
                drop(guard);
            });
        }
        answer
            .await
            .unwrap_or_else(|_| Err(EngineError::Abandoned("the catalog change")))
    }

    /// Decide each change in order against the catalog as the earlier ones
    /// leave it, commit those that change something in one transaction, then
    /// answer each. After a conflict (another process changed the catalog) the
    /// catalog is re-read and the whole batch decided again.
    async fn commit_changes(&self, batch: Vec<Pending>) {
        let mut view = self.view().await;
        let mut attempt = 0;
        loop {
            let now = self.config.clock.now();
            let mut catalog = view.catalog.clone();
            let mut records = Vec::new();
            let mut answers = Vec::with_capacity(batch.len());
            for pending in &batch {
                let decided = self.decide_change(&catalog, &pending.change, now);
                if let Ok((stored, Some(record))) = &decided {
                    // A persistent map: the copy is O(1), the change O(log n).
                    match &pending.change {
                        Change::Remove(id) => {
                            catalog.remove(id);
                        }
                        _ => catalog.insert(stored.clone()),
                    }
                    records.push(record.clone());
                }
                answers.push(decided.map(|(stored, record)| (stored, record.is_some())));
            }
            let committed = if records.is_empty() {
                Ok(())
            } else {
                self.store.commit_catalog_batch(view.sequence, &records).await
            };
            let failure = match committed {
                Ok(()) => {
                    if !records.is_empty() {
                        *self.current.write().await = Arc::new(CatalogView {
                            catalog,
                            sequence: view.sequence + records.len() as i64,
                            last_updated: Some(now),
                        });
                        // After the view: a listener that reads the view
                        // after listening misses none of these.
                        self.feed.publish_catalog(view.sequence + 1, &records);
                        self.forget_health_of(&records);
                        self.outbox.announce(tartan_store::Notice::Catalog {
                            node: self.config.node_id.clone(),
                            sequence: view.sequence + records.len() as i64,
                        });
                    }
                    None
                }
                Err(StoreError::Conflict(_)) if attempt < 2 => {
                    attempt += 1;
                    match self.refresh_catalog().await {
                        Ok(fresh) => {
                            view = fresh;
                            continue;
                        }
                        Err(e) => Some(Unstored::Reload(e.to_string())),
                    }
                }
                Err(StoreError::Conflict(_)) => Some(Unstored::Contended),
                Err(e) => {
                    // The store's error, for each change that needed it.
                    for (pending, answer) in batch.into_iter().zip(answers) {
                        let answer = match answer {
                            Ok((_, true)) => Err(EngineError::Store(e.clone())),
                            other => other.map(|(s, _)| s),
                        };
                        let _ = pending.reply.send(answer);
                    }
                    return;
                }
            };
            for (pending, answer) in batch.into_iter().zip(answers) {
                let answer = match (answer, &failure) {
                    (Ok((_, true)), Some(why)) => Err(why.error()),
                    (other, _) => other.map(|(s, _)| s),
                };
                let _ = pending.reply.send(answer);
            }
            return;
        }
    }

    /// A step registered again, updated or removed has no health until its
    /// next check (Argyll resets it to unknown): tell who forgets it.
    fn forget_health_of(&self, records: &[CatalogChange]) {
        let ids: Vec<String> = records
            .iter()
            .map(|r| match r {
                CatalogChange::Registered(s, _) | CatalogChange::Updated(s, _) => s.id.clone(),
                CatalogChange::Unregistered(id, _) => id.clone(),
            })
            .collect();
        if let Some(tell) = self.on_changed.get() {
            tell(ids);
        }
    }

    /// What one change does to `catalog`: the step as stored, and the record
    /// to commit (none when nothing changes).
    fn decide_change(
        &self,
        catalog: &Steps,
        change: &Change,
        now: chrono::DateTime<Utc>,
    ) -> Result<(Step, Option<CatalogChange>), EngineError> {
        let defaults = &self.config.work_defaults;
        Ok(match change {
            Change::Register(step) => {
                let (s, reg) = catalog.check_register(step.clone(), defaults)?;
                s.check_hosts(&self.config.step_hosts)?;
                let record = (reg == Registration::Added).then(|| CatalogChange::Registered(s.clone(), now));
                (s, record)
            }
            Change::Update(step) => {
                let s = catalog.check_update(step.clone(), defaults)?;
                s.check_hosts(&self.config.step_hosts)?;
                let unchanged = catalog.get(&s.id) == Some(&s);
                let record = (!unchanged).then(|| CatalogChange::Updated(s.clone(), now));
                (s, record)
            }
            Change::Remove(id) => {
                let Some(s) = catalog.get(id).cloned() else {
                    return Err(EngineError::StepNotFound(catalog.missing(id)));
                };
                (s, Some(CatalogChange::Unregistered(id.clone(), now)))
            }
        })
    }
}

fn lock_pending(cache: &Catalog) -> std::sync::MutexGuard<'_, Vec<Pending>> {
    // The queue is only pushed to and taken whole: a panic elsewhere cannot
    // leave it half changed.
    crate::sync::lock(&cache.pending)
}

impl Catalog {
    /// Take in the catalog changes other processes commit.
    pub(crate) fn spawn_relay(
        self: &Arc<Self>,
        notices: Option<mpsc::Receiver<(i64, String)>>,
        stopping: tokio_util::sync::CancellationToken,
    ) {
        let Some(mut notices) = notices else {
            return;
        };
        let catalog = Arc::clone(self);
        tokio::spawn(async move {
            let me = catalog.config.node_id.clone();
            loop {
                let (sequence, node) = tokio::select! {
                    n = notices.recv() => match n {
                        Some(n) => n,
                        None => return,
                    },
                    _ = stopping.cancelled() => return,
                };
                if node != me {
                    if let Err(e) = catalog.take_in_catalog(sequence).await {
                        tracing::warn!("reading another process's catalog change: {e}");
                    }
                }
            }
        });
    }

    /// The sweep behind the notices: when the database holds catalog
    /// changes this process's view lacks (a notice lost while the listener
    /// reconnected), read the catalog again. Each health round sweeps.
    pub(crate) async fn sweep(&self) {
        if !self.outbox.carries_notices() {
            return;
        }
        let seen = self.view().await.sequence;
        match self.store.catalog_events_page(seen, 1, 1 << 20).await {
            Ok(page) if !page.events.is_empty() => {
                if let Err(e) = self.take_in_catalog(seen + 1).await {
                    tracing::warn!("reading the catalog's changes failed: {e}");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("looking for catalog changes failed: {e}"),
        }
    }

    /// Refresh the catalog when another process moved it past this
    /// process's view (which passes the events between the two on). Under
    /// the catalog's change lock, so that a change of this process is never
    /// taken for another's.
    async fn take_in_catalog(&self, sequence: i64) -> Result<(), crate::error::EngineError> {
        let _changing = self.change.lock().await;
        if sequence > self.view().await.sequence {
            self.refresh_catalog().await?;
        }
        Ok(())
    }
}
