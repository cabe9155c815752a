//! for_each costs what its input costs: 10,000 items expanded from a
//! ~900 KB array do not copy that array (or the step, or the flow) per item
//! (docs/work-items.md, "for_each"; figures in BENCHMARKS.md, "Memory: 10,000 for_each items from a ~900 KB input").

use std::time::Duration;

use serde_json::{json, Value};

use crate::both_backends;
use crate::helpers::{call, memory_kib, register, spawn_binary_with, sync_step, Backend, StepServer, TestDb};

both_backends!(ten_thousand_items_from_a_large_input_stay_within_memory);

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
