//! What readers that never read can make the server hold (docs/security.md,
//! "What a reader can make the server hold"): twenty connections asking for
//! a large flow and reading nothing held 1.7 GB for a 63 MB flow; a large
//! flow's answer now takes its size from a budget first (256 MiB for the
//! whole server), and those past it wait, then get 503.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;
use tartan_testkit::{both_backends, TestDb};
use tokio::io::AsyncWriteExt;

use crate::helpers::{
    call, json_reply, memory_kib, spawn_binary_with, wait_for_terminal, Backend, StepServer,
};

both_backends!(readers_that_never_read_a_large_flow_hold_at_most_the_budget);

/// Items of the flow, each answering this many bytes: about 36 MB in all.
const ITEMS: usize = 6;
const ANSWER: usize = 6 * 1024 * 1024;

/// Readers that never read.
const READERS: usize = 20;

async fn readers_that_never_read_a_large_flow_hold_at_most_the_budget(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "stalled-readers", &[]).await;
    let svc = StepServer::start(|r, _| {
        let n = r.body["n"].as_u64().unwrap_or(0);
        json_reply(200, json!({"out": format!("{n}{}", "x".repeat(ANSWER))}))
    })
    .await;
    let step = json!({"id": "big", "name": "big", "type": "sync", "http": {"endpoint": svc.url("/big")},
        "attributes": {"n": {"role": "required", "type": "array", "required": {"for_each": true}},
                       "out": {"role": "output"}}});
    assert_eq!(
        call(&engine, Method::POST, "/engine/step", Some(step)).await.0,
        201
    );
    let items: Vec<usize> = (0..ITEMS).collect();
    let start = json!({"id": "large", "goals": ["big"], "init": {"n": [items]}});
    assert_eq!(
        call(&engine, Method::POST, "/engine/flow", Some(start)).await.0,
        201
    );
    assert_eq!(wait_for_terminal(&engine, "large").await["status"], "completed");
    let pid = engine.child.id().expect("pid");
    let (_, before) = memory_kib(pid);

    let mut stalled = Vec::new();
    for _ in 0..READERS {
        let mut socket = tokio::net::TcpStream::connect(&engine.addr)
            .await
            .expect("connect");
        let request = format!(
            "GET /engine/flow/large HTTP/1.1\r\nHost: {}\r\nConnection: keep-alive\r\n\r\n",
            engine.addr
        );
        socket.write_all(request.as_bytes()).await.expect("write");
        stalled.push(socket);
    }
    // The budget's waits end within 10 s: by then every reader holds its
    // answer or was refused.
    let until = Instant::now() + Duration::from_secs(13);
    let mut peak = 0;
    while Instant::now() < until {
        let asked = Instant::now();
        let health = tokio::time::timeout(
            Duration::from_secs(3),
            call(&engine, Method::GET, "/health", None),
        )
        .await;
        assert!(
            matches!(health, Ok((200, _))),
            "/health within 3 s ({:?})",
            asked.elapsed()
        );
        peak = peak.max(memory_kib(pid).1);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // A held answer costs about three times its flow's data, a read for
    // one a few times that for a moment: the budget (128 MiB) holds one
    // of these at a time and two are read at once, so the server grows by
    // about 450-550 MB here, where all twenty held took 1.8 GB more.
    let grown = peak.saturating_sub(before);
    assert!(grown < 800 * 1024, "resident memory grew by {grown} KiB");
    // A reader that reads still gets the whole flow once room comes back.
    drop(stalled);
    let mut whole = false;
    for _ in 0..40 {
        let (status, flow) = call(&engine, Method::GET, "/engine/flow/large", None).await;
        if status == 200 {
            assert_eq!(flow["status"], "completed");
            whole = true;
            break;
        }
        assert_eq!(status, 503, "{flow}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(whole, "the flow was never sent again");
}
