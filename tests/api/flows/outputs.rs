//! Large outputs cost what they weigh (docs/durability.md, "Large values"):
//! an output is held once in memory and stored once per flow, however many
//! events and snapshots name it, and reading a large flow does not build
//! its whole body at once.

use std::time::Duration;

use futures::StreamExt;

use serde_json::{json, Value};

use crate::helpers::{
    call, memory_kib, register, spawn_binary_with, store_bytes, sync_step, Backend, TestDb,
};
use tartan_testkit::both_backends;

both_backends!(large_outputs_are_stored_once_per_flow);

/// `bytes` characters that no database compresses much (Postgres
/// compresses a long run of one letter to almost nothing).
fn noise(bytes: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..bytes)
        .map(|_| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ALPHABET[(seed >> 58) as usize] as char
        })
        .collect()
}

/// A step server answering every call with `{"out": <output>}`, the body
/// built once; its URL and the output.
async fn large_answer(bytes: usize) -> (String, String) {
    let output = noise(bytes);
    let body = axum::body::Bytes::from(json!({ "out": output }).to_string());
    let app = axum::Router::new().fallback(move || {
        let body = body.clone();
        async move { ([("content-type", "application/json")], body) }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/big"), output)
}

/// Wait until every flow in `ids` has ended, and fail unless each
/// completed: naming the flow, with its state (long strings cut short), so
/// that a failure says why.
async fn all_complete(engine: &crate::helpers::Binary, ids: &[String]) {
    let started = std::time::Instant::now();
    for id in ids {
        let mut status = Value::Null;
        for _ in 0..20 {
            status = call(
                engine,
                reqwest::Method::GET,
                &format!("/engine/flow/{id}/status?wait=30s"),
                None,
            )
            .await
            .1;
            if status["status"] != "active" {
                break;
            }
        }
        if status["status"] != "completed" {
            let (_, mut flow) = call(engine, reqwest::Method::GET, &format!("/engine/flow/{id}"), None).await;
            shorten(&mut flow);
            panic!(
                "flow {id}: {status} after {:?}; its state: {flow:#}",
                started.elapsed()
            );
        }
    }
}

/// `value` with every string past 200 bytes cut to its first 80.
fn shorten(value: &mut Value) {
    match value {
        Value::String(s) if s.len() > 200 => {
            *s = format!(
                "{}... ({} bytes)",
                s.chars().take(80).collect::<String>(),
                s.len()
            )
        }
        Value::Array(items) => items.iter_mut().for_each(shorten),
        Value::Object(map) => map.values_mut().for_each(shorten),
        _ => {}
    }
}

/// 20 flows whose one step answers 7 MB each, all at once (140 MB of
/// outputs): the response budget (`TARTAN_MAX_INFLIGHT_BYTES`, 64 MiB)
/// holds the answers past it back, each output is held once however many
/// events and places of the state name it, and reading each large flow
/// streams it. Measured: about 520 MiB peak (before: 2.1 GB on SQLite and
/// 4 GB on Postgres; 860 MiB with the budget but an output copied into each
/// event and place). On SQLite: the store's part is the same on Postgres,
/// where the run takes minutes in a debug build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_large_outputs_at_once_stay_within_memory() {
    let backend = Backend::Sqlite;
    const FLOWS: usize = 20;
    const OUTPUT: usize = 7_000_000;
    /// 140 MB of outputs arrive at once.
    const RSS_LIMIT_KIB: u64 = 768 * 1024;
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "outputs-memory", &[]).await;
    let (url, _) = large_answer(OUTPUT).await;
    register(&engine, vec![sync_step("big", &url, &["in"], &["out"])]).await;
    let ids: Vec<String> = (0..FLOWS).map(|k| format!("large-{k}")).collect();
    let starts = ids.iter().map(|id| {
        let body = json!({"id": id, "goals": ["big"], "init": {"in": [1]}});
        let engine = &engine;
        async move { call(engine, reqwest::Method::POST, "/engine/flow", Some(body)).await }
    });
    for (status, reply) in futures::future::join_all(starts).await {
        assert_eq!(status, 201, "{reply}");
    }
    let started = std::time::Instant::now();
    all_complete(&engine, &ids).await;
    eprintln!("ran in {:?}", started.elapsed());
    // Every flow read whole, as a client would.
    for id in &ids {
        let (status, flow) = call(&engine, reqwest::Method::GET, &format!("/engine/flow/{id}"), None).await;
        assert_eq!(status, 200);
        assert_eq!(
            flow["attributes"]["out"][0]["value"].as_str().map(str::len),
            Some(OUTPUT)
        );
    }
    let pid = engine.child.id().unwrap_or(0);
    let (peak, now) = memory_kib(pid);
    eprintln!("{FLOWS} outputs of {OUTPUT} bytes: peak RSS {peak} KiB, now {now} KiB");
    assert!(peak > 0, "no memory figure for pid {pid}");
    assert!(peak < RSS_LIMIT_KIB, "peak RSS {peak} KiB");
}

/// 150 flows, each with one output of 1 MB: the store grows by less than
/// twice the outputs, though each output is in four events (the item's
/// success, the attribute, the step's and the flow's completion) and in the
/// flow's snapshot.
async fn large_outputs_are_stored_once_per_flow(backend: Backend) {
    const FLOWS: usize = 150;
    const OUTPUT: usize = 1_000_000;
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "outputs-store", &[]).await;
    let (url, output) = large_answer(OUTPUT).await;
    register(&engine, vec![sync_step("big", &url, &["in"], &["out"])]).await;
    let before = store_bytes(&db).await;
    let ids: Vec<String> = (0..FLOWS).map(|k| format!("stored-{k}")).collect();
    for chunk in ids.chunks(10) {
        let starts = chunk.iter().map(|id| {
            let body = json!({"id": id, "goals": ["big"], "init": {"in": [1]}});
            let engine = &engine;
            async move { call(engine, reqwest::Method::POST, "/engine/flow", Some(body)).await }
        });
        for (status, reply) in futures::future::join_all(starts).await {
            assert_eq!(status, 201, "{reply}");
        }
    }
    all_complete(&engine, &ids).await;
    // Each output still reads back whole, from every place that names it.
    let (_, flow) = call(&engine, reqwest::Method::GET, "/engine/flow/stored-7", None).await;
    assert_eq!(
        flow["attributes"]["out"][0]["value"].as_str(),
        Some(output.as_str())
    );
    let mut carrying = 0;
    let mut after = 0;
    loop {
        let path = format!("/engine/flow/stored-7/events?after={after}");
        let (status, page) = call(&engine, reqwest::Method::GET, &path, None).await;
        assert_eq!(status, 200, "{page}");
        for event in page["events"].as_array().into_iter().flatten() {
            if event.to_string().contains(&output) {
                carrying += 1;
            }
        }
        match page["next"].as_i64() {
            Some(next) => after = next,
            None => break,
        }
    }
    assert!(carrying >= 3, "the output whole in {carrying} events");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let growth = store_bytes(&db).await.saturating_sub(before);
    let outputs = (FLOWS * OUTPUT) as u64;
    eprintln!("{FLOWS} outputs of {OUTPUT} bytes: the store grew {growth} bytes");
    assert!(
        growth < 2 * outputs,
        "the store grew {growth} bytes for {outputs} bytes of outputs"
    );
}

/// A step whose answers are held open half-read: 600,000 bytes announced,
/// the first thousand sent, the rest once `release` turns true. Its URL.
async fn held_answers(release: tokio::sync::watch::Receiver<bool>) -> String {
    const SIZE: usize = 600_000;
    let app = axum::Router::new().fallback(move || {
        let mut release = release.clone();
        async move {
            let head = format!("{{\"out\":\"{}", "a".repeat(1000));
            let rest = format!("{}\"}}", "b".repeat(SIZE - head.len() - 2));
            let body = futures::stream::iter([Ok::<_, std::io::Error>(axum::body::Bytes::from(head))]).chain(
                futures::stream::once(async move {
                    let _ = release.wait_for(|go| *go).await;
                    Ok(axum::body::Bytes::from(rest))
                }),
            );
            axum::response::Response::builder()
                .header("content-type", "application/json")
                .header("content-length", SIZE.to_string())
                .body(axum::body::Body::from_stream(body))
                .unwrap()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/held")
}

/// With a budget of 1 MiB, three answers of 600,000 bytes arriving together
/// are read one at a time: the others wait, connections open, without
/// failing; once read, all three flows complete and the budget is whole
/// again. An answer larger than the whole budget still gets through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_past_the_inflight_budget_wait_their_turn() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "inflight", &[("TARTAN_MAX_INFLIGHT_BYTES", "1048576")]).await;
    let (release, gate) = tokio::sync::watch::channel(false);
    let held = held_answers(gate).await;
    let (huge, _) = large_answer(1_500_000).await;
    register(
        &engine,
        vec![
            sync_step("held", &held, &["in"], &["out"]),
            sync_step("huge", &huge, &["other"], &["more"]),
        ],
    )
    .await;
    let ids: Vec<String> = (0..3).map(|k| format!("held-{k}")).collect();
    for id in &ids {
        let body = json!({"id": id, "goals": ["held"], "init": {"in": [1]}});
        assert_eq!(
            call(&engine, reqwest::Method::POST, "/engine/flow", Some(body))
                .await
                .0,
            201
        );
    }
    let health = || async {
        let (_, health) = call(&engine, reqwest::Method::GET, "/health", None).await;
        health["details"]["response_bytes_held"]
            .as_u64()
            .unwrap_or(u64::MAX)
    };
    // One body taken, the others waiting for room.
    let mut seen = 0;
    for _ in 0..200 {
        seen = health().await;
        if seen >= 600_000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // A body streamed without Content-Length takes the whole budget until
    // read; either way, one body's share.
    assert!((600_000..=1_048_576).contains(&seen), "held {seen} bytes");
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let now = health().await;
        assert!(now <= 1_048_576, "held {now} bytes, past the budget");
    }
    release.send_replace(true);
    all_complete(&engine, &ids).await;
    let body = json!({"id": "huge", "goals": ["huge"], "init": {"other": [1]}});
    assert_eq!(
        call(&engine, reqwest::Method::POST, "/engine/flow", Some(body))
            .await
            .0,
        201
    );
    all_complete(&engine, &["huge".to_string()]).await;
    // The call gives its bytes back as it ends, a moment after the flow
    // shows completed (the decision is answered first).
    let mut held = u64::MAX;
    for _ in 0..200 {
        held = health().await;
        if held == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(held, 0, "every byte given back");
}
