//! One WebSocket connection: its subscriptions, the states and events it is
//! sent, and when it is cut off.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use axum::extract::ws::{close_code, Message, WebSocket};
use futures::stream::SplitStream;
use futures::StreamExt;
use serde_json::{json, Value};
use tartan_engine::{
    BusReceiver, ClusterEvents, ClusterReceiver, CommittedCatalog, CommittedEvents, Engine,
    EventSubscription, RecvError,
};
use tokio::sync::broadcast;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::routes::engine::catalog_state_of;

use super::*;

/// One thing that happened to a connection.
pub(super) enum Step {
    WriterGone,
    Stopping,
    Silent,
    Frame(Option<Result<Message, axum::Error>>),
    Flow(Result<Arc<CommittedEvents>, RecvError>),
    Catalog(Result<Arc<CommittedCatalog>, RecvError>),
    Cluster(Result<Arc<ClusterEvents>, broadcast::error::RecvError>),
}

pub(super) struct Connection {
    pub(super) engine: Engine,
    pub(super) subscriptions: BTreeMap<String, Subscription>,
    pub(super) out: Outbox,
}

impl Connection {
    pub(super) async fn run(
        &mut self,
        stream: &mut SplitStream<WebSocket>,
        events: &mut EventSubscription,
        catalog: &mut BusReceiver<CommittedCatalog>,
        cluster: &mut ClusterReceiver,
        writer_gone: &CancellationToken,
    ) -> End {
        let mut deadline = Instant::now() + PONG_WAIT;
        let stopping = events.stopping.clone();
        loop {
            let step = tokio::select! {
                _ = writer_gone.cancelled() => Step::WriterGone,
                _ = stopping.cancelled() => Step::Stopping,
                _ = tokio::time::sleep_until(deadline) => Step::Silent,
                frame = stream.next() => Step::Frame(frame),
                batch = events.recv() => Step::Flow(batch),
                batch = catalog.recv() => Step::Catalog(batch),
                batch = cluster.recv() => Step::Cluster(batch),
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
                        None => return End::Gone,
                        Some(Ok(Message::Close(_))) => return answer_close(stream).await,
                        Some(Ok(Message::Text(text))) => self.message(text.as_bytes()).await,
                        Some(Ok(Message::Binary(bytes))) => self.message(&bytes).await,
                        Some(Ok(Message::Ping(_) | Message::Pong(_))) => Ok(()),
                        Some(Err(e)) => return read_failed(e),
                    }
                }
                Step::Flow(Ok(batch)) => self.flow_events(&batch),
                Step::Catalog(Ok(batch)) => self.catalog_events(&batch),
                Step::Cluster(Ok(batch)) => self.cluster_events(&batch),
                // Health changes missed by a connection that follows none
                // of them do not matter; one that follows them reconnects.
                Step::Cluster(Err(broadcast::error::RecvError::Lagged(_))) if !self.follows_cluster() => {
                    Ok(())
                }
                Step::Cluster(Err(broadcast::error::RecvError::Lagged(_))) => return self.fell_behind(),
                Step::Cluster(Err(broadcast::error::RecvError::Closed)) => {
                    return End::Close(close_code::AWAY, "the server is shutting down")
                }
                // What a connection following none of it missed does not
                // matter: it is attached again from now on.
                Step::Flow(Err(RecvError::Lagged)) if !self.follows_flows() => {
                    self.engine.feed().rejoin_events(events).await;
                    Ok(())
                }
                Step::Catalog(Err(RecvError::Lagged)) if !self.follows_catalog() => {
                    *catalog = self.engine.feed().subscribe_catalog();
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
    pub(super) async fn message(&mut self, bytes: &[u8]) -> Result<(), Slow> {
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

    pub(super) async fn subscribe(&mut self, data: Value) -> Result<(), Slow> {
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
    pub(super) fn check(
        &self,
        sub_id: &str,
        request: SubscribeData,
    ) -> Result<(Subscription, Vec<Aggregate>), String> {
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
            cluster: false,
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
                Aggregate::Cluster => subscription.cluster = true,
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
    pub(super) async fn state_of(&self, aggregate: &Aggregate) -> Result<Option<(Value, i64)>, String> {
        let encode =
            |v: Result<Value, serde_json::Error>| v.map_err(|e| format!("encoding a state failed: {e}"));
        match aggregate {
            Aggregate::Catalog => {
                let view = self.engine.catalog().view().await;
                let state = encode(serde_json::to_value(catalog_state_of(&view)))?;
                Ok(Some((state, view.sequence + 1)))
            }
            Aggregate::Cluster => match self.engine.health().cluster_with_calls().await {
                Ok(view) => {
                    let state = encode(serde_json::to_value(crate::api::answers::ClusterState::of(&view)))?;
                    Ok(Some((state, 1)))
                }
                Err(e) => {
                    tracing::warn!("reading the cluster for a WebSocket subscription failed: {e}");
                    Err("the cluster could not be read; subscribe again later".to_string())
                }
            },
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

    pub(super) fn unsubscribe(&mut self, data: Value) -> Result<(), Slow> {
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

    pub(super) fn flow_events(&self, batch: &CommittedEvents) -> Result<(), Slow> {
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

    pub(super) fn catalog_events(&self, batch: &CommittedCatalog) -> Result<(), Slow> {
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

    pub(super) fn cluster_events(&self, batch: &ClusterEvents) -> Result<(), Slow> {
        for (sub_id, subscription) in &self.subscriptions {
            if !subscription.wants_cluster() {
                continue;
            }
            for event in &batch.events {
                if !subscription.wants_type(&event.event_type) {
                    continue;
                }
                self.out.send(&Envelope {
                    kind: &event.event_type,
                    sub_id,
                    data: &event.data,
                    id: &["cluster"],
                    timestamp: event.timestamp.timestamp_millis(),
                    sequence: event.sequence,
                })?;
            }
        }
        Ok(())
    }

    pub(super) fn follows_cluster(&self) -> bool {
        self.subscriptions.values().any(Subscription::wants_cluster)
    }

    pub(super) fn follows_flows(&self) -> bool {
        self.subscriptions
            .values()
            .any(|s| s.everything || s.all_flows || !s.flows.is_empty())
    }

    pub(super) fn follows_catalog(&self) -> bool {
        self.subscriptions.values().any(Subscription::wants_catalog)
    }

    /// The bus went on without this connection: events were lost, so it
    /// ends; the client reconnects and reads the state again.
    pub(super) fn fell_behind(&self) -> End {
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
    pub(super) fn error(&self, sub_id: Option<&str>, detail: String) -> Result<(), Slow> {
        self.out.send(&ErrorMessage {
            kind: "error",
            sub_id,
            error: &detail,
        })
    }
}

/// The client sent a close: answer it with a close of the same code and
/// reason, or an empty one for an empty close (RFC 6455 §5.5.1), else a
/// browser sees the connection drop (1006) instead of a clean close.
///
/// tungstenite queues that answer itself when it reads the client's close,
/// but writes it only on the socket's next read or flush, and refuses
/// anything sent after (`SendAfterClosing`), the writer's close included.
/// So the socket is read once more: that writes the answer and, the
/// handshake done, ends the stream (a server ends the connection once its
/// close is answered). Within `WRITE_WAIT`, for a client that does not read.
pub(super) async fn answer_close(stream: &mut SplitStream<WebSocket>) -> End {
    read_to_end(stream, WRITE_WAIT).await;
    End::Gone
}

/// Read the socket until the close handshake ends it, what is read
/// discarded, within `wait`: after the client's close (to write the
/// answer, `answer_close`), or after the server's own close, so that the
/// socket is not dropped with the client's messages unread: that resets
/// the connection (TCP RST), and a client may lose the close frame, and
/// its code, still waiting in its buffer.
pub(super) async fn read_to_end(stream: &mut SplitStream<WebSocket>, wait: Duration) {
    let ended = async {
        while let Some(next) = stream.next().await {
            if let Err(e) = next {
                tracing::debug!("reading a closing WebSocket failed: {e}");
            }
        }
    };
    if tokio::time::timeout(wait, ended).await.is_err() {
        tracing::debug!("a WebSocket's close was not answered within {wait:?}");
    }
}

/// Why a read failed: a message over the limit is told so (1009).
pub(super) fn read_failed(e: axum::Error) -> End {
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

/// At most 64 bytes of something the client sent, for an error message.
pub(super) fn clip(text: &str) -> String {
    match text.char_indices().nth(64) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_string(),
    }
}
