//! Notices between the processes sharing a Postgres database
//! (`LISTEN`/`NOTIFY`, channels in `postgres`); with SQLite, announcing
//! does nothing and listening answers `None`.

use async_trait::async_trait;

use crate::connection::SqlStore;
use crate::error::StoreError;
use crate::NoticeStore;

/// Receipt tokens (32 characters and a comma) per abort notice.
const ABORTS_PER_NOTICE: usize = 200;

#[async_trait]
impl NoticeStore for SqlStore {
    async fn announce_aborts(&self, tokens: &[String]) -> Result<(), StoreError> {
        if !self.backend.notifies() {
            return Ok(());
        }
        // A notice carries at most 8000 bytes: tokens go in batches.
        for chunk in tokens.chunks(ABORTS_PER_NOTICE) {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(crate::postgres::ABORT_CHANNEL)
                .bind(chunk.join(","))
                .execute(&self.write)
                .await?;
        }
        Ok(())
    }

    async fn listen_aborts(&self) -> Result<Option<tokio::sync::mpsc::Receiver<Vec<String>>>, StoreError> {
        match &self.listen_url {
            Some(url) => Ok(Some(crate::postgres::listen_aborts(url).await?)),
            None => Ok(None),
        }
    }

    async fn announce_events(&self, node: &str, head: i64) -> Result<(), StoreError> {
        self.announce_position(crate::postgres::EVENTS_CHANNEL, node, head)
            .await
    }

    async fn listen_events(&self) -> Result<Option<tokio::sync::mpsc::Receiver<(i64, String)>>, StoreError> {
        self.listen_positions(crate::postgres::EVENTS_CHANNEL).await
    }

    async fn announce_catalog(&self, node: &str, sequence: i64) -> Result<(), StoreError> {
        self.announce_position(crate::postgres::CATALOG_CHANNEL, node, sequence)
            .await
    }

    async fn listen_catalog(&self) -> Result<Option<tokio::sync::mpsc::Receiver<(i64, String)>>, StoreError> {
        self.listen_positions(crate::postgres::CATALOG_CHANNEL).await
    }

    async fn listen_handbacks(&self) -> Result<Option<tokio::sync::mpsc::Receiver<()>>, StoreError> {
        self.listen_coalesced(crate::postgres::HANDBACK_CHANNEL).await
    }

    async fn listen_bulk(&self) -> Result<Option<tokio::sync::mpsc::Receiver<()>>, StoreError> {
        self.listen_coalesced(crate::postgres::BULK_CHANNEL).await
    }
}

impl SqlStore {
    /// `NOTIFY channel, '<position> <node>'` (Postgres; nothing elsewhere).
    async fn announce_position(&self, channel: &str, node: &str, position: i64) -> Result<(), StoreError> {
        if !self.backend.notifies() {
            return Ok(());
        }
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(channel)
            .bind(format!("{position} {node}"))
            .execute(&self.write)
            .await?;
        Ok(())
    }

    /// The notices of `channel`, each meaning only "look again": many that
    /// arrive while one is being handled are one. `None` without Postgres.
    async fn listen_coalesced(
        &self,
        channel: &str,
    ) -> Result<Option<tokio::sync::mpsc::Receiver<()>>, StoreError> {
        let Some(url) = &self.listen_url else {
            return Ok(None);
        };
        let mut payloads = crate::postgres::listen(url, channel).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        tokio::spawn(async move {
            while payloads.recv().await.is_some() {
                if let Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) = tx.try_send(()) {
                    return;
                }
            }
        });
        Ok(Some(rx))
    }

    /// The `(position, node)` notices of `channel`; `None` without Postgres.
    async fn listen_positions(
        &self,
        channel: &str,
    ) -> Result<Option<tokio::sync::mpsc::Receiver<(i64, String)>>, StoreError> {
        let Some(url) = &self.listen_url else {
            return Ok(None);
        };
        let mut payloads = crate::postgres::listen(url, channel).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            while let Some(payload) = payloads.recv().await {
                let Some((head, node)) = payload
                    .split_once(' ')
                    .and_then(|(h, n)| Some((h.parse::<i64>().ok()?, n.to_string())))
                else {
                    tracing::debug!("an events notice that is not ours: {payload:?}");
                    continue;
                };
                if tx.send((head, node)).await.is_err() {
                    return;
                }
            }
        });
        Ok(Some(rx))
    }
}
