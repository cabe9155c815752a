//! Registering, updating and removing steps. The catalog is cached in
//! memory; every change is checked against the whole catalog (through its
//! attribute index, so at the cost of the change, not of the catalog) and
//! committed with optimistic concurrency on the catalog's event sequence, so
//! that two processes sharing a database cannot both add conflicting steps.

use std::sync::Arc;

use chrono::Utc;
use tartan_core::catalog::{Catalog, Registration};
use tartan_core::retry::RetryDefaults;
use tartan_core::step::Step;
use tartan_store::{CatalogChange, Store, StoreError};
use tokio::sync::{Mutex, RwLock};

use crate::{Engine, EngineError};

pub(crate) struct CatalogCache {
    current: RwLock<Arc<CatalogView>>,
    /// Serialises changes made by this process.
    change: Mutex<()>,
}

/// The catalog as of one sequence.
pub struct CatalogView {
    pub catalog: Catalog,
    pub sequence: i64,
    pub last_updated: Option<chrono::DateTime<Utc>>,
}

impl CatalogCache {
    pub(crate) async fn load(store: &dyn Store) -> Result<Self, EngineError> {
        Ok(Self {
            current: RwLock::new(Arc::new(Self::read(store).await?)),
            change: Mutex::new(()),
        })
    }

    async fn read(store: &dyn Store) -> Result<CatalogView, EngineError> {
        let snap = store.load_catalog().await?;
        // `effective_retry` is read-only and not stored: compute it again.
        let steps = snap.steps.into_iter().map(|s| {
            let fallback = s.clone();
            s.with_effective_retry(&RetryDefaults::default())
                .unwrap_or(fallback)
        });
        Ok(CatalogView {
            catalog: Catalog::new(steps),
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

impl Engine {
    /// The catalog as this process knows it.
    pub async fn catalog(&self) -> Arc<CatalogView> {
        self.inner.catalog.current.read().await.clone()
    }

    /// Re-read the catalog (another process may have changed it).
    pub async fn refresh_catalog(&self) -> Result<Arc<CatalogView>, EngineError> {
        let view = Arc::new(CatalogCache::read(self.inner.store.as_ref()).await?);
        *self.inner.catalog.current.write().await = view.clone();
        Ok(view)
    }

    /// Register a step. Returns the stored definition; an identical
    /// re-registration is accepted and changes nothing.
    pub async fn register_step(&self, step: Step) -> Result<Step, EngineError> {
        self.change_catalog(Change::Register(step)).await
    }

    /// Replace a step's definition.
    pub async fn update_step(&self, step: Step) -> Result<Step, EngineError> {
        self.change_catalog(Change::Update(step)).await
    }

    /// Remove a step; running flows keep the plan they started with.
    pub async fn unregister_step(&self, id: &str) -> Result<(), EngineError> {
        self.change_catalog(Change::Remove(id.to_string()))
            .await
            .map(|_| ())
    }

    async fn change_catalog(&self, change: Change) -> Result<Step, EngineError> {
        let _guard = self.inner.catalog.change.lock().await;
        // One retry after a conflict: the catalog is re-read and the change
        // decided again against what the other process committed.
        let mut view = self.catalog().await;
        for attempt in 0..3 {
            let defaults = &self.inner.config.work_defaults;
            let now = Utc::now();
            let (stored, record) = match &change {
                Change::Register(step) => {
                    let (s, reg) = view.catalog.check_register(step.clone(), defaults)?;
                    s.check_hosts(&self.inner.config.step_hosts)?;
                    let record =
                        (reg == Registration::Added).then(|| CatalogChange::Registered(s.clone(), now));
                    (s, record)
                }
                Change::Update(step) => {
                    let s = view.catalog.check_update(step.clone(), defaults)?;
                    s.check_hosts(&self.inner.config.step_hosts)?;
                    let unchanged = view.catalog.get(&s.id) == Some(&s);
                    let record = (!unchanged).then(|| CatalogChange::Updated(s.clone(), now));
                    (s, record)
                }
                Change::Remove(id) => {
                    let Some(s) = view.catalog.get(id).cloned() else {
                        return Err(EngineError::StepNotFound(id.clone()));
                    };
                    (s, Some(CatalogChange::Unregistered(id.clone(), now)))
                }
            };
            let Some(record) = record else {
                return Ok(stored);
            };
            match self.inner.store.commit_catalog(view.sequence, record).await {
                Ok(()) => {
                    // A persistent map: the copy is O(1), the change O(log n).
                    let mut catalog = view.catalog.clone();
                    match &change {
                        Change::Remove(id) => {
                            catalog.remove(id);
                        }
                        _ => catalog.insert(stored.clone()),
                    }
                    *self.inner.catalog.current.write().await = Arc::new(CatalogView {
                        catalog,
                        sequence: view.sequence + 1,
                        last_updated: Some(now),
                    });
                    return Ok(stored);
                }
                Err(StoreError::Conflict(_)) if attempt < 2 => {
                    view = self.refresh_catalog().await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(EngineError::Internal(
            "catalog kept changing under this request".into(),
        ))
    }
}
