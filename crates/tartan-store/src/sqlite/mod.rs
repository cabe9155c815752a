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

pub(crate) mod writer;

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
    if schema == Schema::Migrate && path.symlink_metadata().is_err() {
        // Made here, owner-only, rather than by SQLite with the umask's
        // mode: it holds every flow's data and the webhook signing key.
        // SQLite takes an empty file as a new database, and gives its -wal
        // and -shm files the database file's mode.
        new_private_file(&path)?;
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
    let sqlite_writer = writer::Writer::open(&sqlite_path, PRAGMAS)?;
    Ok(SqlStore {
        write,
        read,
        api,
        api_turns: tokio::sync::Semaphore::new(api_size as usize),
        backend: Backend::Sqlite,
        listen_url: None,
        sqlite_path: Some(sqlite_path),
        sqlite_writer: Some(sqlite_writer),
        pg_committer: None,
        pg_notifier: None,
        commit_waits: Default::default(),
        api_waits: Default::default(),
    })
}

/// Create `path` as a new, empty file only its owner may read or write;
/// refused when anything is there, a link included.
fn new_private_file(path: &std::path::Path) -> Result<(), StoreError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(path)
        .map(drop)
        .map_err(|e| StoreError::Config(format!("creating {}: {e}", path.display())))
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
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options
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

/// A consistent copy of the SQLite database `url` names, made while it is
/// in use (docs/operating.md, "Backups"): `VACUUM INTO` reads one snapshot
/// in a read transaction, so the engine serving the file goes on writing
/// (WAL readers do not block the writer). The copy is written beside `to`
/// as `<to>.partial`, synced, then renamed: `to` is either absent or whole,
/// whenever the process stops. Refused when `to` exists. Its size in bytes.
pub(crate) async fn backup(url: &str, to: &std::path::Path) -> Result<u64, StoreError> {
    let options = native_options(url, false)?;
    let source = options.get_filename().to_path_buf();
    if !source.exists() {
        return Err(StoreError::Config(format!(
            "there is no SQLite database at {} to back up",
            source.display()
        )));
    }
    // `symlink_metadata`: a link is never followed, even one to nothing.
    if to.symlink_metadata().is_ok() {
        return Err(StoreError::Config(format!(
            "{} exists: a backup never overwrites a file; name a new one",
            to.display()
        )));
    }
    let mut partial = to.as_os_str().to_owned();
    partial.push(".partial");
    let partial = std::path::PathBuf::from(partial);
    match partial.symlink_metadata() {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(StoreError::Config(format!(
                "{} is a symbolic link: a backup never writes through one",
                partial.display()
            )))
        }
        // Left by a backup that was stopped half way: never a whole backup.
        Ok(_) => std::fs::remove_file(&partial)
            .map_err(|e| StoreError::Config(format!("removing {}: {e}", partial.display())))?,
        Err(_) => {}
    }
    // Created here, new (never through a link) and owner-only; `VACUUM
    // INTO` fills an empty file.
    new_private_file(&partial)?;
    let target = partial
        .to_str()
        .ok_or_else(|| StoreError::Config(format!("{} is not UTF-8", partial.display())))?
        .to_string();
    let native = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await?;
    let copied = sqlx::query("VACUUM INTO ?").bind(&target).execute(&native).await;
    native.close().await;
    copied.map_err(|e| {
        StoreError::Database(format!(
            "copying {} to {}: {e}",
            source.display(),
            partial.display()
        ))
    })?;
    let io = |what: &str, e: std::io::Error| StoreError::Config(format!("{what}: {e}"));
    let file = std::fs::File::open(&partial).map_err(|e| io(&format!("opening {}", partial.display()), e))?;
    file.sync_all()
        .map_err(|e| io(&format!("syncing {}", partial.display()), e))?;
    let size = file
        .metadata()
        .map_err(|e| io(&format!("reading {}", partial.display()), e))?
        .len();
    std::fs::rename(&partial, to)
        .map_err(|e| io(&format!("renaming {} to {}", partial.display(), to.display()), e))?;
    // The rename itself survives a power loss once the directory is synced.
    if let Some(dir) = to.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(dir) = std::fs::File::open(dir) {
            let _ = dir.sync_all();
        }
    }
    Ok(size)
}
