//! The store's connections: a pool per use, the turns of the API's reads
//! (docs/durability.md, "Connection pools"), and when Postgres's last
//! reached a standby (`StandbyMark`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Postgres: the connection batch commits go through (`PgKept`).
    pub(crate) pg_committer: Option<PgKept>,
    /// Postgres: the connection notices to other processes go through, its
    /// commits not waiting for the WAL flush (`PgKept::notices`).
    pub(crate) pg_notifier: Option<PgKept>,
    /// Commits waiting for their connection (`PgKept`; SQLite's write
    /// turn), and API reads for their turn: the waits the metrics show.
    pub(crate) commit_waits: Waits,
    pub(crate) api_waits: Waits,
}

/// Postgres: when a connection of this store last found itself on a
/// standby (a write refused, `StoreError::ReadOnly`, or a readiness check
/// finding `transaction_read_only` on): every connection of the store
/// opened before then is closed rather than handed out again (`reusable`,
/// and `PgKept`). Connections made while a failover was under way
/// (through a proxy or a DNS name not yet moved) lead to a node that stays
/// a standby: each write on them would be refused until the pool's idle
/// timeout, 10 minutes, closed them (docs/durability.md, "Failover").
/// One per store, shared by its pools' hooks, its kept connections and the
/// store that sets it (`standby::PgStore`): another store of the process
/// (tests run several engines in one) keeps its connections.
#[derive(Debug, Default)]
pub(crate) struct StandbyMark {
    seen: std::sync::Mutex<Option<Instant>>,
}

impl StandbyMark {
    /// A connection reached a standby: those opened until now are not reused.
    pub(crate) fn seen(&self) {
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }

    /// Whether a pooled connection may be handed out: not when it was
    /// opened before a connection last reached a standby.
    pub(crate) fn reusable(&self, meta: &sqlx::pool::PoolConnectionMetadata) -> bool {
        Instant::now()
            .checked_sub(meta.age)
            .is_none_or(|opened| self.opened_since(opened))
    }

    /// Whether a connection opened at `opened` is younger than the last
    /// sight of a standby.
    fn opened_since(&self, opened: Instant) -> bool {
        let seen = *self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.is_none_or(|seen| opened > seen)
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

/// Postgres: one connection kept between its statements, outside the
/// pools (docs/durability.md, "Connection pools"): the batch commits'
/// and the notices'. sqlx checks a pooled connection with a round trip
/// when it hands it out and again when it takes it back, which on the hot
/// path cost as much as a tenth of a commit; and the commit statement
/// binds arrays in Postgres's binary form, which the `Any` driver cannot.
/// One that fails as unreachable or read-only, or that was opened before
/// its store last saw a standby (`standby`), is let go; the next statement
/// opens another.
pub(crate) struct PgKept {
    options: sqlx::postgres::PgConnectOptions,
    kept: tokio::sync::Mutex<Option<(sqlx::PgConnection, Instant)>>,
    standby: Arc<StandbyMark>,
}

/// How long a statement waits to open its kept connection before the
/// database counts as unavailable (the pools' acquire timeout).
const KEPT_CONNECT: Duration = Duration::from_secs(5);

impl PgKept {
    /// The batch commits' connection.
    pub(crate) fn commits(options: sqlx::postgres::PgConnectOptions, standby: Arc<StandbyMark>) -> Self {
        Self {
            options,
            kept: tokio::sync::Mutex::new(None),
            standby,
        }
    }

    /// The notices' connection. A `NOTIFY` is a transaction with an id of
    /// its own, so each would wait for a WAL flush of its own, and a commit
    /// flushing meanwhile would wait for it; a notice is worth no flush
    /// (one lost is covered by leases and sweeps), so this connection
    /// commits without waiting for it (`synchronous_commit = off`).
    pub(crate) fn notices(options: sqlx::postgres::PgConnectOptions, standby: Arc<StandbyMark>) -> Self {
        Self::commits(options.options([("synchronous_commit", "off")]), standby)
    }

    /// All rows of `query`, run on the kept connection; `waits`, if any,
    /// counts the wait for it (the statement before's turn, and opening it
    /// when needed).
    pub(crate) async fn fetch_all<'q>(
        &self,
        query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
        waits: Option<&Waits>,
    ) -> Result<Vec<sqlx::postgres::PgRow>, StoreError> {
        use sqlx::Connection;
        let started = Instant::now();
        let mut kept = self.kept.lock().await;
        if kept
            .as_ref()
            .is_some_and(|(_, opened)| !self.standby.opened_since(*opened))
        {
            *kept = None;
        }
        let conn = match kept.as_mut() {
            Some((conn, _)) => conn,
            None => {
                let opened = Instant::now();
                let conn =
                    tokio::time::timeout(KEPT_CONNECT, sqlx::PgConnection::connect_with(&self.options))
                        .await
                        .map_err(|_| {
                            StoreError::Unavailable(format!(
                                "no connection to the database within {KEPT_CONNECT:?}"
                            ))
                        })??;
                &mut kept.insert((conn, opened)).0
            }
        };
        if let Some(waits) = waits {
            waits.record(started.elapsed());
        }
        query.fetch_all(&mut *conn).await.map_err(|e| {
            let e = StoreError::from(e);
            if e.unavailable().is_some() {
                // Maybe broken, or on a standby: closed when dropped.
                *kept = None;
            }
            e
        })
    }
}

/// How long an API read waits for its turn before it is answered 503.
const API_TURN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl SqlStore {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standby_seen_by_one_store_leaves_another_stores_connections_alone() {
        let (one, other) = (StandbyMark::default(), StandbyMark::default());
        let opened = Instant::now();
        assert!(one.opened_since(opened), "no standby seen yet");
        one.seen();
        assert!(!one.opened_since(opened), "opened before the standby was seen");
        assert!(one.opened_since(Instant::now() + Duration::from_millis(1)));
        assert!(other.opened_since(opened), "the other store saw no standby");
    }
}
