//! The catalog: registered steps as a projection (`steps`) of the
//! catalog's own events.

use async_trait::async_trait;
use sqlx::Row;
use tartan_core::step::Step;

use crate::connection::SqlStore;
use crate::dialect::values_list;
use crate::error::StoreError;
use crate::model::*;
use crate::CatalogStore;

use super::{json_text, off_workers, stored_event, ROWS_PER_STATEMENT};

const CATALOG: &str = "catalog";

#[async_trait]
impl CatalogStore for SqlStore {
    async fn load_catalog(&self) -> Result<CatalogSnapshot, StoreError> {
        // The head first, then the steps: a change committed between the two
        // reads is then in the steps but not in the sequence, and the next
        // notice of it reads the catalog again. The other order would give a
        // view without the change that claims to hold it, never read again.
        let head = sqlx::query(
            "SELECT sequence, ts_us FROM events WHERE aggregate_type = $1 AND aggregate_id = $2 \
             ORDER BY sequence DESC LIMIT 1",
        )
        .bind(CATALOG)
        .bind(CATALOG)
        .fetch_optional(&self.read)
        .await?;
        let (sequence, last_updated) = match head {
            Some(r) => (r.try_get("sequence")?, Some(from_us(r.try_get("ts_us")?))),
            None => (0, None),
        };
        let rows = sqlx::query("SELECT definition FROM steps ORDER BY id")
            .fetch_all(&self.read)
            .await?;
        let mut steps = Vec::with_capacity(rows.len());
        for row in rows {
            let text: String = row.try_get("definition")?;
            steps.push(serde_json::from_str::<Step>(&text)?);
        }
        Ok(CatalogSnapshot {
            steps,
            sequence,
            last_updated,
        })
    }

    async fn commit_catalog_batch(
        &self,
        expected_sequence: i64,
        changes: &[CatalogChange],
    ) -> Result<(), StoreError> {
        let mut tx = self.write.begin().await?;
        // The catalog must still be where the caller decided from; a newer
        // event (or a gap) means someone else changed it. The events primary
        // key catches a concurrent writer that read the same head.
        let head = super::aggregate_head(&mut tx, CATALOG, CATALOG).await?;
        if head != expected_sequence {
            return Err(StoreError::Conflict("catalog".into()));
        }
        // Few statements per batch, not two per change: one multi-row insert
        // of the events, then the projection as the batch leaves it.
        let mut events = Vec::with_capacity(changes.len());
        let mut last: std::collections::BTreeMap<&str, Option<(&tartan_core::step::Step, i64)>> =
            std::collections::BTreeMap::new();
        for (sequence, change) in (expected_sequence + 1..).zip(changes) {
            match change {
                CatalogChange::Registered(step, at) | CatalogChange::Updated(step, at) => {
                    last.insert(&step.id, Some((step, to_us(*at))));
                }
                CatalogChange::Unregistered(id, _) => {
                    last.insert(id, None);
                }
            }
            events.push((
                sequence,
                change.event_type(),
                to_us(change.at()),
                json_text(&change.data())?,
            ));
        }
        for chunk in events.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, ts_us, data) VALUES {}",
                values_list(self.backend, chunk.len(), 6)
            );
            let mut q = sqlx::query(&sql);
            for (sequence, event_type, ts_us, data) in chunk {
                q = q
                    .bind(CATALOG)
                    .bind(CATALOG)
                    .bind(*sequence)
                    .bind(*event_type)
                    .bind(*ts_us)
                    .bind(data.clone());
            }
            match q.execute(&mut *tx).await {
                Ok(_) => {}
                Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                    return Err(StoreError::Conflict("catalog".into()));
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut upserts = Vec::new();
        let mut removals = Vec::new();
        for (id, step) in last {
            match step {
                Some((step, at)) => upserts.push((id, json_text(step)?, at)),
                None => removals.push(id),
            }
        }
        for chunk in upserts.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO steps (id, definition, updated_us) VALUES {} \
                 ON CONFLICT (id) DO UPDATE SET definition = excluded.definition, updated_us = excluded.updated_us",
                values_list(self.backend, chunk.len(), 3)
            );
            let mut q = sqlx::query(&sql);
            for (id, definition, at) in chunk {
                q = q.bind(id.to_string()).bind(definition.clone()).bind(*at);
            }
            q.execute(&mut *tx).await?;
        }
        for id in removals {
            sqlx::query("DELETE FROM steps WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn catalog_events(&self) -> Result<Vec<StoredEvent>, StoreError> {
        let _turn = self.api_turn().await?;
        let rows = sqlx::query(
            "SELECT aggregate_type, aggregate_id, sequence, event_type, ts_us, data FROM events \
             WHERE aggregate_type = $1 AND aggregate_id = $2 ORDER BY sequence",
        )
        .bind(CATALOG)
        .bind(CATALOG)
        .fetch_all(&self.api)
        .await?;
        off_workers(move || {
            rows.iter()
                .map(|row| stored_event(row, &row.try_get::<String, _>("data")?))
                .collect()
        })
        .await
    }

    async fn catalog_events_page(
        &self,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<EventPage, StoreError> {
        self.events_page(CATALOG, CATALOG, after, limit, max_bytes).await
    }
}
