//! The driver of the failover benchmark (`bench/failover.sh`, which builds
//! the Postgres cluster, starts the engines and kills the primary twice while
//! this runs; BENCHMARKS.md, "Failover").
//!
//! ```text
//! failover --mode sync|async --engines URL,URL,URL [--steps-listen 127.0.0.1:27125]
//!     [--rate 20] [--probe-ms 100] [--duration 90] [--stop-file PATH]
//!     [--ready-file PATH] [--settle 120]
//! ```
//!
//! It serves the steps itself on `--steps-listen` and registers them:
//! - `fo-sync` (sync): the first call of each work item (receipt token)
//!   answers `503` with `Retry-After: 1`, the next `200`;
//! - `fo-async` (async): answers `202`, sends a heartbeat, then posts the
//!   result to the `Argyll-Webhook-URL` it was given (again on `503` or a
//!   connection error, for up to a minute);
//! - `fo-each` (sync, `for_each` over three elements);
//! - `fo-probe` (a script step, no HTTP): the goal of the write probe.
//!
//! Load: `--rate` flows a second (goal `fo-each`, so each runs all three
//! HTTP steps: five work items), started round-robin across the engines; a
//! start that gets `503`, another `5xx` or no answer is tried again, with
//! the same flow id and body, on the next engine, for up to a minute. A
//! `409` counts as acknowledged when the flow exists. Probe: every
//! `--probe-ms` one start of a `fo-probe` flow, tried once (3 s at most);
//! the longest time between two probes that succeeded is the longest write
//! outage. The load runs until `--stop-file` exists or `--duration` seconds
//! pass; then the driver waits up to `--settle` seconds for the flows to
//! finish, reads each flow's state and events, and checks:
//! - every start answered `201` (acknowledged) completed; the others are
//!   lost (missing, failed or still active);
//! - no receipt token has more than one `work_succeeded` event (a
//!   duplicate completion), and each completed flow has one per work item;
//! - every `work_succeeded` answers a call this driver answered with a
//!   result (for the async step: a webhook of that attempt answered `200`);
//! - every webhook answered `200` is in the history of its flow (as the
//!   attempt's `work_succeeded` or its `work_late_result`).
//!
//! It prints a table and the details, and exits 1 when a check fails that
//! the mode promises (sync: anything lost, completed twice, or a result
//! recorded that no call gave; async: a double or unfounded completion),
//! 2 when it could not run (steps not registered, the engines unreachable).
//!
//! The parts, in `failover/`: `steps.rs` (the steps this driver serves, its
//! records of their calls and webhooks, their registration), `load.rs` (the
//! starts, the probe and the answers, as the client sees them), `check.rs`
//! (each flow read back after the load, and the checks), `report.rs` (the
//! table, the details and the verdict).

#[path = "failover/check.rs"]
mod check;
#[path = "kit/mod.rs"]
mod kit;
#[path = "failover/load.rs"]
mod load;
#[path = "failover/report.rs"]
mod report;
#[path = "failover/steps.rs"]
mod steps;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use futures::StreamExt;
use serde_json::json;
use tokio::task::JoinSet;

use check::{Checks, Found};
use load::{Answers, Kind, Load, Start};
use steps::Records;

#[derive(Parser)]
#[command(about = "Failover benchmark driver (bench/failover.sh)")]
struct Args {
    /// The database's replication, for the report and what fails the run.
    #[arg(long, value_enum)]
    mode: Mode,
    /// The engines' base URLs, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    engines: Vec<String>,
    /// Where this driver serves the steps.
    #[arg(long, default_value = "127.0.0.1:27125")]
    steps_listen: SocketAddr,
    /// Flows started per second.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1000))]
    rate: u64,
    /// Milliseconds between two write probes.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(10..))]
    probe_ms: u64,
    /// The load stops after this many seconds at the latest.
    #[arg(long, default_value_t = 90)]
    duration: u64,
    /// The load stops as soon as this file exists.
    #[arg(long)]
    stop_file: Option<PathBuf>,
    /// Created once the steps are registered and the load has begun.
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// How long to wait, at most, for the flows to finish after the load.
    #[arg(long, default_value_t = 120)]
    settle: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Sync,
    Async,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Sync => "sync",
            Mode::Async => "async",
        }
    }
}

/// Every request's bound; the engine answers within 5 s even when the
/// database is away (docs/durability.md, "When the database goes away").
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const EACH_ITEMS: [u64; 3] = [1, 2, 3];

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn stop_requested(args: &Args, started: Instant) -> bool {
    started.elapsed() >= Duration::from_secs(args.duration)
        || args.stop_file.as_ref().is_some_and(|f| f.exists())
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let code = match run(&args).await {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("failover: {e}");
            2
        }
    };
    std::process::exit(code);
}

/// The run's phases: serve and register the steps, the load until told to
/// stop, the flows read back, the checks; whether they passed.
async fn run(args: &Args) -> Result<bool, String> {
    // Every address is 127.0.0.1: no proxy, whatever the environment says.
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| format!("HTTP client: {e}"))?;
    let records = Arc::new(Records::default());
    let engines: Vec<String> = args
        .engines
        .iter()
        .map(|e| e.trim_end_matches('/').to_string())
        .collect();
    serve_steps(args, &records, &client, &engines[0]).await?;
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let load = Arc::new(Load {
        client,
        engines,
        started: Instant::now(),
        answers: Answers::default(),
    });
    if let Some(ready) = &args.ready_file {
        std::fs::write(ready, "").map_err(|e| format!("{}: {e}", ready.display()))?;
    }
    println!(
        "load: {} flows/s and a probe every {} ms across {} engines (run {run_id})",
        args.rate,
        args.probe_ms,
        load.engines.len()
    );

    let (starts, load_ms) = drive(args, &load, &run_id).await;
    let settle_until = Instant::now() + Duration::from_secs(args.settle);
    let found = read_back(&load, &starts, settle_until).await;
    println!(
        "checked {} flows {:.1} s after the load stopped",
        found.len(),
        (load.ms() - load_ms) as f64 / 1000.0
    );

    let checks = Checks::of(&records, &starts, &found);
    Ok(report::report(args, &load, &checks))
}

/// Serve the steps on `--steps-listen` and register them with `engine`.
async fn serve_steps(
    args: &Args,
    records: &Arc<Records>,
    client: &reqwest::Client,
    engine: &str,
) -> Result<(), String> {
    let app = steps::app(records.clone(), client.clone());
    let listener = tokio::net::TcpListener::bind(args.steps_listen)
        .await
        .map_err(|e| format!("listen on {}: {e}", args.steps_listen))?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    let base = format!("http://{}", args.steps_listen);
    for step in steps::steps(&base) {
        steps::register(client, engine, &step).await?;
    }
    Ok(())
}

/// Flows at a steady rate, probes every probe_ms, until told to stop; then
/// the starts still being tried. Every start, as it ended, and when the
/// load stopped (ms since it began).
async fn drive(args: &Args, load: &Arc<Load>, run_id: &str) -> (Vec<Start>, u64) {
    let mut tasks: JoinSet<Start> = JoinSet::new();
    let mut flow_tick = tokio::time::interval(Duration::from_micros(1_000_000 / args.rate));
    let mut probe_tick = tokio::time::interval(Duration::from_millis(args.probe_ms));
    flow_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    probe_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut starts: Vec<Start> = Vec::new();
    let (mut flows, mut probes) = (0usize, 0usize);
    while !stop_requested(args, load.started) {
        tokio::select! {
            _ = flow_tick.tick() => {
                let id = format!("fo-{run_id}-{flows}");
                let body = json!({"id": id, "goals": ["fo-each"], "init": {"n": [flows], "items": [EACH_ITEMS]}});
                let load = load.clone();
                let first = flows;
                tasks.spawn(async move { load.start(id, Kind::Load, body, first).await });
                flows += 1;
            }
            _ = probe_tick.tick() => {
                let id = format!("fo-{run_id}-p{probes}");
                let body = json!({"id": id, "goals": ["fo-probe"], "init": {"p": [probes]}});
                let load = load.clone();
                let engine = probes;
                tasks.spawn(async move { load.probe(id, body, engine).await });
                probes += 1;
            }
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                if let Ok(start) = done { starts.push(start); }
            }
        }
    }
    let load_ms = load.ms();
    println!("load stopped after {:.1} s: {flows} flows and {probes} probes sent; waiting for the starts still being tried", load_ms as f64 / 1000.0);
    while let Some(done) = tasks.join_next().await {
        if let Ok(start) = done {
            starts.push(start);
        }
    }
    (starts, load_ms)
}

/// Every flow that may exist: acknowledged, or tried and never answered
/// (its commit may have landed all the same), waited for until
/// `settle_until` and read back.
async fn read_back(load: &Arc<Load>, starts: &[Start], settle_until: Instant) -> HashMap<String, Found> {
    futures::stream::iter(starts.iter().enumerate())
        .map(|(n, s)| {
            let load = load.clone();
            let id = s.id.clone();
            async move {
                let found = check::inspect(&load, &id, n, settle_until).await;
                (id, found)
            }
        })
        .buffer_unordered(32)
        .collect()
        .await
}
