//! Large JSON bodies written as they are encoded (docs/api.md, "Large
//! flows"): a flow of 64 MiB is sent in chunks from its state, never first
//! built as one 64 MiB (or, with its outputs under three names, 192 MiB)
//! buffer. Encoding runs on a blocking thread, a chunk ahead of the client
//! at most: a client that reads slowly slows the encoding, and one that
//! goes away stops it.
//!
//! What the server holds for such answers is bounded: each holds its value
//! until it is sent, so each takes its size from [`ANSWER_BUDGET`] first
//! (one larger than the whole budget takes all of it), a client that takes
//! no chunk for [`STALL`] is cut off, and at most [`LOADS`] whole flows are
//! read for answers at once. Twenty readers that never read a 63 MB flow
//! held 1.7 GB before.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// Bytes per chunk sent.
const CHUNK: usize = 64 * 1024;
/// Chunks encoded ahead of the client.
const AHEAD: usize = 4;

/// Bytes of large answers the server holds at once, in KiB (permits).
pub(crate) const ANSWER_BUDGET_KIB: u32 = 128 * 1024;

/// Whole flows read for an answer at once: a read holds the flow's rows
/// and its state together for a moment, up to a few times its size, and
/// the database's read pool (4 by default) runs few more at once anyway.
const LOADS: usize = 2;

/// The places of whole flows being read for an answer.
static LOADING: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(LOADS));

/// Read a whole flow for an answer in one of [`LOADS`] places.
pub(crate) async fn loading<T>(read: impl std::future::Future<Output = T>) -> T {
    // Never closed: an error cannot come, and would only leave the read unplaced.
    let _place = LOADING.acquire().await.ok();
    read.await
}

/// Bytes a large answer holds per byte of its flow's data (see `Share::kib`).
const HELD_PER_BYTE: u64 = 3;

/// How long an answer waits for its share of the budget before it is 503.
pub(crate) const BUDGET_WAIT: Duration = Duration::from_secs(10);

/// How long a client may take no chunk before it is cut off.
pub(crate) const STALL: Duration = Duration::from_secs(30);

/// The large answers' budget, for the whole process.
static ANSWER_BUDGET: LazyLock<Arc<Semaphore>> =
    LazyLock::new(|| Arc::new(Semaphore::new(ANSWER_BUDGET_KIB as usize)));

/// A large answer's share of the budget, held until it is sent.
pub(crate) struct Share(#[allow(dead_code)] OwnedSemaphorePermit);

impl Share {
    /// What an answer of `bytes` of flow data holds while it is sent: its
    /// state holds each output where it was set, in its work item and in
    /// its step's outputs, about three times the data in all.
    fn kib(bytes: u64) -> u32 {
        u32::try_from(bytes.saturating_mul(HELD_PER_BYTE).div_ceil(1024))
            .unwrap_or(u32::MAX)
            .clamp(1, ANSWER_BUDGET_KIB)
    }

    /// The share of an answer of `bytes`, at once if the budget has it.
    pub(crate) fn now(bytes: u64) -> Option<Share> {
        Arc::clone(&ANSWER_BUDGET)
            .try_acquire_many_owned(Share::kib(bytes))
            .ok()
            .map(Share)
    }

    /// The share of an answer of `bytes`, waiting up to [`BUDGET_WAIT`].
    pub(crate) async fn wait(bytes: u64) -> Option<Share> {
        let acquire = Arc::clone(&ANSWER_BUDGET).acquire_many_owned(Share::kib(bytes));
        match tokio::time::timeout(BUDGET_WAIT, acquire).await {
            Ok(Ok(permit)) => Some(Share(permit)),
            _ => None,
        }
    }
}

/// `value` as a JSON response sent while it is encoded, holding `share`
/// until it is sent or the client is gone.
pub(crate) fn json<T: Serialize + Send + 'static>(value: T, share: Share) -> Response {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(AHEAD);
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let _share = share;
        let mut out = Chunks {
            tx,
            buf: Vec::with_capacity(CHUNK),
            runtime,
        };
        let written = serde_json::to_writer(&mut out, &value).map_err(std::io::Error::from);
        // The client going away ends the encoding; nothing to report then.
        let _ = match written.and_then(|()| out.flush_chunk()) {
            Ok(()) => Ok(()),
            Err(e) => out.tx.blocking_send(Err(e)),
        };
    });
    let stream = futures::stream::unfold(
        rx,
        |mut rx| async move { rx.recv().await.map(|chunk| (chunk, rx)) },
    );
    (
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// A writer that hands its bytes on a chunk at a time.
struct Chunks {
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    buf: Vec<u8>,
    runtime: tokio::runtime::Handle,
}

impl Chunks {
    fn flush_chunk(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        let sent = self
            .runtime
            .block_on(tokio::time::timeout(STALL, self.tx.send(Ok(chunk))));
        match sent {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the client went away",
            )),
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client took no chunk for 30 s",
            )),
        }
    }
}

impl std::io::Write for Chunks {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        // A large string comes in one write: it is cut to chunks too.
        let mut rest = bytes;
        while !rest.is_empty() {
            let (now, later) = rest.split_at(rest.len().min(CHUNK - self.buf.len()));
            self.buf.extend_from_slice(now);
            if self.buf.len() >= CHUNK {
                self.flush_chunk()?;
            }
            rest = later;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
