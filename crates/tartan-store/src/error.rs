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
    /// A write reached a database that takes none (Postgres's `25006`): a
    /// standby, as a connection made before a failover or through a proxy
    /// not yet moved to the new primary reaches (docs/durability.md,
    /// "Failover"). Unavailable to its callers, as `Unavailable` is (the
    /// same message, the same 503 and retries); kept apart so that the
    /// store that sees it leave stops reusing the connections it opened
    /// before then (`connection::StandbyMark`).
    #[error("database unavailable: {0}")]
    ReadOnly(String),
}

impl StoreError {
    /// The cause, when the database could not take the request for now
    /// (`Unavailable`, or a standby's `ReadOnly`): callers treat both alike
    /// (a 503, a retry later), and only the store tells them apart.
    pub fn unavailable(&self) -> Option<&str> {
        match self {
            StoreError::Unavailable(cause) | StoreError::ReadOnly(cause) => Some(cause),
            _ => None,
        }
    }
}

/// What an sqlx error means to the store's callers. Pure: noting that a
/// standby was reached is for the store that sees `ReadOnly` leave it.
impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        let kind: fn(String) -> StoreError = match &e {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => StoreError::Unavailable,
            sqlx::Error::Database(db) => match db.code().as_deref() {
                // Postgres: a write reaching a standby, as a connection made
                // before a failover or a proxy not yet moved to the new
                // primary does (docs/durability.md, "When the database goes
                // away").
                Some("25006") => StoreError::ReadOnly,
                // Postgres: connection exceptions (08…), the server shutting
                // down or restarting (57P01–57P03).
                Some(c) if c.starts_with("08") || matches!(c, "57P01" | "57P02" | "57P03") => {
                    StoreError::Unavailable
                }
                _ => StoreError::Database,
            },
            _ => StoreError::Database,
        };
        kind(e.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A database's refusal with `code`, as a driver reports it.
    #[derive(Debug)]
    struct Refusal(&'static str);

    impl std::fmt::Display for Refusal {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "refused with {}", self.0)
        }
    }

    impl std::error::Error for Refusal {}

    impl sqlx::error::DatabaseError for Refusal {
        fn message(&self) -> &str {
            self.0
        }

        fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
            Some(self.0.into())
        }

        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }

        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }

        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }

        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    fn refused(code: &'static str) -> StoreError {
        StoreError::from(sqlx::Error::Database(Box::new(Refusal(code))))
    }

    #[test]
    fn a_standby_refusing_a_write_is_read_only_and_reads_as_unavailable() {
        let e = refused("25006");
        let StoreError::ReadOnly(cause) = &e else {
            panic!("{e:?}");
        };
        assert_eq!(e.to_string(), StoreError::Unavailable(cause.clone()).to_string());
        for code in ["08006", "57P01", "57P02", "57P03"] {
            assert!(matches!(refused(code), StoreError::Unavailable(_)), "{code}");
        }
        assert!(matches!(refused("23505"), StoreError::Database(_)));
        assert!(matches!(
            StoreError::from(sqlx::Error::PoolTimedOut),
            StoreError::Unavailable(_)
        ));
    }
}
