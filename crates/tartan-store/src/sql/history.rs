//! Event histories a page at a time (docs/api.md, "Event histories"): the
//! database reads one page and one row more, to tell whether another page
//! follows, so that a history of any length costs a page's memory.

use crate::connection::SqlStore;
use crate::error::StoreError;
use crate::model::*;

use super::{off_workers, stored_event};

impl SqlStore {
    /// At most `limit` events of one aggregate with a sequence after `after`.
    pub(super) async fn events_page(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        after: i64,
        limit: usize,
    ) -> Result<EventPage, StoreError> {
        let _turn = self.api_turn().await?;
        // The primary key (aggregate_type, aggregate_id, sequence) serves
        // both the filter and the order.
        let rows = sqlx::query(
            "SELECT aggregate_type, aggregate_id, sequence, event_type, ts_us, data FROM events \
             WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence > $3 ORDER BY sequence LIMIT $4",
        )
        .bind(aggregate_type)
        .bind(aggregate_id)
        .bind(after)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX - 1).saturating_add(1))
        .fetch_all(&self.api)
        .await?;
        off_workers(move || {
            let mut events = rows
                .iter()
                .take(limit)
                .map(stored_event)
                .collect::<Result<Vec<_>, _>>()?;
            let next = if rows.len() > limit {
                events.last().map(|e| e.sequence)
            } else {
                None
            };
            events.shrink_to_fit();
            Ok(EventPage { events, next })
        })
        .await
    }
}
