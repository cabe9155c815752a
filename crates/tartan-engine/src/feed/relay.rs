//! Committed events reach the streams of every process on one Postgres
//! (docs/api.md, "Event streams").
//!
//! On Postgres a batch's events get their global positions after the
//! commit (`tartan-store`'s feed, docs/durability.md, "Global positions"),
//! so no process knows its own events' positions as it commits them. Each
//! process says, after its commits, that it committed: to its own relay in
//! memory, and to the other processes with a `NOTIFY` (coalesced: one
//! notice covers every commit since the last) while there are others to
//! hear it (`Peers`: a process alone on its database sends none, half of
//! a lone flow's transactions). Every process listens; on any commit, its
//! own or another's, and only while some stream of its own listens, it
//! reads the feed from where it last read (which positions what was
//! committed) and puts what it read on its bus, in position order. While
//! nobody listens it reads nothing, but
//! positions what was committed at most once a `POSITION_EVERY` after a
//! commit or a notice (not polling: an idle engine has neither), so that a reader
//! arriving later positions little. A notice lost while the listener
//! reconnects is covered by the next one: the relay reads from where it
//! stopped. On SQLite (one process) the writer puts each decision on the
//! bus as it commits it, positions included, and there is no relay.
//!
//! The catalog goes the same way: a process that commits a change says the
//! catalog's new sequence; the others read the events after their own,
//! refresh their cached catalog and hand the events to their WebSocket
//! subscribers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tartan_core::flow::FlowEvent;
use tartan_store::{FeedEvent, FeedFilter};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::bus::CommittedEvents;
use super::Feed;
use crate::notices::Outbox;

/// Events read from the feed per statement, and bytes of their data: a
/// page is one read's memory whatever the size of the events.
const PAGE: usize = 500;
const PAGE_BYTES: usize = 4 * 1024 * 1024;

/// While no stream listens, committed batches are positioned this long
/// after a commit or a notice at most; a failed read is tried again after as long.
const POSITION_EVERY: Duration = Duration::from_secs(1);

/// The writer's side: tells this process's relay, and the other processes
/// while there are any, that it committed.
pub(crate) struct Announcer {
    commits: watch::Sender<i64>,
    peers: Arc<Peers>,
}

impl Announcer {
    /// The writer committed a batch that held events.
    pub(crate) fn committed(&self) {
        self.commits.send_modify(|n| *n += 1);
    }

    /// The cluster as this process's last health round read it: whether
    /// another engine is alive on the database.
    pub(crate) fn others_listed(&self, listed: bool) {
        self.peers.listed.store(listed, Ordering::Relaxed);
    }
}

/// Whether another process could use this one's event notices: one is
/// alive in the cluster as the last health round read it, or one was heard
/// from lately. Each process says so as it starts (`spawn_event_relay`),
/// which covers the time until the others' next round reads its heartbeat.
/// Wrong either way costs only time: a stream of another process would see
/// these events at that process's next notice or round instead of at once;
/// a notice nobody hears is a transaction spent.
struct Peers {
    listed: AtomicBool,
    heard: std::sync::Mutex<Option<Instant>>,
    /// How long a process heard from counts as there: as long as a
    /// heartbeat counts it alive (three health rounds).
    remembered: Duration,
}

impl Peers {
    fn heard(&self) {
        if let Ok(mut heard) = self.heard.lock() {
            *heard = Some(Instant::now());
        }
    }

    fn present(&self) -> bool {
        if self.listed.load(Ordering::Relaxed) {
            return true;
        }
        let heard = self.heard.lock().map(|h| *h).unwrap_or(None);
        heard.is_some_and(|at| at.elapsed() <= self.remembered)
    }
}

/// `None` where the database carries no notices (SQLite: one process per
/// file). `remembered`: how long another process heard from counts as
/// there (`Peers`).
pub(crate) fn announcer(outbox: &Outbox, node: &str, remembered: Duration) -> Option<Arc<Announcer>> {
    if !outbox.carries_notices() {
        return None;
    }
    let (tx, mut rx) = watch::channel(0_i64);
    let peers = Arc::new(Peers {
        listed: AtomicBool::new(false),
        heard: std::sync::Mutex::new(None),
        remembered,
    });
    let (outbox, node, others) = (outbox.clone(), node.to_string(), Arc::clone(&peers));
    tokio::spawn(async move {
        // One notice at a time; commits made meanwhile are covered by the
        // next, so a busy writer sends a notice per round trip at most.
        while rx.changed().await.is_ok() {
            let head = *rx.borrow_and_update();
            if !others.present() {
                continue;
            }
            let notice = tartan_store::Notice::Events {
                node: node.clone(),
                head,
            };
            outbox.announce_now(notice).await;
        }
    });
    Some(Arc::new(Announcer { commits: tx, peers }))
}

impl Feed {
    /// Relay every process's committed events to this process's bus.
    pub(crate) async fn spawn_relay(&self, notices: Option<mpsc::Receiver<(i64, String)>>) {
        let (Some(announcer), Some(notices)) = (self.announcer.as_ref(), notices) else {
            return;
        };
        let own = announcer.commits.subscribe();
        let relayed = match self.store.feed_head().await {
            Ok(head) => head,
            Err(e) => {
                tracing::warn!("not relaying committed events to the streams: {e}");
                return;
            }
        };
        // Here: the others send their notices from now on (`Peers`). The
        // count of this process's commits, none yet.
        let me = self.node_id.clone();
        self.outbox.announce(tartan_store::Notice::Events {
            node: me.clone(),
            head: 0,
        });
        let feed = self.clone();
        tokio::spawn(async move { feed.relay(notices, own, me, relayed).await });
    }

    async fn relay(
        &self,
        mut notices: mpsc::Receiver<(i64, String)>,
        mut own: watch::Receiver<i64>,
        me: String,
        mut relayed: i64,
    ) {
        let Some(announcer) = self.announcer.as_ref() else {
            return;
        };
        // When to look again without a notice: to position what was
        // committed while nobody listens, or after a failed read.
        let mut again: Option<Instant> = None;
        loop {
            let timed = tokio::select! {
                n = notices.recv() => {
                    let Some((_, node)) = n else {
                        return;
                    };
                    // Every notice already queued is one with the first.
                    let mut others = node != me;
                    while let Ok((_, node)) = notices.try_recv() {
                        others |= node != me;
                    }
                    if others {
                        announcer.peers.heard();
                    }
                    false
                }
                changed = own.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    false
                }
                _ = tokio::time::sleep_until(again.unwrap_or_else(Instant::now)), if again.is_some() => true,
                _ = self.stopping.cancelled() => return,
            };
            if timed {
                again = None;
            }
            if !self.bus.listened() {
                if !timed {
                    again.get_or_insert_with(|| Instant::now() + POSITION_EVERY);
                    continue;
                }
                match self.store.feed_head().await {
                    // A stream that began listening meanwhile may not have
                    // read up to `head`: the relay then gives it what it
                    // read before (each subscription skips what came before
                    // it, `EventSubscription::recv`).
                    Ok(head) if !self.bus.listened() => relayed = relayed.max(head),
                    Ok(_) => {}
                    Err(e) => tracing::warn!("positioning committed events: {e}"),
                }
                continue;
            }
            match self.relay_from(relayed).await {
                Ok(reached) => relayed = reached,
                Err((reached, e)) => {
                    // The streams would wait for these events: look again.
                    tracing::warn!("relaying committed events: {e}");
                    relayed = reached;
                    again = Some(Instant::now() + POSITION_EVERY);
                }
            }
        }
    }

    /// Put the feed's events after `relayed` on the bus, up to its head;
    /// answers how far it got.
    async fn relay_from(&self, mut relayed: i64) -> Result<i64, (i64, tartan_store::StoreError)> {
        loop {
            let page = self
                .store
                .feed_page(relayed, &FeedFilter::default(), PAGE, PAGE_BYTES)
                .await
                .map_err(|e| (relayed, e))?;
            if page.reached <= relayed {
                return Ok(relayed);
            }
            relayed = page.reached;
            let events: Vec<&FeedEvent> = page.events.iter().collect();
            for batch in decisions(&events) {
                let bytes = batch.json_bytes();
                self.bus.publish(batch, bytes);
            }
            if relayed >= page.head {
                return Ok(relayed);
            }
        }
    }
}

/// The feed's events as the bus carries them: runs of one flow's
/// consecutive events committed at one time.
fn decisions(events: &[&FeedEvent]) -> Vec<CommittedEvents> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_one_flow_become_one_bus_batch() {
        let at = chrono::Utc::now();
        let event = |flow: &str, sequence: i64, position: i64| FeedEvent {
            position,
            event: tartan_store::StoredEvent {
                aggregate_type: "flow".into(),
                aggregate_id: flow.into(),
                sequence,
                event_type: "flow_deactivated".into(),
                timestamp: at,
                data: serde_json::json!({"flow_id": flow, "status": "completed"}),
            },
        };
        let feed = [
            event("a", 4, 10),
            event("a", 5, 11),
            event("b", 1, 12),
            event("a", 6, 14),
        ];
        let refs: Vec<&FeedEvent> = feed.iter().collect();
        let batches = decisions(&refs);
        let shape: Vec<(&str, i64, i64, usize)> = batches
            .iter()
            .map(|b| {
                (
                    b.flow_id.as_str(),
                    b.first_sequence,
                    b.first_position,
                    b.events.len(),
                )
            })
            .collect();
        assert_eq!(shape, [("a", 4, 10, 2), ("b", 1, 12, 1), ("a", 6, 14, 1)]);
    }
}
