//! Load tool: how many flows per second the engine completes, how long each
//! takes, what the engine adds to each step call, how late retries fire, and
//! how much memory it holds. Runs an engine in this process on a fresh
//! database (a SQLite file in the temp dir, or a database
//! `tartan_load_<pid>` on Postgres at 127.0.0.1:5432, dropped after), a step
//! server on 127.0.0.1, registers the steps of one flow shape and runs flows
//! of it.
//!
//! ```text
//! cargo run --release -p tartan-bench --bin load -- [--store sqlite|postgres] [--shape chain|fanout|retry]
//!     [--flows N] [--concurrency C] [--server-delay-ms D]
//! cargo run --release -p tartan-bench --bin load -- [--store ..] [--shape ..] --rate R --duration SECS [--warmup SECS]
//! cargo run --release -p tartan-bench --bin load -- api (--server URL | --spawn sqlite|postgres) [--token T]
//!     [--flows 1000] [--floor-flows 10000] [--clients 32] [--alone 50] [--poll-ms 10]
//! cargo run --release -p tartan-bench --bin load -- api --vs OLD_TARTAN [--tartan NEW] [--pairs 4] [--spawn STORE]
//! ```
//!
//! `api` is another benchmark: a `tartan serve` (running, or started by the
//! tool) driven over its REST API as a client does, against the same calls
//! made with no engine, in one run (`load/api.rs`). What follows is about
//! the in-process engine.
//!
//! Shapes:
//! - `chain`: three sync steps a → b → c, each answering at once (3 calls a flow);
//! - `fanout`: a step with a `for_each` input of 10 elements (parallelism 10),
//!   then a step consuming their aggregated output (11 calls a flow);
//! - `retry`: one sync step answering 503 to the first two calls of each
//!   receipt token and 200 to the third; fixed backoff of 50 ms, no jitter,
//!   `max_retries` 3 (3 calls a flow).
//!
//! Modes:
//! - closed loop (default): `--flows` flows, at most `--concurrency` in flight;
//!   a slot frees when its flow finishes (learnt from
//!   `Engine::subscribe_finished`, or from the store when notices were
//!   missed). `--concurrency 1` gives the latency of a flow alone.
//! - open loop (`--rate R --duration SECS`): R flows started per second,
//!   whatever is in flight, for SECS; one `interval` line every 10 s (flows
//!   completed so far, flows/s over the interval, flows in flight, RSS, the
//!   interval's latency p50 / p99), then the summary with the first and last
//!   RSS samples after `--warmup` seconds (the last taken when the last flow
//!   finished), the largest, and the slope of a least-squares line through
//!   them: whether memory grows at constant load.
//!   Each finished flow is analysed at once (one read of its state, and of
//!   its events when it retried), so the tool's own memory stays constant.
//!
//! The summary is one line of `key=value` fields:
//! - `flows_per_s` (flows completed; `failed` counts the others),
//!   `rejected` (open loop: starts the engine refused as overloaded, past
//!   its `max_active_flows`), `steps_per_s` (plan steps of completed flows), `calls_per_s` (HTTP calls
//!   the step server answered, retries included), from the first start to
//!   the last finish;
//! - `latency_ms_*`: each flow from the `start_flow` call to its finished
//!   notice (its last decision durable); a flow found finished in the store
//!   instead (`via_store`, after `lagged` notices or a silence) counts until
//!   it was found;
//! - `overhead_ms_*`: per call, the engine's added latency: the attempt's
//!   `ended_at - started_at` (from the decision that starts the attempt,
//!   whose commit comes before the call, to the decision on its result,
//!   whose commit is not included) minus the step server's own handler time
//!   for that call; `overhead_before_call_ms_p50` is the part until the call
//!   reached the step server, `overhead_after_call_ms_p50` the rest;
//!   `server_ms_p50` the handler's own time (`--server-delay-ms` is in it);
//! - `retry_decision_late_ms_*`: each retry attempt's `started_at` minus the
//!   `next_retry_at` of its `work_retry_scheduled` event;
//!   `retry_arrival_late_ms_*`: the call's arrival at the step server minus
//!   the same (`na` without retries);
//! - `peak_rss_mib`: the process's `VmHWM` when the last flow finished; the
//!   process holds the engine and also the (small) step server and load
//!   generator, whose records of each call (~150 bytes a call in the closed
//!   loop, until the analysis at the end) are included.
//!
//! Values are kept in histograms within 0.8 % (`tartan_bench::Histogram`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use clap::{Parser, Subcommand, ValueEnum};
use futures::StreamExt;
use serde_json::json;
use tartan_bench::{proc_status_mib, BenchDb, Histogram};
use tartan_core::flow::FlowStatus;
use tartan_engine::{Engine, FlowFinished};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, Semaphore};

/// mimalloc, as the binary uses.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod api;
mod cpu;
mod relay;
mod report;
mod shape;
mod vs;

use report::*;
use shape::Shape;

/// Seconds between the open loop's `interval` lines.
const INTERVAL: Duration = Duration::from_secs(10);
/// With no flow finishing for this long the run stops and says so.
const STALL: Duration = Duration::from_secs(60);
/// Flows analysed at once.
const ANALYSERS: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StoreKind {
    Sqlite,
    Postgres,
}

impl StoreKind {
    fn name(self) -> &'static str {
        match self {
            StoreKind::Sqlite => "sqlite",
            StoreKind::Postgres => "postgres",
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    about = "Tartan load tool: an engine, a step server and flows of one shape, in one process",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    mode: Option<Mode>,
    #[arg(long, value_enum, default_value = "sqlite")]
    store: StoreKind,
    #[arg(long, value_enum, default_value = "chain")]
    shape: Shape,
    /// Closed loop: how many flows to run.
    #[arg(long, default_value_t = 5000)]
    flows: u64,
    /// Closed loop: flows in flight at most (1: each flow alone).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    concurrency: u64,
    /// Open loop: flows started per second (with --duration).
    #[arg(long, requires = "duration", conflicts_with_all = ["flows", "concurrency"])]
    rate: Option<f64>,
    /// Open loop: seconds to start flows for.
    #[arg(long, requires = "rate")]
    duration: Option<u64>,
    /// Open loop: RSS samples in the first SECS are warm-up, left out of the
    /// first/last comparison (at least the last sample is kept).
    #[arg(long, default_value_t = 60)]
    warmup: u64,
    /// The step server sleeps this long in each call (counted as its own time).
    #[arg(long, default_value_t = 0)]
    server_delay_ms: u64,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Tartan through its REST API (a running `tartan serve`, or one started
    /// here), against the same calls made with no engine, in one run.
    Api(api::ApiArgs),
}

// ---------------------------------------------------------------------------
// The step server.

/// One call as the step server saw it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    attempt: u32,
    arrived: DateTime<Utc>,
    /// From the handler's start to its response built, µs.
    handler_us: i64,
}

#[derive(Default)]
struct Server {
    /// Calls by receipt token in arrival order; taken out when their flow
    /// is analysed.
    calls: Mutex<HashMap<String, Vec<Seen>>>,
    answered: AtomicU64,
}

impl Server {
    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Seen>>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

async fn step_server(server: Arc<Server>, fail_first: usize, delay: Duration) -> std::net::SocketAddr {
    // The body is read before the handler runs (as any step service would),
    // so the connection stays reusable.
    let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap, _body: Bytes| {
        let server = server.clone();
        async move {
            let begun = Instant::now();
            let arrived = Utc::now();
            let token = header(&headers, "argyll-receipt-token").to_string();
            let attempt = header(&headers, "tartan-attempt").parse().unwrap_or(0);
            let earlier = server.calls().get(&token).map_or(0, Vec::len);
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let response: Response = if earlier < fail_first {
                (StatusCode::SERVICE_UNAVAILABLE, "try again").into_response()
            } else {
                let key = uri.path().trim_start_matches('/');
                axum::Json(json!({ key: 1 })).into_response()
            };
            let handler_us = i64::try_from(begun.elapsed().as_micros()).unwrap_or(i64::MAX);
            server.calls().entry(token).or_default().push(Seen {
                attempt,
                arrived,
                handler_us,
            });
            server.answered.fetch_add(1, Ordering::Relaxed);
            response
        }
    });
    tartan_bench::serve(app).await
}

// ---------------------------------------------------------------------------
// Starting flows and learning that they finished.

/// Flows started and not yet seen finished: when each `start_flow` began.
type InFlight = Arc<Mutex<HashMap<String, Instant>>>;

fn in_flight(map: &InFlight) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
    map.lock().unwrap_or_else(|p| p.into_inner())
}

/// A flow seen finished.
struct Done {
    id: String,
    status: FlowStatus,
    latency_us: i64,
}

/// Start flow number `i`. It is listed in flight before it starts, so its
/// notice cannot come first.
async fn start(engine: Engine, shape: Shape, i: u64, flights: InFlight, exit_on_refusal: bool) {
    let id = format!("load-{i}");
    in_flight(&flights).insert(id.clone(), Instant::now());
    let req: tartan_core::request::StartFlow =
        serde_json::from_value(json!({"id": id, "goals": [shape.goal()], "init": shape.init(i)}))
            .unwrap_or_else(|e| panic!("request: {e}"));
    match engine.flows().start_flow(req).await {
        Ok(_) => {}
        // Open loop past what the engine completes: it refuses starts
        // (503 over the API) rather than queue without bound. Counted.
        Err(tartan_engine::EngineError::Overloaded(_)) if !exit_on_refusal => {
            in_flight(&flights).remove(&id);
            REJECTED.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => {
            eprintln!("start {id}: {e}");
            std::process::exit(1);
        }
    }
}

/// Starts the engine refused as overloaded (open loop only).
static REJECTED: AtomicU64 = AtomicU64::new(0);

/// Counts of how finishes were learnt.
#[derive(Default)]
struct Watch {
    /// Notices the subscriber fell behind by.
    lagged: AtomicU64,
    /// Flows found finished in the store instead (after a lag, or a second
    /// without notices while flows were in flight).
    via_store: AtomicU64,
}

/// Turn finished notices into `Done`s for the flows in flight. On a lag
/// (notices lost) or a silence, every flow in flight is looked up in the
/// store instead. Whoever takes a flow out of `flights` reports it, once.
fn spawn_watcher(
    engine: Engine,
    mut notices: broadcast::Receiver<FlowFinished>,
    flights: InFlight,
    done: mpsc::UnboundedSender<Done>,
    watch: Arc<Watch>,
) -> tokio::task::JoinHandle<()> {
    let report = move |id: String, status: FlowStatus, started: Instant| {
        let latency_us = i64::try_from(started.elapsed().as_micros()).unwrap_or(i64::MAX);
        let _ = done.send(Done {
            id,
            status,
            latency_us,
        });
    };
    tokio::spawn(async move {
        loop {
            let sweep = match tokio::time::timeout(Duration::from_secs(1), notices.recv()).await {
                Ok(Ok(n)) => {
                    let started = in_flight(&flights).remove(&n.flow_id);
                    if let Some(started) = started {
                        report(n.flow_id, n.status, started);
                    }
                    false
                }
                Ok(Err(RecvError::Lagged(missed))) => {
                    watch.lagged.fetch_add(missed, Ordering::Relaxed);
                    true
                }
                Ok(Err(RecvError::Closed)) => return,
                Err(_) => !in_flight(&flights).is_empty(),
            };
            if !sweep {
                continue;
            }
            let ids: Vec<String> = in_flight(&flights).keys().cloned().collect();
            for id in ids {
                let Ok(state) = engine.flows().flow(&id).await else {
                    continue; // not stored yet: its start is still under way
                };
                if state.status == FlowStatus::Active {
                    continue;
                }
                let started = in_flight(&flights).remove(&id);
                if let Some(started) = started {
                    watch.via_store.fetch_add(1, Ordering::Relaxed);
                    report(id, state.status, started);
                }
            }
        }
    })
}

struct Run {
    completed: u64,
    failed: u64,
    unfinished: u64,
    /// From the first start to the last finish.
    wall: Duration,
    peak_rss_mib: f64,
}

// ---------------------------------------------------------------------------
// The two loops.

struct Rig {
    engine: Engine,
    server: Arc<Server>,
    flights: InFlight,
    done: mpsc::UnboundedReceiver<Done>,
    watch: Arc<Watch>,
    watcher: tokio::task::JoinHandle<()>,
}

/// Closed loop: at most `concurrency` flows in flight; analysis after the
/// last one finished, so it does not compete with the run.
async fn closed_loop(cli: &Cli, rig: &mut Rig) -> (Run, Samples) {
    let slots = Arc::new(Semaphore::new(
        usize::try_from(cli.concurrency).unwrap_or(usize::MAX),
    ));
    let launcher = {
        let (engine, flights, slots, shape, flows) = (
            rig.engine.clone(),
            rig.flights.clone(),
            slots.clone(),
            cli.shape,
            cli.flows,
        );
        tokio::spawn(async move {
            for i in 0..flows {
                match slots.acquire().await {
                    Ok(permit) => permit.forget(),
                    Err(_) => return,
                }
                tokio::spawn(start(engine.clone(), shape, i, flights.clone(), true));
            }
        })
    };
    let started = Instant::now();
    let mut samples = Samples::default();
    let (mut completed, mut failed) = (0, 0);
    let mut ids = Vec::with_capacity(usize::try_from(cli.flows).unwrap_or(0));
    while completed + failed < cli.flows {
        match tokio::time::timeout(STALL, rig.done.recv()).await {
            Ok(Some(d)) => {
                slots.add_permits(1);
                samples.latency.record(d.latency_us);
                if d.status == FlowStatus::Completed {
                    completed += 1;
                } else {
                    failed += 1;
                }
                ids.push(d.id);
            }
            Ok(None) => break,
            Err(_) => {
                eprintln!(
                    "no flow finished for {STALL:?}; {} in flight, e.g. {:?}",
                    in_flight(&rig.flights).len(),
                    in_flight(&rig.flights).keys().next()
                );
                break;
            }
        }
    }
    let wall = started.elapsed();
    let peak_rss_mib = proc_status_mib("VmHWM");
    launcher.abort();
    let shared = Mutex::new(samples);
    futures::stream::iter(ids)
        .for_each_concurrent(ANALYSERS, |id| {
            let (engine, server, shared) = (&rig.engine, &rig.server, &shared);
            async move { analyse(engine, server, &id, shared).await }
        })
        .await;
    let samples = shared.into_inner().unwrap_or_else(|p| p.into_inner());
    let run = Run {
        completed,
        failed,
        unfinished: cli.flows - completed - failed,
        wall,
        peak_rss_mib,
    };
    (run, samples)
}

/// Open loop: `rate` flows a second for `duration`, each analysed as it
/// finishes; an `interval` line every 10 s.
async fn open_loop(cli: &Cli, rig: &mut Rig, rate: f64, duration: u64) -> (Run, Samples, Vec<(f64, f64)>) {
    let total = (rate * duration as f64).round() as u64;
    let started = Instant::now();
    let launcher = {
        let (engine, flights, shape) = (rig.engine.clone(), rig.flights.clone(), cli.shape);
        tokio::spawn(async move {
            // Each tick starts the flows due by then: the average rate is exact
            // whatever the timer's resolution.
            let mut tick = tokio::time::interval(Duration::from_secs_f64((1.0 / rate).max(0.001)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut launched = 0;
            while launched < total {
                tick.tick().await;
                let due = ((started.elapsed().as_secs_f64() * rate) as u64 + 1).min(total);
                while launched < due {
                    tokio::spawn(start(engine.clone(), shape, launched, flights.clone(), false));
                    launched += 1;
                }
            }
        })
    };
    let shared = Arc::new(Mutex::new(Samples::default()));
    let analysers = Arc::new(Semaphore::new(ANALYSERS));
    let mut report = tokio::time::interval_at(tokio::time::Instant::now() + INTERVAL, INTERVAL);
    let (mut completed, mut failed) = (0u64, 0u64);
    let mut interval = (0u64, Histogram::new(), Instant::now());
    let mut rss = Vec::new();
    let mut last_done = Instant::now();
    let mut wall = Duration::ZERO;
    while completed + failed < total {
        tokio::select! {
            d = rig.done.recv() => {
                let Some(d) = d else { break };
                last_done = Instant::now();
                wall = started.elapsed();
                if d.status == FlowStatus::Completed {
                    completed += 1;
                    interval.0 += 1;
                } else {
                    failed += 1;
                }
                interval.1.record(d.latency_us);
                let permit = analysers.clone().acquire_owned().await.unwrap_or_else(|e| panic!("analysers: {e}"));
                let (engine, server, shared) = (rig.engine.clone(), rig.server.clone(), shared.clone());
                tokio::spawn(async move {
                    {
                        let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
                        s.latency.record(d.latency_us);
                    }
                    analyse(&engine, &server, &d.id, &shared).await;
                    drop(permit);
                });
            }
            _ = report.tick() => {
                let t = started.elapsed().as_secs_f64();
                let secs = interval.2.elapsed().as_secs_f64();
                let now_rss = proc_status_mib("VmRSS");
                rss.push((t, now_rss));
                println!(
                    "interval store={} shape={} t_s={t:.0} completed={} failed={} flows_per_s={:.1} in_flight={} \
                     rss_mib={now_rss:.1} latency_ms_p50={} latency_ms_p99={}",
                    cli.store.name(),
                    cli.shape.name(),
                    completed,
                    failed,
                    interval.0 as f64 / secs,
                    in_flight(&rig.flights).len(),
                    if interval.1.is_empty() { "na".into() } else { ms(interval.1.quantile(0.5)) },
                    if interval.1.is_empty() { "na".into() } else { ms(interval.1.quantile(0.99)) },
                );
                interval = (0, Histogram::new(), Instant::now());
                if last_done.elapsed() > STALL && started.elapsed().as_secs() > duration {
                    eprintln!("no flow finished for {STALL:?}; {} in flight", in_flight(&rig.flights).len());
                    break;
                }
            }
        }
    }
    let peak_rss_mib = proc_status_mib("VmHWM");
    // The last sample: the end of the run, when it came after the last line.
    let t = started.elapsed().as_secs_f64();
    if rss.last().is_none_or(|(last, _)| t - last > 1.0) {
        rss.push((t, proc_status_mib("VmRSS")));
    }
    launcher.abort();
    // Wait for the analyses under way.
    let _ = analysers
        .acquire_many(u32::try_from(ANALYSERS).unwrap_or(u32::MAX))
        .await;
    let samples = std::mem::take(&mut *shared.lock().unwrap_or_else(|p| p.into_inner()));
    let run = Run {
        completed,
        failed,
        unfinished: total.saturating_sub(completed + failed),
        wall: if wall.is_zero() { started.elapsed() } else { wall },
        peak_rss_mib,
    };
    (run, samples, rss)
}

#[tokio::main]
async fn main() {
    tartan_bench::init_logging();
    let mut cli = Cli::parse();
    if let Some(Mode::Api(args)) = cli.mode.take() {
        return match args.vs.clone() {
            Some(old) => vs::compare(args, &old).await,
            None => api::run(args).await,
        };
    }
    if cli.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        eprintln!("--rate must be a positive number");
        std::process::exit(2);
    }

    let db = BenchDb::create(cli.store.name(), "load").await;
    let engine = db.engine("load").await;
    let server = Arc::new(Server::default());
    let addr = step_server(
        server.clone(),
        cli.shape.failures_first(),
        Duration::from_millis(cli.server_delay_ms),
    )
    .await;
    for step in cli.shape.steps(&format!("http://{addr}")) {
        let step: tartan_core::step::Step =
            serde_json::from_value(step).unwrap_or_else(|e| panic!("step: {e}"));
        engine
            .catalog()
            .register_step(step)
            .await
            .unwrap_or_else(|e| panic!("register: {e}"));
    }

    let flights: InFlight = Arc::default();
    let watch = Arc::new(Watch::default());
    let (done_tx, done) = mpsc::unbounded_channel();
    let watcher = spawn_watcher(
        engine.clone(),
        engine.flows().subscribe_finished(),
        flights.clone(),
        done_tx,
        watch.clone(),
    );
    let mut rig = Rig {
        engine: engine.clone(),
        server: server.clone(),
        flights,
        done,
        watch,
        watcher,
    };

    let line = match (cli.rate, cli.duration) {
        (Some(rate), Some(duration)) => {
            let (run, samples, rss) = open_loop(&cli, &mut rig, rate, duration).await;
            let calls = server.answered.load(Ordering::Relaxed);
            let mut line = summary(&cli, "open", &run, &samples, &rig.watch, calls);
            line.push_str(&format!(
                " rate={rate} duration_s={duration} warmup_s={}",
                cli.warmup
            ));
            match rss_trend(&rss, cli.warmup as f64) {
                Some(t) => line.push_str(&format!(
                    " rss_first_mib={:.1} rss_first_t_s={:.0} rss_last_mib={:.1} rss_last_t_s={:.0} \
                     rss_max_mib={:.1} rss_slope_mib_per_min={:.2}",
                    t.first.1, t.first.0, t.last.1, t.last.0, t.max, t.slope_per_min
                )),
                None => line.push_str(" rss_first_mib=na rss_last_mib=na"),
            }
            line
        }
        _ => {
            let (run, samples) = closed_loop(&cli, &mut rig).await;
            let calls = server.answered.load(Ordering::Relaxed);
            let mut line = summary(&cli, "closed", &run, &samples, &rig.watch, calls);
            line.push_str(&format!(" flows={} concurrency={}", cli.flows, cli.concurrency));
            line
        }
    };
    println!("{line}");
    rig.watcher.abort();
    engine.shutdown(Duration::from_secs(5)).await;
    db.drop().await;
}
