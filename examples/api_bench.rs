//! The engine against no engine at all, through the HTTP API, in one run
//! (BENCHMARKS.md, "Against the floor"). The machine is shared and its
//! speed drifts, so speed is reported as a ratio to a floor measured in the
//! same run:
//!
//! - **floor**: `--clients` clients each run flows by making the three calls
//!   of the chain a → b → c themselves, straight to the step server (no
//!   engine, no database);
//! - **engine**: the same clients start the same flows with
//!   `POST /engine/flow` on an in-process Tartan (the real router, a fresh
//!   database) and watch each finish through `GET /engine/flow/{id}/status`
//!   (what an API client can see): every `--poll-ms` (10) while 32 clients
//!   run, every millisecond for the flows run alone. Polling costs the
//!   engine reads of its own; at one poll a millisecond per client they
//!   would be most of what is measured.
//!
//! Each runs `--flows` flows with `--clients` in flight (throughput), then
//! `--alone` flows one after another (single-flow latency, the median).
//!
//! ```text
//! cargo run --release --example api_bench -- [--store sqlite|postgres] [--flows 1000] [--clients 32] [--alone 50]
//! ```
//!
//! One `key=value` line per side, then the ratios: `throughput_ratio`
//! (engine flows/s over floor flows/s) and `latency_multiple` (engine
//! single-flow p50 over floor's).

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::Uri;
use clap::{Parser, ValueEnum};
use serde_json::{json, Value};

use support::{percentile, BenchDb};

// The allocator the `tartan` binary runs with, so the engine side measures
// what a server does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum StoreKind {
    Sqlite,
    Postgres,
}

#[derive(Debug, Parser)]
#[command(about = "Tartan through its API against the same calls made with no engine")]
struct Cli {
    #[arg(long, value_enum, default_value = "sqlite")]
    store: StoreKind,
    /// Flows per throughput run.
    #[arg(long, default_value_t = 1000)]
    flows: u64,
    /// Clients with a flow in flight at once.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    clients: u64,
    /// Flows run one after another for the single-flow latency.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    alone: u64,
    /// How often a client asks whether its flow finished, while many run.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    poll_ms: u64,
}

const STEPS: [&str; 3] = ["a", "b", "c"];

/// What one side measured.
struct Run {
    flows_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    alone_p50_ms: f64,
}

impl Run {
    fn line(&self, side: &str) -> String {
        format!(
            "api_bench side={side} flows_per_s={:.1} latency_ms_p50={:.3} latency_ms_p99={:.3} alone_ms_p50={:.3}",
            self.flows_per_s, self.p50_ms, self.p99_ms, self.alone_p50_ms
        )
    }
}

/// `flows` runs of `one` with `clients` in flight, then `alone` one after
/// another: throughput and latencies. `one` gets the flow's id and how often
/// to look whether it finished.
async fn measure<F, Fut>(flows: u64, clients: u64, alone: u64, poll: Duration, one: F) -> Run
where
    F: Fn(String, Duration) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (next, one) = (next.clone(), one.clone());
        tasks.push(tokio::spawn(async move {
            let mut took = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= flows {
                    return took;
                }
                let t = Instant::now();
                one(format!("load-{i}"), poll).await;
                took.push(t.elapsed());
            }
        }));
    }
    let mut took = Vec::new();
    for t in tasks {
        took.extend(t.await.unwrap_or_else(|e| panic!("client task: {e}")));
    }
    let wall = started.elapsed();
    took.sort();
    let mut single = Vec::new();
    for i in 0..alone {
        let t = Instant::now();
        one(format!("alone-{i}"), Duration::from_millis(1)).await;
        single.push(t.elapsed());
    }
    single.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Run {
        flows_per_s: flows as f64 / wall.as_secs_f64(),
        p50_ms: ms(percentile(&took, 0.5)),
        p99_ms: ms(percentile(&took, 0.99)),
        alone_p50_ms: ms(percentile(&single, 0.5)),
    }
}

/// A step server answering `POST /{key}` with `{"{key}": 1}` at once.
async fn step_server() -> SocketAddr {
    let app = axum::Router::new().fallback(|uri: Uri| async move {
        let key = uri.path().trim_start_matches('/').to_string();
        axum::Json(json!({ key: 1 }))
    });
    support::serve(app).await
}

async fn post(client: &reqwest::Client, url: &str, body: &Value) -> (u16, Value) {
    let r = client
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The floor: the chain's three calls, made by the client itself.
async fn floor(cli: &Cli, steps: SocketAddr, client: reqwest::Client) -> Run {
    measure(cli.flows, cli.clients, cli.alone, Duration::ZERO, move |id, _| {
        let client = client.clone();
        async move {
            let mut input = json!({ "seed": id });
            for key in STEPS {
                let (status, out) = post(&client, &format!("http://{steps}/{key}"), &input).await;
                assert_eq!(status, 200, "step {key}: {out}");
                input = out;
            }
        }
    })
    .await
}

/// The same flows, run by Tartan through its API.
async fn engine(cli: &Cli, steps: SocketAddr, client: reqwest::Client) -> Run {
    let kind = match cli.store {
        StoreKind::Sqlite => "sqlite",
        StoreKind::Postgres => "postgres",
    };
    let db = BenchDb::create(kind, "api_bench").await;
    let engine = db.engine("api-bench").await;
    let api = support::serve(tartan_server::router(
        engine.clone(),
        tartan_server::ApiSecurity::open(),
    ))
    .await;
    let mut input = "seed";
    for key in STEPS {
        let step = json!({
            "id": key, "name": key, "type": "sync",
            "http": { "endpoint": format!("http://{steps}/{key}") },
            "attributes": {
                input: { "role": "required", "type": "any" },
                key: { "role": "output", "type": "any" },
            },
        });
        let (status, body) = post(&client, &format!("http://{api}/engine/step"), &step).await;
        assert_eq!(status, 201, "registering {key}: {body}");
        input = key;
    }
    let poll = Duration::from_millis(cli.poll_ms);
    let run = measure(cli.flows, cli.clients, cli.alone, poll, move |id, poll| {
        let client = client.clone();
        async move {
            let start = json!({ "id": id, "goals": ["c"], "init": { "seed": [id] } });
            let (status, body) = post(&client, &format!("http://{api}/engine/flow"), &start).await;
            assert_eq!(status, 201, "starting {id}: {body}");
            let url = format!("http://{api}/engine/flow/{id}/status");
            loop {
                let r = client
                    .get(&url)
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("GET {url}: {e}"));
                let body: Value = r.json().await.unwrap_or(Value::Null);
                match body["status"].as_str() {
                    Some("active") => tokio::time::sleep(poll).await,
                    Some("completed") => return,
                    other => panic!("flow {id} ended {other:?}: {body}"),
                }
            }
        }
    })
    .await;
    engine.shutdown(Duration::from_secs(1)).await;
    db.drop().await;
    run
}

#[tokio::main]
async fn main() {
    support::init_logging();
    let cli = Cli::parse();
    let steps = step_server().await;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(usize::try_from(cli.clients).unwrap_or(usize::MAX) * 2)
        .build()
        .unwrap_or_else(|e| panic!("client: {e}"));
    let floor = floor(&cli, steps, client.clone()).await;
    println!("{}", floor.line("floor"));
    let tartan = engine(&cli, steps, client).await;
    println!(
        "{}",
        tartan.line(&format!("engine store={:?}", cli.store).to_lowercase())
    );
    println!(
        "api_bench throughput_ratio={:.3} latency_multiple={:.2} flows={} clients={} alone={} poll_ms={}",
        tartan.flows_per_s / floor.flows_per_s,
        tartan.alone_p50_ms / floor.alone_p50_ms,
        cli.flows,
        cli.clients,
        cli.alone,
        cli.poll_ms
    );
}
