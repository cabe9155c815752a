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
//! - `fo-once` (sync, after `fo-each`): answers `400` to the first call of
//!   each flow, which fails the flow, and `200` to every later one;
//! - `fo-probe` (a script step, no HTTP): the goal of the write probe.
//!
//! Load: `--rate` flows a second (goal `fo-each`, so each runs all three
//! HTTP steps: five work items), started round-robin across the engines; a
//! start that gets `503`, another `5xx` or no answer is tried again, with
//! the same flow id and body, on the next engine, for up to a minute. A
//! `409` counts as acknowledged when the flow exists. One load flow in five
//! is a bulk flow: labelled `fo: bulk`, goal `fo-once` (six work items), it
//! fails once and completes only when a bulk job retries it. Every 3 s a
//! bulk retry job (`POST /engine/bulk/retry`, the run's failed bulk flows,
//! at the rate bulk flows are started, so that a job is running whenever
//! the primary dies) is created on the engines in turn, tried again like a
//! start. Probe: every `--probe-ms` one start of a `fo-probe` flow, tried
//! once (3 s at most); the longest time between two probes that succeeded
//! is the longest write outage. The load runs until `--stop-file` exists or
//! `--duration` seconds pass; then, within `--settle` seconds, the driver
//! creates one more job and waits for every job to finish and every bulk
//! flow to complete (creating another job if bulk flows failed after the
//! last one matched), waits for the other flows to finish, reads each
//! flow's state and events, and checks:
//! - every start answered `201` (acknowledged) completed; the others are
//!   lost (missing, failed or still active);
//! - no receipt token has more than one `work_succeeded` event (a
//!   duplicate completion), and each completed flow has one per work item
//!   (a flow retry starts an item over under the same receipt token: a
//!   retried bulk flow still has six, and its `fo-once` item one call more
//!   per retry);
//! - every `work_succeeded` answers a call this driver answered with a
//!   result (for the async step: a webhook of that attempt answered `200`);
//! - every webhook answered `200` is in the history of its flow (as the
//!   attempt's `work_succeeded` or its `work_late_result`);
//! - every bulk job completed, failed on no flow, and retried no flow twice
//!   (two `flow_retried` events naming the same job).
//!
//! Then it reads `tartan_flows_active` from each engine's `/metrics` until
//! it shows 0, for up to 20 s: every flow is over, none may stay in memory.
//!
//! It prints a table and the details, and exits 1 when a check fails that
//! the mode promises (sync: anything lost, completed twice, a result
//! recorded that no call gave, a bulk job not completed or failing on a
//! flow, a flow retried twice by one job, a flow still in an engine's
//! memory; async: a double or unfounded completion, a flow retried twice by
//! one job), 2 when it could not run (steps not registered, the engines
//! unreachable).
//!
//! The parts, in `failover/`: `steps.rs` (the steps this driver serves, its
//! records of their calls and webhooks, their registration), `load.rs` (the
//! starts, the probe and the answers, as the client sees them), `bulk.rs`
//! (the bulk retry jobs: created, waited for, checked), `check.rs` (each
//! flow read back after the load, and the checks), `memory.rs` (what the
//! engines still hold in memory), `report.rs` (the table, the details and
//! the verdict).

mod bulk;
mod check;
// The pattern examples' step-service helpers (examples/README.md): this
// driver is a step service too.
#[path = "../../../../examples/kit/mod.rs"]
mod kit;
mod load;
mod memory;
mod report;
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

use bulk::{Bulk, BulkChecks, Creation, BULK_EVERY, BULK_SHARE};
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
    /// How long to wait, at most, for the bulk jobs and the flows to finish
    /// after the load.
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
/// stop, the bulk jobs waited for, the flows read back, what the engines
/// hold, the checks; whether they passed.
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
    // A job acts on bulk flows as fast as they are started: one created
    // every BULK_EVERY holds those of about that long and runs about as
    // long, so that one is running whenever the primary dies.
    let bulk = Arc::new(Bulk::new(&run_id, args.rate.div_ceil(BULK_SHARE as u64)));
    if let Some(ready) = &args.ready_file {
        std::fs::write(ready, "").map_err(|e| format!("{}: {e}", ready.display()))?;
    }
    println!(
        "load: {} flows/s (one in {BULK_SHARE} a bulk flow), a probe every {} ms and a bulk retry job every {} s acting on {} flows/s, across {} engines (run {run_id})",
        args.rate,
        args.probe_ms,
        BULK_EVERY.as_secs(),
        bulk.rate(),
        load.engines.len()
    );

    let (starts, mut creations, load_ms) = drive(args, &load, &bulk, &run_id).await;
    let settle_until = Instant::now() + Duration::from_secs(args.settle);
    let settled = bulk.settle(&load, &mut creations, settle_until).await;
    println!(
        "waited {:.1} s for {} bulk jobs and the bulk flows{}",
        settled.waited.as_secs_f64(),
        settled.jobs.len(),
        if settled.settled { "" } else { " (NOT settled)" }
    );
    let found = read_back(&load, &starts, settle_until).await;
    println!(
        "checked {} flows {:.1} s after the load stopped",
        found.len(),
        (load.ms() - load_ms) as f64 / 1000.0
    );
    let held = memory::flows_held(&load, memory::MEMORY_WAIT).await;

    let checks = Checks::of(&records, &starts, &found);
    let bulk_checks = BulkChecks::of(&creations, settled, &starts, &found);
    let outcome = report::Outcome {
        checks: &checks,
        bulk: &bulk_checks,
        bulk_answers: &bulk.answers,
        held: &held,
    };
    Ok(report::report(args, &load, &outcome))
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

/// Flows at a steady rate (one in `BULK_SHARE` a bulk flow), probes every
/// probe_ms and a bulk job every `BULK_EVERY`, until told to stop; then the
/// starts and creations still being tried. Every start and creation, as it
/// ended, and when the load stopped (ms since it began).
async fn drive(
    args: &Args,
    load: &Arc<Load>,
    bulk: &Arc<Bulk>,
    run_id: &str,
) -> (Vec<Start>, Vec<Creation>, u64) {
    let mut tasks: JoinSet<Start> = JoinSet::new();
    let mut jobs: JoinSet<Creation> = JoinSet::new();
    let mut flow_tick = tokio::time::interval(Duration::from_micros(1_000_000 / args.rate));
    let mut probe_tick = tokio::time::interval(Duration::from_millis(args.probe_ms));
    let mut bulk_tick = tokio::time::interval_at(tokio::time::Instant::now() + BULK_EVERY, BULK_EVERY);
    flow_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    probe_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    bulk_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut starts: Vec<Start> = Vec::new();
    let mut creations: Vec<Creation> = Vec::new();
    let (mut flows, mut probes, mut bulks) = (0usize, 0usize, 0usize);
    while !stop_requested(args, load.started) {
        tokio::select! {
            _ = flow_tick.tick() => {
                let id = format!("fo-{run_id}-{flows}");
                let init = json!({"n": [flows], "items": [EACH_ITEMS]});
                let (kind, body) = if flows % BULK_SHARE == BULK_SHARE - 1 {
                    (Kind::Bulk, Bulk::flow(&id, init))
                } else {
                    (Kind::Load, json!({"id": id, "goals": ["fo-each"], "init": init}))
                };
                let load = load.clone();
                let first = flows;
                tasks.spawn(async move { load.start(id, kind, body, first).await });
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
            _ = bulk_tick.tick() => {
                let (load, bulk) = (load.clone(), bulk.clone());
                let engine = bulks;
                jobs.spawn(async move { bulk.create(&load, engine, false).await });
                bulks += 1;
            }
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                if let Ok(start) = done { starts.push(start); }
            }
            Some(done) = jobs.join_next(), if !jobs.is_empty() => {
                if let Ok(creation) = done { creations.push(creation); }
            }
        }
    }
    let load_ms = load.ms();
    println!("load stopped after {:.1} s: {flows} flows and {probes} probes sent, {bulks} bulk jobs asked for; waiting for the starts still being tried", load_ms as f64 / 1000.0);
    while let Some(done) = tasks.join_next().await {
        if let Ok(start) = done {
            starts.push(start);
        }
    }
    while let Some(done) = jobs.join_next().await {
        if let Ok(creation) = done {
            creations.push(creation);
        }
    }
    (starts, creations, load_ms)
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
