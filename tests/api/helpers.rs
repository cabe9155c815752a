//! The test harness: the real server on port 0 against a fresh database
//! (a SQLite file or a new Postgres database), typed helpers per route, and
//! step servers on 127.0.0.1:0 that record what they receive.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use serde_json::{json, Value};
use tartan_engine::{Engine, EngineConfig};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub use tartan_testkit::{Backend, TestDb};

/// The real server, in process, on 127.0.0.1:0.
pub struct TestApp {
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    pub engine: Engine,
    /// Dropping it stops the server.
    _stop: oneshot::Sender<()>,
    /// Dropped last: removes the database.
    _db: TestDb,
}

pub async fn spawn_app(backend: Backend) -> Option<TestApp> {
    let db = TestDb::create(backend).await?;
    Some(start_on(db, "test-node").await)
}

/// Start a server on an existing database (used for restarts).
pub async fn start_on(db: TestDb, node_id: &str) -> TestApp {
    start_on_with(db, node_id, |_| {}).await
}

/// Start a server whose API has tokens or CORS origins.
pub async fn start_secured(db: TestDb, node_id: &str, security: tartan_server::ApiSecurity) -> TestApp {
    start_app(db, node_id, security, |_| {}).await
}

/// A fresh app that asks for tokens: `full` may do anything, `read` only read.
pub async fn spawn_with_tokens(backend: Backend, full: &str, read: &str) -> Option<TestApp> {
    let db = TestDb::create(backend).await?;
    let security = tartan_server::ApiSecurity::new(&[full.into()], &[read.into()], &[])
        .unwrap_or_else(|e| panic!("security settings: {e}"));
    Some(start_secured(db, "test-node", security).await)
}

/// The same, with the engine's configuration adjusted by `adjust`.
pub async fn start_on_with(db: TestDb, node_id: &str, adjust: impl FnOnce(&mut EngineConfig)) -> TestApp {
    start_app(db, node_id, tartan_server::ApiSecurity::open(), adjust).await
}

async fn start_app(
    db: TestDb,
    node_id: &str,
    security: tartan_server::ApiSecurity,
    adjust: impl FnOnce(&mut EngineConfig),
) -> TestApp {
    let store = tartan_store::open(&db.url)
        .await
        .unwrap_or_else(|e| panic!("opening store: {e}"));
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("bind: {e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("addr: {e}"));
    let mut config = EngineConfig {
        node_id: node_id.into(),
        webhook_base_url: format!("http://{addr}"),
        step_timeout: Duration::from_secs(5),
        ..EngineConfig::default()
    };
    adjust(&mut config);
    let engine = Engine::start(config, store)
        .await
        .unwrap_or_else(|e| panic!("engine: {e}"));
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(tartan_server::serve(listener, engine.clone(), security, async {
        let _ = stopped.await;
    }));
    TestApp {
        addr,
        client: reqwest::Client::new(),
        engine,
        _stop: stop,
        _db: db,
    }
}

/// Read a response: the reply (body as JSON, else as a string) and the body's
/// length in bytes.
pub async fn read_reply(resp: reqwest::Response) -> (Reply, usize) {
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::IM_A_TEAPOT);
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let bytes = resp.bytes().await.unwrap_or_default();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
    };
    (
        Reply {
            status,
            content_type,
            body,
        },
        bytes.len(),
    )
}

/// A response: status, content type and JSON body (Null when empty).
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub content_type: String,
    pub body: Value,
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub async fn send(&self, method: Method, path: &str, body: Option<String>) -> Reply {
        let writes = method != Method::GET;
        let mut req = self.client.request(method, self.url(path));
        // Routes that change state take JSON only, with or without a body.
        if writes {
            req = req.header("Content-Type", "application/json");
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        let resp = req.send().await.unwrap_or_else(|e| panic!("request {path}: {e}"));
        read_reply(resp).await.0
    }

    /// The path of the signed webhook URL of a work item's first attempt
    /// (what the engine hands to the step), for requests a step would make.
    pub fn webhook_path(&self, flow: &str, step: &str, token: &str) -> String {
        let url = self.engine.flows().webhook_url(flow, step, token, 1);
        url.trim_start_matches(&format!("http://{}", self.addr))
            .to_string()
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.send(Method::POST, path, Some(body.to_string())).await
    }

    pub async fn register(&self, step: &Value) -> Reply {
        self.post("/engine/step", step).await
    }

    pub async fn start_flow(&self, body: &Value) -> Reply {
        self.post("/engine/flow", body).await
    }

    pub async fn flow(&self, id: &str) -> Value {
        let r = self.get(&format!("/engine/flow/{id}")).await;
        assert_eq!(r.status, StatusCode::OK, "GET flow {id}: {:?}", r.body);
        r.body
    }

    /// Poll until the flow is terminal and deactivated (bounded), then return it.
    pub async fn wait_for_flow(&self, id: &str) -> Value {
        for _ in 0..400 {
            let f = self.flow(id).await;
            if f["status"] != "active" && !f["deactivated_at"].is_null() {
                return f;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("flow {id} did not finish: {}", self.flow(id).await);
    }

    pub async fn event_types(&self, id: &str) -> Vec<String> {
        let r = self.get(&format!("/engine/flow/{id}/events")).await;
        r.body["events"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e["type"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// What a step server received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

type Handler = Arc<dyn Fn(Received, usize) -> BoxFuture<'static, Response> + Send + Sync>;

/// A step endpoint on 127.0.0.1:0 answering with `handler(request, n)`, where
/// n counts earlier requests to the same path.
pub struct StepServer {
    pub addr: SocketAddr,
    pub received: Arc<Mutex<Vec<Received>>>,
}

impl StepServer {
    /// A server whose answers are computed at once.
    pub async fn start(handler: impl Fn(&Received, usize) -> Response + Send + Sync + 'static) -> StepServer {
        Self::start_async(move |r, n| {
            let resp = handler(&r, n);
            Box::pin(async move { resp })
        })
        .await
    }

    /// A server whose answers may wait (hang, delay, rendezvous).
    pub async fn start_async(
        handler: impl Fn(Received, usize) -> BoxFuture<'static, Response> + Send + Sync + 'static,
    ) -> StepServer {
        let handler: Handler = Arc::new(handler);
        let received: Arc<Mutex<Vec<Received>>> = Arc::default();
        let counts: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let rec = received.clone();
        let app =
            axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let handler = handler.clone();
                let rec = rec.clone();
                let counts = counts.clone();
                async move {
                    let r = Received {
                        method,
                        path: uri.path().to_string(),
                        headers,
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                    };
                    let n = {
                        let mut c = counts.lock().unwrap_or_else(|p| p.into_inner());
                        let e = c.entry(r.path.clone()).or_insert(0);
                        *e += 1;
                        *e - 1
                    };
                    rec.lock().unwrap_or_else(|p| p.into_inner()).push(r.clone());
                    handler(r, n).await
                }
            });
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("addr: {e}"));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        StepServer { addr, received }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A step server whose calls of `/held` wait until the sender is set to
/// `true`; every call (held ones once released) answers `{"<path>": "done"}`
/// (`/s` answers `{"s": "done"}`).
pub async fn held_server() -> (tokio::sync::watch::Sender<bool>, StepServer) {
    let (release, held) = tokio::sync::watch::channel(false);
    let svc = StepServer::start_async(move |r, _| {
        let mut held = held.clone();
        Box::pin(async move {
            if r.path == "/held" {
                let _ = held.wait_for(|released| *released).await;
            }
            let key = r.path.trim_start_matches('/').to_string();
            json_reply(200, json!({ key: "done" }))
        })
    })
    .await;
    (release, svc)
}

/// `GET /engine/flow/{id}/status?wait=30s` on `app`, sent in a task of its
/// own; the task answers the reply.
pub fn waiting_status(app: &TestApp, id: &str) -> tokio::task::JoinHandle<Reply> {
    let (client, url) = (
        app.client.clone(),
        app.url(&format!("/engine/flow/{id}/status?wait=30s")),
    );
    tokio::spawn(async move {
        let resp = client
            .get(url)
            .send()
            .await
            .unwrap_or_else(|e| panic!("status: {e}"));
        read_reply(resp).await.0
    })
}

/// How many `work_succeeded` events flow `id` has, as `engine` serves them.
pub async fn work_succeeded(engine: &Binary, id: &str) -> usize {
    let (status, events) = call(
        engine,
        reqwest::Method::GET,
        &format!("/engine/flow/{id}/events"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{events}");
    events["events"].as_array().map_or(0, |all| {
        all.iter().filter(|e| e["type"] == "work_succeeded").count()
    })
}

/// A JSON response.
pub fn json_reply(status: u16, body: Value) -> Response {
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A sync step definition.
pub fn sync_step(id: &str, endpoint: &str, inputs: &[&str], outputs: &[&str]) -> Value {
    let mut attributes = serde_json::Map::new();
    for i in inputs {
        attributes.insert((*i).into(), json!({"role": "required", "type": "string"}));
    }
    for o in outputs {
        attributes.insert((*o).into(), json!({"role": "output", "type": "string"}));
    }
    json!({
        "id": id,
        "name": id,
        "type": "sync",
        "http": { "endpoint": endpoint },
        "attributes": attributes,
    })
}

/// The `tartan` binary, running: for what only a real process shows (SIGKILL,
/// SIGTERM, start-up configuration).
pub struct Binary {
    pub child: tokio::process::Child,
    pub addr: String,
    /// Every line it has logged so far.
    pub log: Arc<Mutex<Vec<String>>>,
}

/// A test that fails while an engine runs shows what the engine said: its
/// warnings and errors, then its last lines (a CI failure is otherwise
/// only the assertion).
impl Drop for Binary {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let notable: Vec<&String> = log
            .iter()
            .filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("\"level\":\"WARN"))
            .collect();
        eprintln!("--- engine {} ({} lines logged) ---", self.addr, log.len());
        for line in notable.iter().rev().take(30).rev() {
            eprintln!("{line}");
        }
        eprintln!("--- its last lines ---");
        for line in log.iter().rev().take(15).rev() {
            eprintln!("{line}");
        }
    }
}

/// Start `tartan serve` on 127.0.0.1:0 against `db`, with a stable node id
/// (a restart with the same id takes its own leases back at once).
pub async fn spawn_binary(db: &TestDb, node_id: &str) -> Binary {
    spawn_binary_with(db, node_id, &[]).await
}

/// The same, with extra environment (e.g. short leases).
pub async fn spawn_binary_with(db: &TestDb, node_id: &str, env: &[(&str, &str)]) -> Binary {
    spawn_serve(
        &[
            "--listen",
            "127.0.0.1:0",
            "--node-id",
            node_id,
            "--database-url",
            &db.url,
        ],
        env,
    )
    .await
}

/// Start `tartan serve` with these flags and extra environment; returns
/// once it logs `listening on <addr>`.
pub async fn spawn_serve(args: &[&str], env: &[(&str, &str)]) -> Binary {
    spawn_serve_under(None, args, env).await
}

/// The same, run by `sh` after `ulimit <ulimit>` (e.g. `-n 256`, soft and
/// hard, or `-Sn 256`, soft only) when given: a process with those limits.
pub async fn spawn_serve_under(ulimit: Option<&str>, args: &[&str], env: &[(&str, &str)]) -> Binary {
    spawn_program_under(env!("CARGO_BIN_EXE_tartan"), ulimit, args, env).await
}

/// `tartan serve` as `spawn_serve` starts it, from the binary at `program`
/// (another release's, say).
pub async fn spawn_program(program: &str, args: &[&str], env: &[(&str, &str)]) -> Binary {
    spawn_program_under(program, None, args, env).await
}

async fn spawn_program_under(
    program: &str,
    ulimit: Option<&str>,
    args: &[&str],
    env: &[(&str, &str)],
) -> Binary {
    use tokio::io::AsyncBufReadExt;
    let mut command = match ulimit {
        None => tokio::process::Command::new(program),
        Some(limits) => {
            // `exec`: the child's pid is tartan's own.
            let mut sh = tokio::process::Command::new("sh");
            sh.arg("-c")
                .arg(format!("ulimit {limits} && exec \"$0\" \"$@\""))
                .arg(program);
            sh
        }
    };
    command.envs(env.iter().copied());
    let mut child = command
        .arg("serve")
        .args(args)
        .env(
            "RUST_LOG",
            env.iter()
                .find(|(k, _)| *k == "RUST_LOG")
                .map_or("info", |(_, v)| v),
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawning tartan");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let keep = |line: &str| {
        log.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(line.to_string())
    };
    let addr = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            keep(&line);
            if let Some(rest) = line.split("listening on ").nth(1) {
                // Text lines end the address with a space, JSON lines with a quote.
                return rest
                    .split(|c: char| c.is_whitespace() || c == '"')
                    .next()
                    .map(str::to_string);
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .expect("tartan logs `listening on <addr>`");
    // Keep draining the log so the child never blocks on a full pipe.
    let kept = log.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            kept.lock().unwrap_or_else(|p| p.into_inner()).push(line);
        }
    });
    Binary { child, addr, log }
}

/// A request that takes longer than this fails the test (an engine that
/// hangs fails fast instead of holding the run): far above any request's
/// need, waits of `?wait=30s` included.
const CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// One request to a running binary: status and JSON body (Null when none).
pub async fn call(engine: &Binary, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let client = reqwest::Client::builder()
        .timeout(CALL_TIMEOUT)
        .build()
        .expect("client");
    let writes = method != reqwest::Method::GET;
    let mut req = client.request(method, format!("http://{}{path}", engine.addr));
    if writes {
        req = req.header("Content-Type", "application/json");
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req
        .send()
        .await
        .unwrap_or_else(|e| panic!("{path} on {}: {e}", engine.addr));
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// A flow's events, in order.
pub async fn events(app: &TestApp, id: &str) -> Vec<Value> {
    let r = app.get(&format!("/engine/flow/{id}/events")).await;
    assert_eq!(r.status, StatusCode::OK, "events of {id}: {:?}", r.body);
    r.body["events"].as_array().cloned().unwrap_or_default()
}

/// The events of one type.
pub fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// The types of the events, in order.
pub fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e["type"].as_str().map(String::from))
        .collect()
}

/// The flow once it is no longer active (or after two minutes).
pub async fn wait_for_terminal(engine: &Binary, id: &str) -> Value {
    // Waits on the flow's status, which costs the server little whatever
    // the flow holds, then reads the flow once: polling the whole flow of
    // a test with tens of MB of outputs kept a loaded machine's server
    // busy answering the polls.
    finished(engine, id, Duration::from_secs(120)).await;
    call(engine, reqwest::Method::GET, &format!("/engine/flow/{id}"), None)
        .await
        .1
}

/// The flow's status once it is no longer active, or after `limit`.
pub async fn finished(engine: &Binary, id: &str, limit: Duration) -> Value {
    let since = std::time::Instant::now();
    loop {
        let (_, status) = call(
            engine,
            reqwest::Method::GET,
            &format!("/engine/flow/{id}/status?wait=5s"),
            None,
        )
        .await;
        if status["status"] != "active" || since.elapsed() > limit {
            return status;
        }
    }
}

/// The receipt token of a call a step server received.
pub fn token_of(r: &Received) -> String {
    r.headers["argyll-receipt-token"]
        .to_str()
        .unwrap_or_default()
        .to_string()
}

/// The attempt number of a call a step server received.
pub fn attempt_of(r: &Received) -> u64 {
    r.headers["tartan-attempt"]
        .to_str()
        .unwrap_or("0")
        .parse()
        .unwrap_or(0)
}

/// Register `steps` on `engine`.
pub async fn register(engine: &Binary, steps: Vec<Value>) {
    for step in steps {
        let (status, body) = call(engine, reqwest::Method::POST, "/engine/step", Some(step)).await;
        assert_eq!(status, 201, "{body}");
    }
}

/// What every finished flow must show: completed; each work item succeeded
/// exactly once; every call the step server saw for it is in its event log.
/// Returns how many attempts were abandoned (cut off and called again).
pub async fn check_flow(engine: &Binary, id: &str, svc: &StepServer, items: usize) -> usize {
    let flow = wait_for_terminal(engine, id).await;
    assert_eq!(flow["status"], "completed", "{id}: {flow}");
    let events = call(
        engine,
        reqwest::Method::GET,
        &format!("/engine/flow/{id}/events"),
        None,
    )
    .await
    .1;
    let events = events["events"].as_array().cloned().unwrap_or_default();
    let mut succeeded: BTreeMap<String, usize> = BTreeMap::new();
    let mut started = BTreeSet::new();
    for e in &events {
        let token = e["data"]["token"].as_str().unwrap_or_default().to_string();
        match e["type"].as_str() {
            Some("work_succeeded") => *succeeded.entry(token).or_default() += 1,
            Some("work_started") => {
                started.insert((token, e["data"]["attempt"].as_u64().unwrap_or(0)));
            }
            _ => {}
        }
    }
    assert_eq!(succeeded.len(), items, "{id}: {succeeded:?}");
    assert!(succeeded.values().all(|n| *n == 1), "{id}: {succeeded:?}");
    for r in svc.requests() {
        let token = token_of(&r);
        if succeeded.contains_key(&token) {
            let attempt = attempt_of(&r);
            assert!(
                started.contains(&(token.clone(), attempt)),
                "{id}: call {token}#{attempt} is not in the event log"
            );
        }
    }
    flow["executions"]
        .as_object()
        .into_iter()
        .flat_map(|e| e.values())
        .flat_map(|x| x["work_items"].as_object().into_iter().flat_map(|w| w.values()))
        .flat_map(|w| w["attempts"].as_array().cloned().unwrap_or_default())
        .filter(|a| a["outcome"] == "abandoned")
        .count()
}

/// What a step server noted, once it holds `n` entries (bounded wait): a
/// webhook's answer is noted after the flow it completed, so a test that saw
/// the flow finish may look before it is there.
pub async fn noted<T: Clone>(notes: &Mutex<Vec<T>>, n: usize) -> Vec<T> {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let seen = notes.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if seen.len() >= n || std::time::Instant::now() > until {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// SIGTERM, and the process is gone within `within`, with success.
pub async fn sigterm_within(mut engine: Binary, within: Duration) {
    let pid = engine.child.id().expect("pid").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = tokio::time::timeout(within, engine.child.wait())
        .await
        .unwrap_or_else(|_| panic!("still running {within:?} after SIGTERM"))
        .expect("wait");
    assert!(status.success(), "exit status {status:?}");
}

/// Peak and current resident memory of a process, in KiB.
pub fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Run the `tartan` binary to its end with `args` and only the environment
/// `env`: whether it succeeded, its stdout and its stderr.
pub async fn run_tartan(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let out = tartan_output(args, env).await;
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run the `tartan` binary to its end with `args` and only the environment
/// `env` (at most a minute): what it exited with and wrote.
pub async fn tartan_output(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_tartan"))
            .args(args)
            .env_clear()
            .envs(env.iter().copied())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("tartan ends by itself")
    .expect("running tartan")
}

/// Run `tartan serve` expecting it to refuse to start: its exit status,
/// stdout and stderr.
pub async fn serve_refusing(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let args: Vec<&str> = std::iter::once("serve").chain(args.iter().copied()).collect();
    run_tartan(&args, env).await
}

/// The flags of a server that is never meant to get as far as its database.
pub const UNUSED_SERVER: [&str; 4] = [
    "--listen",
    "127.0.0.1:0",
    "--database-url",
    "sqlite://unused-never-created.db",
];

/// Three steps in a chain, the first held until `gate` is notified (or
/// not held, without one).
pub async fn three_steps(app: &TestApp, gate: Option<Arc<tokio::sync::Notify>>) -> StepServer {
    let svc = StepServer::start_async(move |r, _| {
        let gate = gate.clone();
        Box::pin(async move {
            match r.path.as_str() {
                "/a" => {
                    if let Some(gate) = gate {
                        gate.notified().await;
                    }
                    json_reply(200, json!({"x": "1"}))
                }
                "/b" => json_reply(200, json!({"y": "2"})),
                _ => json_reply(200, json!({"z": "3"})),
            }
        })
    })
    .await;
    for step in [
        sync_step("a", &svc.url("/a"), &["seed"], &["x"]),
        sync_step("b", &svc.url("/b"), &["x"], &["y"]),
        sync_step("c", &svc.url("/c"), &["y"], &["z"]),
    ] {
        assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    }
    svc
}

/// A flow's JSON without its work items' `late_results`, the one thing a
/// late result changes (it is recorded once per attempt).
pub fn without_late_notes(flow: &Value) -> Value {
    let mut flow = flow.clone();
    if let Some(execs) = flow.get_mut("executions").and_then(Value::as_object_mut) {
        for exec in execs.values_mut() {
            if let Some(items) = exec.get_mut("work_items").and_then(Value::as_object_mut) {
                for item in items.values_mut() {
                    if let Some(item) = item.as_object_mut() {
                        item.remove("late_results");
                    }
                }
            }
        }
    }
    flow
}

/// The bytes a test database takes: the SQLite file once its write-ahead
/// log is checkpointed into it (the log is cut back to 4 MiB on its own,
/// docs/durability.md), or the Postgres database's size.
pub async fn store_bytes(db: &TestDb) -> u64 {
    if let Some(path) = db.url.strip_prefix("sqlite://") {
        let pool = sqlx::SqlitePool::connect(&db.url).await.unwrap();
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
        return std::fs::metadata(path).map_or(0, |m| m.len());
    }
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let (size,): (i64,) = sqlx::query_as("SELECT pg_database_size(current_database())")
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    u64::try_from(size).unwrap_or(0)
}

/// The attempts of the (first) work item of `step` in a flow's state.
pub fn item_attempts(flow: &Value, step: &str) -> Vec<Value> {
    flow["executions"][step]["work_items"]
        .as_object()
        .and_then(|items| items.values().next())
        .and_then(|item| item["attempts"].as_array().cloned())
        .unwrap_or_default()
}

/// The one work item of `step` in a flow's state: the test fails when the
/// step has none, or more than one.
pub fn only_item<'a>(flow: &'a Value, step: &str) -> &'a Value {
    let items = flow["executions"][step]["work_items"]
        .as_object()
        .unwrap_or_else(|| panic!("no items of {step}: {flow}"));
    assert_eq!(items.len(), 1, "{flow}");
    items.values().next().unwrap_or(&Value::Null)
}

/// Wait, up to `limit`, until `done` holds; whether it did.
pub async fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while !done() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}
