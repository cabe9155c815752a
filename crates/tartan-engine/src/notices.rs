//! Notices between the processes sharing one Postgres (docs/architecture.md,
//! "Several processes on one Postgres"): what this process announces, and
//! the one listener whose notices are routed, by kind, to the component
//! that acts on them — aborts to the calls in flight, handed-back work to
//! the leases, events and catalog changes to the relays, bulk jobs to the
//! bulk runner, health changes to the dispatch gate, lane changes to the
//! lanes. Every notice only hastens what leases and sweeps would do
//! anyway, so a lost one costs time, never correctness.

use std::sync::Arc;

use tartan_store::{Notice, NoticeStore};

use tokio::sync::mpsc::{self, error::TrySendError, Receiver, Sender};

/// Announces in the background: the decision or change that prompted a
/// notice does not wait for it.
#[derive(Clone)]
pub(crate) struct Outbox {
    store: Arc<dyn NoticeStore>,
    carries: bool,
}

impl Outbox {
    /// `carries`: whether the database carries notices (only Postgres).
    pub(crate) fn new(store: Arc<dyn NoticeStore>, carries: bool) -> Self {
        Self { store, carries }
    }

    /// Only Postgres carries notices.
    pub(crate) fn carries_notices(&self) -> bool {
        self.carries
    }

    /// Tell the other processes `notice`, in the background.
    pub(crate) fn announce(&self, notice: Notice) {
        if !self.carries_notices() {
            return;
        }
        let outbox = self.clone();
        tokio::spawn(async move { outbox.announce_now(notice).await });
    }

    /// Tell the other processes `notice` now; a failure is logged, since
    /// leases and sweeps cover a lost notice.
    pub(crate) async fn announce_now(&self, notice: Notice) {
        if let Err(e) = self.store.announce(&notice).await {
            tracing::debug!("announcing {notice:?} failed (leases and sweeps cover it): {e}");
        }
    }
}

/// The notices heard, one receiver per kind; all `None` where the database
/// carries none (SQLite) or listening failed. Each component takes its own.
#[derive(Default)]
pub(crate) struct Inbox {
    /// Receipt tokens whose calls another process asks to abort.
    pub aborts: Option<Receiver<Vec<String>>>,
    /// `(head, node)`: how far a process's committed events reach.
    pub events: Option<Receiver<(i64, String)>>,
    /// `(sequence, node)`: a process committed the catalog this far.
    pub catalog: Option<Receiver<(i64, String)>>,
    /// Another process handed work back (many at once are one).
    pub handbacks: Option<Receiver<()>>,
    /// A bulk job was created (many at once are one).
    pub bulk_jobs: Option<Receiver<()>>,
    /// Another process recorded a health change (many at once are one).
    pub health: Option<Receiver<()>>,
    /// Lanes another process changed.
    pub lanes: Option<Receiver<String>>,
}

/// Where the router sends each kind.
struct Routes {
    aborts: Sender<Vec<String>>,
    events: Sender<(i64, String)>,
    catalog: Sender<(i64, String)>,
    handbacks: Sender<()>,
    bulk_jobs: Sender<()>,
    health: Sender<()>,
    lanes: Sender<String>,
}

/// Notices of one kind queued before the router waits for their reader.
const QUEUED: usize = 64;

impl Inbox {
    /// Listen on the store's one notice connection and route what comes.
    pub(crate) async fn open(store: &dyn NoticeStore) -> Inbox {
        let heard = match store.listen().await {
            Ok(Some(heard)) => heard,
            Ok(None) => return Inbox::default(),
            Err(e) => {
                tracing::warn!(
                    "not listening for other processes' notices (leases and sweeps cover them): {e}"
                );
                return Inbox::default();
            }
        };
        let (aborts, aborts_rx) = mpsc::channel(QUEUED);
        let (events, events_rx) = mpsc::channel(QUEUED);
        let (catalog, catalog_rx) = mpsc::channel(QUEUED);
        // "Look again" notices: one queued stands for any number.
        let (handbacks, handbacks_rx) = mpsc::channel(1);
        let (bulk_jobs, bulk_jobs_rx) = mpsc::channel(1);
        let (health, health_rx) = mpsc::channel(1);
        let (lanes, lanes_rx) = mpsc::channel(QUEUED);
        let routes = Routes {
            aborts,
            events,
            catalog,
            handbacks,
            bulk_jobs,
            health,
            lanes,
        };
        tokio::spawn(routes.run(heard));
        Inbox {
            aborts: Some(aborts_rx),
            events: Some(events_rx),
            catalog: Some(catalog_rx),
            handbacks: Some(handbacks_rx),
            bulk_jobs: Some(bulk_jobs_rx),
            health: Some(health_rx),
            lanes: Some(lanes_rx),
        }
    }
}

impl Routes {
    /// Route until the listener ends or no component listens any more (the
    /// engine stopped). A component that is not running (the event relay
    /// without streams) has dropped its receiver: its notices are dropped.
    async fn run(self, mut heard: Receiver<Notice>) {
        while let Some(notice) = heard.recv().await {
            match notice {
                Notice::Aborts(tokens) => {
                    let _ = self.aborts.send(tokens).await;
                }
                Notice::Events { node, head } => {
                    let _ = self.events.send((head, node)).await;
                }
                Notice::Catalog { node, sequence } => {
                    let _ = self.catalog.send((sequence, node)).await;
                }
                Notice::HandedBack { .. } => coalesce(&self.handbacks),
                Notice::BulkJob { .. } => coalesce(&self.bulk_jobs),
                Notice::Health { .. } => coalesce(&self.health),
                Notice::Lane { id } => {
                    let _ = self.lanes.send(id).await;
                }
            }
            if self.all_closed() {
                return;
            }
        }
    }

    fn all_closed(&self) -> bool {
        self.aborts.is_closed()
            && self.events.is_closed()
            && self.catalog.is_closed()
            && self.handbacks.is_closed()
            && self.bulk_jobs.is_closed()
            && self.health.is_closed()
            && self.lanes.is_closed()
    }
}

/// Queue a "look again" unless one is queued already.
fn coalesce(to: &Sender<()>) {
    match to.try_send(()) {
        Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Closed(())) => {}
    }
}

/// Handle each notice of one kind, one at a time, until `stopping` fires.
/// None heard (SQLite): nothing to do, the slower path covers it.
pub(crate) fn on_notices<T, F, Fut>(
    notices: Option<tokio::sync::mpsc::Receiver<T>>,
    stopping: tokio_util::sync::CancellationToken,
    handle: F,
) where
    T: Send + 'static,
    F: Fn(T) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let Some(mut notices) = notices else {
        return;
    };
    tokio::spawn(async move {
        loop {
            let notice = tokio::select! {
                n = notices.recv() => match n {
                    Some(notice) => notice,
                    None => return,
                },
                _ = stopping.cancelled() => return,
            };
            handle(notice).await;
        }
    });
}
