//! Event histories a page at a time (docs/api.md, "Event histories"): the
//! database reads one page and one row more, to tell whether another page
//! follows, so that a history of any length costs a page's memory.

use sqlx::Row;

use crate::connection::SqlStore;
use crate::error::StoreError;
use crate::model::*;

use super::{off_workers, stored_event, values};

impl SqlStore {
    /// At most `limit` events of one aggregate with a sequence after
    /// `after`, and at most `max_bytes` of their data (or the first event
    /// alone, if larger).
    pub(super) async fn events_page(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<EventPage, StoreError> {
        let _turn = self.api_turn().await?;
        // The sizes first, then the events that fit: a page of large events
        // is cut short before they are read, not after. The primary key
        // (aggregate_type, aggregate_id, sequence) serves both the filter
        // and the order.
        let sizes = sqlx::query(
            "SELECT sequence, CAST(octet_length(data) + COALESCE(value_bytes, 0) AS BIGINT) AS size FROM events \
             WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence > $3 ORDER BY sequence LIMIT $4",
        )
        .bind(aggregate_type)
        .bind(aggregate_id)
        .bind(after)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX - 1).saturating_add(1))
        .fetch_all(&self.api)
        .await?
        .iter()
        .map(|row| Ok((row.try_get::<i64, _>("sequence")?, row.try_get::<i64, _>("size")?)))
        .collect::<Result<Vec<(i64, i64)>, StoreError>>()?;
        let taken = fitting(sizes.iter().map(|(_, size)| *size), limit, max_bytes);
        let Some(&(last, _)) = taken.checked_sub(1).and_then(|k| sizes.get(k)) else {
            return Ok(EventPage::default());
        };
        // Sequences are gap-free within an aggregate, so these are the rows
        // measured (fewer if retention deleted the flow meanwhile).
        let rows = sqlx::query(
            "SELECT aggregate_type, aggregate_id, sequence, event_type, ts_us, data, value_refs FROM events \
             WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence > $3 AND sequence <= $4 \
             ORDER BY sequence",
        )
        .bind(aggregate_type)
        .bind(aggregate_id)
        .bind(after)
        .bind(last)
        .fetch_all(&self.api)
        .await?;
        let more = sizes.len() > taken;
        let texts = values::resolve(&self.api, &rows, "data", "value_refs", "aggregate_id").await?;
        off_workers(move || {
            let mut events = rows
                .iter()
                .zip(&texts)
                .map(|(row, text)| stored_event(row, text))
                .collect::<Result<Vec<_>, _>>()?;
            events.shrink_to_fit();
            Ok(EventPage {
                events,
                next: more.then_some(last),
            })
        })
        .await
    }
}

/// How many of a page's candidate rows, of these sizes in order, it takes:
/// at most `limit`, and no more than `max_bytes` in all, but always the
/// first (a page makes progress whatever the size of one event).
pub(super) fn fitting(sizes: impl Iterator<Item = i64>, limit: usize, max_bytes: usize) -> usize {
    let budget = u64::try_from(max_bytes).unwrap_or(u64::MAX);
    let mut total: u64 = 0;
    let mut taken = 0;
    for size in sizes.take(limit) {
        let size = u64::try_from(size).unwrap_or(0);
        if taken > 0 && total.saturating_add(size) > budget {
            break;
        }
        total = total.saturating_add(size);
        taken += 1;
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::fitting;

    #[test]
    fn a_page_stops_at_its_count_or_its_bytes_but_takes_one() {
        assert_eq!(fitting([10, 10, 10].into_iter(), 2, 100), 2);
        assert_eq!(fitting([10, 10, 10].into_iter(), 5, 20), 2);
        assert_eq!(fitting([10, 10, 10].into_iter(), 5, 19), 1);
        assert_eq!(
            fitting([500, 1].into_iter(), 5, 100),
            1,
            "one event over the bound"
        );
        assert_eq!(fitting([].into_iter(), 5, 100), 0);
        assert_eq!(fitting([1, 2].into_iter(), 0, 100), 0);
    }
}
