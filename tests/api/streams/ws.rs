//! `GET /engine/ws` (docs/api.md, "WebSocket"): Argyll's WebSocket
//! protocol. Subscriptions to flows, the catalog and the cluster, their
//! state on subscribing, their events live in Argyll's envelope; errors for
//! bad messages; the read limit, the origin check, the tokens, and a client
//! that does not read being dropped.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::helpers::*;
use tartan_testkit::both_backends;

both_backends!(
    a_flow_subscription_sends_its_state_then_its_events_live,
    a_catalog_subscription_sees_changes_made_after_it,
    unsubscribing_stops_the_events,
    bad_messages_get_errors_and_the_connection_goes_on,
    a_connection_that_falls_behind_the_bus_is_told_and_closed,
    a_cluster_subscription_gets_each_health_change_live,
);

/// An engine whose bus holds one byte, with the step `quick` registered
/// (and its server, kept alive by the caller).
async fn one_byte_bus(db: TestDb) -> (TestApp, StepServer) {
    let app = start_on_with(db, "ws", |c| c.stream_buffer_bytes = 1).await;
    let svc = StepServer::start(|_, _| json_reply(200, json!({"q": "1"}))).await;
    let r = app
        .register(&sync_step("quick", &svc.url("/q"), &["seed"], &["q"]))
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    (app, svc)
}

/// Start 50 flows of the one step `quick` at once, named by `round`.
async fn start_round(app: &TestApp, round: usize) {
    let starts = (0..50).map(|k| async move {
        let body = json!({"id": format!("many-{round}-{k}"), "goals": ["quick"], "init": {"seed": ["s"]}});
        assert_eq!(app.start_flow(&body).await.status, StatusCode::CREATED);
    });
    futures::future::join_all(starts).await;
}

/// What the server sent next.
#[derive(Debug)]
enum Incoming {
    Json(Value),
    /// The connection ended: with the close frame's code, if one came.
    Closed(Option<u16>),
}

struct Client<S> {
    ws: WebSocketStream<S>,
}

type Tcp = MaybeTlsStream<TcpStream>;

/// Open `path` with extra headers; the refusal's status and body if refused.
async fn open_with(
    app: &TestApp,
    path: &str,
    headers: &[(&'static str, &str)],
) -> Result<Client<Tcp>, (u16, Value)> {
    let mut request = format!("ws://{}{path}", app.addr).into_client_request().unwrap();
    for (name, value) in headers {
        request
            .headers_mut()
            .insert(*name, HeaderValue::from_str(value).unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((ws, _)) => Ok(Client { ws }),
        Err(WsError::Http(resp)) => {
            let content_type = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            assert_eq!(content_type, "application/problem+json");
            let body = resp
                .body()
                .as_deref()
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or(Value::Null);
            Err((resp.status().as_u16(), body))
        }
        Err(e) => panic!("handshake: {e}"),
    }
}

async fn open(app: &TestApp) -> Client<Tcp> {
    open_with(app, "/engine/ws", &[])
        .await
        .unwrap_or_else(|r| panic!("refused: {r:?}"))
}

impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin> Client<S> {
    async fn send(&mut self, message: &Value) {
        self.ws
            .send(Message::Text(message.to_string().into()))
            .await
            .unwrap();
    }

    async fn subscribe(&mut self, data: Value) -> Value {
        self.send(&json!({"type": "subscribe", "data": data})).await;
        let reply = self.json().await;
        assert_eq!(reply["type"], "subscribed", "{reply}");
        reply
    }

    /// The next message (pings are answered by the library and skipped).
    async fn recv(&mut self) -> Incoming {
        loop {
            let next = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .expect("a message within 30 s");
            return match next {
                Some(Ok(Message::Text(text))) => Incoming::Json(serde_json::from_str(&text).unwrap()),
                Some(Ok(Message::Close(frame))) => Incoming::Closed(frame.map(|f| u16::from(f.code))),
                Some(Ok(_)) => continue,
                None | Some(Err(_)) => Incoming::Closed(None),
            };
        }
    }

    async fn json(&mut self) -> Value {
        match self.recv().await {
            Incoming::Json(v) => v,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    /// Send a close frame; the server's answer (RFC 6455 §5.5.1): its
    /// close frame, after which it ends the connection. Anything else — the
    /// connection dropped without a close frame, which a browser reports
    /// as 1006 — fails the test.
    async fn close_with(&mut self, frame: Option<CloseFrame>) -> Option<CloseFrame> {
        self.ws.send(Message::Close(frame)).await.unwrap();
        loop {
            let next = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .expect("an answer to the close within 30 s");
            match next {
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                Some(Ok(Message::Close(answer))) => {
                    let end = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                        .await
                        .expect("the connection ended within 30 s of the close");
                    assert!(end.is_none(), "after the closing handshake: {end:?}");
                    return answer;
                }
                other => panic!("expected the server's close frame, got {other:?}"),
            }
        }
    }

    /// Every message until the server answers a ping: what it had to send.
    async fn flush(&mut self) -> Vec<Value> {
        self.send(&json!({"type": "ping"})).await;
        let mut all = Vec::new();
        loop {
            let m = self.json().await;
            if m["type"] == "pong" {
                return all;
            }
            all.push(m);
        }
    }
}

fn millis(rfc3339: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339.as_str().unwrap())
        .unwrap()
        .timestamp_millis()
}

/// The messages are the stored events, in Argyll's envelope.
fn assert_envelopes(messages: &[Value], stored: &[&Value], sub_id: &str, id: Value) {
    assert_eq!(messages.len(), stored.len(), "{messages:#?}");
    for (m, e) in messages.iter().zip(stored) {
        assert_eq!(m["type"], e["type"], "{m}");
        assert_eq!(m["sub_id"], sub_id, "{m}");
        assert_eq!(m["id"], id, "{m}");
        assert_eq!(m["sequence"], e["sequence"], "{m}");
        assert_eq!(m["data"], e["data"], "{m}");
        assert_eq!(m["timestamp"].as_i64(), Some(millis(&e["timestamp"])), "{m}");
    }
}

async fn a_flow_subscription_sends_its_state_then_its_events_live(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let gate = Arc::new(Notify::new());
    let _svc = three_steps(&app, Some(gate.clone())).await;
    let r = app
        .start_flow(&json!({"id": "w1", "goals": ["c"], "init": {"seed": ["s"]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let mut ws = open(&app).await;
    // As Argyll's web UI: the selected flow with its state, and the flow
    // list's rows without, for three types only.
    let detail = ws
        .subscribe(json!({"sub_id": "detail", "aggregate_ids": [["flow", "w1"]], "include_state": true}))
        .await;
    assert_eq!(detail["sub_id"], "detail");
    let items = detail["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{detail}");
    assert_eq!(items[0]["id"], json!(["flow", "w1"]));
    assert_eq!(items[0]["data"]["id"], "w1");
    assert_eq!(items[0]["data"]["status"], "active");
    assert!(items[0]["data"]["plan"].is_object(), "{detail}");
    let from = items[0]["sequence"].as_i64().unwrap();
    assert!(from >= 2, "{detail}");
    let summary = ws
        .subscribe(json!({
            "sub_id": "summary",
            "aggregate_ids": [["flow", "w1"], ["flow", "elsewhere"]],
            "event_types": ["flow_started", "flow_completed", "flow_failed"],
        }))
        .await;
    assert_eq!(summary["items"], json!([]));

    gate.notify_one();
    let mut live = Vec::new();
    loop {
        let m = ws.json().await;
        let last = m["sub_id"] == "detail" && m["type"] == "flow_deactivated";
        live.push(m);
        if last {
            break;
        }
    }
    live.extend(ws.flush().await);
    let stored = events(&app, "w1").await;
    let detail: Vec<Value> = live.iter().filter(|m| m["sub_id"] == "detail").cloned().collect();
    // The state, then every event after it: none missed, none twice.
    let after: Vec<&Value> = stored
        .iter()
        .filter(|e| e["sequence"].as_i64().unwrap() >= from)
        .collect();
    assert_envelopes(&detail, &after, "detail", json!(["flow", "w1"]));
    assert_eq!(detail[0]["sequence"], from);
    let summary: Vec<Value> = live
        .iter()
        .filter(|m| m["sub_id"] == "summary")
        .cloned()
        .collect();
    let completed = of_type(&stored, "flow_completed");
    assert_envelopes(&summary, &completed, "summary", json!(["flow", "w1"]));
    assert_eq!(live.len(), detail.len() + summary.len(), "{live:#?}");
}

async fn a_catalog_subscription_sees_changes_made_after_it(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let step = |id: &str, name: &str| {
        let mut s = sync_step(id, "http://127.0.0.1:9/x", &["seed"], &[&format!("{id}_out")]);
        s["name"] = json!(name);
        s
    };
    assert_eq!(app.register(&step("a", "A")).await.status, StatusCode::CREATED);
    let mut ws = open(&app).await;
    let catalog = ws
        .subscribe(json!({
            "sub_id": "catalog",
            "aggregate_ids": [["catalog"]],
            "include_state": true,
            "event_types": ["step_registered", "step_unregistered", "step_updated"],
        }))
        .await;
    let item = &catalog["items"][0];
    assert_eq!(item["id"], json!(["catalog"]));
    assert_eq!(item["data"]["steps"]["a"]["name"], "A", "{catalog}");
    assert_eq!(item["sequence"], 2, "one event so far: the next is 2");
    // The cluster: this engine, with its heartbeat, and the health of its
    // steps (unknown: `a` has no health check).
    let cluster = ws
        .subscribe(json!({"sub_id": "health", "aggregate_ids": [["cluster"]], "include_state": true}))
        .await;
    let item = &cluster["items"][0];
    assert_eq!(item["id"], json!(["cluster"]));
    assert_eq!(
        item["data"]["nodes"]["test-node"]["health"]["a"]["status"], "unknown",
        "{cluster}"
    );
    assert!(
        item["data"]["nodes"]["test-node"]["last_seen"].is_string(),
        "{cluster}"
    );

    assert_eq!(app.register(&step("b", "B")).await.status, StatusCode::CREATED);
    let r = app
        .send(Method::PUT, "/engine/step/b", Some(step("b", "B2").to_string()))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let r = app.send(Method::DELETE, "/engine/step/b", None).await;
    assert!(r.status.is_success(), "{:?}", r.body);
    let mut live = Vec::new();
    while live.len() < 3 {
        live.push(ws.json().await);
    }
    live.extend(ws.flush().await);
    let stored = app.get("/engine/catalog/events").await.body["events"]
        .as_array()
        .cloned()
        .unwrap();
    let after: Vec<&Value> = stored.iter().skip(1).collect();
    assert_envelopes(&live, &after, "catalog", json!(["catalog"]));
    assert_eq!(live[0]["data"]["step"]["id"], "b");
    assert_eq!(live[1]["type"], "step_updated");
    assert_eq!(live[1]["data"]["step"]["name"], "B2");
    assert_eq!(live[2]["data"], json!({"step_id": "b"}));
}

/// Argyll's UI subscribes to `["cluster"]` for `step_health_changed`:
/// each change of a step's health arrives as it is recorded, in the
/// envelope and with the data `GET /engine/cluster/events` has.
async fn a_cluster_subscription_gets_each_health_change_live(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let app = start_on_with(db, "test-node", |c| {
        c.health = tartan_engine::HealthConfig {
            interval: Duration::from_millis(100),
            timeout: Duration::from_secs(1),
        };
    })
    .await;
    let up = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = up.clone();
    let svc = StepServer::start(move |_, _| {
        let status = if flag.load(std::sync::atomic::Ordering::SeqCst) {
            200
        } else {
            503
        };
        json_reply(status, json!({}))
    })
    .await;
    let mut ws = open(&app).await;
    ws.subscribe(
        json!({"sub_id": "health", "aggregate_ids": [["cluster"]], "include_state": true,
                        "event_types": ["step_health_changed"]}),
    )
    .await;
    let mut step = sync_step("checked", &svc.url("/run"), &[], &["out"]);
    step["http"]["health_check"] = json!(svc.url("/health"));
    assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    let down = ws.json().await;
    up.store(true, std::sync::atomic::Ordering::SeqCst);
    let back = ws.json().await;
    for (m, status) in [(&down, "unhealthy"), (&back, "healthy")] {
        assert_eq!(m["type"], "step_health_changed", "{m}");
        assert_eq!(m["sub_id"], "health", "{m}");
        assert_eq!(m["id"], json!(["cluster"]), "{m}");
        assert_eq!(m["data"]["step_id"], "checked", "{m}");
        assert_eq!(m["data"]["node_id"], "test-node", "{m}");
        assert_eq!(m["data"]["status"], status, "{m}");
    }
    assert_eq!(down["data"]["error"], "HTTP 503", "{down}");
    let stored = app.get("/engine/cluster/events").await.body["events"]
        .as_array()
        .cloned()
        .unwrap();
    let stored: Vec<&Value> = stored.iter().collect();
    assert_envelopes(&[down, back], &stored, "health", json!(["cluster"]));
}

async fn unsubscribing_stops_the_events(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let mut ws = open(&app).await;
    ws.subscribe(json!({"sub_id": "gone", "aggregate_ids": [["catalog"]]}))
        .await;
    ws.send(&json!({"type": "unsubscribe", "data": {"sub_id": "gone"}}))
        .await;
    assert_eq!(ws.json().await, json!({"type": "unsubscribed", "sub_id": "gone"}));
    // Another subscription to the same events: once it has them, the
    // first would have had them too.
    ws.subscribe(json!({"sub_id": "kept", "aggregate_ids": [["catalog"]]}))
        .await;
    let step = sync_step("s", "http://127.0.0.1:9/s", &["seed"], &["out"]);
    assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    let mut seen = vec![ws.json().await];
    seen.extend(ws.flush().await);
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0]["sub_id"], "kept");
    assert_eq!(seen[0]["type"], "step_registered");
}

/// Send `message`; the answer is an error, for `sub_id`, that `says` something.
async fn expect_error(ws: &mut Client<Tcp>, message: Message, sub_id: Option<&str>, says: &str) {
    ws.ws.send(message).await.unwrap();
    let reply = ws.json().await;
    assert_eq!(reply["type"], "error", "{reply}");
    assert_eq!(reply["sub_id"].as_str(), sub_id, "{reply}");
    let error = reply["error"].as_str().unwrap();
    assert!(error.contains(says), "{error:?} should say {says:?}");
}

async fn bad_messages_get_errors_and_the_connection_goes_on(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let mut ws = open(&app).await;
    let text = |v: Value| Message::Text(v.to_string().into());
    expect_error(&mut ws, Message::Text("not json".into()), None, "JSON").await;
    expect_error(&mut ws, Message::Binary(vec![0xff, 0].into()), None, "JSON").await;
    expect_error(
        &mut ws,
        text(json!({"type": "launch"})),
        None,
        "unknown message type",
    )
    .await;
    expect_error(
        &mut ws,
        text(json!({"type": "subscribe", "data": {}})),
        None,
        "sub_id",
    )
    .await;
    expect_error(&mut ws, text(json!({"type": "subscribe"})), None, "data").await;
    expect_error(
        &mut ws,
        text(json!({"type": "subscribe", "data": {"sub_id": "x", "aggregate_ids": [["bogus"]]}})),
        Some("x"),
        "aggregate_ids",
    )
    .await;
    expect_error(
        &mut ws,
        text(json!({"type": "subscribe", "data": {"sub_id": "x", "aggregate_ids": "flow"}})),
        Some("x"),
        "aggregate_ids",
    )
    .await;
    // A child flow's id is longer than a client's (docs/steps.md, "Sub-flows").
    let long = "f".repeat(5000);
    expect_error(
        &mut ws,
        text(json!({"type": "subscribe", "data": {"sub_id": "x", "aggregate_ids": [["flow", long]]}})),
        Some("x"),
        "at most 4096 bytes",
    )
    .await;
    expect_error(
        &mut ws,
        text(json!({"type": "unsubscribe", "data": {}})),
        None,
        "sub_id",
    )
    .await;
    // A connection holds at most 32 subscriptions.
    for k in 0..32 {
        ws.subscribe(json!({"sub_id": format!("s{k}"), "aggregate_ids": [["catalog"]]}))
            .await;
    }
    expect_error(
        &mut ws,
        text(json!({"type": "subscribe", "data": {"sub_id": "one-more"}})),
        Some("one-more"),
        "at most 32",
    )
    .await;
    // Replacing one is not one more.
    ws.subscribe(json!({"sub_id": "s0", "aggregate_ids": [["flow"]]}))
        .await;
    // Still usable: a subscription works and sees its events.
    ws.send(&json!({"type": "unsubscribe", "data": {"sub_id": "s1"}}))
        .await;
    assert_eq!(ws.json().await["type"], "unsubscribed");
    let reply = ws
        .subscribe(json!({"sub_id": "ok", "aggregate_ids": [["flow", "nope"]], "include_state": true}))
        .await;
    // No such flow: no item (Argyll's client shows "not found").
    assert_eq!(reply["items"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_closes_the_connection() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let mut ws = open(&app).await;
    // Just under the limit is read (and answered).
    let padding = "x".repeat(60 * 1024);
    ws.send(&json!({"type": "ping", "data": padding})).await;
    assert_eq!(ws.json().await["type"], "pong");
    ws.send(&json!({"type": "ping", "data": "x".repeat(65 * 1024)}))
        .await;
    match ws.recv().await {
        // 1009: message too big; without the frame, the server dropped it.
        Incoming::Closed(code) => assert!(matches!(code, Some(1009) | None), "{code:?}"),
        other => panic!("expected the connection closed, got {other:?}"),
    }
    // The server goes on.
    let mut again = open(&app).await;
    again.send(&json!({"type": "ping"})).await;
    assert_eq!(again.json().await["type"], "pong");
}

/// A client's close is answered with a close of its code (RFC 6455
/// §5.5.1), so a browser sees a clean close with the code it sent, not
/// 1006; the connection's stream slot is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_from_the_client_is_answered_with_its_code() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let app = start_on_with(db, "ws", |c| c.max_streams = 1).await;
    let mut ws = open(&app).await;
    ws.subscribe(json!({"sub_id": "all", "aggregate_ids": [["catalog"], ["flow"]]}))
        .await;
    assert!(ws.flush().await.is_empty());
    let answer = ws
        .close_with(Some(CloseFrame {
            code: CloseCode::Normal,
            reason: "the page is closed".into(),
        }))
        .await
        .expect("a close frame with a code");
    assert_eq!(u16::from(answer.code), 1000, "{answer:?}");
    // The slot is given back.
    for _ in 0..200 {
        if let Ok(mut again) = open_with(&app, "/engine/ws", &[]).await {
            again.send(&json!({"type": "ping"})).await;
            assert_eq!(again.json().await["type"], "pong");
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the slot of a closed connection was not given back");
}

/// A close without a code (1005, "no status received") is answered with
/// one without a code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_close_from_the_client_is_answered_with_an_empty_close() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let mut ws = open(&app).await;
    ws.send(&json!({"type": "ping"})).await;
    assert_eq!(ws.json().await["type"], "pong");
    let answer = ws.close_with(None).await;
    assert!(answer.is_none(), "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_origin_is_refused() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let security = tartan_server::ApiSecurity::new(&[], &[], &["http://ui.example".into()]).unwrap();
    let app = start_secured(db, "ws", security).await;
    let (status, body) = open_with(&app, "/engine/ws", &[("origin", "http://evil.example")])
        .await
        .err()
        .expect("refused");
    assert_eq!(status, 403);
    assert!(
        body["detail"].as_str().unwrap().contains("evil.example"),
        "{body}"
    );
    // The server's own origin, a listed one, and clients without Origin.
    let own = format!("http://{}", app.addr);
    for origin in [Some(own.as_str()), Some("http://ui.example"), None] {
        let headers: Vec<(&'static str, &str)> = origin.map(|o| ("origin", o)).into_iter().collect();
        let mut ws = open_with(&app, "/engine/ws", &headers)
            .await
            .unwrap_or_else(|r| panic!("{origin:?} refused: {r:?}"));
        ws.send(&json!({"type": "ping"})).await;
        assert_eq!(ws.json().await["type"], "pong");
    }
    // Another port of the same host is another origin.
    let other_port = format!("http://127.0.0.1:{}", app.addr.port().wrapping_add(1));
    let refused = open_with(&app, "/engine/ws", &[("origin", &other_port)]).await;
    assert_eq!(refused.err().map(|(s, _)| s), Some(403));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_needed_in_the_header_or_the_query() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let security = tartan_server::ApiSecurity::new(
        &["full-token-0123456789".into()],
        &["read-token-0123456789".into()],
        &[],
    )
    .unwrap();
    let app = start_secured(db, "ws", security).await;
    for path in ["/engine/ws", "/engine/ws?access_token=wrong"] {
        let refused = open_with(&app, path, &[]).await;
        assert_eq!(refused.err().map(|(s, _)| s), Some(401), "{path}");
    }
    let by_query = open_with(&app, "/engine/ws?access_token=read-token-0123456789", &[]).await;
    let by_header = open_with(
        &app,
        "/engine/ws",
        &[("authorization", "Bearer read-token-0123456789")],
    )
    .await;
    for ws in [by_query, by_header] {
        let mut ws = ws.unwrap_or_else(|r| panic!("refused: {r:?}"));
        let reply = ws
            .subscribe(json!({"sub_id": "c", "aggregate_ids": [["catalog"]], "include_state": true}))
            .await;
        assert_eq!(reply["items"][0]["id"], json!(["catalog"]));
    }
}

/// A client that subscribes to every flow and then reads nothing: once
/// what the kernel buffers and its small queue are full, it is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_read_is_dropped() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let app = start_on_with(db, "ws", |c| c.stream_buffer = 8).await;
    let big = "x".repeat(64 * 1024);
    let svc = StepServer::start(move |_, _| json_reply(200, json!({"out": big}))).await;
    let r = app
        .register(&sync_step("big", &svc.url("/big"), &["seed"], &["out"]))
        .await;
    assert_eq!(r.status, StatusCode::CREATED);

    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(app.addr).await.unwrap();
    let (ws, _) = tokio_tungstenite::client_async(format!("ws://{}/engine/ws", app.addr), stream)
        .await
        .unwrap();
    let mut slow = Client { ws };
    slow.subscribe(json!({"sub_id": "all", "aggregate_ids": [["flow"]]}))
        .await;

    // About 256 KiB of events a flow: 10 MiB in all, far more than the
    // socket's buffers and the queue hold.
    const FLOWS: usize = 40;
    let starts = (0..FLOWS).map(|k| {
        let app = &app;
        async move {
            let body = json!({"id": format!("big-{k}"), "goals": ["big"], "init": {"seed": ["s"]}});
            assert_eq!(app.start_flow(&body).await.status, StatusCode::CREATED);
        }
    });
    futures::future::join_all(starts).await;
    for k in 0..FLOWS {
        app.wait_for_flow(&format!("big-{k}")).await;
    }
    // What was written before the drop can still be read; then it ends,
    // short of the end of every flow.
    let mut finished = 0;
    while let Incoming::Json(m) = slow.recv().await {
        if m["type"] == "flow_deactivated" {
            finished += 1;
        }
    }
    assert!(finished < FLOWS, "the client got every event: it was not dropped");
    // The server goes on.
    let mut ws = open(&app).await;
    ws.send(&json!({"type": "ping"})).await;
    assert_eq!(ws.json().await["type"], "pong");
}

/// With a bus of one byte, a connection that follows every flow falls
/// behind when two decisions are published before it reads the first
/// (decisions committed together are published back to back): it is told
/// so, and closed with 1013 (try again later), after which it reconnects.
/// Rounds of flows run until that happens, however the threads interleave.
async fn a_connection_that_falls_behind_the_bus_is_told_and_closed(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let (app, _svc) = one_byte_bus(db).await;
    let mut ws = open(&app).await;
    ws.subscribe(json!({"sub_id": "all", "aggregate_ids": [["flow"]]}))
        .await;
    let mut told = None;
    for round in 0..20 {
        start_round(&app, round).await;
        // Answered after what was queued before it, unless the connection
        // is closed (then the ping may not even be sent).
        let _ = ws
            .ws
            .send(Message::Text(json!({"type": "ping"}).to_string().into()))
            .await;
        loop {
            match ws.recv().await {
                Incoming::Json(m) if m["type"] == "error" => told = Some(m),
                Incoming::Json(m) if m["type"] == "pong" => break,
                Incoming::Json(_) => {}
                Incoming::Closed(code) => {
                    let told = told.expect("an error message before the close");
                    assert!(
                        told["error"]
                            .as_str()
                            .unwrap_or_default()
                            .contains("fell too far behind"),
                        "{told}"
                    );
                    assert_eq!(code, Some(1013));
                    let mut again = open(&app).await;
                    again.send(&json!({"type": "ping"})).await;
                    assert_eq!(again.json().await["type"], "pong");
                    return;
                }
            }
        }
    }
    panic!("the connection never fell behind a bus of one byte");
}

/// A connection that follows no flow missed nothing it wanted when the bus
/// went on without it: it is not closed, and subscribes later as usual.
/// A second connection, following every flow, shows the bus did go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_following_no_flow_is_not_cut_off() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let (app, _svc) = one_byte_bus(db).await;
    let mut idle = open(&app).await;
    let mut follower = open(&app).await;
    follower
        .subscribe(json!({"sub_id": "all", "aggregate_ids": [["flow"]]}))
        .await;
    let mut round = 0;
    'rounds: loop {
        assert!(round < 20, "the follower never fell behind a bus of one byte");
        start_round(&app, round).await;
        round += 1;
        let _ = follower
            .ws
            .send(Message::Text(json!({"type": "ping"}).to_string().into()))
            .await;
        loop {
            match follower.recv().await {
                Incoming::Json(m) if m["type"] == "pong" => break,
                Incoming::Json(_) => {}
                Incoming::Closed(code) => {
                    assert_eq!(code, Some(1013));
                    break 'rounds;
                }
            }
        }
    }
    idle.send(&json!({"type": "ping"})).await;
    assert_eq!(idle.json().await, json!({"type": "pong"}));
    idle.subscribe(json!({"sub_id": "catalog", "aggregate_ids": [["catalog"]]}))
        .await;
}

/// Each connection holds one of the process's stream slots, shared with
/// the event streams, until it closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_stream_limit_are_refused_until_one_closes() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let app = start_on_with(db, "ws", |c| c.max_streams = 1).await;
    let first = open(&app).await;
    let (status, body) = open_with(&app, "/engine/ws", &[]).await.err().expect("refused");
    assert_eq!(status, 503);
    assert!(body["detail"].as_str().unwrap().contains("streams"), "{body}");
    drop(first);
    // The slot comes back once the server sees the client gone.
    for _ in 0..200 {
        if let Ok(mut ws) = open_with(&app, "/engine/ws", &[]).await {
            ws.send(&json!({"type": "ping"})).await;
            assert_eq!(ws.json().await["type"], "pong");
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the slot of a closed connection was not given back");
}

/// Two engines on one Postgres: the catalog changes and flow events of one
/// reach the other's WebSocket live, and its cached catalog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_made_by_another_process_arrive_live() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let a = start_on(TestDb::at_url(db.url.clone()), "node-a").await;
    let b = start_on(TestDb::at_url(db.url.clone()), "node-b").await;
    let mut ws = open(&b).await;
    ws.subscribe(json!({"sub_id": "catalog", "aggregate_ids": [["catalog"]]}))
        .await;
    ws.subscribe(json!({"sub_id": "flows", "aggregate_ids": [["flow"]], "event_types": ["flow_completed"]}))
        .await;
    let gate = Arc::new(Notify::new());
    let _svc = three_steps(&a, Some(gate.clone())).await;
    let registered: Vec<Value> = {
        let mut m = Vec::new();
        while m.len() < 3 {
            m.push(ws.json().await);
        }
        m
    };
    let ids: Vec<&str> = registered
        .iter()
        .map(|m| {
            assert_eq!(m["type"], "step_registered", "{m}");
            assert_eq!(m["sub_id"], "catalog");
            m["data"]["step"]["id"].as_str().unwrap()
        })
        .collect();
    assert_eq!(ids, ["a", "b", "c"]);
    // `b` knows the steps now: its own reads show them.
    assert_eq!(b.get("/engine/step/c").await.status, StatusCode::OK);
    let r = a
        .start_flow(&json!({"id": "far", "goals": ["c"], "init": {"seed": ["s"]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    gate.notify_one();
    let done = ws.json().await;
    assert_eq!(done["type"], "flow_completed", "{done}");
    assert_eq!(done["id"], json!(["flow", "far"]));
    assert_eq!(done["sub_id"], "flows");
    assert!(ws.flush().await.is_empty());
}
