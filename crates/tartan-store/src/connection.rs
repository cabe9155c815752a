//! The store's connections: a pool per use, and the turns of the API's
//! reads (docs/durability.md, "Connection pools").

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::any::{AnyArguments, AnyRow};
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyPool};

use crate::dialect::Backend;
use crate::error::StoreError;

/// Both databases behind the sqlx `Any` driver. SQLite gets a one-connection
/// writer pool (it allows one writer) and a separate reader pool; Postgres
/// uses one pool for both. The API's listings and histories have a pool of
/// their own on both (docs/durability.md, "Connection pools").
pub(crate) struct SqlStore {
    pub(crate) write: AnyPool,
    pub(crate) read: AnyPool,
    pub(crate) api: AnyPool,
    /// One turn per connection of `api`: a listing holds it from its query
    /// to its last decoded row, so that no more listings decode at once
    /// than there are connections.
    pub(crate) api_turns: tokio::sync::Semaphore,
    pub(crate) backend: Backend,
    /// Postgres: where to listen for other processes' notices.
    pub(crate) listen_url: Option<String>,
    /// SQLite: the database file (node locks live next to it).
    pub(crate) sqlite_path: Option<std::path::PathBuf>,
    /// SQLite: the thread that commits the batches of decisions, on a
    /// connection of its own (docs/durability.md, "SQLite's writer").
    pub(crate) sqlite_writer: Option<crate::sqlite::writer::Writer>,
    /// Postgres: the connection batch commits go through, kept between
    /// them. Taking one from the pool checks it with a round trip first
    /// (sqlx's ping), which would be one more per commit on the hot path
    /// (BENCHMARKS.md, "The relay, and the commit path"). One that fails as
    /// unreachable is let go, and the next commit takes a checked one.
    pub(crate) committer: tokio::sync::Mutex<Option<PoolConnection<Any>>>,
    /// Commits waiting for `committer` (and for a connection when none is
    /// kept), and API reads for their turn: the waits the metrics show.
    pub(crate) commit_waits: Waits,
    pub(crate) api_waits: Waits,
}

/// When a connection of this process last found itself on a standby (a
/// write refused with `25006`, or `transaction_read_only` on): every pooled
/// connection opened before then is closed rather than handed out again
/// (`reusable`). Connections made while a failover was under way (through
/// a proxy or a DNS name not yet moved) lead to a node that stays a
/// standby: each write on them would be refused until the pool's idle
/// timeout, 10 minutes, closed them (docs/durability.md, "Failover"). Process-wide because the error conversion that sees the
/// `25006` has no store at hand; another store of the same process (tests)
/// only reconnects once more.
static STANDBY_SEEN: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);

/// A connection reached a standby: those opened until now are not reused.
pub(crate) fn standby_seen() {
    *STANDBY_SEEN.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
}

/// Whether a pooled connection may be handed out: not when it was opened
/// before a connection last reached a standby (`standby_seen`).
pub(crate) fn reusable(meta: &sqlx::pool::PoolConnectionMetadata) -> bool {
    let seen = *STANDBY_SEEN.lock().unwrap_or_else(|p| p.into_inner());
    match (seen, Instant::now().checked_sub(meta.age)) {
        (Some(seen), Some(opened)) => opened > seen,
        _ => true,
    }
}

/// How often, and how long in all, something waited for a connection.
#[derive(Debug, Default)]
pub(crate) struct Waits {
    count: AtomicU64,
    nanos: AtomicU64,
}

impl Waits {
    pub(crate) fn record(&self, waited: Duration) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    fn read(&self) -> (u64, f64) {
        let nanos = self.nanos.load(Ordering::Relaxed);
        (self.count.load(Ordering::Relaxed), nanos as f64 / 1e9)
    }
}

/// How long an API read waits for its turn before it is answered 503.
const API_TURN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl SqlStore {
    /// All rows of a batch commit's `query`, run on the kept connection
    /// (`committer`), taken from the pool when there is none.
    pub(crate) async fn fetch_on_committer<'q>(
        &self,
        query: sqlx::query::Query<'q, Any, AnyArguments<'q>>,
    ) -> Result<Vec<AnyRow>, StoreError> {
        let started = Instant::now();
        let mut kept = self.committer.lock().await;
        let conn = match kept.as_mut() {
            Some(conn) => conn,
            None => kept.insert(self.write.acquire().await?),
        };
        self.commit_waits.record(started.elapsed());
        query.fetch_all(&mut **conn).await.map_err(|e| {
            let e = StoreError::from(e);
            if matches!(e, StoreError::Unavailable(_)) {
                // Maybe broken: out of the pool, closed when dropped.
                if let Some(conn) = kept.take() {
                    drop(conn.detach());
                }
            }
            e
        })
    }

    /// A batch commit's transaction on the write pool (SQLite's one writer;
    /// Postgres when a batch cannot go in one statement), its wait for the
    /// connection counted with the commits' (`commit_waits`; the `BEGIN`'s
    /// round trip is in it too).
    pub(crate) async fn begin_commit(&self) -> Result<sqlx::Transaction<'static, Any>, sqlx::Error> {
        let started = Instant::now();
        let tx = self.write.begin().await;
        self.commit_waits.record(started.elapsed());
        tx
    }

    /// An API read's turn (docs/durability.md, "Connection pools").
    pub(crate) async fn api_turn(&self) -> Result<tokio::sync::SemaphorePermit<'_>, StoreError> {
        let started = Instant::now();
        let turn = tokio::time::timeout(API_TURN_WAIT, self.api_turns.acquire()).await;
        self.api_waits.record(started.elapsed());
        match turn {
            Ok(Ok(turn)) => Ok(turn),
            Ok(Err(_)) => Err(StoreError::Unavailable("the store is closed".into())),
            Err(_) => Err(StoreError::Unavailable(format!(
                "every API read connection busy for {API_TURN_WAIT:?} (TARTAN_DB_READ_POOL)"
            ))),
        }
    }
}

impl crate::traits::PoolStats for SqlStore {
    fn pools(&self) -> Vec<crate::traits::PoolReading> {
        let reading = |pool: &'static str, of: &AnyPool, waits: Option<&Waits>| {
            let (waits, wait_seconds) = waits.map_or((0, 0.0), Waits::read);
            crate::traits::PoolReading {
                pool,
                size: of.size(),
                idle: u32::try_from(of.num_idle()).unwrap_or(u32::MAX),
                max: of.options().get_max_connections(),
                waits,
                wait_seconds,
            }
        };
        match self.backend {
            // One pool for the engine's reads and writes.
            Backend::Postgres => vec![
                reading("engine", &self.write, Some(&self.commit_waits)),
                reading("api", &self.api, Some(&self.api_waits)),
            ],
            Backend::Sqlite => vec![
                reading("write", &self.write, Some(&self.commit_waits)),
                reading("read", &self.read, None),
                reading("api", &self.api, Some(&self.api_waits)),
            ],
        }
    }
}
