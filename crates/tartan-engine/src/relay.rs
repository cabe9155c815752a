//! Events committed by the other processes on one Postgres reach this
//! process's streams (docs/api.md, "Event streams").
//!
//! Each process says, after its commits, how far its flow events reach
//! (`NOTIFY`, coalesced: one notice covers every commit since the last).
//! Every process listens; on another's notice, and only while some stream
//! of its own listens, it reads the feed from where it last read up to that
//! point and puts what it read on its bus. Its own events are on its bus
//! already (the writer publishes them): the writer notes the range of
//! positions of each of its batches, and the relay leaves those out. A
//! notice lost while the listener reconnects is covered by the next one:
//! the relay reads from where it stopped.
//!
//! The catalog goes the same way: a process that commits a change says the
//! catalog's new sequence; the others read the events after their own,
//! refresh their cached catalog and hand the events to their WebSocket
//! subscribers.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tartan_core::flow::FlowEvent;
use tartan_store::{FeedEvent, FeedFilter};
use tokio::sync::{mpsc, watch};

use crate::events::CommittedEvents;
use crate::notices::Outbox;
use crate::Engine;

/// Events read from the feed per statement, and bytes of their data: a
/// page is one read's memory whatever the size of the events.
const PAGE: usize = 500;
const PAGE_BYTES: usize = 4 * 1024 * 1024;

/// Own batches remembered for the relay to leave out; past this many the
/// oldest are forgotten (a relay that far behind may put a few of this
/// process's events on the bus twice; the streams skip them).
const OWN_BATCHES: usize = 65_536;

/// The writer's side: the head of this process's committed events, told to
/// the others, and the positions of its batches, which the relay leaves out.
pub(crate) struct Announcer {
    head: watch::Sender<i64>,
    /// First position of each own batch, to its last.
    own: Mutex<BTreeMap<i64, i64>>,
}

impl Announcer {
    /// The writer committed a batch whose decisions took these ranges of
    /// positions (`first..=last` each). They are one run, kept as one
    /// entry; several when the batch was committed one by one after a
    /// failure.
    pub(crate) fn committed(&self, ranges: impl Iterator<Item = (i64, i64)>) {
        let mut ranges: Vec<(i64, i64)> = ranges.collect();
        ranges.sort_unstable();
        let mut runs: Vec<(i64, i64)> = Vec::new();
        for (first, last) in ranges {
            match runs.last_mut() {
                Some(run) if first == run.1 + 1 => run.1 = last,
                _ => runs.push((first, last)),
            }
        }
        let Some(&(_, head)) = runs.last() else {
            return;
        };
        if let Ok(mut own) = self.own.lock() {
            own.extend(runs);
            while own.len() > OWN_BATCHES {
                own.pop_first();
            }
        }
        self.head.send_if_modified(|h| {
            let newer = head > *h;
            *h = (*h).max(head);
            newer
        });
    }

    fn is_own(&self, position: i64) -> bool {
        self.own.lock().is_ok_and(|own| {
            own.range(..=position)
                .next_back()
                .is_some_and(|(_, last)| position <= *last)
        })
    }

    /// The relay has read up to `position`: batches before it are done with.
    fn forget_through(&self, position: i64) {
        if let Ok(mut own) = self.own.lock() {
            while own.first_key_value().is_some_and(|(_, last)| *last <= position) {
                own.pop_first();
            }
        }
    }
}

/// `None` where the database carries no notices (SQLite: one process per
/// file).
pub(crate) fn announcer(outbox: &Outbox, node: &str) -> Option<Arc<Announcer>> {
    if !outbox.carries_notices() {
        return None;
    }
    let (tx, mut rx) = watch::channel(0_i64);
    let (outbox, node) = (outbox.clone(), node.to_string());
    tokio::spawn(async move {
        // One notice at a time; commits made meanwhile are covered by the
        // next, so a busy writer sends a notice per round trip at most.
        while rx.changed().await.is_ok() {
            let head = *rx.borrow_and_update();
            let notice = tartan_store::Notice::Events {
                node: node.clone(),
                head,
            };
            outbox.announce_now(notice).await;
        }
    });
    Some(Arc::new(Announcer {
        head: tx,
        own: Mutex::new(BTreeMap::new()),
    }))
}

impl Engine {
    /// Take in the catalog changes other processes commit.
    pub(crate) fn spawn_catalog_relay(&self, notices: Option<mpsc::Receiver<(i64, String)>>) {
        let Some(mut notices) = notices else {
            return;
        };
        let engine = self.clone();
        tokio::spawn(async move {
            let me = engine.inner.config.node_id.clone();
            loop {
                let (sequence, node) = tokio::select! {
                    n = notices.recv() => match n {
                        Some(n) => n,
                        None => return,
                    },
                    _ = engine.inner.stopping.cancelled() => return,
                };
                if node != me {
                    if let Err(e) = engine.take_in_catalog(sequence).await {
                        tracing::warn!("reading another process's catalog change: {e}");
                    }
                }
            }
        });
    }

    /// The sweep behind the notices: when the database holds catalog
    /// changes this process's view lacks (a notice lost while the listener
    /// reconnected), read the catalog again. Each health round sweeps.
    pub(crate) async fn sweep_catalog(&self) {
        if !self.inner.outbox.carries_notices() {
            return;
        }
        let seen = self.catalog().await.sequence;
        match self.inner.store.catalog_events_page(seen, 1, 1 << 20).await {
            Ok(page) if !page.events.is_empty() => {
                if let Err(e) = self.take_in_catalog(seen + 1).await {
                    tracing::warn!("reading the catalog's changes failed: {e}");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("looking for catalog changes failed: {e}"),
        }
    }

    /// Refresh the catalog when another process moved it past this
    /// process's view (which passes the events between the two on). Under
    /// the catalog's change lock, so that a change of this process is never
    /// taken for another's.
    async fn take_in_catalog(&self, sequence: i64) -> Result<(), crate::EngineError> {
        let _changing = self.inner.catalog.change.lock().await;
        if sequence > self.catalog().await.sequence {
            self.refresh_catalog().await?;
        }
        Ok(())
    }

    /// Relay the other processes' committed events to this process's bus.
    pub(crate) async fn spawn_event_relay(&self, notices: Option<mpsc::Receiver<(i64, String)>>) {
        let (Some(announcer), Some(notices)) = (self.inner.announcer.clone(), notices) else {
            return;
        };
        let relayed = match self.inner.store.feed_head().await {
            Ok(head) => head,
            Err(e) => {
                tracing::warn!("not relaying other processes' events: {e}");
                return;
            }
        };
        let engine = self.clone();
        tokio::spawn(async move { engine.relay(notices, relayed, &announcer).await });
    }

    async fn relay(&self, mut notices: mpsc::Receiver<(i64, String)>, mut relayed: i64, own: &Announcer) {
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
                own.forget_through(relayed);
                continue;
            }
            while relayed < head {
                match self
                    .inner
                    .store
                    .feed_page(relayed, &FeedFilter::default(), PAGE, PAGE_BYTES)
                    .await
                {
                    Ok(page) if page.reached > relayed => {
                        relayed = page.reached;
                        let theirs: Vec<&FeedEvent> =
                            page.events.iter().filter(|e| !own.is_own(e.position)).collect();
                        for batch in decisions(&theirs) {
                            let bytes = batch.json_bytes();
                            self.inner.bus.publish(batch, bytes);
                        }
                        own.forget_through(relayed);
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

    fn announcer() -> Announcer {
        Announcer {
            head: watch::channel(0).0,
            own: Mutex::new(BTreeMap::new()),
        }
    }

    #[test]
    fn own_batches_are_left_out_and_forgotten_once_read() {
        let a = announcer();
        a.committed([(3, 4), (5, 5)].into_iter());
        a.committed([(9, 9)].into_iter());
        assert_eq!(
            a.own.lock().map(|own| own.len()).ok(),
            Some(2),
            "3..=5 is one run"
        );
        let own: Vec<i64> = (1..=10).filter(|p| a.is_own(*p)).collect();
        assert_eq!(own, [3, 4, 5, 9]);
        assert_eq!(*a.head.borrow(), 9);
        a.forget_through(5);
        assert!(!a.is_own(4));
        assert!(a.is_own(9));
        a.forget_through(9);
        assert!(a.own.lock().is_ok_and(|own| own.is_empty()));
    }

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
