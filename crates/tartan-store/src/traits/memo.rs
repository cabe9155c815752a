use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::StoreError;

/// Memoized answers of memoizable steps (docs/steps.md, "Memoization").
#[async_trait]
pub trait MemoStore: Send + Sync {
    /// The outputs stored under `key` (JSON text), unless expired at `now`.
    async fn memo_get(&self, key: &str, now: DateTime<Utc>) -> Result<Option<String>, StoreError>;

    /// Store `outputs` (JSON text) under `key` unless an answer is there
    /// already (the first is kept, as Argyll keeps it).
    async fn memo_put(
        &self,
        key: &str,
        step_id: &str,
        outputs: &str,
        now: DateTime<Utc>,
        expires: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError>;

    /// Delete the expired answers and, past `keep`, the oldest; how many went.
    async fn memo_prune(&self, now: DateTime<Utc>, keep: u64) -> Result<u64, StoreError>;
}
