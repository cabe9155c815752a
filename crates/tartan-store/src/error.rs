use thiserror::Error;

/// What can go wrong in the store. sqlx errors are translated here; callers
/// never match on them.
#[derive(Debug, Clone, Error)]
pub enum StoreError {
    /// The flow id is taken.
    #[error("flow exists: {0}")]
    FlowExists(String),
    /// Someone else changed the aggregate first; reload and decide again.
    #[error("concurrent change of {0}")]
    Conflict(String),
    /// Bad configuration (URL, options).
    #[error("{0}")]
    Config(String),
    /// A stored value could not be read back.
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    /// A statement failed.
    #[error("database error: {0}")]
    Database(String),
    /// Another live process on this database runs under this node id.
    #[error(
        "node id {0:?} is in use by another running process on this database; give this process a \
         different TARTAN_NODE_ID (--node-id), or stop the other one first (a stopped or killed \
         process frees its id at once)"
    )]
    NodeInUse(String),
    /// Another live process serves this SQLite file.
    #[error(
        "another tartan process serves the SQLite database {0}: SQLite is for one process; stop the \
         other one first, or use Postgres (TARTAN_DATABASE_URL=postgres://...) to run several"
    )]
    DatabaseInUse(String),
    /// The database cannot be reached (down, restarting, failing over, no
    /// connection free in time): trying again later may succeed.
    #[error("database unavailable: {0}")]
    Unavailable(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        let unreachable = match &e {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => true,
            // Postgres: connection exceptions (08…), the server shutting
            // down or restarting (57P01–57P03), and a write reaching a
            // standby (25006), as a connection made before a failover or a
            // proxy not yet moved to the new primary does
            // (docs/durability.md, "When the database goes away").
            sqlx::Error::Database(db) => db.code().is_some_and(|c| {
                if c == "25006" {
                    crate::connection::standby_seen();
                }
                c.starts_with("08") || matches!(c.as_ref(), "57P01" | "57P02" | "57P03" | "25006")
            }),
            _ => false,
        };
        if unreachable {
            StoreError::Unavailable(e.to_string())
        } else {
            StoreError::Database(e.to_string())
        }
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        StoreError::Database(format!("migration failed: {e}"))
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::Corrupt(e.to_string())
    }
}
