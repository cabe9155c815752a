//! SQLite's commit writer: one connection owned by a thread of its own
//! (docs/durability.md, "SQLite's writer").
//!
//! Through sqlx, every statement of a commit is a round trip between the
//! async task and sqlx's connection thread: a batch of the hot path took
//! ten of them (begin, six statements, commit), each a wake-up of another
//! thread, and each multi-row statement's text differed by its row count,
//! so its prepared form was rarely cached. Here the whole batch is one job:
//! handed to this thread once, run with cached one-row statements (SQLite
//! runs in this process: a statement costs a function call, not a network
//! round trip), answered once.
//!
//! One writer at a time: a job runs while its caller holds the sqlx write
//! pool's only connection (the write turn), so this connection and that
//! one never write at once and neither meets `SQLITE_BUSY`.

use std::path::Path;
use std::sync::mpsc;

use rusqlite::Connection;

use crate::error::StoreError;

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// The handle of the writer thread; the thread ends, closing its
/// connection, once the handle is dropped and its last job is done.
pub(crate) struct Writer {
    jobs: mpsc::SyncSender<Job>,
}

impl Writer {
    /// Open the database at `path` (migrated already) on a new thread.
    pub(crate) fn open(path: &Path, pragmas: &str) -> Result<Self, StoreError> {
        let mut conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| StoreError::Config(format!("opening {} for writing: {e}", path.display())))?;
        conn.execute_batch(pragmas).map_err(database)?;
        // Room for the statements of a commit and of its fallback.
        conn.set_prepared_statement_cache_capacity(32);
        // One job at a time is in flight (its caller holds the write turn
        // until it is answered): the queue never holds more than one.
        let (jobs, queue) = mpsc::sync_channel::<Job>(1);
        std::thread::Builder::new()
            .name("tartan-sqlite-writer".into())
            .spawn(move || {
                while let Ok(job) = queue.recv() {
                    // A job that panics loses its answer (its caller hears
                    // the writer stopped), not the writer.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&mut conn)));
                }
            })
            .map_err(|e| StoreError::Config(format!("starting the SQLite writer: {e}")))?;
        Ok(Self { jobs })
    }

    /// Run `job` on the writer's connection and answer what it returns.
    /// The caller holds the write turn.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Connection) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let _ = reply.send(job(conn));
        });
        self.jobs
            .try_send(job)
            .map_err(|_| StoreError::Unavailable("the SQLite writer is busy or stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the SQLite writer stopped".into()))
    }
}

/// A statement's failure; `SQLITE_BUSY` and `SQLITE_LOCKED` (another
/// process holding the file: never this one's own connections, which take
/// turns) as unavailable, so that the engine tries again later.
pub(crate) fn database(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            StoreError::Unavailable(e.to_string())
        }
        _ => StoreError::Database(e.to_string()),
    }
}
