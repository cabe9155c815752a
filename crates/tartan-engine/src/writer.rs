//! Group commit. Every decision about a flow goes through one writer task,
//! which commits whatever accumulated while its previous commit was in
//! flight as one transaction: a commit costs about the same whatever it
//! holds, so under load many decisions share one.

use std::sync::Arc;

use tartan_store::{FlowCommit, FlowStore, StoreError};
use tokio::sync::{mpsc, oneshot};

use crate::failure_log::FailureLines;
use crate::feed::bus::{Bus, CommittedEvents};
use crate::feed::relay::Announcer;
use crate::metrics::{Metrics, Tally};

/// Commits at most this many decisions per transaction.
const MAX_BATCH: usize = 512;

struct Request {
    commit: FlowCommit,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

#[derive(Clone)]
pub(crate) struct Writer {
    queue: mpsc::Sender<Request>,
}

impl Writer {
    /// `announce`, where set (Postgres), is told of each committed batch
    /// (`relay::Announcer`); the relay then puts its events on the bus.
    /// Without it (SQLite) the store numbers the events as it commits them
    /// and the writer puts them on the bus itself.
    pub(crate) fn spawn(
        store: Arc<dyn FlowStore>,
        metrics: Arc<Metrics>,
        (bus, announce): (Arc<Bus>, Option<Arc<Announcer>>),
    ) -> Self {
        let (queue, rx) = mpsc::channel(MAX_BATCH * 8);
        tokio::spawn(run(store, rx, metrics, bus, announce));
        Self { queue }
    }

    /// Commit one decision; returns once it is durable.
    pub(crate) async fn commit(&self, commit: FlowCommit) -> Result<(), StoreError> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Request { commit, reply })
            .await
            .map_err(|_| StoreError::Unavailable("commit writer stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("commit writer stopped".into()))?
    }
}

async fn run(
    store: Arc<dyn FlowStore>,
    mut rx: mpsc::Receiver<Request>,
    metrics: Arc<Metrics>,
    bus: Arc<Bus>,
    announce: Option<Arc<Announcer>>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    // What each decision counts for in the metrics, read before its events
    // go to the store, counted once it is committed (docs/operating.md, "Metrics").
    let mut tallies: Vec<Tally> = Vec::with_capacity(MAX_BATCH);
    // And the failures each records, logged once committed.
    let mut failures: Vec<FailureLines> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        let (commits, replies): (Vec<_>, Vec<_>) = batch.drain(..).map(|r| (r.commit, r.reply)).unzip();
        let size = commits.len();
        tallies.clear();
        tallies.extend(commits.iter().map(|c| Tally::of(&c.events)));
        failures.clear();
        failures.extend(
            commits
                .iter()
                .map(|c| FailureLines::of(&c.events, c.state.trace.as_deref())),
        );
        // The event streams' copy, made only while someone listens
        // (docs/api.md, "Event streams") and only where the store numbers
        // the events as it commits (without an announcer: on Postgres the
        // relay puts them on the bus); the gate is held so that a stream
        // opened meanwhile reads these events from the store.
        let gate = match announce {
            None => Some(bus.hold().await),
            Some(_) => None,
        };
        let copies: Vec<Option<CommittedEvents>> = if gate.is_some() && bus.listened() {
            commits
                .iter()
                .map(|c| {
                    Some(CommittedEvents {
                        flow_id: c.flow_id.clone(),
                        first_sequence: c.base_sequence + 1,
                        first_position: 0,
                        at: c.at,
                        events: c.events.clone(),
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        let started = std::time::Instant::now();
        let eventful = commits.iter().any(|c| !c.events.is_empty());
        // The copies are weighed (the bus is bounded in bytes) while the
        // database commits, not after.
        let (results, sizes) = tokio::join!(store.commit_flows(commits), async {
            copies
                .iter()
                .map(|c| c.as_ref().map_or(0, CommittedEvents::json_bytes))
                .collect::<Vec<usize>>()
        });
        for ((copy, result), bytes) in copies.into_iter().zip(&results).zip(sizes) {
            if let (Some(mut copy), Ok(Some(position))) = (copy, result) {
                copy.first_position = *position;
                bus.publish(copy, bytes);
            }
        }
        drop(gate);
        let announced = eventful && results.iter().any(Result::is_ok);
        let took = started.elapsed();
        metrics.commit_batch(size, took);
        if results.iter().any(Result::is_ok) {
            metrics.db.available();
        }
        tracing::debug!(size, elapsed_us = took.as_micros() as u64, "group commit");
        for (((reply, result), tally), failed) in
            replies.into_iter().zip(results).zip(&tallies).zip(&failures)
        {
            match &result {
                Ok(_) => {
                    metrics.committed(tally);
                    failed.emit();
                }
                Err(e) => metrics.db.commit_failed(e),
            }
            // The asker may have gone away (request cancelled); the commit stands.
            let _ = reply.send(result.map(|_| ()));
        }
        // After the replies: the deciders carry on (their next calls are
        // the flows' critical path) before the notice's task is woken.
        if let Some(announce) = announce.as_ref().filter(|_| announced) {
            announce.committed();
        }
    }
}
