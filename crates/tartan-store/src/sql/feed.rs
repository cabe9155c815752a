//! The feed: every flow event of the database in global-position order,
//! for the global event stream and for relaying events to the streams
//! (docs/api.md, "Event streams"). Positions are gap-free in the order
//! they were given and given only to committed events, so a reader that
//! has read up to `p` never finds an event at or below `p` later.
//!
//! SQLite numbers the events as it commits them (its one writer takes the
//! range from `event_positions`). Postgres commits a batch's events numbered
//! within a batch of their own, and a batch is given its first position
//! later ([`SqlStore::position_batches`]): taking positions in the commit
//! held the counter's row through every commit's WAL flush, so that the
//! commits of several engines waited for each other (docs/durability.md,
//! "Global positions").

use async_trait::async_trait;
use sqlx::Row;

use crate::connection::SqlStore;
use crate::dialect::Backend;
use crate::error::StoreError;
use crate::model::*;
use crate::FeedStore;

use super::history::fitting;
use super::{off_workers, stored_event, values};

/// A page looks at most this many positions ahead, so that a filter that
/// matches little costs a bounded scan per statement.
const WINDOW: i64 = 10_000;

/// Batches positioned per transaction (each a row of `event_batches`).
const POSITION_BATCHES: i64 = 10_000;

/// The columns the feed reads, each event with its position.
const COLUMNS: &str =
    "aggregate_type, aggregate_id, sequence, event_type, ts_us, data, value_refs, value_bytes";

/// The events at positions `$1` (excluded) to `$2`, as a table `feed`.
/// SQLite: the events' own positions. Postgres: the events of the
/// positioned batches (the first read is the batch that holds `$1 + 1`),
/// and those stored with a position of their own (before the batches, or
/// by an engine of the last release during a rolling update, migration
/// `20261207000000_event_batches`).
static SQLITE_FEED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("(SELECT {COLUMNS}, global_position FROM events WHERE global_position > $1 AND global_position <= $2) AS feed")
});
static PG_FEED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let columns = COLUMNS.replace(", ", ", e.");
    format!(
        "(SELECT e.{columns}, b.first_position + e.batch_offset AS global_position \
         FROM event_batches AS b JOIN events AS e ON e.batch_id = b.id \
         WHERE b.first_position >= (SELECT COALESCE(MAX(first_position), 0) FROM event_batches \
           WHERE first_position <= $1 + 1) AND b.first_position <= $2 \
           AND b.first_position + e.batch_offset > $1 AND b.first_position + e.batch_offset <= $2 \
         UNION ALL SELECT {COLUMNS}, global_position FROM events \
         WHERE global_position > $1 AND global_position <= $2) AS feed"
    )
});

impl SqlStore {
    /// Postgres: give every committed batch that has no position yet its
    /// first position, after the last given, in the order of the batches'
    /// ids, in a transaction that holds the counter's row (so that two
    /// processes doing this take turns). A batch is seen only once
    /// committed, so no position is given to an event that could still be
    /// rolled back; one flow's batches are committed in order and get
    /// their ids in that order (a decision on a flow is taken once the
    /// one before it committed), so its events keep their order. A batch
    /// whose events were purged before it was positioned leaves a gap,
    /// as purged events do.
    pub(crate) async fn position_batches(&self) -> Result<(), StoreError> {
        if self.backend != Backend::Postgres {
            return Ok(());
        }
        loop {
            let pending: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM event_batches WHERE first_position IS NULL)",
            )
            .fetch_one(&self.write)
            .await?;
            if !pending {
                return Ok(());
            }
            let mut tx = self.write.begin().await?;
            let last: i64 = sqlx::query_scalar("SELECT last FROM event_positions WHERE id = 1 FOR UPDATE")
                .fetch_one(&mut *tx)
                .await?;
            // A statement of its own after the lock: it sees what the
            // process that held it before positioned.
            let numbered: i64 = sqlx::query_scalar(
                "WITH pending AS (SELECT id, event_count, SUM(event_count) OVER (ORDER BY id) AS through \
                   FROM event_batches WHERE first_position IS NULL ORDER BY id LIMIT $2), \
                 numbered AS (UPDATE event_batches AS b SET first_position = $1 + p.through - p.event_count + 1 \
                   FROM pending AS p WHERE b.id = p.id AND b.first_position IS NULL \
                   RETURNING b.first_position + b.event_count - 1 AS last), \
                 moved AS (UPDATE event_positions SET last = GREATEST(last, (SELECT MAX(last) FROM numbered)) \
                   WHERE id = 1) \
                 SELECT COUNT(*) FROM numbered",
            )
            .bind(last)
            .bind(POSITION_BATCHES)
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            if numbered < POSITION_BATCHES {
                return Ok(());
            }
        }
    }
}

#[async_trait]
impl FeedStore for SqlStore {
    /// The position of the last committed flow event (Postgres: once the
    /// committed batches are positioned).
    async fn feed_head(&self) -> Result<i64, StoreError> {
        self.position_batches().await?;
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
        // Positions are dense: without a filter, `limit` of them hold at
        // most `limit` events.
        let unfiltered = filter.flow_prefix.is_none() && filter.event_types.is_empty();
        let window = match unfiltered {
            true => i64::try_from(limit).unwrap_or(WINDOW).min(WINDOW),
            false => WINDOW,
        };
        let upto = head.min(after.saturating_add(window));
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
        let feed = match self.backend {
            Backend::Postgres => PG_FEED.as_str(),
            Backend::Sqlite => SQLITE_FEED.as_str(),
        };
        let sizes_sql = format!(
            "SELECT global_position, CAST(octet_length(data) + COALESCE(value_bytes, 0) AS BIGINT) AS size \
             FROM {feed} WHERE TRUE{filters} ORDER BY global_position LIMIT ${}",
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
        let events_sql = format!("SELECT * FROM {feed} WHERE TRUE{filters} ORDER BY global_position");
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
