//! Large JSON bodies written as they are encoded (docs/api.md, "Large
//! flows"): a flow of 64 MiB is sent in chunks from its state, never first
//! built as one 64 MiB (or, with its outputs under three names, 192 MiB)
//! buffer. Encoding runs on a blocking thread, a chunk ahead of the client
//! at most: a client that reads slowly slows the encoding, and one that
//! goes away stops it.

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tokio::sync::mpsc;

/// Bytes per chunk sent.
const CHUNK: usize = 64 * 1024;
/// Chunks encoded ahead of the client.
const AHEAD: usize = 4;

/// `value` as a JSON response sent while it is encoded.
pub(crate) fn json<T: Serialize + Send + 'static>(value: T) -> Response {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(AHEAD);
    tokio::task::spawn_blocking(move || {
        let mut out = Chunks {
            tx,
            buf: Vec::with_capacity(CHUNK),
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
}

impl Chunks {
    fn flush_chunk(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"))
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
