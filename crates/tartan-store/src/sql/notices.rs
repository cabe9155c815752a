//! Notices between the processes sharing a Postgres database: one
//! `NOTIFY` channel per kind, all heard on one `LISTEN` connection
//! (`postgres::listen`); with SQLite, announcing does nothing and listening
//! answers `None`.

use async_trait::async_trait;
use tokio::sync::mpsc::Receiver;

use crate::connection::SqlStore;
use crate::error::StoreError;
use crate::{Notice, NoticeStore};

/// The `NOTIFY` channels, one per kind of notice.
const ABORT_CHANNEL: &str = "tartan_abort";
const HANDBACK_CHANNEL: &str = "tartan_handback";
const EVENTS_CHANNEL: &str = "tartan_events";
const CATALOG_CHANNEL: &str = "tartan_catalog";
const BULK_CHANNEL: &str = "tartan_bulk";
const HEALTH_CHANNEL: &str = "tartan_health";
const LANE_CHANNEL: &str = "tartan_lane";

/// Every channel, listened to together.
pub(crate) const CHANNELS: [&str; 7] = [
    ABORT_CHANNEL,
    HANDBACK_CHANNEL,
    EVENTS_CHANNEL,
    CATALOG_CHANNEL,
    BULK_CHANNEL,
    HEALTH_CHANNEL,
    LANE_CHANNEL,
];

/// Receipt tokens (32 characters and a comma) per abort notice: a notice
/// carries at most 8000 bytes.
const ABORTS_PER_NOTICE: usize = 200;

/// The `(channel, payload)` pairs that carry `notice`: one, but for aborts
/// of many tokens, which go in batches.
pub(crate) fn encode(notice: &Notice) -> Vec<(&'static str, String)> {
    match notice {
        Notice::Aborts(tokens) => tokens
            .chunks(ABORTS_PER_NOTICE)
            .map(|chunk| (ABORT_CHANNEL, chunk.join(",")))
            .collect(),
        Notice::Events { node, head } => vec![(EVENTS_CHANNEL, format!("{head} {node}"))],
        Notice::Catalog { node, sequence } => vec![(CATALOG_CHANNEL, format!("{sequence} {node}"))],
        Notice::HandedBack { node } => vec![(HANDBACK_CHANNEL, node.clone())],
        Notice::BulkJob { id } => vec![(BULK_CHANNEL, id.clone())],
        Notice::Health { node } => vec![(HEALTH_CHANNEL, node.clone())],
        Notice::Lane { id } => vec![(LANE_CHANNEL, id.clone())],
    }
}

/// The notice a payload on `channel` carries; `None` for one that is not
/// ours (anyone may `NOTIFY` on a channel).
pub(crate) fn decode(channel: &str, payload: &str) -> Option<Notice> {
    let position = || {
        let (at, node) = payload.split_once(' ')?;
        Some((at.parse::<i64>().ok()?, node.to_string()))
    };
    match channel {
        ABORT_CHANNEL => Some(Notice::Aborts(
            payload
                .split(',')
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect(),
        )),
        EVENTS_CHANNEL => position().map(|(head, node)| Notice::Events { node, head }),
        CATALOG_CHANNEL => position().map(|(sequence, node)| Notice::Catalog { node, sequence }),
        HANDBACK_CHANNEL => Some(Notice::HandedBack {
            node: payload.to_string(),
        }),
        BULK_CHANNEL => Some(Notice::BulkJob {
            id: payload.to_string(),
        }),
        HEALTH_CHANNEL => Some(Notice::Health {
            node: payload.to_string(),
        }),
        LANE_CHANNEL => Some(Notice::Lane {
            id: payload.to_string(),
        }),
        _ => None,
    }
}

/// `NOTIFY` `notice` on `conn`: in a transaction, it is delivered at
/// commit.
pub(crate) async fn notify(conn: &mut sqlx::AnyConnection, notice: &Notice) -> Result<(), StoreError> {
    for (channel, payload) in encode(notice) {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(channel)
            .bind(payload)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

#[async_trait]
impl NoticeStore for SqlStore {
    async fn announce(&self, notice: &Notice) -> Result<(), StoreError> {
        if !self.backend.notifies() {
            return Ok(());
        }
        let Some(notifier) = &self.pg_notifier else {
            return notify(&mut *self.write.acquire().await?, notice).await;
        };
        for (channel, payload) in encode(notice) {
            let query = sqlx::query("SELECT pg_notify($1, $2)")
                .bind(channel)
                .bind(payload);
            notifier.fetch_all(query, None).await?;
        }
        Ok(())
    }

    async fn listen(&self) -> Result<Option<Receiver<Notice>>, StoreError> {
        let Some(url) = &self.listen_url else {
            return Ok(None);
        };
        let mut payloads = crate::postgres::listen(url, &CHANNELS).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            while let Some((channel, payload)) = payloads.recv().await {
                let Some(notice) = decode(&channel, &payload) else {
                    tracing::debug!("a notice on {channel} that is not ours: {payload:?}");
                    continue;
                };
                if tx.send(notice).await.is_err() {
                    return;
                }
            }
        });
        Ok(Some(rx))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_notice_reads_back_as_itself() {
        let notices = [
            Notice::Aborts(vec!["a".repeat(32), "b".repeat(32)]),
            Notice::Events {
                node: "node 1".into(),
                head: 42,
            },
            Notice::Catalog {
                node: "n".into(),
                sequence: 7,
            },
            Notice::HandedBack { node: "n".into() },
            Notice::BulkJob { id: "job".into() },
            Notice::Health { node: "n".into() },
            Notice::Lane {
                id: "host:a:1".into(),
            },
        ];
        for notice in notices {
            let encoded = encode(&notice);
            assert_eq!(encoded.len(), 1);
            let (channel, payload) = &encoded[0];
            assert!(CHANNELS.contains(channel));
            assert_eq!(decode(channel, payload), Some(notice));
        }
    }

    #[test]
    fn many_aborts_go_in_notices_under_postgres_limit() {
        let tokens: Vec<String> = (0..450).map(|i| format!("{i:032}")).collect();
        let encoded = encode(&Notice::Aborts(tokens.clone()));
        assert_eq!(encoded.len(), 3);
        assert!(encoded.iter().all(|(_, p)| p.len() < 8000));
        let back: Vec<String> = encoded
            .iter()
            .flat_map(|(c, p)| match decode(c, p) {
                Some(Notice::Aborts(t)) => t,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(back, tokens);
    }

    #[test]
    fn payloads_that_are_not_ours_are_dropped() {
        assert_eq!(decode(EVENTS_CHANNEL, "x node"), None);
        assert_eq!(decode(CATALOG_CHANNEL, "12"), None);
        assert_eq!(decode("elsewhere", "1 n"), None);
    }
}
