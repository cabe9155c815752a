//! Request bodies take their bytes from `TARTAN_MAX_INFLIGHT_BYTES`, like
//! responses (docs/durability.md, "Bytes in flight"): a for_each whose items
//! share a large input sends at most what the budget holds at once, each
//! body referring to the one encoding of what the items share, and a body
//! larger than the whole budget goes alone.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tartan_testkit::both_backends;

use crate::helpers::{call, memory_kib, register, spawn_binary_with, sync_step, Backend, Binary, TestDb};

both_backends!(
    a_for_each_sharing_a_large_input_sends_what_the_budget_holds,
    a_body_larger_than_the_whole_budget_goes_alone,
);

/// The engine's peak resident memory may not pass this while 150 calls
/// of ~4 MB bodies run. Each call holding its own copy, it passed 600 MB.
const RSS_LIMIT_KIB: u64 = 200 * 1024;

/// What the step server saw.
#[derive(Default)]
struct Seen {
    /// Requests being answered now, and the most at once.
    now: AtomicUsize,
    most: AtomicUsize,
    /// The items called, by their element.
    items: Mutex<Vec<u64>>,
    /// Bodies that were not the shared input then the item, by length.
    wrong: Mutex<Vec<usize>>,
}

/// A step endpoint that reads each body whole, checks it is `prefix` then
/// the item's element, holds the request `hold`, then answers.
async fn endpoint(prefix: String, hold: Duration) -> (String, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let prefix = Arc::new(prefix);
    let app = {
        let seen = seen.clone();
        axum::Router::new()
            .fallback(move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let (seen, prefix) = (seen.clone(), prefix.clone());
                async move {
                    let at_once = seen.now.fetch_add(1, Ordering::SeqCst) + 1;
                    seen.most.fetch_max(at_once, Ordering::SeqCst);
                    let announced = headers
                        .get("content-length")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<usize>().ok());
                    let item = body
                        .strip_prefix(prefix.as_bytes())
                        .filter(|_| announced == Some(body.len()))
                        .and_then(|rest| serde_json::from_slice::<Value>(&[b"{", rest].concat()).ok())
                        .and_then(|v| v["items"].as_u64());
                    match item {
                        Some(i) => seen.items.lock().unwrap().push(i),
                        None => seen.wrong.lock().unwrap().push(body.len()),
                    }
                    drop(body);
                    tokio::time::sleep(hold).await;
                    seen.now.fetch_sub(1, Ordering::SeqCst);
                    axum::Json(json!({"done": true}))
                }
            })
            .layer(axum::extract::DefaultBodyLimit::max(16 << 20))
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/each"), seen)
}

/// A for_each step over `items` whose input `pad` is made by a mapping
/// script: `pad` repeated `times` times.
fn padded_step(endpoint: &str, times: usize) -> Value {
    let mut step = sync_step("each", endpoint, &[], &["done"]);
    step["attributes"]["pad"] = json!({"role": "required", "required": {"mapping": {"script": {
        "language": "lua", "script": format!("return string.rep(pad, {times})"),
    }}}});
    step["attributes"]["items"] =
        json!({"role": "required", "type": "array", "required": {"for_each": true}});
    step["work_config"] = json!({"parallelism": 200});
    step["timeouts"] = json!({"attempt": "60s"});
    step
}

/// Wait for the flow to end, asking `/health` meanwhile: the slowest
/// answer of `/health`, and the flow's status.
async fn run_to_end(engine: &Binary, id: &str) -> (Duration, Value) {
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    while started.elapsed() < Duration::from_secs(300) {
        let asked = Instant::now();
        let (status, health) = call(engine, reqwest::Method::GET, "/health", None).await;
        slowest = slowest.max(asked.elapsed());
        assert_eq!(status, 200, "{health}");
        let (_, flow) = call(
            engine,
            reqwest::Method::GET,
            &format!("/engine/flow/{id}/status"),
            None,
        )
        .await;
        if flow["status"] != "active" {
            // The whole flow, to say why when it did not complete.
            let (_, flow) = call(engine, reqwest::Method::GET, &format!("/engine/flow/{id}"), None).await;
            return (slowest, flow);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("flow {id} still active");
}

/// The attack of issue 45: a 200-byte start whose input mapping makes a
/// ~4 MB input for 150 items at once. With a budget of 10 MiB, two bodies
/// are sent at a time (each call held a private copy of the input before,
/// and all 150 went at once); `/health` answers throughout and the flow
/// completes.
async fn a_for_each_sharing_a_large_input_sends_what_the_budget_holds(backend: Backend) {
    const ITEMS: u64 = 150;
    const PAD: usize = 4_000_000;
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "bodies", &[("TARTAN_MAX_INFLIGHT_BYTES", "10485760")]).await;
    let prefix = format!("{{\"pad\":\"{}\",", "x".repeat(PAD));
    let (url, seen) = endpoint(prefix, Duration::from_millis(40)).await;
    register(&engine, vec![padded_step(&url, PAD)]).await;
    let items: Vec<u64> = (0..ITEMS).collect();
    let body = json!({"id": "padded", "goals": ["each"], "init": {"pad": ["x"], "items": [items]}});
    assert!(body.to_string().len() < 1000);
    let (status, reply) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(body)).await;
    assert_eq!(status, 201, "{reply}");

    let (slowest, flow) = run_to_end(&engine, "padded").await;
    let pid = engine.child.id().unwrap_or(0);
    let (peak, now) = memory_kib(pid);
    let most = seen.most.load(Ordering::SeqCst);
    eprintln!(
        "{ITEMS} calls of {PAD} bytes: at most {most} at once, peak RSS {peak} KiB, now {now} KiB, /health within {slowest:?}"
    );
    assert_eq!(flow["status"], "completed", "{flow}");
    let wrong = seen.wrong.lock().unwrap().clone();
    assert!(
        wrong.is_empty(),
        "{} bodies not the input then the item: {wrong:?}",
        wrong.len()
    );
    let mut called = seen.items.lock().unwrap().clone();
    called.sort_unstable();
    called.dedup();
    assert_eq!(called.len() as u64, ITEMS, "every item called");
    // 10 MiB holds two bodies of ~4 MB beside the answers' shares.
    assert!((1..=2).contains(&most), "{most} bodies sent at once");
    assert!(slowest < Duration::from_secs(2), "/health took {slowest:?}");
    assert!(peak > 0, "no memory figure for pid {pid}");
    assert!(peak < RSS_LIMIT_KIB, "peak RSS {peak} KiB");
}

/// With a budget of 1 MiB, bodies of ~2 MB each take all of it: they are
/// sent one at a time, none fails, and each call's answer still finds its
/// share (the request's share goes back first).
async fn a_body_larger_than_the_whole_budget_goes_alone(backend: Backend) {
    const ITEMS: u64 = 6;
    const PAD: usize = 2_000_000;
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "bodies-huge", &[("TARTAN_MAX_INFLIGHT_BYTES", "1048576")]).await;
    let prefix = format!("{{\"pad\":\"{}\",", "x".repeat(PAD));
    let (url, seen) = endpoint(prefix, Duration::from_millis(100)).await;
    register(&engine, vec![padded_step(&url, PAD)]).await;
    let items: Vec<u64> = (0..ITEMS).collect();
    let body = json!({"id": "huge", "goals": ["each"], "init": {"pad": ["x"], "items": [items]}});
    let (status, reply) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(body)).await;
    assert_eq!(status, 201, "{reply}");

    let (_, flow) = run_to_end(&engine, "huge").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert!(seen.wrong.lock().unwrap().is_empty());
    assert_eq!(seen.items.lock().unwrap().len() as u64, ITEMS);
    let most = seen.most.load(Ordering::SeqCst);
    assert_eq!(most, 1, "{most} bodies larger than the budget sent at once");
}
