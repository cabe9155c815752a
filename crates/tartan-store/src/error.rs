use thiserror::Error;

/// What can go wrong in the store. sqlx errors are translated here; callers
/// never match on them.
#[derive(Debug, Error)]
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
    /// The database failed or is unreachable.
    #[error("database error: {0}")]
    Database(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        StoreError::Database(e.to_string())
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
