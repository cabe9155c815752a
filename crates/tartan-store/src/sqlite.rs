//! SQLite: the embedded default. WAL mode with one writer connection; a
//! committed transaction survives a killed process. With `synchronous =
//! NORMAL` a power loss can lose the last transactions committed before it,
//! never the file's integrity (see docs/durability.md).

use std::str::FromStr;
use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::Executor;

use crate::connection::SqlStore;
use crate::dialect::{quiet, Backend};
use crate::error::StoreError;
use crate::schema::{Migration, Schema};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

// `journal_size_limit`: after a checkpoint the WAL file is cut back to
// 4 MiB; without it, it keeps the size of its largest burst for good.
const PRAGMAS: &str = "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
                       PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = ON; \
                       PRAGMA journal_size_limit = 4194304;";

fn pool(size: u32) -> AnyPoolOptions {
    AnyPoolOptions::new()
        .max_connections(size)
        // A SQLite connection lives in this process and does not break as a
        // network connection does: checking it before each use (sqlx's
        // default) is a round trip to its worker thread for nothing, before
        // every commit of the hot path.
        .test_before_acquire(false)
        .after_connect(|conn, _| {
            Box::pin(async move {
                conn.execute(PRAGMAS).await?;
                Ok(())
            })
        })
}

/// The native driver's options for the file `url` names; it is created
/// when missing only if `create`.
fn native_options(url: &str, create: bool) -> Result<SqliteConnectOptions, StoreError> {
    Ok(SqliteConnectOptions::from_str(url)
        .map_err(|e| StoreError::Config(format!("invalid SQLite URL {url:?}: {e}")))?
        .create_if_missing(create)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10)))
}

/// Bring the schema to this binary's as `schema` says (creating the file
/// to migrate it); the migrations applied now. With the native driver,
/// which knows how to create a missing database file.
pub(crate) async fn prepare(url: &str, schema: Schema) -> Result<Vec<Migration>, StoreError> {
    let options = native_options(url, schema == Schema::Migrate)?;
    let path = options.get_filename().to_path_buf();
    if schema == Schema::Require && !path.exists() {
        return Err(StoreError::Config(format!(
            "there is no SQLite database at {}: run `tartan migrate` to create it, or start `tartan \
             serve` without --no-migrate",
            path.display()
        )));
    }
    let native = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await?;
    let applied = crate::schema::applied_sqlite(&native).await?;
    let missing = crate::schema::plan(&MIGRATOR, &applied, schema)?;
    if !missing.is_empty() {
        MIGRATOR.run(&native).await?;
    }
    native.close().await;
    Ok(missing)
}

pub(crate) async fn open(url: &str, pools: &crate::Pools, schema: Schema) -> Result<SqlStore, StoreError> {
    sqlx::any::install_default_drivers();
    prepare(url, schema).await?;
    let sqlite_path = native_options(url, false)?.get_filename().to_path_buf();

    // One writer (SQLite allows one), a few readers for the engine and a
    // few for the API's listings, each set up alike (docs/durability.md,
    // "Connection pools"). WAL readers never block the writer.
    let write = pool(1).connect_with(quiet(url)?).await?;
    let read = pool(pools.engine.unwrap_or(4)).connect_with(quiet(url)?).await?;
    let api_size = pools.read.unwrap_or(4);
    let api = pool(api_size).connect_with(quiet(url)?).await?;
    Ok(SqlStore {
        write,
        read,
        api,
        api_turns: tokio::sync::Semaphore::new(api_size as usize),
        backend: Backend::Sqlite,
        listen_url: None,
        sqlite_path: Some(sqlite_path),
        committer: tokio::sync::Mutex::new(None),
        commit_waits: Default::default(),
        api_waits: Default::default(),
    })
}

/// One process serves a SQLite file (docs/operating.md, "SQLite"): its
/// catalog and its timers live in that process's memory, so a second would
/// serve stale steps and race the first for the same work. The process
/// holds an exclusive `flock` on `<database>.lock`, which the kernel
/// releases when it ends, however it ends; a second is refused at start.
/// The node id needs no lock of its own: no other process can use it here.
pub(crate) fn hold_node(db: &std::path::Path, _node: &str) -> Result<crate::NodeGuard, StoreError> {
    let mut name = db.as_os_str().to_owned();
    name.push(".lock");
    let path = std::path::PathBuf::from(name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| StoreError::Config(format!("opening the lock {}: {e}", path.display())))?;
    #[cfg(unix)]
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => {
            return Err(StoreError::DatabaseInUse(db.display().to_string()))
        }
        Err(e) => return Err(StoreError::Config(format!("locking {}: {e}", path.display()))),
    }
    Ok(crate::NodeGuard::new(file))
}
