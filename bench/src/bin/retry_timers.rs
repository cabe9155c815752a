//! Timer benchmark (issue: retries fire on time, and an idle engine costs
//! nothing). Runs an engine in this process on a fresh database, a step
//! server on 127.0.0.1 that fails each work item's first call with 503 and
//! succeeds on the second, and measures how late the retries arrive.
//!
//! ```text
//! cargo run --release -p tartan-bench --bin retry_timers -- precision [sqlite|postgres] [count] [backoff_ms]
//! cargo run --release -p tartan-bench --bin retry_timers -- idle [sqlite|postgres] [count] [seconds]
//! ```
//! `precision` starts `count` flows whose retries are due between
//! `backoff_ms / 2` and `backoff_ms` after their first attempt (equal jitter;
//! the default 15 s lets every start finish first, so the retries fall due
//! over several seconds of an otherwise quiet engine) and reports the
//! lateness of each retry's arrival at the step server against its recorded
//! `next_retry_at`, and of the engine's decision to start it: p50, p99, max.
//! `idle` schedules `count` retries three hours ahead, then measures the
//! process's CPU time and RSS over `seconds`.
//! Postgres: a database `tartan_bench_<pid>` on 127.0.0.1:5432, dropped after.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use serde_json::json;
use tartan_bench::{percentile, BenchDb};

/// mimalloc: the engine allocates many short-lived JSON strings and states;
/// glibc's malloc showed as a third of the CPU profile under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type Arrivals = Arc<Mutex<HashMap<String, (u32, DateTime<Utc>)>>>;

async fn step_server(arrivals: Arrivals) -> std::net::SocketAddr {
    let app = axum::Router::new().fallback(move |headers: HeaderMap| {
        let arrivals = arrivals.clone();
        async move {
            let now = Utc::now();
            let token = headers
                .get("argyll-receipt-token")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let attempt: u32 = headers
                .get("tartan-attempt")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            arrivals
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(token, (attempt, now));
            if attempt <= 1 {
                (StatusCode::SERVICE_UNAVAILABLE, "").into_response()
            } else {
                axum::Json(json!({"out": "ok"})).into_response()
            }
        }
    });
    tartan_bench::serve(app).await
}

/// (user + system CPU seconds, RSS in MiB) of this process, from /proc.
fn cpu_and_rss() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields after the command name: utime is the 12th, stime the 13th (0-based 11, 12).
    let cpu = (ticks(11) + ticks(12)) / 100.0;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let rss_kb = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    (cpu, rss_kb / 1024.0)
}

#[tokio::main]
async fn main() {
    tartan_bench::init_logging();
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("precision");
    if !matches!(mode, "precision" | "idle") || args.len() > 5 {
        eprintln!(
            "usage: retry_timers precision [sqlite|postgres] [count] [backoff_ms]\n       \
             retry_timers idle [sqlite|postgres] [count] [seconds]"
        );
        std::process::exit(2);
    }
    let kind = args.get(2).map(String::as_str).unwrap_or("sqlite");
    let count: usize = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let param: u64 = args
        .get(4)
        .and_then(|v| v.parse().ok())
        .unwrap_or(if mode == "idle" { 30 } else { 15_000 });

    let db = BenchDb::create(kind, "bench").await;
    let arrivals: Arrivals = Arc::default();
    let step_addr = step_server(arrivals.clone()).await;
    let engine = db.engine("bench").await;

    let backoff_ms = if mode == "idle" { 3 * 3600 * 1000 } else { param };
    let step: tartan_core::step::Step = serde_json::from_value(json!({
        "id": "flaky", "name": "flaky", "type": "sync",
        "http": {"endpoint": format!("http://{step_addr}/flaky")},
        "attributes": {"seed": {"role": "required"}, "out": {"role": "output"}},
        "work_config": {"max_retries": 1, "init_backoff": backoff_ms, "max_backoff": backoff_ms, "backoff_type": "fixed", "jitter": "equal"}
    }))
    .unwrap_or_else(|e| panic!("step: {e}"));
    engine
        .catalog()
        .register_step(step)
        .await
        .unwrap_or_else(|e| panic!("register: {e}"));

    start_flows(&engine, kind, count).await;
    if mode == "idle" {
        idle(&engine, kind, count, param).await;
    } else {
        precision(&engine, kind, count, &arrivals).await;
    }
    engine.shutdown(Duration::from_secs(5)).await;
    db.drop().await;
}

/// Start `count` flows of the step, 200 requests at a time.
async fn start_flows(engine: &tartan_engine::Engine, kind: &str, count: usize) {
    let started = Instant::now();
    let mut handles = Vec::new();
    // At most 200 start requests at once, as a pool of clients would.
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(200));
    for i in 0..count {
        let engine = engine.clone();
        let permit = gate
            .clone()
            .acquire_owned()
            .await
            .unwrap_or_else(|e| panic!("gate: {e}"));
        handles.push(tokio::spawn(async move {
            let _permit = permit;
            let req: tartan_core::request::StartFlow = serde_json::from_value(
                json!({"id": format!("f{i}"), "goals": ["flaky"], "init": {"seed": [i]}}),
            )
            .unwrap_or_else(|e| panic!("request: {e}"));
            engine
                .flows()
                .start_flow(req)
                .await
                .unwrap_or_else(|e| panic!("start: {e}"));
        }));
    }
    for h in handles {
        let _ = h.await;
    }
    println!(
        "{kind}: started {count} flows in {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

/// Once every flow waits for its retry 3 h ahead, the engine's CPU and
/// memory over `seconds`.
async fn idle(engine: &tartan_engine::Engine, kind: &str, count: usize, seconds: u64) {
    // Wait until every first attempt has failed and its retry is scheduled.
    while engine.timers() < count {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (cpu0, _) = cpu_and_rss();
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let (cpu1, rss) = cpu_and_rss();
    let wall = t0.elapsed().as_secs_f64();
    println!(
        "{kind}: idle with {} retries scheduled 3 h ahead: CPU {:.3} s over {:.0} s = {:.3}% of one core; RSS {:.0} MiB",
        engine.timers(),
        cpu1 - cpu0,
        wall,
        100.0 * (cpu1 - cpu0) / wall,
        rss
    );
}

/// How late each retry arrived at the step server, and when the engine
/// decided to start it, against its `next_retry_at`.
async fn precision(engine: &tartan_engine::Engine, kind: &str, count: usize, arrivals: &Arrivals) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let done = arrivals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|(a, _)| *a >= 2)
            .count();
        if done >= count || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let arrived = arrivals.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut late_ms = Vec::with_capacity(count);
    let mut decided = Vec::with_capacity(count);
    let page = engine
        .store()
        .query_work(&tartan_store::WorkQuery {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("query: {e}"));
    let mut cursor = page.next_cursor.clone();
    let mut items = page.items;
    while let Some(c) = cursor {
        let p = engine
            .store()
            .query_work(&tartan_store::WorkQuery {
                limit: 1000,
                cursor: Some(c),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("query: {e}"));
        cursor = p.next_cursor.clone();
        items.extend(p.items);
    }
    for w in &items {
        let Some(first) = w.detail.attempts.first() else {
            continue;
        };
        let Some(delay) = first.delay.and_then(|d| i64::try_from(d.delay_ms).ok()) else {
            continue;
        };
        let Some(ended) = first.ended_at else { continue };
        let due = ended + chrono::Duration::milliseconds(delay);
        if let Some((attempt, at)) = arrived.get(&w.token) {
            if *attempt >= 2 {
                late_ms.push((*at - due).num_microseconds().unwrap_or(0));
            }
        }
        if let Some(second) = w.detail.attempts.get(1) {
            decided.push((second.started_at - due).num_microseconds().unwrap_or(0));
        }
    }
    late_ms.sort_unstable();
    decided.sort_unstable();
    let ms = |us: i64| us as f64 / 1000.0;
    println!(
        "{kind}: {} retries fired; lateness at the step server vs next_retry_at: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, min {:.2} ms",
        late_ms.len(),
        ms(percentile(&late_ms, 0.5)),
        ms(percentile(&late_ms, 0.99)),
        ms(late_ms.last().copied().unwrap_or(0)),
        ms(late_ms.first().copied().unwrap_or(0)),
    );
    println!(
        "{kind}: the engine's decision to start each retry vs next_retry_at: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(percentile(&decided, 0.5)),
        ms(percentile(&decided, 0.99)),
        ms(decided.last().copied().unwrap_or(0)),
    );
}
