//! for_each costs what its input costs: 10,000 items expanded from a
//! ~900 KB array do not copy that array (or the step, or the flow) per item
//! (docs/work-items.md, "for_each"; figures in BENCHMARKS.md, "Memory: 10,000 for_each items from a ~900 KB input").

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{
    call, memory_kib, register, spawn_binary_with, store_bytes, sync_step, Backend, StepServer, TestDb,
};
use tartan_testkit::both_backends;

both_backends!(
    ten_thousand_items_from_a_large_input_stay_within_memory,
    a_large_input_beside_ten_thousand_items_is_held_and_stored_once,
);

/// The engine's peak resident memory may not pass this.
const RSS_LIMIT_KIB: u64 = 300 * 1024;

async fn ten_thousand_items_from_a_large_input_stay_within_memory(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "volume", &[]).await;
    // The endpoint holds every call: the items stay in flight while memory
    // is read.
    let svc = StepServer::start_async(|_, _| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            axum::response::IntoResponse::into_response(axum::http::StatusCode::OK)
        })
    })
    .await;
    let mut step = sync_step("each", &svc.url("/each"), &[], &["done"]);
    step["attributes"]["items"] =
        json!({"role": "required", "type": "array", "required": {"for_each": true}});
    step["work_config"] = json!({"parallelism": 100});
    step["timeouts"] = json!({"attempt": "60s"});
    register(&engine, vec![step]).await;
    let items: Vec<Value> = (0..10_000)
        .map(|i| json!(format!("{i:06}-{}", "x".repeat(80))))
        .collect();
    let body = json!({"id": "wide", "goals": ["each"], "init": {"items": [items]}});
    let size = body.to_string().len();
    assert!((850_000..1_000_000).contains(&size), "{size} bytes");
    let (status, reply) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(body)).await;
    assert_eq!(status, 201, "{reply}");

    // Every item created, the first hundred called.
    let mut count = 0;
    for _ in 0..600 {
        let (_, flow) = call(&engine, reqwest::Method::GET, "/engine/flow/wide", None).await;
        count = flow["executions"]["each"]["work_items"]
            .as_object()
            .map_or(0, |w| w.len());
        if count == 10_000 && svc.requests().len() >= 100 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(count, 10_000);
    let pid = engine.child.id().unwrap_or(0);
    let (peak, now) = memory_kib(pid);
    eprintln!("10,000 items from {size} bytes: peak RSS {peak} KiB, now {now} KiB");
    assert!(peak > 0, "no memory figure for pid {pid}");
    assert!(peak < RSS_LIMIT_KIB, "peak RSS {peak} KiB");
    let (status, reply) = call(&engine, reqwest::Method::POST, "/engine/flow/wide/cancel", None).await;
    assert_eq!(status, 202, "{reply}");
}

/// The attack of issue 24: a ~900 KB input beside a for_each array of
/// 10,000 items, in one start. The input is shared by every item: held and
/// stored once (docs/work-items.md, "What an item holds"), and still sent
/// whole to every call.
async fn a_large_input_beside_ten_thousand_items_is_held_and_stored_once(backend: Backend) {
    const ITEMS: usize = 10_000;
    const STORE_GROWTH_LIMIT: u64 = 20 * 1024 * 1024;
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "volume-shared", &[]).await;
    let big = "y".repeat(880_000);
    // What every call's body must be: the shared input whole, then the
    // item's element (compared as bytes: parsing 10,000 bodies of 880 KB
    // would be the test's own cost).
    let prefix = Arc::new(format!("{{\"big\":\"{big}\","));
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let wrong = Arc::new(Mutex::new(Vec::new()));
    let app = {
        let (prefix, seen, wrong) = (prefix.clone(), seen.clone(), wrong.clone());
        axum::Router::new().fallback(move |body: axum::body::Bytes| {
            let (prefix, seen, wrong) = (prefix.clone(), seen.clone(), wrong.clone());
            async move {
                let item = body
                    .strip_prefix(prefix.as_bytes())
                    .and_then(|rest| serde_json::from_slice::<Value>(&[b"{", rest].concat()).ok())
                    .and_then(|v| v["items"].as_u64());
                match item {
                    Some(i) => {
                        seen.lock().unwrap().insert(i);
                    }
                    None => wrong.lock().unwrap().push(body.len()),
                }
                axum::Json(json!({"done": true}))
            }
        })
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let mut step = sync_step("each", &format!("http://{addr}/each"), &["big"], &["done"]);
    step["attributes"]["items"] =
        json!({"role": "required", "type": "array", "required": {"for_each": true}});
    step["work_config"] = json!({"parallelism": 16});
    register(&engine, vec![step]).await;
    let before = store_bytes(&db).await;
    let items: Vec<Value> = (0..ITEMS).map(|i| json!(i)).collect();
    let body = json!({"id": "shared", "goals": ["each"], "init": {"big": [big], "items": [items]}});
    let size = body.to_string().len();
    assert!((880_000..1_000_000).contains(&size), "{size} bytes");
    let (status, reply) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(body)).await;
    assert_eq!(status, 201, "{reply}");
    let started = std::time::Instant::now();
    let mut status = Value::Null;
    while started.elapsed() < Duration::from_secs(900) {
        status = call(
            &engine,
            reqwest::Method::GET,
            "/engine/flow/shared/status?wait=30s",
            None,
        )
        .await
        .1;
        if status["status"] != "active" {
            break;
        }
    }
    eprintln!("{ITEMS} items ran in {:?}", started.elapsed());
    assert_eq!(status["status"], "completed", "{status}");

    let wrong = wrong.lock().unwrap().clone();
    assert!(
        wrong.is_empty(),
        "{} calls without the full input, e.g. {:?} bytes",
        wrong.len(),
        wrong.first()
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        ITEMS,
        "every item called with its element"
    );
    let pid = engine.child.id().unwrap_or(0);
    let (peak, _) = memory_kib(pid);
    let growth = store_bytes(&db).await.saturating_sub(before);
    eprintln!("{ITEMS} items beside {size} bytes: peak RSS {peak} KiB, store grew {growth} bytes");
    assert!(peak > 0, "no memory figure for pid {pid}");
    assert!(peak < RSS_LIMIT_KIB, "peak RSS {peak} KiB");
    assert!(growth < STORE_GROWTH_LIMIT, "the store grew {growth} bytes");
}
