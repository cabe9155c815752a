//! `load api`: Tartan as its users run it, driven over its REST API from
//! another process, against the same calls made with no engine at all
//! (BENCHMARKS.md, "Against the floor, through the API"). The machine is
//! shared and its speed drifts, so speed is reported as a ratio to a floor
//! measured in the same run:
//!
//! - **floor**: `--clients` clients each run flows by making the three calls
//!   of the chain a → b → c themselves, straight to this tool's step server
//!   (no engine, no database);
//! - **relay**: the same clients drive `relay.rs`, which answers the two
//!   requests below as Tartan does and makes the three calls itself with
//!   nothing else: the bound of any engine reached over HTTP;
//! - **tartan**: the three steps are registered on a `tartan serve` with
//!   `POST /engine/step`, and the same clients start the same flows with
//!   `POST /engine/flow` and learn that each finished through
//!   `GET /engine/flow/{id}/status?wait=30s`, which answers when the flow
//!   finishes (docs/api.md, "Waiting for a flow"): one request per flow.
//!   `--poll-ms N` polls the status every N ms instead (every millisecond
//!   for the flows run alone), as a client that cannot wait would.
//!
//! `--shape scripted` registers the same chain with scripts on the hot
//! path: each step has a jpath predicate that holds (its input is there)
//! and a Lua mapping that passes its input on unchanged, so the flows
//! complete as with `--shape plain` (the default) and the step server
//! gets the same bodies; the difference is the scripts' cost.
//!
//! `--lane-concurrency N`, `--lane-rate R` (`20/s`) and `--lane-burst B`
//! give each step of the chain a lane (docs/lanes.md): with limits above
//! what the clients reach, what an unsaturated lane costs; with a rate
//! below it, whether a saturated lane holds its rate (`flows_per_s` is then
//! the lane's rate, each flow passing each lane once).
//!
//! Each side runs flows with `--clients` in flight (throughput: `--flows`
//! through Tartan, `--floor-flows` on the floor and the relay, so that each
//! lasts about a second), then `--alone` flows one after another (single-flow latency, the
//! median).
//!
//! The server is either one already running (`--server URL`, which must
//! reach 127.0.0.1, where the step server listens), or one this tool starts
//! (`--spawn sqlite|postgres`): the `tartan` binary built beside this tool,
//! on a fresh database (the same as the load tool's), stopped and the
//! database removed on every way out, a panic or Ctrl-C included.
//!
//! Ids are prefixed with `load-<unix seconds>-<pid>` (steps, their
//! attributes and flows), so runs against one server do not meet: a step
//! registered again identically is accepted, but a different one under the
//! same id is a 409, and each run's step server has a new port. The steps
//! are removed at the end; the flows stay.
//!
//! Output: one `key=value` line per side, then the ratios:
//! `throughput_ratio` (Tartan flows/s over floor flows/s) and
//! `latency_multiple` (Tartan's single-flow p50 over the floor's), and the
//! same two of the relay.

use std::future::Future;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::http::Uri;
use clap::{Args, ValueEnum};
use futures::FutureExt;
use serde_json::{json, Value};
use tartan_bench::{BenchDb, Histogram};

use crate::{cpu, relay};
use crate::{ms, StoreKind};

#[derive(Debug, Args)]
pub struct ApiArgs {
    /// A running `tartan serve` to drive, e.g. http://127.0.0.1:8080; it must
    /// be able to call 127.0.0.1, where this tool's step server listens.
    #[arg(long, required_unless_present_any = ["spawn", "vs"], conflicts_with_all = ["spawn", "vs"])]
    server: Option<String>,
    /// Start `tartan serve` on a fresh database of this store instead, and
    /// stop it at the end.
    #[arg(long, value_enum)]
    pub spawn: Option<StoreKind>,
    /// The binary `--spawn` runs, the new one of `--vs` [default: `tartan`
    /// in the target directory this tool was built in, e.g.
    /// target/release/tartan].
    #[arg(long)]
    pub tartan: Option<PathBuf>,
    /// An A/B: this (old) binary and `--tartan`'s (new) run alternately,
    /// `--pairs` times on each store (`--spawn`'s only, when given), each
    /// run measuring the floor and the relay again (`load/vs.rs`).
    #[arg(long)]
    pub vs: Option<PathBuf>,
    /// Pairs of runs of an A/B (`--vs`).
    #[arg(long, default_value_t = 4, requires = "vs", value_parser = clap::value_parser!(u64).range(1..))]
    pub pairs: u64,
    /// Bearer token sent to the API; with `--spawn` the server requires it.
    #[arg(long)]
    token: Option<String>,
    /// Flows of Tartan's throughput run.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    flows: u64,
    /// Flows of the floor's and the relay's throughput runs: more than
    /// Tartan's, as each takes
    /// a fraction of the time; at ~10,000 flows/s the default lasts a second,
    /// long enough that a hiccup of the machine does not decide the rate.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    floor_flows: u64,
    /// Clients with a flow in flight at once.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    clients: u64,
    /// Flows run one after another for the single-flow latency.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    alone: u64,
    /// How often a client asks whether its flow finished, while many run;
    /// 0 (the default): one request that waits for it (`status?wait=30s`).
    #[arg(long, default_value_t = 0)]
    poll_ms: u64,
    /// The chain's steps as registered on Tartan (the floor and the relay
    /// make the same calls either way).
    #[arg(long, value_enum, default_value = "plain")]
    shape: ChainShape,
    /// Give each of the chain's steps a lane of this concurrency
    /// (docs/lanes.md): what an unsaturated or a saturated lane costs.
    #[arg(long)]
    lane_concurrency: Option<u32>,
    /// Give each step a lane of this rate (`20/s`).
    #[arg(long)]
    lane_rate: Option<String>,
    /// The lane's burst, with `--lane-rate`.
    #[arg(long, requires = "lane_rate")]
    lane_burst: Option<u32>,
}

impl ApiArgs {
    /// The chain's steps' `limits`, when a lane flag is given.
    fn limits(&self) -> Option<Value> {
        if self.lane_concurrency.is_none() && self.lane_rate.is_none() {
            return None;
        }
        let mut limits = serde_json::Map::new();
        if let Some(n) = self.lane_concurrency {
            limits.insert("concurrency".into(), n.into());
        }
        if let Some(rate) = &self.lane_rate {
            limits.insert("rate".into(), rate.clone().into());
        }
        if let Some(burst) = self.lane_burst {
            limits.insert("burst".into(), burst.into());
        }
        Some(Value::Object(limits))
    }
}

/// How the chain's steps are registered on Tartan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ChainShape {
    /// One required input and one output each, nothing else.
    Plain,
    /// Also a jpath predicate that holds (`$["<input>"]`: the input is
    /// there) and a Lua mapping on the input that passes it on unchanged
    /// (`return _ENV["<input>"]`; the names hold `-`, so they are quoted).
    Scripted,
}

impl ChainShape {
    fn name(self) -> &'static str {
        match self {
            ChainShape::Plain => "plain",
            ChainShape::Scripted => "scripted",
        }
    }
}

/// How long a spawned server may take to answer `/ready`.
const READY_WAIT: Duration = Duration::from_secs(30);

/// One measurement, of a server given (`--server`) or started here
/// (`--spawn`); an A/B (`--vs`) is `vs.rs`'s.
pub async fn run(args: ApiArgs) {
    let steps = step_server().await;
    let Some(store) = args.spawn else {
        let server = args
            .server
            .clone()
            .unwrap_or_else(|| panic!("--server or --spawn is required"));
        bench(&args, &server, steps, None).await;
        return;
    };
    let binary = args.tartan.clone().unwrap_or_else(default_binary);
    spawned(&args, store, &binary, steps).await;
}

/// One run of `binary` started on a fresh database of `store`, stopped and
/// the database removed after (a panic or Ctrl-C included).
pub async fn spawned(args: &ApiArgs, store: StoreKind, binary: &Path, steps: SocketAddr) -> Measured {
    let db = BenchDb::create(store.name(), "load_api").await;
    // A panic or Ctrl-C stops the server (its guard's drop) before the
    // database is removed; the panic goes on after.
    let interrupted = AssertUnwindSafe(async {
        let server = Spawned::start(args, binary, &db.url).await;
        tokio::select! {
            measured = bench(args, &server.url, steps, Some(server.child.id())) => Some(measured),
            _ = tokio::signal::ctrl_c() => None,
        }
    })
    .catch_unwind()
    .await;
    db.drop().await;
    match interrupted {
        Ok(Some(measured)) => measured,
        Ok(None) => {
            eprintln!("interrupted");
            std::process::exit(130);
        }
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// What one run measured: each side, and the engine's and Postgres's CPU
/// per flow of Tartan's side (`cpu.rs`; absent when unknown).
pub struct Measured {
    pub relay: Run,
    pub tartan: Run,
    pub cpu: cpu::Mark,
}

/// Both sides against the server at `server` (process `pid` when this tool
/// started it), their lines printed.
async fn bench(args: &ApiArgs, server: &str, steps: SocketAddr, pid: Option<u32>) -> Measured {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(usize::try_from(args.clients).unwrap_or(usize::MAX) * 2)
        .build()
        .unwrap_or_else(|e| panic!("client: {e}"));
    let api = Api {
        client: client.clone(),
        base: server.trim_end_matches('/').to_string(),
        token: args.token.clone(),
    };
    let (status, health) = api.get("/health").await;
    assert_eq!(status, 200, "GET {server}/health: {health}");
    let store = health["details"]["store"]
        .as_str()
        .unwrap_or("unknown")
        .to_string();
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let chain = Chain::new(&format!("load-{unix}-{}", std::process::id()));

    let floor = floor(args, &chain, steps, client.clone()).await;
    println!("{}", floor.line("side=floor"));
    let relay = relay::start(
        steps,
        chain.steps.to_vec(),
        usize::try_from(args.clients).unwrap_or(usize::MAX),
    );
    let relay_api = Api {
        client,
        base: format!("http://{relay}"),
        token: None,
    };
    let relay = through_api(
        args,
        args.floor_flows,
        &format!("{}-relay", chain.prefix),
        &chain,
        relay_api,
    )
    .await;
    println!("{}", relay.line("side=relay"));
    chain.register(&api, steps, args.shape, args.limits()).await;
    let before = cpu::Mark::now(pid, store == "postgres");
    let tartan = through_api(args, args.flows, &chain.prefix, &chain, api.clone()).await;
    let cpu = before.per_flow_ms(cpu::Mark::now(pid, store == "postgres"), args.flows + args.alone);
    chain.unregister(&api).await;
    let shown = |ms: Option<f64>| ms.map_or_else(|| "na".to_string(), |ms| format!("{ms:.3}"));
    println!(
        "{} cpu_ms_per_flow_engine={} cpu_ms_per_flow_postgres={}",
        tartan.line(&format!("side=tartan store={store} server={}", api.base)),
        shown(cpu.engine),
        shown(cpu.postgres),
    );
    println!(
        "load_api store={store} throughput_ratio={:.3} latency_multiple={:.2} \
         relay_throughput_ratio={:.3} relay_latency_multiple={:.2} \
         flows={} floor_flows={} clients={} alone={} poll_ms={} shape={} lane={}",
        tartan.flows_per_s / floor.flows_per_s,
        tartan.alone_p50_us as f64 / floor.alone_p50_us as f64,
        relay.flows_per_s / floor.flows_per_s,
        relay.alone_p50_us as f64 / floor.alone_p50_us as f64,
        args.flows,
        args.floor_flows,
        args.clients,
        args.alone,
        args.poll_ms,
        args.shape.name(),
        args.limits()
            .map_or_else(|| "none".to_string(), |l| l.to_string())
    );
    Measured { relay, tartan, cpu }
}

// ---------------------------------------------------------------------------
// The chain, its step server and the server's API.

/// The chain a → b → c of one run: step ids, and the attributes they take
/// and give, all under the run's prefix.
struct Chain {
    prefix: String,
    seed: String,
    /// Each step's id, which is also the name of its output.
    steps: [String; 3],
}

impl Chain {
    fn new(prefix: &str) -> Chain {
        Chain {
            prefix: prefix.to_string(),
            seed: format!("{prefix}-seed"),
            steps: ["a", "b", "c"].map(|s| format!("{prefix}-{s}")),
        }
    }

    fn goal(&self) -> &str {
        &self.steps[2]
    }

    async fn register(&self, api: &Api, steps: SocketAddr, shape: ChainShape, limits: Option<Value>) {
        let mut input = &self.seed;
        for key in &self.steps {
            let mut step = json!({
                "id": key, "name": key, "type": "sync",
                "http": { "endpoint": format!("http://{steps}/{key}") },
                "attributes": {
                    input: { "role": "required", "type": "any" },
                    key: { "role": "output", "type": "any" },
                },
            });
            if let Some(limits) = &limits {
                step["limits"] = limits.clone();
            }
            if shape == ChainShape::Scripted {
                // A JSON string is a string in jpath and in Lua alike.
                let quoted = Value::from(input.as_str()).to_string();
                step["predicate"] = json!({ "language": "jpath", "script": format!("$[{quoted}]") });
                step["attributes"][input]["required"] = json!({ "mapping": { "script": {
                    "language": "lua", "script": format!("return _G[{quoted}]"),
                } } });
            }
            let (status, body) = api.post("/engine/step", &step).await;
            assert_eq!(status, 201, "registering {key}: {body}");
            input = key;
        }
    }

    /// Remove the run's steps (what fails is said, not fatal).
    async fn unregister(&self, api: &Api) {
        for key in self.steps.iter().rev() {
            let url = format!("{}/engine/step/{key}", api.base);
            match api.authed(api.client.delete(&url)).send().await {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => eprintln!("DELETE {url}: {}", r.status()),
                Err(e) => eprintln!("DELETE {url}: {e}"),
            }
        }
    }
}

/// A step server answering `POST /{key}` with `{"{key}": 1}` at once.
pub async fn step_server() -> SocketAddr {
    let app = axum::Router::new().fallback(|uri: Uri| async move {
        let key = uri.path().trim_start_matches('/').to_string();
        axum::Json(json!({ key: 1 }))
    });
    tartan_bench::serve(app).await
}

/// The status and JSON answer (null when it is not JSON) of `req`, which is
/// `what` (a method and URL) for the panic message when it gets no answer.
async fn answer(req: reqwest::RequestBuilder, what: &str) -> (u16, Value) {
    let r = req.send().await.unwrap_or_else(|e| panic!("{what}: {e}"));
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The server's API, with the bearer token when one is given.
#[derive(Clone)]
struct Api {
    client: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Api {
    fn authed(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => req.bearer_auth(token),
            None => req,
        }
    }

    async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        answer(
            self.authed(self.client.post(&url)).json(body),
            &format!("POST {url}"),
        )
        .await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        answer(self.authed(self.client.get(&url)), &format!("GET {url}")).await
    }
}

// ---------------------------------------------------------------------------
// Measuring.

/// What one side measured (µs).
pub struct Run {
    pub flows_per_s: f64,
    latency: Histogram,
    pub alone_p50_us: i64,
}

impl Run {
    fn line(&self, side: &str) -> String {
        format!(
            "load_api {side} flows_per_s={:.1} latency_ms_p50={} latency_ms_p99={} alone_ms_p50={}",
            self.flows_per_s,
            ms(self.latency.quantile(0.5)),
            ms(self.latency.quantile(0.99)),
            ms(self.alone_p50_us)
        )
    }
}

fn us(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// `flows` runs of `one` with `clients` in flight, then `alone` one after
/// another: throughput and latencies. `one` gets the flow's id and how often
/// to look whether it finished.
async fn measure<F, Fut>(args: &ApiArgs, flows: u64, prefix: &str, one: F) -> Run
where
    F: Fn(String, Duration) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let poll = Duration::from_millis(args.poll_ms);
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    // Dropped on a panic, the set aborts the other clients.
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..args.clients {
        let (next, one, prefix) = (next.clone(), one.clone(), prefix.to_string());
        tasks.spawn(async move {
            let mut took = Histogram::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= flows {
                    return took;
                }
                let t = Instant::now();
                one(format!("{prefix}-{i}"), poll).await;
                took.record(us(t.elapsed()));
            }
        });
    }
    let mut latency = Histogram::new();
    while let Some(took) = tasks.join_next().await {
        latency.merge(&took.unwrap_or_else(|e| panic!("client task: {e}")));
    }
    let wall = started.elapsed();
    let mut single = Histogram::new();
    for i in 0..args.alone {
        let t = Instant::now();
        let alone_poll = if poll.is_zero() {
            poll
        } else {
            Duration::from_millis(1)
        };
        one(format!("{prefix}-alone-{i}"), alone_poll).await;
        single.record(us(t.elapsed()));
    }
    Run {
        flows_per_s: flows as f64 / wall.as_secs_f64(),
        latency,
        alone_p50_us: single.quantile(0.5),
    }
}

/// The floor: the chain's three calls, made by the client itself.
async fn floor(args: &ApiArgs, chain: &Chain, steps: SocketAddr, client: reqwest::Client) -> Run {
    let (keys, seed) = (chain.steps.clone(), chain.seed.clone());
    measure(
        args,
        args.floor_flows,
        &format!("{}-floor", chain.prefix),
        move |id, _| {
            let (client, keys, seed) = (client.clone(), keys.clone(), seed.clone());
            async move {
                if let Err(e) = relay::call_chain(&client, steps, &keys, json!({ seed: id })).await {
                    panic!("{e}");
                }
            }
        },
    )
    .await
}

/// `flows` of the same flows, run through the API at `api`: Tartan's, or
/// the relay's (`relay.rs`), which answers the same two requests.
async fn through_api(args: &ApiArgs, flows: u64, prefix: &str, chain: &Chain, api: Api) -> Run {
    let (goal, seed) = (chain.goal().to_string(), chain.seed.clone());
    measure(args, flows, prefix, move |id, poll| {
        let (api, goal, seed) = (api.clone(), goal.clone(), seed.clone());
        async move {
            let start = json!({ "id": id, "goals": [goal], "init": { seed: [id] } });
            let (status, body) = api.post("/engine/flow", &start).await;
            assert_eq!(status, 201, "starting {id}: {body}");
            let path = if poll.is_zero() {
                format!("/engine/flow/{id}/status?wait=30s")
            } else {
                format!("/engine/flow/{id}/status")
            };
            loop {
                let (_, body) = api.get(&path).await;
                match body["status"].as_str() {
                    Some("active") => tokio::time::sleep(poll).await,
                    Some("completed") => return,
                    other => panic!("flow {id} ended {other:?}: {body}"),
                }
            }
        }
    })
    .await
}

// ---------------------------------------------------------------------------
// A `tartan serve` of this run.

/// A `tartan serve` child process; killed when dropped.
struct Spawned {
    child: Child,
    url: String,
}

impl Spawned {
    /// Start the binary on `database_url`, on a free port of 127.0.0.1 with
    /// no environment but its settings here, and wait until it is ready.
    async fn start(args: &ApiArgs, binary: &Path, database_url: &str) -> Spawned {
        if !binary.is_file() {
            panic!(
                "no tartan binary at {}: build it (cargo build --release --bin tartan) or pass --tartan",
                binary.display()
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap_or_else(|e| panic!("a free port: {e}"))
            .port();
        let listen = format!("127.0.0.1:{port}");
        let mut cmd = Command::new(binary);
        cmd.arg("serve")
            .env_clear()
            .env("TARTAN_DATABASE_URL", database_url)
            .env("TARTAN_LISTEN", &listen)
            .env("TARTAN_NODE_ID", format!("load-api-{}", std::process::id()))
            .env("TARTAN_STEP_HOSTS", "127.0.0.1")
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            // Its log on this tool's stderr; stdout is for the results.
            .stdout(Stdio::from(std::io::stderr()))
            .stderr(Stdio::inherit());
        if let Some(token) = &args.token {
            cmd.env("TARTAN_API_TOKEN", token);
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let mut spawned = Spawned {
            child,
            url: format!("http://{listen}"),
        };
        spawned.wait_ready().await;
        spawned
    }

    async fn wait_ready(&mut self) {
        let client = reqwest::Client::new();
        let url = format!("{}/ready", self.url);
        let began = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("tartan serve exited ({status}) before it was ready; its log is above");
            }
            if let Ok(r) = client.get(&url).send().await {
                if r.status().is_success() {
                    return;
                }
            }
            if began.elapsed() > READY_WAIT {
                panic!("tartan serve not ready at {url} after {READY_WAIT:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tartan` in this tool's directory (`target/<profile>/load`).
pub fn default_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("this tool's path: {e}"));
    exe.parent()
        .unwrap_or_else(|| panic!("no directory above {}", exe.display()))
        .join(format!("tartan{}", std::env::consts::EXE_SUFFIX))
}
