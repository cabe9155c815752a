//! Load tool: how many flows per second the engine completes, and how long
//! each takes. Runs an engine in this process on a fresh database, a step
//! server on 127.0.0.1, registers a chain of three sync steps, and starts
//! `flows` flows with at most `concurrency` in flight.
//!
//! ```text
//! cargo run --release --example load -- [sqlite|postgres] [flows] [concurrency]
//! ```
//! Reports flows/s and steps/s completed, the flows' latency
//! (`completed_at - created_at`) p50 / p95 / p99, and the process's peak RSS.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::Semaphore;

/// mimalloc, as the binary uses.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod support;

use support::{percentile, BenchDb};

async fn step_server() -> std::net::SocketAddr {
    // Each step returns its output at once: the measure is the engine's.
    let app = axum::Router::new().fallback(|uri: axum::http::Uri| async move {
        let key = uri.path().trim_start_matches('/').to_string();
        axum::Json(json!({ key: 1 }))
    });
    support::serve(app).await
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let kind = args.get(1).map(String::as_str).unwrap_or("sqlite").to_string();
    let flows: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(5000);
    let concurrency: usize = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(200);

    let db = BenchDb::create(&kind, "load").await;
    let engine = db.engine("load").await;
    let addr = step_server().await;
    for (id, input, output) in [("a", "seed", "a"), ("b", "a", "b"), ("c", "b", "c")] {
        let step: tartan_core::step::Step = serde_json::from_value(json!({
            "id": id, "name": id, "type": "sync",
            "http": {"endpoint": format!("http://{addr}/{output}")},
            "attributes": {input: {"role": "required"}, output: {"role": "output"}}
        }))
        .unwrap_or_else(|e| panic!("step: {e}"));
        engine
            .register_step(step)
            .await
            .unwrap_or_else(|e| panic!("register: {e}"));
    }

    // Starts are limited to `concurrency` requests at a time; the flows then
    // run on their own. Latency is the engine's: `completed_at - created_at`.
    let gate = Arc::new(Semaphore::new(concurrency));
    let started = Instant::now();
    let mut handles = Vec::with_capacity(flows);
    for i in 0..flows {
        let permit = gate
            .clone()
            .acquire_owned()
            .await
            .unwrap_or_else(|e| panic!("gate: {e}"));
        let engine = engine.clone();
        handles.push(tokio::spawn(async move {
            let req: tartan_core::request::StartFlow = serde_json::from_value(
                json!({"id": format!("load-{i}"), "goals": ["c"], "init": {"seed": [i]}}),
            )
            .unwrap_or_else(|e| panic!("request: {e}"));
            engine
                .start_flow(req)
                .await
                .unwrap_or_else(|e| panic!("start: {e}"));
            drop(permit);
        }));
    }
    for h in handles {
        let _ = h.await;
    }
    let active = tartan_store::FlowQuery {
        id_prefix: None,
        labels: Vec::new(),
        statuses: vec![tartan_core::flow::FlowStatus::Active],
        limit: 1,
        cursor: None,
        sort: tartan_store::SortOrder::RecentFirst,
    };
    loop {
        let page = engine
            .store()
            .query_flows(&active)
            .await
            .unwrap_or_else(|e| panic!("query: {e}"));
        if page.flows.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let wall = started.elapsed().as_secs_f64();
    let mut latencies = Vec::with_capacity(flows);
    for i in 0..flows {
        let state = engine
            .flow(&format!("load-{i}"))
            .await
            .unwrap_or_else(|e| panic!("flow: {e}"));
        if let Some(done) = state.completed_at {
            latencies.push((done - state.created_at).num_microseconds().unwrap_or(0) as f64 / 1000.0);
        }
    }
    latencies.sort_by(f64::total_cmp);
    println!(
        "{kind}: {flows} three-step flows, {concurrency} starts in flight: {:.0} flows/s, {:.0} steps/s; \
         flow latency p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms; peak RSS {:.0} MiB",
        flows as f64 / wall,
        3.0 * flows as f64 / wall,
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.95),
        percentile(&latencies, 0.99),
        peak_rss_mib(),
    );
    engine.shutdown(Duration::from_secs(5)).await;
    db.drop().await;
}
