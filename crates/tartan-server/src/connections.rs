//! Bounded connections (docs/durability.md, "Slow clients" and
//! "Connections"): at most `TARTAN_MAX_CONNECTIONS` open at once, and none
//! held open by a client that says nothing.
//!
//! - A connection holds a permit of the cap for as long as its socket is
//!   open, upgraded WebSockets included: the permit lives in the socket
//!   ([`Limited`]). At the cap, new connections wait in the listen backlog,
//!   not in the process, so the cap also bounds the file descriptors taken.
//! - A connection must bring a complete request head within
//!   `TARTAN_HEADER_TIMEOUT` of being accepted, and again within that of its
//!   last response ending (keep-alive, HTTP/2 included). Before its first
//!   request it is simply closed; hyper's own header timeout starts only
//!   once it knows the protocol, which it learns from the first bytes.
//!   After a request it is shut down gracefully (HTTP/2: `GOAWAY`).

use std::fmt::Display;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use hyper_util::server::graceful::GracefulConnection;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// An accepted socket with its permit: the permit goes back when the
/// socket is closed, wherever it went (hyper, or an upgraded WebSocket).
pub(crate) struct Limited {
    io: TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl Limited {
    pub(crate) fn new(io: TcpStream, permit: OwnedSemaphorePermit) -> Self {
        Self { io, _permit: permit }
    }
}

impl AsyncRead for Limited {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Limited {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// What a connection is doing, as its requests come and go.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Activity {
    /// Requests whose head has arrived and whose response has not ended.
    open: usize,
    /// Whether any request has arrived yet.
    served: bool,
    /// Since when nothing is open (the accept, or the last response's end).
    idle_since: Instant,
}

/// The requests of one connection, counted from their head to the end of
/// their response body.
#[derive(Clone)]
pub(crate) struct Requests(Arc<watch::Sender<Activity>>);

impl Requests {
    pub(crate) fn new() -> (Self, watch::Receiver<Activity>) {
        let (tx, rx) = watch::channel(Activity {
            open: 0,
            served: false,
            idle_since: Instant::now(),
        });
        (Self(Arc::new(tx)), rx)
    }

    /// A request's head has arrived; it is open until the guard is dropped.
    pub(crate) fn begin(&self) -> RequestGuard {
        self.0.send_modify(|a| {
            a.open += 1;
            a.served = true;
        });
        RequestGuard(self.0.clone())
    }
}

pub(crate) struct RequestGuard(Arc<watch::Sender<Activity>>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.send_modify(|a| {
            a.open = a.open.saturating_sub(1);
            if a.open == 0 {
                a.idle_since = Instant::now();
            }
        });
    }
}

/// A response body that keeps its request open until it ends or is
/// dropped: an event stream is not idle while it streams.
pub(crate) struct Tracked {
    body: Body,
    _guard: RequestGuard,
}

impl Tracked {
    pub(crate) fn new(body: Body, guard: RequestGuard) -> Self {
        Self { body, _guard: guard }
    }
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Server-wide signals every connection obeys.
#[derive(Clone)]
pub(crate) struct Stops {
    /// Stop taking requests: finish the open ones, then close.
    pub(crate) graceful: CancellationToken,
    /// The grace is over: close now.
    pub(crate) now: CancellationToken,
}

/// Drive one connection to its end, closing it when it is idle for longer
/// than `header_timeout` or when the server stops.
pub(crate) async fn drive<C>(
    conn: C,
    mut activity: watch::Receiver<Activity>,
    header_timeout: Duration,
    stops: Stops,
) where
    C: GracefulConnection,
    C::Error: Display,
{
    tokio::pin!(conn);
    // Whether the connection was asked to close once its requests end.
    let mut shutting_down = false;
    // Once shut down for idleness: how long it may take to close.
    let mut close_by: Option<Instant> = None;
    let mut watching = true;
    loop {
        let now = *activity.borrow_and_update();
        let idle_until = now.idle_since + header_timeout;
        let deadline = match (now.open, close_by) {
            // A response that ended past the limit still gets its time to
            // be flushed and the connection closed by the protocol.
            (0, Some(by)) => Some(by.max(idle_until)),
            (0, None) => Some(idle_until),
            _ => None,
        };
        let expired = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            ended = conn.as_mut() => {
                // A client that went away or was too slow: nothing to report.
                if let Err(e) = ended {
                    tracing::debug!("connection ended: {e}");
                }
                return;
            }
            changed = activity.changed(), if watching => {
                watching = changed.is_ok();
            }
            () = expired => {
                if !now.served || close_by.is_some() {
                    // No request head in time, or a shutdown the client did
                    // not complete: dropping the connection closes it.
                    return;
                }
                conn.as_mut().graceful_shutdown();
                shutting_down = true;
                close_by = Some(Instant::now() + header_timeout);
            }
            () = stops.graceful.cancelled(), if !shutting_down => {
                conn.as_mut().graceful_shutdown();
                shutting_down = true;
                close_by.get_or_insert(Instant::now() + header_timeout);
            }
            () = stops.now.cancelled() => return,
        }
    }
}
