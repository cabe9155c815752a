//! The feed: every flow event of the database in global-position order,
//! for the global event stream and for relaying other processes' events
//! (docs/api.md, "Event streams"). Positions are gap-free in commit order
//! (see `commit::take_positions`), so a reader that has read up to `p`
//! never finds an event at or below `p` later.

use async_trait::async_trait;
use sqlx::Row;

use crate::connection::SqlStore;
use crate::error::StoreError;
use crate::model::*;
use crate::FeedStore;

use super::history::fitting;
use super::{off_workers, stored_event, values};

/// A page looks at most this many positions ahead, so that a filter that
/// matches little costs a bounded scan per statement.
const WINDOW: i64 = 10_000;

#[async_trait]
impl FeedStore for SqlStore {
    /// The position of the last committed flow event.
    async fn feed_head(&self) -> Result<i64, StoreError> {
        let _turn = self.api_turn().await?;
        Ok(sqlx::query("SELECT last FROM event_positions WHERE id = 1")
            .fetch_one(&self.api)
            .await?
            .try_get("last")?)
    }

    async fn feed_page(
        &self,
        after: i64,
        filter: &FeedFilter,
        limit: usize,
        max_bytes: usize,
    ) -> Result<FeedPage, StoreError> {
        // The head first, then the rows up to it: everything at or below a
        // committed head is visible to the later statement.
        let head = self.feed_head().await?;
        let upto = head.min(after.saturating_add(WINDOW));
        let empty = FeedPage {
            events: Vec::new(),
            reached: after,
            head,
        };
        if upto <= after || limit == 0 {
            return Ok(empty);
        }
        let mut filters = String::new();
        let mut n = 2;
        if filter.flow_prefix.is_some() {
            filters.push_str(&format!(" AND substr(aggregate_id, 1, ${}) = ${}", n + 1, n + 2));
            n += 2;
        }
        if !filter.event_types.is_empty() {
            let list: Vec<String> = (0..filter.event_types.len())
                .map(|k| format!("${}", n + 1 + k))
                .collect();
            filters.push_str(&format!(" AND event_type IN ({})", list.join(", ")));
            n += filter.event_types.len();
        }
        // The sizes first, then the events that fit (as `events_page`).
        let sizes_sql = format!(
            "SELECT global_position, CAST(octet_length(data) + COALESCE(value_bytes, 0) AS BIGINT) AS size FROM events \
             WHERE global_position > $1 AND global_position <= $2{filters} ORDER BY global_position LIMIT ${}",
            n + 1
        );
        let _turn = self.api_turn().await?;
        let sizes = bound(&sizes_sql, after, upto, filter)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.api)
            .await?
            .iter()
            .map(|row| {
                Ok((
                    row.try_get::<i64, _>("global_position")?,
                    row.try_get::<i64, _>("size")?,
                ))
            })
            .collect::<Result<Vec<(i64, i64)>, StoreError>>()?;
        let taken = fitting(sizes.iter().map(|(_, size)| *size), limit, max_bytes);
        let Some(&(last, _)) = taken.checked_sub(1).and_then(|k| sizes.get(k)) else {
            return Ok(FeedPage {
                reached: upto,
                ..empty
            });
        };
        let events_sql = format!(
            "SELECT aggregate_type, aggregate_id, sequence, event_type, ts_us, data, value_refs, global_position \
             FROM events \
             WHERE global_position > $1 AND global_position <= $2{filters} ORDER BY global_position"
        );
        let rows = bound(&events_sql, after, last, filter)
            .fetch_all(&self.api)
            .await?;
        let texts = values::resolve(&self.api, &rows, "data", "value_refs", "aggregate_id").await?;
        drop(_turn);
        // Cut short (by count or bytes): the next page starts after the last
        // event taken; else every position up to `upto` was looked at.
        let reached = if taken < sizes.len() || taken >= limit {
            last
        } else {
            upto
        };
        off_workers(move || {
            let events = rows
                .iter()
                .zip(&texts)
                .map(|(row, text)| {
                    Ok(FeedEvent {
                        position: row.try_get("global_position")?,
                        event: stored_event(row, text)?,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok(FeedPage {
                events,
                reached,
                head,
            })
        })
        .await
    }
}

/// A feed statement with its positions and the filter's values bound, in
/// the order of the placeholders `read_feed` writes.
fn bound<'q>(
    sql: &'q str,
    after: i64,
    until: i64,
    filter: &FeedFilter,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    let mut q = sqlx::query(sql).bind(after).bind(until);
    if let Some(prefix) = &filter.flow_prefix {
        q = q.bind(prefix.chars().count() as i32).bind(prefix.clone());
    }
    for t in &filter.event_types {
        q = q.bind(t.clone());
    }
    q
}
