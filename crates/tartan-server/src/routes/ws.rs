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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{close_code, CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tartan_core::ids::MAX_FLOW_ID_LEN;
use tartan_engine::{
    BusReceiver, CatalogView, CommittedCatalog, CommittedEvents, Engine, EventSubscription, RecvError,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::engine::catalog_state_of;
use crate::error::{kind, ApiError, Problem};

/// The largest message a client may send (Argyll's read limit).
const READ_LIMIT: usize = 64 * 1024;
/// A client that sends nothing, not even a pong, this long is gone
/// (Argyll's read deadline).
const PONG_WAIT: Duration = Duration::from_secs(60);
/// A ping this often keeps the connection and its proxies alive, and
/// draws the pong that proves the client is there (Argyll's period).
const PING_PERIOD: Duration = Duration::from_secs(54);
/// A write that takes longer ends the connection (Argyll's write wait).
const WRITE_WAIT: Duration = Duration::from_secs(10);
/// Subscriptions one connection may hold.
const MAX_SUBSCRIPTIONS: usize = 32;
/// Aggregate ids one connection's subscriptions may name in all.
const MAX_AGGREGATES: usize = 1024;
/// Aggregates one subscribe may ask the state of.
const MAX_STATE_ITEMS: usize = 100;
/// Event types one subscription may filter on.
const MAX_EVENT_TYPES: usize = 64;
/// Bytes of a `sub_id`.
const MAX_SUB_ID: usize = 256;
/// Bytes of an event type (the longest is 20).
const MAX_EVENT_TYPE: usize = 64;
/// Bytes waiting to be written: a message that finds this many or more
/// queued is not added, and the client, which is not keeping up, is
/// dropped. So at most this much and one message wait, however large.
const MAX_QUEUED_BYTES: usize = 4 * 1024 * 1024;
/// The close of a client dropped for not reading.
const SLOW_REASON: &str = "not reading its messages fast enough; reconnect and subscribe again";

/// `GET /engine/ws`: upgrade to Argyll's WebSocket protocol.
#[utoipa::path(get, path = "/engine/ws", tag = "flows",
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
    let events = engine.subscribe_events().await?;
    let catalog = engine.subscribe_catalog();
    let queue = engine.config().stream_buffer.max(1);
    Ok(upgrade
        .max_message_size(READ_LIMIT)
        .max_frame_size(READ_LIMIT)
        .on_upgrade(move |socket| serve(socket, engine, events, catalog, queue)))
}

async fn serve(
    socket: WebSocket,
    engine: Engine,
    mut events: EventSubscription,
    mut catalog: BusReceiver<CommittedCatalog>,
    queue: usize,
) {
    let (sink, stream) = socket.split();
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
        .run(stream, &mut events, &mut catalog, &writer_gone)
        .await;
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
            if connection.out.tx.try_send(frame).is_err() {
                writer_gone.cancel();
            }
        }
    }
    // The writer ends after what is queued (bounded, each write within
    // WRITE_WAIT); the stream slot is held until then.
    drop(connection);
    let _ = writer.await;
    drop(events);
}

/// Why a connection ends.
enum End {
    /// The client closed it, or it broke.
    Gone,
    /// The client does not read: close at once, nothing more is written.
    Slow,
    /// Tell the client why, after what is queued.
    Close(u16, &'static str),
}

/// The client's queue is full: it is dropped.
struct Slow;

enum Outgoing {
    Text(String),
    Close(CloseFrame),
}

/// What waits to be written: bounded in messages (the channel) and bytes.
struct Outbox {
    tx: mpsc::Sender<Outgoing>,
    queued: Arc<AtomicUsize>,
}

impl Outbox {
    fn push(&self, text: String) -> Result<(), Slow> {
        let len = text.len();
        let before = self.queued.fetch_add(len, Ordering::Relaxed);
        if before >= MAX_QUEUED_BYTES {
            return Err(Slow);
        }
        self.tx.try_send(Outgoing::Text(text)).map_err(|_| Slow)
    }

    fn send(&self, message: &impl Serialize) -> Result<(), Slow> {
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
async fn write(
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

/// One thing that happened to a connection.
enum Step {
    WriterGone,
    Stopping,
    Silent,
    Frame(Option<Result<Message, axum::Error>>),
    Flow(Result<Arc<CommittedEvents>, RecvError>),
    Catalog(Result<Arc<CommittedCatalog>, RecvError>),
}

struct Connection {
    engine: Engine,
    subscriptions: BTreeMap<String, Subscription>,
    out: Outbox,
}

impl Connection {
    async fn run(
        &mut self,
        mut stream: SplitStream<WebSocket>,
        events: &mut EventSubscription,
        catalog: &mut BusReceiver<CommittedCatalog>,
        writer_gone: &CancellationToken,
    ) -> End {
        let mut deadline = Instant::now() + PONG_WAIT;
        loop {
            let step = tokio::select! {
                _ = writer_gone.cancelled() => Step::WriterGone,
                _ = events.stopping.cancelled() => Step::Stopping,
                _ = tokio::time::sleep_until(deadline) => Step::Silent,
                frame = stream.next() => Step::Frame(frame),
                batch = events.events.recv() => Step::Flow(batch),
                batch = catalog.recv() => Step::Catalog(batch),
            };
            let done = match step {
                Step::WriterGone => return End::Gone,
                Step::Stopping => return End::Close(close_code::AWAY, "the server is shutting down"),
                Step::Silent => {
                    return End::Close(close_code::POLICY, "nothing received for 60 s, not even a pong")
                }
                Step::Frame(frame) => {
                    deadline = Instant::now() + PONG_WAIT;
                    match frame {
                        None | Some(Ok(Message::Close(_))) => return End::Gone,
                        Some(Ok(Message::Text(text))) => self.message(text.as_bytes()).await,
                        Some(Ok(Message::Binary(bytes))) => self.message(&bytes).await,
                        Some(Ok(Message::Ping(_) | Message::Pong(_))) => Ok(()),
                        Some(Err(e)) => return read_failed(e),
                    }
                }
                Step::Flow(Ok(batch)) => self.flow_events(&batch),
                Step::Catalog(Ok(batch)) => self.catalog_events(&batch),
                // What a connection following none of it missed does not
                // matter: it is attached again from now on.
                Step::Flow(Err(RecvError::Lagged)) if !self.follows_flows() => {
                    self.engine.rejoin_events(events).await;
                    Ok(())
                }
                Step::Catalog(Err(RecvError::Lagged)) if !self.follows_catalog() => {
                    *catalog = self.engine.subscribe_catalog();
                    Ok(())
                }
                Step::Flow(Err(RecvError::Lagged)) | Step::Catalog(Err(RecvError::Lagged)) => {
                    return self.fell_behind();
                }
                Step::Flow(Err(RecvError::Closed)) | Step::Catalog(Err(RecvError::Closed)) => {
                    return End::Close(close_code::AWAY, "the server is shutting down");
                }
            };
            if done.is_err() {
                return End::Slow;
            }
        }
    }

    /// One message from the client.
    async fn message(&mut self, bytes: &[u8]) -> Result<(), Slow> {
        let message: ClientMessage = match serde_json::from_slice(bytes) {
            Ok(m) => m,
            Err(e) => {
                return self.error(
                    None,
                    format!("a message is a JSON object with a `type` and `data`: {e}"),
                )
            }
        };
        match message.kind.as_str() {
            "subscribe" => self.subscribe(message.data).await,
            "unsubscribe" => self.unsubscribe(message.data),
            // Argyll's web UI sends this as its heartbeat.
            "ping" => self.out.send(&json!({ "type": "pong" })),
            other => self.error(
                None,
                format!(
                    "unknown message type {:?}: expected subscribe, unsubscribe or ping",
                    clip(other)
                ),
            ),
        }
    }

    async fn subscribe(&mut self, data: Value) -> Result<(), Slow> {
        let named = data.get("sub_id").and_then(Value::as_str).map(clip);
        let mut request: SubscribeData = match serde_path_to_error::deserialize(data) {
            Ok(r) => r,
            Err(e) => {
                let field = e.path().to_string();
                let at = if field == "." {
                    "data".to_string()
                } else {
                    format!("data.{field}")
                };
                return self.error(named.as_deref(), format!("subscribe: {at}: {}", e.inner()));
            }
        };
        let sub_id = match request.sub_id.take() {
            Some(id) if !id.is_empty() && id.len() <= MAX_SUB_ID => id,
            Some(id) if !id.is_empty() => {
                return self.error(
                    Some(&clip(&id)),
                    format!("subscribe: sub_id: at most {MAX_SUB_ID} bytes"),
                )
            }
            _ => return self.error(None, "subscribe: data.sub_id is required".into()),
        };
        let (subscription, aggregates) = match self.check(&sub_id, request) {
            Ok(checked) => checked,
            Err(why) => return self.error(Some(&sub_id), format!("subscribe: {why}")),
        };
        let mut subscription = subscription;
        let mut items = Vec::new();
        if subscription.include_state {
            for aggregate in &aggregates {
                match self.state_of(aggregate).await {
                    Ok(Some((data, sequence))) => {
                        match aggregate {
                            Aggregate::Catalog => subscription.catalog_from = sequence,
                            Aggregate::Flow(id) => {
                                subscription.flow_from.insert(id.clone(), sequence);
                            }
                            Aggregate::Cluster | Aggregate::Flows => {}
                        }
                        items.push(json!({
                            "id": aggregate.id(),
                            "data": data,
                            "sequence": sequence,
                        }));
                    }
                    // No such flow: no item, as Argyll (its client shows "not found").
                    Ok(None) => {}
                    Err(why) => return self.error(Some(&sub_id), format!("subscribe: {why}")),
                }
            }
        }
        self.subscriptions.insert(sub_id.clone(), subscription);
        self.out.send(&json!({
            "type": "subscribed",
            "sub_id": sub_id,
            "items": items,
        }))
    }

    /// The subscription a subscribe asks for, within the connection's bounds.
    fn check(&self, sub_id: &str, request: SubscribeData) -> Result<(Subscription, Vec<Aggregate>), String> {
        let replaced = self.subscriptions.get(sub_id);
        if replaced.is_none() && self.subscriptions.len() >= MAX_SUBSCRIPTIONS {
            return Err(format!(
                "a connection holds at most {MAX_SUBSCRIPTIONS} subscriptions; unsubscribe one first"
            ));
        }
        let mut aggregates = Vec::new();
        for parts in request.aggregate_ids.unwrap_or_default() {
            let aggregate = Aggregate::parse(&parts)?;
            if !aggregates.contains(&aggregate) {
                aggregates.push(aggregate);
            }
            if aggregates.len() > MAX_AGGREGATES {
                break;
            }
        }
        let held: usize = self.subscriptions.values().map(|s| s.size).sum();
        let held = held - replaced.map_or(0, |s| s.size);
        if held + aggregates.len() > MAX_AGGREGATES {
            return Err(format!(
                "aggregate_ids: a connection's subscriptions name at most {MAX_AGGREGATES} aggregates in all"
            ));
        }
        let include_state = request.include_state.unwrap_or(false);
        if include_state && aggregates.len() > MAX_STATE_ITEMS {
            return Err(format!(
                "include_state: the state of at most {MAX_STATE_ITEMS} aggregates at a time"
            ));
        }
        let types = match request.event_types {
            Some(types) if !types.is_empty() => {
                if types.len() > MAX_EVENT_TYPES {
                    return Err(format!("event_types: at most {MAX_EVENT_TYPES}"));
                }
                if types.iter().any(|t| t.len() > MAX_EVENT_TYPE) {
                    return Err(format!("event_types: a type is at most {MAX_EVENT_TYPE} bytes"));
                }
                Some(types.into_iter().collect())
            }
            _ => None,
        };
        let mut subscription = Subscription {
            everything: aggregates.is_empty(),
            catalog: false,
            all_flows: false,
            flows: HashSet::new(),
            types,
            include_state,
            catalog_from: i64::MIN,
            flow_from: HashMap::new(),
            size: aggregates.len(),
        };
        for aggregate in &aggregates {
            match aggregate {
                Aggregate::Catalog => subscription.catalog = true,
                // No cluster events are made (docs/api.md, "WebSocket").
                Aggregate::Cluster => {}
                Aggregate::Flows => subscription.all_flows = true,
                Aggregate::Flow(id) => {
                    subscription.flows.insert(id.clone());
                }
            }
        }
        Ok((subscription, aggregates))
    }

    /// An aggregate's state and the sequence of its next event; `None`
    /// for a flow that does not exist and for all flows together.
    async fn state_of(&self, aggregate: &Aggregate) -> Result<Option<(Value, i64)>, String> {
        let encode =
            |v: Result<Value, serde_json::Error>| v.map_err(|e| format!("encoding a state failed: {e}"));
        match aggregate {
            Aggregate::Catalog => {
                let view = self.engine.catalog().await;
                let state = encode(serde_json::to_value(catalog_state_of(&view)))?;
                Ok(Some((state, view.sequence + 1)))
            }
            Aggregate::Cluster => {
                let view = self.engine.catalog().await;
                Ok(Some((cluster_state(&self.engine, &view), 1)))
            }
            Aggregate::Flows => Ok(None),
            Aggregate::Flow(id) => match self.engine.flow_at(id).await {
                Ok(Some((state, sequence))) => {
                    Ok(Some((encode(serde_json::to_value(&state))?, sequence + 1)))
                }
                Ok(None) => Ok(None),
                Err(e) => {
                    tracing::warn!("reading a flow for a WebSocket subscription failed: {e}");
                    Err(format!(
                        "the state of flow {:?} could not be read; subscribe again later",
                        clip(id)
                    ))
                }
            },
        }
    }

    fn unsubscribe(&mut self, data: Value) -> Result<(), Slow> {
        let Some(sub_id) = data
            .get("sub_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        else {
            return self.error(None, "unsubscribe: data.sub_id is required".into());
        };
        self.subscriptions.remove(sub_id);
        self.out
            .send(&json!({ "type": "unsubscribed", "sub_id": sub_id }))
    }

    fn flow_events(&self, batch: &CommittedEvents) -> Result<(), Slow> {
        let flow_id = batch.flow_id.as_str();
        if !self.subscriptions.values().any(|s| s.wants_flow(flow_id)) {
            return Ok(());
        }
        let timestamp = batch.at.timestamp_millis();
        let id = ["flow", flow_id];
        // Each event's data is built once, for the first subscription
        // that wants it.
        let mut data: Vec<Option<Value>> = vec![None; batch.events.len()];
        for (sub_id, subscription) in &self.subscriptions {
            if !subscription.wants_flow(flow_id) {
                continue;
            }
            let from = subscription.flow_from.get(flow_id).copied().unwrap_or(i64::MIN);
            for (k, (sequence, event)) in batch.sequenced().enumerate() {
                let kind = event.type_name();
                if sequence < from || !subscription.wants_type(kind) {
                    continue;
                }
                let data = data[k].get_or_insert_with(|| event.data());
                self.out.send(&Envelope {
                    kind,
                    sub_id,
                    data,
                    id: &id,
                    timestamp,
                    sequence,
                })?;
            }
        }
        Ok(())
    }

    fn catalog_events(&self, batch: &CommittedCatalog) -> Result<(), Slow> {
        for (sub_id, subscription) in &self.subscriptions {
            if !subscription.wants_catalog() {
                continue;
            }
            for event in &batch.events {
                if event.sequence < subscription.catalog_from || !subscription.wants_type(&event.event_type) {
                    continue;
                }
                self.out.send(&Envelope {
                    kind: &event.event_type,
                    sub_id,
                    data: &event.data,
                    id: &["catalog"],
                    timestamp: event.timestamp.timestamp_millis(),
                    sequence: event.sequence,
                })?;
            }
        }
        Ok(())
    }

    fn follows_flows(&self) -> bool {
        self.subscriptions
            .values()
            .any(|s| s.everything || s.all_flows || !s.flows.is_empty())
    }

    fn follows_catalog(&self) -> bool {
        self.subscriptions.values().any(Subscription::wants_catalog)
    }

    /// The bus went on without this connection: events were lost, so it
    /// ends; the client reconnects and reads the state again.
    fn fell_behind(&self) -> End {
        let told = self.error(
            None,
            "this connection fell too far behind the engine's events and is closed; \
             reconnect and subscribe again with include_state"
                .into(),
        );
        match told {
            Ok(()) => End::Close(close_code::AGAIN, "fell behind the engine's events; reconnect"),
            Err(Slow) => End::Slow,
        }
    }

    /// A message the client got wrong: said, and the connection goes on.
    fn error(&self, sub_id: Option<&str>, detail: String) -> Result<(), Slow> {
        self.out.send(&ErrorMessage {
            kind: "error",
            sub_id,
            error: &detail,
        })
    }
}

/// Why a read failed: a message over the limit is told so (1009).
fn read_failed(e: axum::Error) -> End {
    let inner = e.into_inner();
    let too_big = matches!(
        inner.downcast_ref::<tungstenite::Error>(),
        Some(tungstenite::Error::Capacity(_))
    );
    if too_big {
        End::Close(close_code::SIZE, "a message may be at most 64 KiB")
    } else {
        tracing::debug!("a WebSocket connection broke: {inner}");
        End::Gone
    }
}

/// The state of `["cluster"]`: Argyll's nodes with the health of each step.
/// Tartan runs no health checks and keeps no list of its processes, so it
/// shows this process, every step's health unknown (as `GET /engine`).
fn cluster_state(engine: &Engine, view: &CatalogView) -> Value {
    let now = chrono::Utc::now();
    let health: serde_json::Map<String, Value> = view
        .catalog
        .steps()
        .keys()
        .map(|id| (id.clone(), json!({ "status": "unknown" })))
        .collect();
    let mut nodes = serde_json::Map::new();
    nodes.insert(
        engine.config().node_id.clone(),
        json!({ "last_seen": now, "health": health }),
    );
    json!({ "last_updated": now, "nodes": nodes })
}

/// At most 64 bytes of something the client sent, for an error message.
fn clip(text: &str) -> String {
    match text.char_indices().nth(64) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_string(),
    }
}

/// What a client sends.
#[derive(Deserialize)]
struct ClientMessage {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: Value,
}

/// `data` of a subscribe (Argyll's `ClientSubscription`).
#[derive(Deserialize)]
struct SubscribeData {
    sub_id: Option<String>,
    aggregate_ids: Option<Vec<Vec<String>>>,
    event_types: Option<Vec<String>>,
    include_state: Option<bool>,
}

/// An event, in Argyll's envelope.
#[derive(Serialize)]
struct Envelope<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    sub_id: &'a str,
    data: &'a Value,
    id: &'a [&'a str],
    /// Unix milliseconds.
    timestamp: i64,
    sequence: i64,
}

/// A message the server could not act on.
#[derive(Serialize)]
struct ErrorMessage<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    sub_id: Option<&'a str>,
    error: &'a str,
}

/// What an aggregate id names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Aggregate {
    Catalog,
    Cluster,
    /// `["flow"]`: every flow (Argyll matches aggregate ids as prefixes).
    Flows,
    Flow(String),
}

impl Aggregate {
    fn parse(parts: &[String]) -> Result<Aggregate, String> {
        match parts {
            [a] if a == "catalog" => Ok(Aggregate::Catalog),
            [a] if a == "cluster" => Ok(Aggregate::Cluster),
            [a] if a == "flow" => Ok(Aggregate::Flows),
            [a, id] if a == "flow" && !id.is_empty() && id.len() <= MAX_FLOW_ID_LEN => {
                Ok(Aggregate::Flow(id.clone()))
            }
            [a, id] if a == "flow" && !id.is_empty() => Err(format!(
                "aggregate_ids: a flow id is at most {MAX_FLOW_ID_LEN} bytes, got {}",
                id.len()
            )),
            _ => {
                let shown: Vec<String> = parts.iter().take(3).map(|p| clip(p)).collect();
                Err(format!(
                    "aggregate_ids: {shown:?} is not an aggregate id: expected [\"catalog\"], \
                     [\"cluster\"], [\"flow\"] or [\"flow\", \"<flow id>\"]"
                ))
            }
        }
    }

    fn id(&self) -> Vec<&str> {
        match self {
            Aggregate::Catalog => vec!["catalog"],
            Aggregate::Cluster => vec!["cluster"],
            Aggregate::Flows => vec!["flow"],
            Aggregate::Flow(id) => vec!["flow", id],
        }
    }
}

/// One subscription: what it follows, and where each followed aggregate's
/// live events start (after the state it was sent).
struct Subscription {
    /// No aggregate ids: every event.
    everything: bool,
    catalog: bool,
    all_flows: bool,
    flows: HashSet<String>,
    /// `None`: every type.
    types: Option<HashSet<String>>,
    include_state: bool,
    catalog_from: i64,
    flow_from: HashMap<String, i64>,
    /// Aggregate ids named, counted against `MAX_AGGREGATES`.
    size: usize,
}

impl Subscription {
    fn wants_flow(&self, id: &str) -> bool {
        self.everything || self.all_flows || self.flows.contains(id)
    }

    fn wants_catalog(&self) -> bool {
        self.everything || self.catalog
    }

    fn wants_type(&self, kind: &str) -> bool {
        self.types.as_ref().is_none_or(|t| t.contains(kind))
    }
}
