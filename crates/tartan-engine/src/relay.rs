//! Events committed by the other processes on one Postgres reach this
//! process's streams (docs/api.md, "Event streams").
//!
//! Each process says, after its commits, how far its flow events reach
//! (`NOTIFY`, coalesced: one notice covers every commit since the last).
//! Every process listens; on another's notice, and only while some stream
//! of its own listens, it reads the feed from where it last read up to that
//! point and puts what it read on its bus. Its own events are on its bus
//! already (the writer publishes them), so the streams skip the copies by
//! position and sequence. A notice lost while the listener reconnects is
//! covered by the next one: the relay reads from where it stopped.

use std::sync::Arc;

use tartan_core::flow::FlowEvent;
use tartan_store::{FeedEvent, FeedFilter, Store};
use tokio::sync::{mpsc, watch};

use crate::events::CommittedEvents;
use crate::Engine;

/// Events read from the feed per statement.
const PAGE: usize = 500;

/// The writer's side: the head of this process's committed events, told to
/// the others. `None` where the database carries no notices (SQLite: one
/// process per file).
pub(crate) fn announcer(store: &Arc<dyn Store>, node: &str) -> Option<watch::Sender<i64>> {
    if store.backend() != "postgres" {
        return None;
    }
    let (tx, mut rx) = watch::channel(0_i64);
    let (store, node) = (Arc::clone(store), node.to_string());
    tokio::spawn(async move {
        // One notice at a time; commits made meanwhile are covered by the
        // next, so a busy writer sends a notice per round trip at most.
        while rx.changed().await.is_ok() {
            let head = *rx.borrow_and_update();
            if let Err(e) = store.announce_events(&node, head).await {
                tracing::debug!("announcing committed events: {e}");
            }
        }
    });
    Some(tx)
}

impl Engine {
    /// Relay the other processes' committed events to this process's bus.
    pub(crate) async fn spawn_event_relay(&self) {
        let notices = match self.inner.store.listen_events().await {
            Ok(Some(n)) => n,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(
                    "not listening for other processes' events (their streams will not show here): {e}"
                );
                return;
            }
        };
        let relayed = match self.inner.store.feed_head().await {
            Ok(head) => head,
            Err(e) => {
                tracing::warn!("not relaying other processes' events: {e}");
                return;
            }
        };
        let engine = self.clone();
        tokio::spawn(async move { engine.relay(notices, relayed).await });
    }

    async fn relay(&self, mut notices: mpsc::Receiver<(i64, String)>, mut relayed: i64) {
        let me = self.inner.config.node_id.clone();
        loop {
            let first = tokio::select! {
                n = notices.recv() => match n {
                    Some(n) => n,
                    None => return,
                },
                _ = self.inner.stopping.cancelled() => return,
            };
            // Every notice already queued is one with the first.
            let mut head = None;
            let mut notice = Some(first);
            while let Some((h, node)) = notice {
                if node != me {
                    head = head.max(Some(h));
                }
                notice = notices.try_recv().ok();
            }
            let Some(head) = head.filter(|h| *h > relayed) else {
                continue;
            };
            if !self.inner.bus.listened() {
                relayed = head;
                continue;
            }
            while relayed < head {
                match self
                    .inner
                    .store
                    .feed_page(relayed, &FeedFilter::default(), PAGE)
                    .await
                {
                    Ok(page) if page.reached > relayed => {
                        relayed = page.reached;
                        for batch in decisions(&page.events) {
                            self.inner.bus.publish(batch);
                        }
                    }
                    Ok(_) => break,
                    Err(e) => {
                        // The streams fill what they miss from the store
                        // when the next events reach them.
                        tracing::warn!("relaying other processes' events: {e}");
                        break;
                    }
                }
            }
        }
    }
}

/// The feed's events as the bus carries them: runs of one flow's
/// consecutive events committed at one time.
fn decisions(events: &[FeedEvent]) -> Vec<CommittedEvents> {
    let mut out: Vec<CommittedEvents> = Vec::new();
    for e in events {
        let event = match FlowEvent::from_parts(&e.event.event_type, e.event.data.clone()) {
            Ok(event) => event,
            Err(err) => {
                tracing::warn!(position = e.position, "an event the relay cannot read: {err}");
                continue;
            }
        };
        if let Some(last) = out.last_mut() {
            let follows = last.flow_id == e.event.aggregate_id
                && last.at == e.event.timestamp
                && last.first_sequence + last.events.len() as i64 == e.event.sequence
                && last.first_position + last.events.len() as i64 == e.position;
            if follows {
                last.events.push(event);
                continue;
            }
        }
        out.push(CommittedEvents {
            flow_id: e.event.aggregate_id.clone(),
            first_sequence: e.event.sequence,
            first_position: e.position,
            at: e.event.timestamp,
            events: vec![event],
        });
    }
    out
}
