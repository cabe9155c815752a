//! The feed: every flow event of the database in global-position order,
//! for the global event stream and for relaying other processes' events
//! (docs/api.md, "Event streams"). Positions are gap-free in commit order
//! (see `commit::take_positions`), so a reader that has read up to `p`
//! never finds an event at or below `p` later.

use sqlx::Row;

use crate::connection::SqlStore;
use crate::error::StoreError;
use crate::model::*;

use super::{off_workers, stored_event};

/// A page looks at most this many positions ahead, so that a filter that
/// matches little costs a bounded scan per statement.
const WINDOW: i64 = 10_000;

impl SqlStore {
    /// The position of the last committed flow event.
    pub(super) async fn read_feed_head(&self) -> Result<i64, StoreError> {
        let _turn = self.api_turn().await?;
        Ok(sqlx::query("SELECT last FROM event_positions WHERE id = 1")
            .fetch_one(&self.api)
            .await?
            .try_get("last")?)
    }

    pub(super) async fn read_feed(
        &self,
        after: i64,
        filter: &FeedFilter,
        limit: usize,
    ) -> Result<FeedPage, StoreError> {
        // The head first, then the rows up to it: everything at or below a
        // committed head is visible to the later statement.
        let head = self.read_feed_head().await?;
        let upto = head.min(after.saturating_add(WINDOW));
        if upto <= after || limit == 0 {
            return Ok(FeedPage {
                events: Vec::new(),
                reached: after,
                head,
            });
        }
        let mut sql = String::from(
            "SELECT aggregate_type, aggregate_id, sequence, event_type, ts_us, data, global_position FROM events \
             WHERE global_position > $1 AND global_position <= $2",
        );
        let mut n = 2;
        if filter.flow_prefix.is_some() {
            sql.push_str(&format!(" AND substr(aggregate_id, 1, ${}) = ${}", n + 1, n + 2));
            n += 2;
        }
        if !filter.event_types.is_empty() {
            let list: Vec<String> = (0..filter.event_types.len())
                .map(|k| format!("${}", n + 1 + k))
                .collect();
            sql.push_str(&format!(" AND event_type IN ({})", list.join(", ")));
            n += filter.event_types.len();
        }
        sql.push_str(&format!(" ORDER BY global_position LIMIT ${}", n + 1));
        let mut q = sqlx::query(&sql).bind(after).bind(upto);
        if let Some(prefix) = &filter.flow_prefix {
            q = q.bind(prefix.chars().count() as i32).bind(prefix.clone());
        }
        for t in &filter.event_types {
            q = q.bind(t.clone());
        }
        q = q.bind(i64::try_from(limit).unwrap_or(i64::MAX));
        let _turn = self.api_turn().await?;
        let rows = q.fetch_all(&self.api).await?;
        drop(_turn);
        off_workers(move || {
            let events = rows
                .iter()
                .map(|row| {
                    Ok(FeedEvent {
                        position: row.try_get("global_position")?,
                        event: stored_event(row)?,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            let reached = if events.len() >= limit {
                events.last().map_or(upto, |e| e.position)
            } else {
                upto
            };
            Ok(FeedPage {
                events,
                reached,
                head,
            })
        })
        .await
    }
}
