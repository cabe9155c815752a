//! `GET /engine/ws`: Argyll's WebSocket protocol (docs/api.md, "WebSocket").
//! A client subscribes to the `catalog`, `cluster` and `flow` aggregates,
//! gets their state on subscribing when it asks, then their events as they
//! are committed, each in Argyll's envelope with the subscription's id.
//!
//! The connection listens to the engine's bus before it is upgraded, so a
//! state read on a later subscribe already has, or is followed by, every
//! event; the events the state includes are skipped by sequence. Bounds: a
//! message read is at most 64 KiB, a connection holds at most
//! `MAX_SUBSCRIPTIONS` subscriptions of `MAX_AGGREGATES` aggregates in all,
//! and what waits to be written is bounded in messages and bytes. A client
//! that does not read its messages is dropped, not buffered for: when its
//! queue is full what waits is thrown away and the connection is closed
//! (1013, with a reason, if the close can still be written within
//! `WRITE_WAIT`). One that falls behind the bus itself (`stream_buffer`,
//! `stream_buffer_bytes`) is told so and closed the same way; it reconnects
//! and subscribes again.
//!
//! - this file: the route, the connection's life and its bounded outbox.
//! - `connection`: one connection's subscriptions and what it is sent.
//! - `protocol`: the messages of the protocol and what a subscription names.

mod connection;
mod protocol;

use connection::*;
use protocol::*;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{close_code, CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use futures::stream::SplitSink;
use futures::{SinkExt, StreamExt};
use serde::Serialize;
use tartan_engine::{BusReceiver, ClusterReceiver, CommittedCatalog, Engine, EventSubscription};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{kind, ApiError, Problem};

/// The largest message a client may send (Argyll's read limit).
pub(super) const READ_LIMIT: usize = 64 * 1024;
/// A client that sends nothing, not even a pong, this long is gone
/// (Argyll's read deadline).
pub(super) const PONG_WAIT: Duration = Duration::from_secs(60);
/// A ping this often keeps the connection and its proxies alive, and
/// draws the pong that proves the client is there (Argyll's period).
pub(super) const PING_PERIOD: Duration = Duration::from_secs(54);
/// A write that takes longer ends the connection (Argyll's write wait).
pub(super) const WRITE_WAIT: Duration = Duration::from_secs(10);

/// How long the server waits for a client to answer the server's close,
/// reading what it still sends meanwhile (`connection::read_to_end`).
const CLOSE_ANSWER_WAIT: Duration = Duration::from_secs(2);
/// Subscriptions one connection may hold.
pub(super) const MAX_SUBSCRIPTIONS: usize = 32;
/// Aggregate ids one connection's subscriptions may name in all.
pub(super) const MAX_AGGREGATES: usize = 1024;
/// Aggregates one subscribe may ask the state of.
pub(super) const MAX_STATE_ITEMS: usize = 100;
/// Event types one subscription may filter on.
pub(super) const MAX_EVENT_TYPES: usize = 64;
/// Bytes of a `sub_id`.
pub(super) const MAX_SUB_ID: usize = 256;
/// Bytes of an event type (the longest is 20).
pub(super) const MAX_EVENT_TYPE: usize = 64;
/// Bytes waiting to be written: a message that finds this many or more
/// queued is not added, and the client, which is not keeping up, is
/// dropped. So at most this much and one message wait, however large.
pub(super) const MAX_QUEUED_BYTES: usize = 4 * 1024 * 1024;
/// The close of a client dropped for not reading.
pub(super) const SLOW_REASON: &str = "not reading its messages fast enough; reconnect and subscribe again";

/// Argyll's WebSocket: subscribe to the catalog, the cluster and flows.
///
/// Upgrades the connection; a subscription gets the aggregate's state, then
/// its events as they are committed. A browser, whose `WebSocket` cannot
/// set `Authorization`, passes its token as `access_token`; a page of an
/// origin not in `TARTAN_CORS_ORIGINS` is refused. A `503` when the process
/// serves its most streams.
#[utoipa::path(get, path = "/engine/ws", tag = "flows", operation_id = "openWebSocket",
    params(("access_token" = Option<String>, Query,
        description = "The token, for browsers, whose `WebSocket` cannot set `Authorization` (RFC 6750 §2.3)")),
    responses(
        (status = 101, description = "Switched to Argyll's WebSocket protocol: subscribe to `catalog`, `cluster` and `flow` aggregates (docs/api.md, \"WebSocket\")"),
        (status = 400, description = "Not a WebSocket handshake", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "A browser page of another origin (`Origin`) not listed in `TARTAN_CORS_ORIGINS`", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Too many streams open; retry later", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn engine_ws(
    State(engine): State<Engine>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let upgrade = upgrade.map_err(|r| {
        let status = r.status();
        let kind = if status == StatusCode::METHOD_NOT_ALLOWED {
            kind::METHOD
        } else {
            kind::VALIDATION
        };
        ApiError::new(
            status,
            kind,
            format!("not a WebSocket handshake: {}", r.body_text()),
        )
    })?;
    // Listen before anything is read, and take a stream slot (or 503).
    let events = engine.feed().subscribe_events().await?;
    let catalog = engine.feed().subscribe_catalog();
    let cluster = engine.health().subscribe_cluster();
    let queue = engine.config().stream_buffer.max(1);
    Ok(upgrade
        .max_message_size(READ_LIMIT)
        .max_frame_size(READ_LIMIT)
        .on_upgrade(move |socket| serve(socket, engine, events, catalog, cluster, queue)))
}

pub(super) async fn serve(
    socket: WebSocket,
    engine: Engine,
    mut events: EventSubscription,
    mut catalog: BusReceiver<CommittedCatalog>,
    mut cluster: ClusterReceiver,
    queue: usize,
) {
    let (sink, mut stream) = socket.split();
    let (tx, rx) = mpsc::channel(queue);
    let queued = Arc::new(AtomicUsize::new(0));
    let writer_gone = CancellationToken::new();
    let slow = CancellationToken::new();
    let writer = tokio::spawn(write(
        sink,
        rx,
        Arc::clone(&queued),
        writer_gone.clone(),
        slow.clone(),
    ));
    let mut connection = Connection {
        engine,
        subscriptions: BTreeMap::new(),
        out: Outbox { tx, queued },
    };
    let end = connection
        .run(&mut stream, &mut events, &mut catalog, &mut cluster, &writer_gone)
        .await;
    let closing = !matches!(end, End::Gone);
    match end {
        End::Gone => {}
        End::Slow => {
            tracing::debug!("dropped a WebSocket client that does not read its messages");
            slow.cancel();
        }
        End::Close(code, reason) => {
            let frame = Outgoing::Close(CloseFrame {
                code,
                reason: Utf8Bytes::from_static(reason),
            });
            // After what is queued. A full queue (the message that says why
            // may have taken its last place) is waited on for as long as
            // one write may take, as the writer drains it; past that the
            // client counts as slow: what waits is dropped and the close is
            // tried alone. Without the wait, a close behind a full queue
            // was dropped and the client saw the connection end with no
            // code (1006 in a browser) instead of 1013.
            match tokio::time::timeout(WRITE_WAIT, connection.out.tx.send(frame)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => writer_gone.cancel(),
                Err(_) => slow.cancel(),
            }
        }
    }
    // The writer ends after what is queued (bounded, each write within
    // WRITE_WAIT); the stream slot is held until then.
    drop(connection);
    let _ = writer.await;
    // The server's close written (or given up on): the client's answer is
    // read before the socket goes (`connection::read_to_end`).
    if closing {
        connection::read_to_end(&mut stream, CLOSE_ANSWER_WAIT).await;
    }
    drop(events);
}

/// Why a connection ends.
pub(super) enum End {
    /// The client closed it (its close answered by `answer_close`), or it broke.
    Gone,
    /// The client does not read: close at once, nothing more is written.
    Slow,
    /// Tell the client why, after what is queued.
    Close(u16, &'static str),
}

/// The client's queue is full: it is dropped.
pub(super) struct Slow;

pub(super) enum Outgoing {
    Text(String),
    Close(CloseFrame),
}

/// What waits to be written: bounded in messages (the channel) and bytes.
pub(super) struct Outbox {
    tx: mpsc::Sender<Outgoing>,
    queued: Arc<AtomicUsize>,
}

impl Outbox {
    pub(super) fn push(&self, text: String) -> Result<(), Slow> {
        let len = text.len();
        let before = self.queued.fetch_add(len, Ordering::Relaxed);
        if before >= MAX_QUEUED_BYTES {
            return Err(Slow);
        }
        self.tx.try_send(Outgoing::Text(text)).map_err(|_| Slow)
    }

    pub(super) fn send(&self, message: &impl Serialize) -> Result<(), Slow> {
        match serde_json::to_string(message) {
            Ok(text) => self.push(text),
            Err(e) => {
                tracing::warn!("encoding a WebSocket message failed: {e}");
                Ok(())
            }
        }
    }
}

/// Write what is queued, and a ping every `PING_PERIOD`, until the queue
/// closes, a write fails or takes longer than `WRITE_WAIT`, or `gone` fires.
/// When `slow` fires, what is queued is dropped (its memory freed at once)
/// and only a close frame saying why is tried, within `WRITE_WAIT`.
pub(super) async fn write(
    mut sink: SplitSink<WebSocket, Message>,
    mut rx: mpsc::Receiver<Outgoing>,
    queued: Arc<AtomicUsize>,
    gone: CancellationToken,
    slow: CancellationToken,
) {
    let mut ping = tokio::time::interval_at(Instant::now() + PING_PERIOD, PING_PERIOD);
    loop {
        let message = tokio::select! {
            _ = gone.cancelled() => break,
            _ = slow.cancelled() => break,
            _ = ping.tick() => Message::Ping(Default::default()),
            next = rx.recv() => match next {
                Some(Outgoing::Text(text)) => {
                    queued.fetch_sub(text.len(), Ordering::Relaxed);
                    Message::Text(text.into())
                }
                Some(Outgoing::Close(frame)) => Message::Close(Some(frame)),
                None => break,
            },
        };
        let closing = matches!(message, Message::Close(_));
        let sent = tokio::select! {
            _ = gone.cancelled() => false,
            _ = slow.cancelled() => false,
            r = tokio::time::timeout(WRITE_WAIT, sink.send(message)) => matches!(r, Ok(Ok(()))),
        };
        if !sent || closing {
            break;
        }
    }
    if slow.is_cancelled() && !gone.is_cancelled() {
        drop(rx);
        let close = Message::Close(Some(CloseFrame {
            code: close_code::AGAIN,
            reason: Utf8Bytes::from_static(SLOW_REASON),
        }));
        tokio::select! {
            _ = gone.cancelled() => {}
            _ = tokio::time::timeout(WRITE_WAIT, sink.send(close)) => {}
        }
    }
    gone.cancel();
}
