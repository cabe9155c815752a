use async_trait::async_trait;

use crate::StoreError;

/// A flow's place in its concurrency key's line, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinePlace {
    pub key: String,
    pub limit: i64,
    /// `waiting`, `admitting` or `running`.
    pub state: String,
    /// Among the waiting flows, 1 for the next to run (0 unless waiting).
    pub place: i64,
    /// The key's flows running now (admitting included), and waiting.
    pub running: i64,
    pub waiting: i64,
}

/// What the sweep finds a dead engine (or a lost answer) left undone in
/// the lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StalledLines {
    /// Keys with flows waiting while fewer than their limit run.
    pub keys: Vec<String>,
    /// Flows let in before the time asked whose `flow_admitted` is not
    /// committed, each with when it joined (`Admitted::joined_us`).
    pub admitting: Vec<Admitted>,
}

/// A flow let in on its turn, and when it joined the line (the row's
/// `queued_us`): its turn is for that place in the line only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    pub flow_id: String,
    pub joined_us: i64,
}

/// The lines of concurrency keys (docs/concurrency.md). A flow's row is
/// written by the commits that start, admit and end it (`FlowCommit::line`);
/// these let the next flows in and read places.
#[async_trait]
pub trait LineStore: Send + Sync {
    /// Let in as many of `key`'s waiting flows, in turn order, as the limit
    /// of the first leaves room for beside those running, marking them
    /// admitting at `now_us`; them, in turn order. Two
    /// engines letting one key's flows in take turns (on Postgres, a lock
    /// on the key for the transaction).
    async fn line_admit(&self, key: &str, now_us: i64) -> Result<Vec<Admitted>, StoreError>;

    /// What is left undone: keys with room and flows waiting, and flows
    /// admitting since before `admitted_before_us`.
    async fn lines_stalled(&self, admitted_before_us: i64) -> Result<StalledLines, StoreError>;

    /// A flow's place in its line (`None`: it has no row: no key, or
    /// it ended).
    async fn line_place(&self, flow_id: &str) -> Result<Option<LinePlace>, StoreError>;

    /// Flows waiting in all lines, and running: for the metrics.
    async fn line_counts(&self) -> Result<(i64, i64), StoreError>;
}
