//! Bounded connections (docs/durability.md, "Connections"): a socket that
//! says nothing is closed within the header timeout, HTTP/1 and HTTP/2
//! alike; requests in progress are not idle; at most
//! `TARTAN_MAX_CONNECTIONS` are open at once; and idle sockets do not keep
//! `/health` from answering, even under a small open-file limit.
//!
//! Bounds are generous (the machine is small and shared): what is asserted
//! is that connections close and requests are answered, not how fast.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{
    call, json_reply, register, spawn_binary_with, spawn_serve_under, sync_step, wait_for_terminal, Backend,
    Binary, StepServer, TestDb,
};
use crate::wire::{h2_connect, h2_get, raw_request};

/// How long a test waits for what must happen at all.
const BOUND: Duration = Duration::from_secs(30);

/// Read from `stream` until the server closes it (EOF or reset), at most
/// `bound`: whether it closed, and after how long.
async fn closed_within(stream: &mut TcpStream, bound: Duration) -> (bool, Duration) {
    let started = Instant::now();
    let closed = tokio::time::timeout(bound, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok();
    (closed, started.elapsed())
}

async fn connect(addr: &str) -> TcpStream {
    TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"))
}

async fn health(engine: &Binary) -> u16 {
    let client = reqwest::Client::builder().timeout(BOUND * 2).build().unwrap();
    let resp = client
        .get(format!("http://{}/health", engine.addr))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET /health: {e}"));
    resp.status().as_u16()
}

/// A line of the engine's log containing `text`.
fn logged(engine: &Binary, text: &str) -> Option<String> {
    let log = engine.log.lock().unwrap_or_else(|p| p.into_inner());
    log.iter().find(|l| l.contains(text)).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_closed_within_the_header_timeout_but_a_busy_one_is_not() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "idle", &[("TARTAN_HEADER_TIMEOUT", "300ms")]).await;

    // Never a byte: hyper alone would wait for the first one forever.
    let mut silent = connect(&engine.addr).await;
    let (closed, after) = closed_within(&mut silent, BOUND).await;
    assert!(closed, "a silent connection is still open after {after:?}");
    assert!(
        after >= Duration::from_millis(250),
        "closed after {after:?}, before the timeout"
    );

    // Half a request head, then nothing.
    let mut partial = connect(&engine.addr).await;
    partial.write_all(b"GET /health HTTP/1.1\r\nHo").await.unwrap();
    let (closed, after) = closed_within(&mut partial, BOUND).await;
    assert!(
        closed,
        "a connection with half a head is still open after {after:?}"
    );

    // Keep-alive after a response: closed once idle for the timeout.
    let mut kept = connect(&engine.addr).await;
    kept.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut answer = [0u8; 12];
    kept.read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200");
    let (closed, after) = closed_within(&mut kept, BOUND).await;
    assert!(
        closed,
        "an idle keep-alive connection is still open after {after:?}"
    );

    // An event stream and a WebSocket last longer than the timeout: a
    // request in progress is not idle.
    let mut stream = connect(&engine.addr).await;
    stream
        .write_all(b"GET /engine/events/stream HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let (ws, _) = tokio_tungstenite::connect_async(format!("ws://{}/engine/ws", engine.addr))
        .await
        .unwrap_or_else(|e| panic!("WebSocket: {e}"));
    let mut ws = ws;
    let (closed, _) = closed_within(&mut stream, Duration::from_millis(1500)).await;
    assert!(!closed, "an event stream was closed as idle");
    use futures::{SinkExt, StreamExt};
    ws.send(tokio_tungstenite::tungstenite::Message::text(
        json!({"type": "ping"}).to_string(),
    ))
    .await
    .unwrap_or_else(|e| panic!("the WebSocket was closed as idle: {e}"));
    let pong = tokio::time::timeout(BOUND, async {
        while let Some(Ok(message)) = ws.next().await {
            if let Ok(text) = message.to_text() {
                if let Ok(v) = serde_json::from_str::<Value>(text) {
                    if v["type"] == "pong" {
                        return true;
                    }
                }
            }
        }
        false
    })
    .await;
    assert_eq!(pong.ok(), Some(true), "no pong from the WebSocket");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_http2_connection_is_closed_after_the_header_timeout() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "h2-idle", &[("TARTAN_HEADER_TIMEOUT", "300ms")]).await;

    // The preface and settings, then no request.
    let mut silent = connect(&engine.addr).await;
    silent
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let (closed, after) = closed_within(&mut silent, BOUND).await;
    assert!(
        closed,
        "an HTTP/2 connection without a request is open after {after:?}"
    );

    // A request, then nothing: closed (GOAWAY) once idle for the timeout.
    let (mut sender, driver) = h2_connect(&engine.addr).await;
    let (status, body) = h2_get(&mut sender, &engine.addr, "/health").await;
    assert_eq!(status, 200, "{body}");
    let started = Instant::now();
    let ended = tokio::time::timeout(BOUND, driver).await;
    assert!(
        ended.is_ok(),
        "an idle HTTP/2 connection is open after {:?}",
        started.elapsed()
    );
    assert_eq!(health(&engine).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_beyond_max_connections_waits_until_one_closes() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    // A long header timeout: the held connections stay until closed here.
    let engine = spawn_binary_with(
        &db,
        "capped",
        &[
            ("TARTAN_MAX_CONNECTIONS", "20"),
            ("TARTAN_HEADER_TIMEOUT", "120s"),
        ],
    )
    .await;
    assert!(
        logged(&engine, "at most 20 connections at once").is_some(),
        "the cap is not logged"
    );
    let mut held = Vec::new();
    for _ in 0..20 {
        held.push(connect(&engine.addr).await);
    }
    // The 21st is taken by the kernel, not by the server: no answer yet.
    let request = "GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    let waiting = {
        let addr = engine.addr.clone();
        tokio::spawn(async move { raw_request(&addr, request, BOUND).await })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!waiting.is_finished(), "served beyond TARTAN_MAX_CONNECTIONS");
    // One closes: the waiting one is served.
    drop(held.remove(0));
    let (status, head, _) = waiting.await.unwrap();
    assert_eq!(status, 200, "{head}");
    assert!(
        logged(&engine, "TARTAN_MAX_CONNECTIONS): new ones wait").is_some(),
        "reaching the cap is not logged"
    );
    drop(held);
    assert_eq!(health(&engine).await, 200);
}

/// The case: with a small open-file limit, idle sockets held
/// `/health` off and took the descriptors the engine's own work needs. Now
/// the connections are capped at half the limit and the idle ones closed:
/// a flow moves on while a thousand idle sockets wait, with no descriptor
/// ever lacking, `/health` is answered, and every idle socket is reaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_answers_while_a_thousand_idle_sockets_are_open_and_they_are_reaped() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    // This test holds a thousand sockets itself.
    let _ = rlimit::increase_nofile_limit(4096);
    let engine = spawn_serve_under(
        Some("-n 256"),
        &[
            "--listen",
            "127.0.0.1:0",
            "--node-id",
            "idle-1000",
            "--database-url",
            &db.url,
        ],
        &[("TARTAN_HEADER_TIMEOUT", "2s")],
    )
    .await;
    assert!(
        logged(&engine, "at most 128 connections at once").is_some(),
        "half of the 256 open files: {:?}",
        logged(&engine, "connections at once")
    );
    // `a` answers once the sockets are open; `b`, on another server, then
    // needs a new connection, and may not retry.
    let gate = Arc::new(tokio::sync::Notify::new());
    let first = {
        let gate = gate.clone();
        StepServer::start_async(move |_, _| {
            let gate = gate.clone();
            Box::pin(async move {
                gate.notified().await;
                json_reply(200, json!({"x": "1"}))
            })
        })
        .await
    };
    let second = StepServer::start(|_, _| json_reply(200, json!({"y": "2"}))).await;
    let once = json!({"max_retries": 0});
    let mut a = sync_step("a", &first.url("/a"), &["seed"], &["x"]);
    a["work_config"] = once.clone();
    let mut b = sync_step("b", &second.url("/b"), &["x"], &["y"]);
    b["work_config"] = once;
    register(&engine, vec![a, b]).await;
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(json!({"id": "f", "goals": ["b"], "init": {"seed": ["s"]}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    for _ in 0..500 {
        if !first.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(first.requests().len(), 1, "step a was not called");

    let mut idle = Vec::new();
    for _ in 0..1000 {
        match tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(&engine.addr)).await {
            Ok(Ok(s)) => idle.push(s),
            // The kernel's backlog may be full: enough are open.
            _ => break,
        }
    }
    assert!(idle.len() >= 500, "only {} idle sockets connected", idle.len());
    // Let the server take what it will of them, then let `a` answer.
    tokio::time::sleep(Duration::from_millis(500)).await;
    gate.notify_one();
    assert_eq!(health(&engine).await, 200);
    // Every idle socket is closed by the server, in rounds of the cap.
    let reaped = futures::future::join_all(idle.iter_mut().map(|s| closed_within(s, BOUND * 4))).await;
    let open = reaped.iter().filter(|(closed, _)| !closed).count();
    assert_eq!(
        open,
        0,
        "{open} of {} idle sockets were never closed",
        reaped.len()
    );
    let flow = wait_for_terminal(&engine, "f").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(second.requests().len(), 1);
    // Uncapped, the sockets take every descriptor: accepting fails, and so
    // do the database's files and the step's connection until they close.
    assert_eq!(logged(&engine, "Too many open files"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_raises_its_open_file_limit_to_the_hard_one() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let Ok((_, hard)) = rlimit::getrlimit(rlimit::Resource::NOFILE) else {
        return;
    };
    if hard <= 256 {
        eprintln!("SKIPPED: the hard open-file limit is {hard}: nothing to raise to");
        return;
    }
    let engine = spawn_serve_under(
        Some("-Sn 256"),
        &[
            "--listen",
            "127.0.0.1:0",
            "--node-id",
            "nofile",
            "--database-url",
            &db.url,
        ],
        &[],
    )
    .await;
    let pid = engine.child.id().unwrap_or_default();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|n| n.parse::<u64>().ok());
    assert_eq!(soft, Some(hard), "{limits}");
    let expected = (hard / 2).min(10_000);
    assert!(
        logged(&engine, &format!("at most {expected} connections at once")).is_some(),
        "{:?}",
        logged(&engine, "connections at once")
    );
}
