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

pub(crate) async fn open(url: &str, pools: &crate::Pools) -> Result<SqlStore, StoreError> {
    sqlx::any::install_default_drivers();
    // Create the file and apply migrations with the native driver, which
    // knows how to create a missing database file.
    let options = SqliteConnectOptions::from_str(url)
        .map_err(|e| StoreError::Config(format!("invalid SQLite URL {url:?}: {e}")))?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10));
    let sqlite_path = options.get_filename().to_path_buf();
    let native = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await?;
    MIGRATOR.run(&native).await?;
    native.close().await;

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
    })
}

/// An exclusive `flock` on `<database>.node-<id>.lock`: the kernel releases
/// it when the process ends, however it ends. The id is spelled into the
/// name with anything but letters, digits, `-` and `_` as `%xx`.
pub(crate) fn hold_node(db: &std::path::Path, node: &str) -> Result<crate::NodeGuard, StoreError> {
    let mut name = db.as_os_str().to_owned();
    name.push(".node-");
    let spelled: String = node
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
                char::from(b).to_string()
            } else {
                format!("%{b:02x}")
            }
        })
        .collect();
    name.push(spelled);
    name.push(".lock");
    let path = std::path::PathBuf::from(name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| StoreError::Config(format!("opening the node lock {}: {e}", path.display())))?;
    #[cfg(unix)]
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => return Err(StoreError::NodeInUse(node.to_string())),
        Err(e) => {
            return Err(StoreError::Config(format!(
                "locking the node lock {}: {e}",
                path.display()
            )))
        }
    }
    Ok(crate::NodeGuard::new(file))
}
