//! Postgres: for production and for several engine processes on one
//! database. Claims use `FOR UPDATE SKIP LOCKED` (see `sql::claim_sql`).

use sqlx::any::AnyPoolOptions;
use sqlx::postgres::PgPoolOptions;

use crate::error::StoreError;
use crate::sql::{Backend, SqlStore};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

const ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

pub(crate) async fn open(url: &str) -> Result<SqlStore, StoreError> {
    sqlx::any::install_default_drivers();
    let native = PgPoolOptions::new().max_connections(1).connect(url).await?;
    MIGRATOR.run(&native).await?;
    native.close().await;
    let pool = AnyPoolOptions::new()
        .max_connections(16)
        // While the database is away, a request waits this long for a
        // connection, then is answered 503; the engine's own commits try
        // again (see `decide_persistently`).
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(crate::sql::quiet(url)?)
        .await?;
    Ok(SqlStore {
        write: pool.clone(),
        read: pool,
        backend: Backend::Postgres,
    })
}
