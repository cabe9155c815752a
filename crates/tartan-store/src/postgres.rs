//! Postgres: for production and for several engine processes on one
//! database. Claims use `FOR UPDATE SKIP LOCKED` (see `sql::claim_sql`).

use sqlx::any::AnyPoolOptions;
use sqlx::postgres::PgPoolOptions;
use sqlx::Executor;

use crate::error::StoreError;
use crate::sql::{Backend, SqlStore};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

const ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

pub(crate) async fn open(url: &str, pools: &crate::Pools) -> Result<SqlStore, StoreError> {
    sqlx::any::install_default_drivers();
    let native = PgPoolOptions::new().max_connections(1).connect(url).await?;
    MIGRATOR.run(&native).await?;
    native.close().await;
    let engine = AnyPoolOptions::new()
        .max_connections(pools.engine.unwrap_or(16))
        // While the database is away, a request waits this long for a
        // connection, then is answered 503; the engine's own commits try
        // again (see `decide_persistently`).
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(crate::sql::quiet(url)?)
        .await?;
    // The API's listings: a pool of their own, and a bound on each
    // statement, so that they cannot hold what commits and lease renewal
    // need (docs/durability.md, "Connection pools").
    let timeout_ms = pools.read_timeout.as_millis().max(1);
    let api_size = pools.read.unwrap_or(4);
    let api = AnyPoolOptions::new()
        .max_connections(api_size)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                conn.execute(format!("SET statement_timeout = {timeout_ms}").as_str())
                    .await?;
                Ok(())
            })
        })
        .connect_with(crate::sql::quiet(url)?)
        .await?;
    Ok(SqlStore {
        write: engine.clone(),
        read: engine,
        api,
        api_turns: tokio::sync::Semaphore::new(api_size as usize),
        backend: Backend::Postgres,
        listen_url: Some(url.to_string()),
    })
}

/// The `NOTIFY` channel of abort announcements.
pub(crate) const ABORT_CHANNEL: &str = "tartan_abort";

/// Listen for abort announcements on a connection of its own; the listener
/// reconnects by itself after the database went away (notices sent
/// meanwhile are lost: lease renewal is the fallback).
pub(crate) async fn listen_aborts(url: &str) -> Result<tokio::sync::mpsc::Receiver<Vec<String>>, StoreError> {
    let mut listener = sqlx::postgres::PgListener::connect(url).await?;
    listener.listen(ABORT_CHANNEL).await?;
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            match listener.recv().await {
                Ok(notice) => {
                    let tokens = notice.payload().split(',').map(str::to_string).collect();
                    if tx.send(tokens).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!("listening for abort notices: {e}; trying again");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
    });
    Ok(rx)
}
