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

#[path = "kit/mod.rs"]
mod kit;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use clap::{Parser, ValueEnum};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::task::JoinSet;

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

/// A start that gave up: tried for this long without an acknowledgement.
const START_GIVE_UP: Duration = Duration::from_secs(60);
/// A webhook delivery that gave up.
const WEBHOOK_GIVE_UP: Duration = Duration::from_secs(60);
/// Every request's bound; the engine answers within 5 s even when the
/// database is away (docs/durability.md, "When the database goes away").
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// Work items of a load flow: one sync, one async, three for_each.
const ITEMS_PER_FLOW: usize = 5;
const EACH_ITEMS: [u64; 3] = [1, 2, 3];

/// What the step server saw and answered, and how the webhooks went.
#[derive(Default)]
struct Records {
    /// Calls per (step, token): the attempts seen, in order of arrival.
    calls: Mutex<HashMap<(String, String), Called>>,
    /// (token, attempt) of every call answered with a result (sync `200`).
    answered: Mutex<HashSet<(String, u32)>>,
    /// Each webhook delivery, by (token, attempt).
    webhooks: Mutex<HashMap<(String, u32), Delivery>>,
    heartbeats_ok: AtomicU64,
    heartbeats_other: AtomicU64,
}

/// The calls of one work item: its flow and the attempt of each call.
#[derive(Default)]
struct Called {
    flow: String,
    attempts: Vec<u32>,
}

/// A result posted to a webhook: its flow, the final answer (0: none) and
/// how many tries it took.
struct Delivery {
    flow: String,
    status: u16,
    tries: u32,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Clone)]
struct StepState {
    records: Arc<Records>,
    client: reqwest::Client,
}

fn attempt_of(headers: &HeaderMap) -> u32 {
    kit::header(headers, "tartan-attempt").parse().unwrap_or(0)
}

/// Note a call; its place among the calls of its token, 1 for the first.
fn note_call(records: &Records, step: &str, headers: &HeaderMap) -> (String, u32, usize) {
    let token = kit::receipt_token(headers);
    let attempt = attempt_of(headers);
    let mut calls = lock(&records.calls);
    let seen = calls.entry((step.to_string(), token.clone())).or_default();
    seen.flow = kit::header(headers, "argyll-flow-id").to_string();
    seen.attempts.push(attempt);
    (token, attempt, seen.attempts.len())
}

async fn sync_step(State(s): State<StepState>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let (token, attempt, nth) = note_call(&s.records, "fo-sync", &headers);
    if nth == 1 {
        return kit::busy("warming up", 1);
    }
    lock(&s.records.answered).insert((token, attempt));
    let n = body["n"].as_u64().unwrap_or(0);
    Json(json!({"a": n * 2})).into_response()
}

async fn each_step(State(s): State<StepState>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let (token, attempt, _) = note_call(&s.records, "fo-each", &headers);
    lock(&s.records.answered).insert((token, attempt));
    let item = body["items"].as_u64().unwrap_or(0);
    Json(json!({"c": item * 10})).into_response()
}

async fn async_step(State(s): State<StepState>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let (token, attempt, _) = note_call(&s.records, "fo-async", &headers);
    let webhook = kit::header(&headers, "argyll-webhook-url").to_string();
    if !webhook.starts_with("http") {
        return kit::problem(
            StatusCode::BAD_REQUEST,
            "no Argyll-Webhook-URL: is the step async?",
        );
    }
    let flow = kit::header(&headers, "argyll-flow-id").to_string();
    let a = body["a"].as_u64().unwrap_or(0);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let beat = s
            .client
            .post(format!("{webhook}/heartbeat"))
            .header("content-type", "application/json")
            .body("{}")
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await;
        let counter = match beat {
            Ok(r) if r.status() == StatusCode::OK => &s.records.heartbeats_ok,
            _ => &s.records.heartbeats_other,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(150)).await;
        let (status, tries) = deliver(&s.client, &webhook, &json!({"b": a + 1})).await;
        lock(&s.records.webhooks).insert((token, attempt), Delivery { flow, status, tries });
    });
    (StatusCode::ACCEPTED, Json(json!({"accepted": true}))).into_response()
}

/// Post a result to its webhook until it is answered with anything but a
/// `503`, another `5xx` or no answer, or a minute passes (status 0: none).
async fn deliver(client: &reqwest::Client, url: &str, result: &Value) -> (u16, u32) {
    let started = Instant::now();
    let mut tries = 0;
    loop {
        tries += 1;
        let status = match client
            .post(url)
            .json(result)
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
        {
            Ok(r) => r.status().as_u16(),
            Err(_) => 0,
        };
        if (status != 0 && status < 500) || started.elapsed() > WEBHOOK_GIVE_UP {
            return (status, tries);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn steps(base: &str) -> Vec<Value> {
    let retry = json!({"max_retries": 30, "init_backoff": 200, "backoff_type": "fixed"});
    vec![
        json!({"id": "fo-sync", "name": "Failover sync", "type": "sync",
            "http": {"endpoint": format!("{base}/sync"), "timeout": "5s"},
            "attributes": {"n": {"role": "required", "type": "number"},
                           "a": {"role": "output", "type": "number"}},
            "work_config": retry}),
        json!({"id": "fo-async", "name": "Failover async", "type": "async",
            "http": {"endpoint": format!("{base}/async"), "timeout": "5s"},
            "timeouts": {"inactivity": "10s"},
            "attributes": {"a": {"role": "required", "type": "number"},
                           "b": {"role": "output", "type": "number"}},
            "work_config": retry}),
        json!({"id": "fo-each", "name": "Failover for_each", "type": "sync",
            "http": {"endpoint": format!("{base}/each"), "timeout": "5s"},
            "attributes": {"b": {"role": "required", "type": "number"},
                           "items": {"role": "required", "type": "array", "required": {"for_each": true}},
                           "c": {"role": "output", "type": "number"}},
            "work_config": {"max_retries": 30, "init_backoff": 200, "backoff_type": "fixed", "parallelism": 3}}),
        json!({"id": "fo-probe", "name": "Failover probe", "type": "script",
            "script": {"language": "lua", "script": "return { q = p }"},
            "attributes": {"p": {"role": "required", "type": "number"},
                           "q": {"role": "output", "type": "number"}}}),
    ]
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Load,
    Probe,
}

/// One flow start, as the client saw it.
struct Start {
    id: String,
    kind: Kind,
    /// Milliseconds from the load's start: first sent, acknowledged.
    sent_ms: u64,
    acked_ms: Option<u64>,
    tries: u32,
    /// Acknowledged through a `409` and a read of the flow, not a `201`.
    via_conflict: bool,
    /// A refusal that is no outage (400, 404, ...), with its body.
    refused: Option<String>,
}

/// Answers to start requests, by status (0: no answer).
#[derive(Default)]
struct Answers(Mutex<BTreeMap<u16, u64>>);

impl Answers {
    fn note(&self, status: u16) {
        *lock(&self.0).entry(status).or_default() += 1;
    }
    fn describe(&self) -> String {
        lock(&self.0)
            .iter()
            .map(|(s, n)| match s {
                0 => format!("no answer x{n}"),
                s => format!("{s} x{n}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

struct Load {
    client: reqwest::Client,
    engines: Vec<String>,
    started: Instant,
    answers: Answers,
}

impl Load {
    fn ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Start one flow, trying again on an outage with the same id and body.
    async fn start(&self, id: String, kind: Kind, body: Value, first_engine: usize) -> Start {
        let sent_ms = self.ms();
        let give_up = Instant::now() + START_GIVE_UP;
        let mut start = Start {
            id,
            kind,
            sent_ms,
            acked_ms: None,
            tries: 0,
            via_conflict: false,
            refused: None,
        };
        loop {
            let engine = &self.engines[(first_engine + start.tries as usize) % self.engines.len()];
            start.tries += 1;
            let sent = self
                .client
                .post(format!("{engine}/engine/flow"))
                .json(&body)
                .timeout(REQUEST_TIMEOUT)
                .send()
                .await;
            let status = sent.as_ref().map(|r| r.status().as_u16()).unwrap_or(0);
            self.answers.note(status);
            match status {
                201 => {
                    start.acked_ms = Some(self.ms());
                    return start;
                }
                409 if self.exists(engine, &start.id).await => {
                    start.acked_ms = Some(self.ms());
                    start.via_conflict = true;
                    return start;
                }
                0 | 409 | 500..=599 => {}
                _ => {
                    let text = match sent {
                        Ok(r) => r.text().await.unwrap_or_default(),
                        Err(e) => e.to_string(),
                    };
                    start.refused = Some(format!("{status}: {text}"));
                    return start;
                }
            }
            if Instant::now() > give_up {
                return start;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// One try, no retry: the write probe.
    async fn probe(&self, id: String, body: Value, engine: usize) -> Start {
        let sent_ms = self.ms();
        let engine = &self.engines[engine % self.engines.len()];
        let status = self
            .client
            .post(format!("{engine}/engine/flow"))
            .json(&body)
            .timeout(PROBE_TIMEOUT)
            .send()
            .await
            .map(|r| r.status().as_u16())
            .unwrap_or(0);
        let acked_ms = (status == 201).then(|| self.ms());
        Start {
            id,
            kind: Kind::Probe,
            sent_ms,
            acked_ms,
            tries: 1,
            via_conflict: false,
            refused: None,
        }
    }

    async fn exists(&self, engine: &str, id: &str) -> bool {
        matches!(
            self.get(engine, &format!("/engine/flow/{id}/status")).await,
            Ok((200, _))
        )
    }

    async fn get(&self, engine: &str, path: &str) -> Result<(u16, Value), reqwest::Error> {
        let r = self
            .client
            .get(format!("{engine}{path}"))
            .timeout(Duration::from_secs(70))
            .send()
            .await?;
        let status = r.status().as_u16();
        let body = r.json::<Value>().await.unwrap_or(Value::Null);
        Ok((status, body))
    }

    /// GET on any engine that answers, trying the others on an outage, for
    /// up to a minute.
    async fn get_any(&self, path: &str, n: usize) -> Option<(u16, Value)> {
        let give_up = Instant::now() + Duration::from_secs(60);
        let mut i = n;
        loop {
            let engine = &self.engines[i % self.engines.len()];
            i += 1;
            match self.get(engine, path).await {
                Ok((status, body)) if status < 500 => return Some((status, body)),
                _ if Instant::now() > give_up => return None,
                _ => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }
}

/// What the engines say of one flow, after the load.
#[derive(Default)]
struct Found {
    /// `None`: the flow does not exist (404).
    status: Option<String>,
    /// Receipt token to the attempts of its `work_succeeded` events, with
    /// the step.
    succeeded: HashMap<String, (String, Vec<u32>)>,
    /// (token, attempt) of its `work_late_result` events.
    late: HashSet<(String, u32)>,
    work_items: usize,
    unreadable: bool,
}

async fn inspect(load: &Load, id: &str, n: usize, settle_until: Instant) -> Found {
    let mut found = Found::default();
    // Wait for the flow to finish (a status wait answers when it does).
    loop {
        let left = settle_until
            .saturating_duration_since(Instant::now())
            .as_secs()
            .clamp(1, 30);
        match load
            .get_any(&format!("/engine/flow/{id}/status?wait={left}s"), n)
            .await
        {
            Some((404, _)) => return found,
            Some((200, body)) if body["status"] != "active" || Instant::now() >= settle_until => break,
            Some((200, _)) => {}
            _ => {
                found.unreadable = true;
                return found;
            }
        }
    }
    let Some((200, state)) = load.get_any(&format!("/engine/flow/{id}"), n).await else {
        found.unreadable = true;
        return found;
    };
    found.status = state["status"].as_str().map(str::to_string);
    if let Some(executions) = state["executions"].as_object() {
        found.work_items = executions
            .values()
            .filter_map(|e| e["work_items"].as_object())
            .map(|w| w.len())
            .sum();
    }
    // The whole history, a page at a time.
    let mut after = 0;
    loop {
        let Some((200, page)) = load
            .get_any(&format!("/engine/flow/{id}/events?after={after}&limit=1000"), n)
            .await
        else {
            found.unreadable = true;
            return found;
        };
        for event in page["events"].as_array().into_iter().flatten() {
            let data = &event["data"];
            let token = data["token"].as_str().unwrap_or("").to_string();
            let attempt = data["attempt"].as_u64().unwrap_or(0) as u32;
            match event["type"].as_str() {
                Some("work_succeeded") => {
                    let step = data["step_id"].as_str().unwrap_or("").to_string();
                    found
                        .succeeded
                        .entry(token)
                        .or_insert_with(|| (step, Vec::new()))
                        .1
                        .push(attempt);
                }
                Some("work_late_result") => {
                    found.late.insert((token, attempt));
                }
                _ => {}
            }
        }
        match page["next"].as_u64() {
            Some(next) => after = next,
            None => break,
        }
    }
    found
}

fn stop_requested(args: &Args, started: Instant) -> bool {
    started.elapsed() >= Duration::from_secs(args.duration)
        || args.stop_file.as_ref().is_some_and(|f| f.exists())
}

/// Intervals in which no probe that was sent succeeded: (from, to) in ms
/// between the sending of two probes that succeeded, longest first.
fn outages(starts: &[&Start]) -> Vec<(u64, u64)> {
    let mut ok: Vec<u64> = starts
        .iter()
        .filter(|s| s.acked_ms.is_some())
        .map(|s| s.sent_ms)
        .collect();
    ok.sort_unstable();
    let mut gaps: Vec<(u64, u64)> = ok.windows(2).map(|w| (w[0], w[1])).collect();
    gaps.sort_by_key(|(a, b)| std::cmp::Reverse(b - a));
    gaps
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

async fn run(args: &Args) -> Result<bool, String> {
    // Every address is 127.0.0.1: no proxy, whatever the environment says.
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| format!("HTTP client: {e}"))?;
    let records = Arc::new(Records::default());
    let app = Router::new()
        .route("/sync", post(sync_step))
        .route("/async", post(async_step))
        .route("/each", post(each_step))
        .with_state(StepState {
            records: records.clone(),
            client: client.clone(),
        });
    let listener = tokio::net::TcpListener::bind(args.steps_listen)
        .await
        .map_err(|e| format!("listen on {}: {e}", args.steps_listen))?;
    tokio::spawn(async move { axum::serve(listener, app).await });

    let engines: Vec<String> = args
        .engines
        .iter()
        .map(|e| e.trim_end_matches('/').to_string())
        .collect();
    let base = format!("http://{}", args.steps_listen);
    for step in steps(&base) {
        register(&client, &engines[0], &step).await?;
    }
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

    // Flows at a steady rate, probes every probe_ms, until told to stop.
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

    // Every flow that may exist: acknowledged, or tried and never answered
    // (its commit may have landed all the same).
    let settle_until = Instant::now() + Duration::from_secs(args.settle);
    let found: HashMap<String, Found> = futures::stream::iter(starts.iter().enumerate())
        .map(|(n, s)| {
            let load = load.clone();
            let id = s.id.clone();
            async move {
                let found = inspect(&load, &id, n, settle_until).await;
                (id, found)
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    println!(
        "checked {} flows {:.1} s after the load stopped",
        found.len(),
        (load.ms() - load_ms) as f64 / 1000.0
    );

    Ok(report(args, &load, &records, &starts, &found))
}

async fn register(client: &reqwest::Client, engine: &str, step: &Value) -> Result<(), String> {
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let sent = client
            .post(format!("{engine}/engine/step"))
            .json(step)
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await;
        match sent {
            Ok(r) if r.status() == StatusCode::CREATED => return Ok(()),
            Ok(r) if r.status().is_client_error() => {
                return Err(format!(
                    "registering {}: {} {}",
                    step["id"],
                    r.status(),
                    r.text().await.unwrap_or_default()
                ))
            }
            other if Instant::now() > give_up => {
                return Err(format!("registering {}: {other:?}", step["id"]))
            }
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Print the table and the details; whether the run passed.
fn report(
    args: &Args,
    load: &Load,
    records: &Records,
    starts: &[Start],
    found: &HashMap<String, Found>,
) -> bool {
    let status_of = |id: &str| found.get(id).and_then(|f| f.status.as_deref());
    let acked: Vec<&Start> = starts.iter().filter(|s| s.acked_ms.is_some()).collect();
    let completed = acked
        .iter()
        .filter(|s| status_of(&s.id) == Some("completed"))
        .count();
    let mut lost: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for s in &acked {
        let f = &found[&s.id];
        let why = match (&f.status, f.unreadable) {
            (Some(st), _) if st == "completed" => continue,
            (_, true) => "unreadable".to_string(),
            (None, _) => "missing from the database".to_string(),
            // In the database and never finishing: no replication loss
            // explains that, an engine did not take the flow up again.
            (Some(st), _) if st == "active" => "STUCK: still active".to_string(),
            (Some(st), _) => st.clone(),
        };
        lost.entry(why).or_default().push(&s.id);
    }
    let lost_count: usize = lost.values().map(Vec::len).sum();

    // Completions per token, across every flow read.
    let mut per_token: HashMap<&str, (&str, Vec<u32>)> = HashMap::new();
    for f in found.values() {
        for (token, (step, attempts)) in &f.succeeded {
            per_token
                .entry(token)
                .or_insert((step, Vec::new()))
                .1
                .extend(attempts);
        }
    }
    let duplicates: Vec<(&str, &Vec<u32>)> = per_token
        .iter()
        .filter(|(_, (_, a))| a.len() > 1)
        .map(|(t, (_, a))| (*t, a))
        .collect();
    let duplicate_count: usize = duplicates.iter().map(|(_, a)| a.len() - 1).sum();

    // Each completed flow: one completion per work item.
    let short: Vec<&str> = acked
        .iter()
        .filter(|s| status_of(&s.id) == Some("completed"))
        .filter(|s| {
            let f = &found[&s.id];
            let want = if s.kind == Kind::Load { ITEMS_PER_FLOW } else { 1 };
            f.succeeded.len() != want || f.work_items != want
        })
        .map(|s| s.id.as_str())
        .collect();

    // Every completion answers a result this driver gave.
    let answered = lock(&records.answered);
    let webhooks = lock(&records.webhooks);
    let mut unfounded: Vec<String> = Vec::new();
    for (token, (step, attempts)) in &per_token {
        for attempt in attempts {
            let given = match *step {
                "fo-sync" | "fo-each" => answered.contains(&(token.to_string(), *attempt)),
                "fo-async" => webhooks
                    .get(&(token.to_string(), *attempt))
                    .is_some_and(|w| w.status == 200),
                _ => true, // the probe's script step: the engine's own answer
            };
            if !given {
                unfounded.push(format!("{step} {token} attempt {attempt}"));
            }
        }
    }

    // Every webhook answered 200 is in its flow's history.
    let mut webhooks_lost: Vec<String> = Vec::new();
    let (mut webhooks_ok, mut webhooks_failed) = (0, 0);
    let mut webhook_answers: BTreeMap<u16, u64> = BTreeMap::new();
    let mut webhook_retried = 0;
    let acked_ids: HashSet<&str> = acked.iter().map(|s| s.id.as_str()).collect();
    for ((token, attempt), Delivery { flow, status, tries }) in webhooks.iter() {
        *webhook_answers.entry(*status).or_default() += 1;
        if *tries > 1 {
            webhook_retried += 1;
        }
        if *status != 200 {
            webhooks_failed += 1;
            continue;
        }
        webhooks_ok += 1;
        let recorded = found.get(flow).is_some_and(|f| {
            f.succeeded.get(token).is_some_and(|(_, a)| a.contains(attempt))
                || f.late.contains(&(token.clone(), *attempt))
        });
        if !recorded
            && (acked_ids.contains(flow.as_str()) || found.get(flow).is_some_and(|f| f.status.is_some()))
        {
            webhooks_lost.push(format!("{flow} {token} attempt {attempt}"));
        }
    }

    // Calls made more often than the step's own answers explain: made again
    // after a lease ran out or a result could not be recorded.
    let calls = lock(&records.calls);
    let mut again: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut called_again: Vec<String> = Vec::new();
    for ((step, token), called) in calls.iter() {
        let expected = if step == "fo-sync" { 2 } else { 1 };
        let entry = again.entry(step.as_str()).or_default();
        entry.0 += called.attempts.len();
        if called.attempts.len() > expected {
            entry.1 += 1;
            called_again.push(format!(
                "{step} {token} of {}, attempts {:?}",
                called.flow, called.attempts
            ));
        }
    }
    called_again.sort();
    let mut refused_webhooks: Vec<String> = webhooks
        .iter()
        .filter(|(_, d)| d.status != 200)
        .map(|((token, attempt), d)| format!("{} {token} attempt {attempt}: {}", d.flow, d.status))
        .collect();
    refused_webhooks.sort();

    let probes: Vec<&Start> = starts.iter().filter(|s| s.kind == Kind::Probe).collect();
    let gaps = outages(&probes);
    let longest = gaps.first().map(|(a, b)| b - a).unwrap_or(0);
    let loads: Vec<&Start> = starts.iter().filter(|s| s.kind == Kind::Load).collect();
    let load_acked = loads.iter().filter(|s| s.acked_ms.is_some()).count();
    let unacked: Vec<&&Start> = loads
        .iter()
        .filter(|s| s.acked_ms.is_none() && s.refused.is_none())
        .collect();
    let refused: Vec<&&Start> = loads.iter().filter(|s| s.refused.is_some()).collect();
    let unacked_exist = starts
        .iter()
        .filter(|s| s.acked_ms.is_none() && found.get(&s.id).is_some_and(|f| f.status.is_some()))
        .collect::<Vec<_>>();
    let unacked_stuck = unacked_exist
        .iter()
        .filter(|s| status_of(&s.id) != Some("completed"))
        .map(|s| s.id.as_str())
        .collect::<Vec<_>>();

    println!();
    println!(
        "| mode | acknowledged | completed | lost | duplicate completions | longest write outage (ms) |"
    );
    println!("|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {} | {} | {} | {} |",
        args.mode.name(),
        acked.len(),
        completed,
        lost_count,
        duplicate_count,
        longest
    );
    println!();
    println!(
        "starts: {} load flows sent, {} acknowledged ({} after a retry, {} through a 409), {} never acknowledged, {} refused; {} probes sent, {} acknowledged",
        loads.len(),
        load_acked,
        loads.iter().filter(|s| s.acked_ms.is_some() && s.tries > 1).count(),
        loads.iter().filter(|s| s.via_conflict).count(),
        unacked.len(),
        refused.len(),
        probes.len(),
        probes.iter().filter(|s| s.acked_ms.is_some()).count(),
    );
    println!("answers to starts: {}", load.answers.describe());
    println!(
        "never acknowledged but created: {} ({} of them not completed)",
        unacked_exist.len(),
        unacked_stuck.len()
    );
    for (why, ids) in &lost {
        println!(
            "lost ({why}): {} e.g. {}",
            ids.len(),
            ids.iter().take(5).cloned().collect::<Vec<_>>().join(" ")
        );
    }
    for s in refused.iter().take(3) {
        println!("refused: {} {}", s.id, s.refused.as_deref().unwrap_or(""));
    }
    for (token, attempts) in duplicates.iter().take(5) {
        println!("completed twice: token {token}, attempts {attempts:?}");
    }
    println!(
        "work items: {} completed; completed flows with a completion missing or extra: {}{}",
        per_token.len(),
        short.len(),
        if short.is_empty() {
            String::new()
        } else {
            format!(
                " e.g. {}",
                short.iter().take(5).cloned().collect::<Vec<_>>().join(" ")
            )
        },
    );
    println!(
        "completions no call of this driver gave: {}{}",
        unfounded.len(),
        unfounded
            .first()
            .map(|u| format!(" e.g. {u}"))
            .unwrap_or_default()
    );
    println!(
        "step calls: {}",
        again
            .iter()
            .map(|(step, (n, twice))| format!(
                "{step} {n} ({twice} work items called more often than their answers explain)"
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "webhooks: {webhooks_ok} answered 200, {webhooks_failed} not ({}), {webhook_retried} needed more than one try; answered 200 but not in the history: {}{}; heartbeats: {} answered 200, {} not",
        webhook_answers.iter().map(|(s, n)| format!("{s} x{n}")).collect::<Vec<_>>().join(", "),
        webhooks_lost.len(),
        webhooks_lost.first().map(|w| format!(" e.g. {w}")).unwrap_or_default(),
        records.heartbeats_ok.load(Ordering::Relaxed),
        records.heartbeats_other.load(Ordering::Relaxed),
    );
    for c in called_again.iter().take(5) {
        println!("called again: {c}");
    }
    for w in refused_webhooks.iter().take(5) {
        println!("webhook not answered 200: {w}");
    }
    println!(
        "write outages (probe every {} ms; from-to in s since the load began): {}",
        args.probe_ms,
        gaps.iter()
            .filter(|(a, b)| b - a >= 1000)
            .map(|(a, b)| format!(
                "{:.1}-{:.1} ({} ms)",
                *a as f64 / 1000.0,
                *b as f64 / 1000.0,
                b - a
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let broken = duplicate_count > 0 || !unfounded.is_empty() || !short.is_empty();
    let lost_any = lost_count > 0 || !webhooks_lost.is_empty() || !unacked_stuck.is_empty();
    let stuck = lost.get("STUCK: still active").map_or(0, Vec::len) + unacked_stuck.len();
    let passed = match args.mode {
        Mode::Sync => !broken && !lost_any,
        Mode::Async => !broken,
    };
    println!(
        "{}: {}",
        if passed { "PASSED" } else { "FAILED" },
        match (args.mode, broken, lost_any) {
            (_, true, _) => "a work item completed twice, or a completion no call gave, or a flow's completions do not match its items",
            (Mode::Sync, _, true) => "acknowledged writes were lost with synchronous replication",
            (Mode::Async, _, true) => "acknowledged writes were lost (asynchronous replication may lose a dead primary's last commits)",
            _ => "every acknowledged start completed, every work item once",
        }
    );
    if stuck > 0 {
        println!("STUCK: {stuck} flows are still active in the database after the settle time");
    }
    passed
}
