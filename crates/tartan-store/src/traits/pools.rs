//! The connection pools as the metrics show them (docs/operating.md,
//! "Metrics"): how many connections each holds, how many are idle, and how
//! long the engine waited for one.

/// One pool, read now.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolReading {
    /// `engine` (Postgres: commits, claims and timers), `write` and `read`
    /// (SQLite's one writer and its readers), `api` (the API's listings).
    pub pool: &'static str,
    /// Connections open, idle or in use.
    pub size: u32,
    pub idle: u32,
    /// The most it may open.
    pub max: u32,
    /// Times the engine waited for this pool's connection: commits for the
    /// kept commit connection, API reads for their turn.
    pub waits: u64,
    /// How long those waits took, in all.
    pub wait_seconds: f64,
}

/// The pools' state, read at each scrape.
pub trait PoolStats {
    fn pools(&self) -> Vec<PoolReading>;
}
