//! Outages of what the engine depends on, and of its peers:
//! - Postgres restarts while calls are in flight: the engine reconnects,
//!   records the results it got meanwhile and carries on.
//! - Three engines share one Postgres: flows started on any of them complete,
//!   no work item is ever called by two processes at once (leases of long
//!   calls are renewed), and when one engine is killed the others take its
//!   work over with the same receipt token.
//! - Lease renewal that keeps failing stops the call before its lease can
//!   run out.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{
    attempt_of, call, check_flow, json_reply, register, spawn_binary_with, sync_step, token_of,
    wait_for_terminal, Backend, StepServer, TestDb,
};
use crate::timeouts::support::{Misbehaviour, RawStep};

/// A Postgres cluster of the test's own, on a free port, that the test may
/// stop and start (the machine's shared server must stay up for the others).
struct PrivatePostgres {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

impl PrivatePostgres {
    /// `None` when no Postgres server binaries are installed and `CI` is not
    /// set (said loudly); with `CI` set that is a failure.
    async fn start() -> Option<PrivatePostgres> {
        let Some(bin) = postgres_bin_dir() else {
            if std::env::var_os("CI").is_some() {
                panic!("no Postgres server binaries (initdb) under /usr/lib/postgresql and CI is set");
            }
            eprintln!("SKIPPED: no Postgres server binaries (initdb); this test ran on nothing");
            return None;
        };
        let dir = std::env::temp_dir().join(format!("tartan-pg-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let pg = PrivatePostgres { bin, dir, port };
        if is_root() {
            // initdb refuses to run as root: the cluster belongs to `postgres`.
            run("chown", &["-R", "postgres:postgres", pg.dir.to_str().unwrap()]).await;
        }
        let data = pg.data();
        pg.as_owner(
            "initdb",
            &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"],
        )
        .await;
        pg.ctl(&["start"]).await;
        Some(pg)
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// `pg_ctl <action>`, waiting for it to finish; fast shutdown cuts every
    /// session at once, as a crash or failover would.
    async fn ctl(&self, action: &[&str]) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("log").display().to_string();
        let data = self.data();
        let mut args = vec!["-D", &data, "-l", &log, "-w", "-m", "fast", "-o", &options];
        args.extend_from_slice(action);
        self.as_owner("pg_ctl", &args).await;
    }

    async fn as_owner(&self, tool: &str, args: &[&str]) {
        let tool = self.bin.join(tool).display().to_string();
        if is_root() {
            let mut all = vec!["-u", "postgres", "--", tool.as_str()];
            all.extend_from_slice(args);
            run("runuser", &all).await;
        } else {
            run(&tool, args).await;
        }
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let data = self.data();
        let pg_ctl = self.bin.join("pg_ctl").display().to_string();
        let mut stop = if is_root() {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--", &pg_ctl]);
            c
        } else {
            std::process::Command::new(&pg_ctl)
        };
        let _ = stop.args(["-D", &data, "-m", "immediate", "stop"]).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn postgres_bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop()
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

async fn run(program: &str, args: &[&str]) {
    let out = tokio::process::Command::new(program)
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Counts a call open on its token while it lives, however it ends (the
/// server drops the handler of a request whose client went away).
struct OpenCall {
    token: String,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

impl OpenCall {
    fn enter(token: String, open: Arc<Mutex<HashMap<String, usize>>>, overlaps: &Mutex<Vec<String>>) -> Self {
        let mut counts = open.lock().unwrap();
        let count = counts.entry(token.clone()).or_default();
        *count += 1;
        if *count > 1 {
            overlaps.lock().unwrap().push(token.clone());
        }
        drop(counts);
        OpenCall { token, open }
    }
}

impl Drop for OpenCall {
    fn drop(&mut self) {
        let mut counts = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = counts.get_mut(&self.token) {
            *count -= 1;
        }
    }
}

const RESTART_FLOWS: usize = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_rides_out_a_postgres_restart_mid_run() {
    let Some(pg) = PrivatePostgres::start().await else {
        return;
    };
    let db = TestDb::at_url(pg.url());
    // Calls of `b` are held until the database is down, so that all of them
    // are in flight at the stop and their results come back during it.
    let (release, held) = tokio::sync::watch::channel(false);
    let svc = StepServer::start_async(move |r, _| {
        let mut held = held.clone();
        Box::pin(async move {
            let key = r.path.trim_start_matches('/').to_string();
            if key == "b" {
                let _ = held.wait_for(|released| *released).await;
            }
            json_reply(200, json!({ key: "done" }))
        })
    })
    .await;
    // Leases outlast the outage: results that came back meanwhile are still
    // this engine's to record.
    let env = [("TARTAN_LEASE", "10s"), ("TARTAN_STEP_TIMEOUT", "3s")];
    let engine = spawn_binary_with(&db, "outage", &env).await;
    register(
        &engine,
        vec![
            sync_step("a", &svc.url("/a"), &["seed"], &["a"]),
            sync_step("b", &svc.url("/b"), &["a"], &["b"]),
        ],
    )
    .await;
    for i in 0..RESTART_FLOWS {
        let body = json!({"id": format!("pg-{i}"), "goals": ["b"], "init": {"seed": [i]}});
        let (status, reply) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(body)).await;
        assert_eq!(status, 201, "{reply}");
    }
    let all_held = Instant::now() + Duration::from_secs(30);
    while svc.requests().iter().filter(|r| r.path == "/b").count() < RESTART_FLOWS {
        assert!(Instant::now() < all_held, "the calls of b did not all arrive");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Every session is cut; the held calls answer meanwhile and their
    // results wait for the database. A client's read waits for a connection
    // a bounded time, then is told the database is unavailable.
    pg.ctl(&["stop"]).await;
    release.send_replace(true);
    let (status, body) = call(&engine, reqwest::Method::GET, "/engine/flow/pg-0", None).await;
    assert_eq!(status, 503, "a read while the database is down: {body}");
    assert_eq!(body["status"], 503, "{body}");
    // Longer than a connection is waited for: the engine's own commits of
    // those results fail, and must be tried again, not dropped.
    tokio::time::sleep(Duration::from_secs(3)).await;
    pg.ctl(&["start"]).await;

    let mut abandoned = 0;
    for i in 0..RESTART_FLOWS {
        abandoned += check_flow(&engine, &format!("pg-{i}"), &svc, 2).await;
    }
    // Results that came back during the outage were recorded once it was
    // over, not thrown away: every work item was called exactly once.
    assert_eq!(abandoned, 0, "attempts were cut off and made again");
    let mut per_token: BTreeMap<String, usize> = BTreeMap::new();
    for r in svc.requests() {
        *per_token.entry(token_of(&r)).or_default() += 1;
    }
    assert_eq!(per_token.len(), 2 * RESTART_FLOWS);
    assert!(
        per_token.values().all(|n| *n == 1),
        "calls per token: {per_token:?}"
    );
    // And new flows start on the restarted database.
    let body = json!({"id": "pg-after", "goals": ["b"], "init": {"seed": ["x"]}});
    let (status, reply) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(body)).await;
    assert_eq!(status, 201, "{reply}");
    check_flow(&engine, "pg-after", &svc, 2).await;
}

/// Notes when a call's handler ended, however it ended (answered, or
/// dropped because the engine closed the connection).
struct Ended(Arc<Mutex<Vec<Instant>>>);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Instant::now());
    }
}

/// A call that outlasts its lease many times over is kept alive by renewal;
/// when the database goes away and renewal keeps failing, the engine stops
/// the call itself, long before the step's own timeout, rather than let it
/// run on past a lease another process could take over (docs/durability.md,
/// "Leases"). Once the database is back, the item is called again under the
/// same token, never two calls at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_lease_renewal_stops_the_call_before_its_lease_runs_out() {
    let Some(pg) = PrivatePostgres::start().await else {
        return;
    };
    let db = TestDb::at_url(pg.url());
    let open: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let overlaps: Arc<Mutex<Vec<String>>> = Arc::default();
    let ended: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let (o, ov, en) = (open.clone(), overlaps.clone(), ended.clone());
    // The first call hangs (its step allows it a minute); the next answers.
    let svc = StepServer::start_async(move |r, n| {
        let (open, overlaps, ended) = (o.clone(), ov.clone(), en.clone());
        Box::pin(async move {
            let _open = OpenCall::enter(token_of(&r), open, &overlaps);
            let _ended = Ended(ended);
            if n == 0 {
                tokio::time::sleep(Duration::from_secs(120)).await;
            }
            json_reply(200, json!({ "long": "done" }))
        })
    })
    .await;
    // A lease is 1 s (the engine's attempt timeout) + 1 s, renewed every
    // 1/3 s; the call needs a minute.
    let env = [("TARTAN_LEASE", "1s"), ("TARTAN_STEP_TIMEOUT", "1s")];
    let engine = spawn_binary_with(&db, "renewal", &env).await;
    let mut long = sync_step("long", &svc.url("/long"), &["seed"], &["long"]);
    long["http"]["timeout"] = json!(60_000);
    register(&engine, vec![long]).await;
    let body = json!({"id": "renewed", "goals": ["long"], "init": {"seed": [1]}});
    let (status, reply) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(body)).await;
    assert_eq!(status, 201, "{reply}");
    let arrived = Instant::now() + Duration::from_secs(30);
    while svc.requests().is_empty() {
        assert!(Instant::now() < arrived, "the call did not arrive");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Past its first lease, the call is still running: renewal holds it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        ended.lock().unwrap().is_empty(),
        "the call ended while its lease was being renewed"
    );

    let stopped = Instant::now();
    pg.ctl(&["stop"]).await;
    // From here no renewal can succeed: the lease runs out at most 2 s on.
    let down = Instant::now();
    let until = stopped + Duration::from_secs(20);
    while ended.lock().unwrap().is_empty() {
        assert!(
            Instant::now() < until,
            "the call still runs 20 s after the database went away (its lease was 2 s)"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stop = ended.lock().unwrap()[0];
    assert!(stop >= stopped, "the call ended before the database went away");
    eprintln!(
        "the call was stopped {:?} after the database went away",
        stop - stopped
    );
    // Before the lease could run out (2 s), with slack for a loaded machine;
    // a renewal left to hang on its connection held the call 10 s.
    assert!(
        stop < down + Duration::from_secs(5),
        "the call ran {:?} after the database was down, past its 2 s lease",
        stop.saturating_duration_since(down)
    );

    pg.ctl(&["start"]).await;
    let abandoned = check_flow(&engine, "renewed", &svc, 1).await;
    assert_eq!(abandoned, 1, "the stopped attempt is recorded as abandoned");
    let requests = svc.requests();
    assert_eq!(requests.len(), 2, "called again once");
    assert_eq!(
        token_of(&requests[0]),
        token_of(&requests[1]),
        "under the same token"
    );
    assert_eq!((attempt_of(&requests[0]), attempt_of(&requests[1])), (1, 2));
    let overlaps = overlaps.lock().unwrap().clone();
    assert!(overlaps.is_empty(), "calls of one item overlapped: {overlaps:?}");
}

const SHARED_FLOWS: usize = 24;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_engines_share_one_postgres_without_calling_one_item_twice_at_once() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    // The step server notes, per receipt token, how many calls are open at
    // once. `long` outlasts a lease several times over (its lease must be
    // renewed, or another engine would take it); `flaky` fails one call in
    // three with 503, so retries are due while all three engines sweep.
    let open: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let overlaps: Arc<Mutex<Vec<String>>> = Arc::default();
    let (o, ov) = (open.clone(), overlaps.clone());
    let svc = StepServer::start_async(move |r, n| {
        let (open, overlaps) = (o.clone(), ov.clone());
        Box::pin(async move {
            let _open = OpenCall::enter(token_of(&r), open, &overlaps);
            let key = r.path.trim_start_matches('/').to_string();
            let delay = if key == "long" { 2_500 } else { 20 };
            tokio::time::sleep(Duration::from_millis(delay)).await;
            if key == "flaky" && n % 3 == 1 {
                return json_reply(503, json!({"detail": "flaky"}));
            }
            json_reply(200, json!({ key: "done" }))
        })
    })
    .await;
    // A lease is 1 s (attempt timeout) + 1 s: `long` needs it renewed twice.
    let env = [("TARTAN_LEASE", "1s"), ("TARTAN_STEP_TIMEOUT", "1s")];
    let mut engines = vec![
        spawn_binary_with(&db, "node-a", &env).await,
        spawn_binary_with(&db, "node-b", &env).await,
        spawn_binary_with(&db, "node-c", &env).await,
    ];
    let mut long = sync_step("long", &svc.url("/long"), &["seed"], &["long"]);
    long["http"]["timeout"] = json!(10_000);
    let mut flaky = sync_step("flaky", &svc.url("/flaky"), &["long"], &["flaky"]);
    flaky["work_config"] = json!({"max_retries": -1, "init_backoff": 50, "backoff_type": "fixed"});
    register(&engines[0], vec![long, flaky]).await;

    // Flows are started round-robin on all three.
    for i in 0..SHARED_FLOWS {
        let body = json!({"id": format!("shared-{i}"), "goals": ["flaky"], "init": {"seed": [i]}});
        let (status, reply) = call(&engines[i % 3], reqwest::Method::POST, "/engine/flow", Some(body)).await;
        assert_eq!(status, 201, "{reply}");
    }
    // Mid-run, while its long calls are open, node c dies.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let mut c = engines.pop().unwrap();
    c.child.kill().await.expect("SIGKILL node c");

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut abandoned = 0;
    for i in 0..SHARED_FLOWS {
        assert!(Instant::now() < deadline, "flows did not finish in time");
        abandoned += check_flow(&engines[i % 2], &format!("shared-{i}"), &svc, 2).await;
    }
    let overlaps = overlaps.lock().unwrap().clone();
    assert!(
        overlaps.is_empty(),
        "calls of one work item overlapped: {overlaps:?}"
    );
    // Node c's calls were taken over, with their receipt token.
    assert!(
        abandoned > 0,
        "no call of node c was cut off: the test proved nothing"
    );
    let requests = svc.requests();
    let retaken: Vec<String> = requests
        .iter()
        .filter(|r| r.path == "/long" && attempt_of(r) > 1)
        .map(token_of)
        .collect();
    assert!(!retaken.is_empty(), "no long call was made again");
    for token in &retaken {
        assert!(
            requests
                .iter()
                .any(|r| r.path == "/long" && attempt_of(r) == 1 && &token_of(r) == token),
            "{token} was called again under the same token"
        );
    }
}

/// More flows in progress than `TARTAN_MAX_ACTIVE_FLOWS`: a start is refused
/// with 503, `Retry-After` and a problem naming the limit, and creates
/// nothing; once flows finish, starts are taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_at_its_active_flow_limit_refuses_starts_with_retry_after() {
    let db = TestDb::create(Backend::Sqlite).await.unwrap();
    let (release, held) = tokio::sync::watch::channel(false);
    let svc = StepServer::start_async(move |_, _| {
        let mut held = held.clone();
        Box::pin(async move {
            let _ = held.wait_for(|released| *released).await;
            json_reply(200, json!({"out": "done"}))
        })
    })
    .await;
    let engine = spawn_binary_with(&db, "limited", &[("TARTAN_MAX_ACTIVE_FLOWS", "2")]).await;
    register(&engine, vec![sync_step("s", &svc.url("/s"), &["seed"], &["out"])]).await;
    let start = |id: &str| json!({"id": id, "goals": ["s"], "init": {"seed": ["x"]}});
    for id in ["held-1", "held-2"] {
        let (status, body) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(start(id))).await;
        assert_eq!(status, 201, "{body}");
    }

    let refused = reqwest::Client::new()
        .post(format!("http://{}/engine/flow", engine.addr))
        .json(&start("refused"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(refused.headers()["content-type"], "application/problem+json");
    let problem: Value = refused.json().await.unwrap();
    assert_eq!(problem["type"], "urn:tartan:problem:overloaded", "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("TARTAN_MAX_ACTIVE_FLOWS"),
        "{problem}"
    );
    let (status, _) = call(&engine, reqwest::Method::GET, "/engine/flow/refused", None).await;
    assert_eq!(status, 404, "a refused start creates nothing");

    release.send_replace(true);
    for id in ["held-1", "held-2"] {
        assert_eq!(wait_for_terminal(&engine, id).await["status"], "completed");
    }
    // The finished flows no longer count: starts are taken again.
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(start("refused")),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(wait_for_terminal(&engine, "refused").await["status"], "completed");
}

/// A flow cancelled through one engine aborts the call another engine is
/// making for it straight away (Postgres `NOTIFY`), not at that engine's
/// next lease renewal (`TARTAN_LEASE / 3`: 40 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_through_one_engine_aborts_the_call_another_is_making() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let raw = RawStep::start(Misbehaviour::HangBeforeHeaders).await;
    let env = [("TARTAN_LEASE", "120s")];
    let a = spawn_binary_with(&db, "node-a", &env).await;
    let b = spawn_binary_with(&db, "node-b", &env).await;
    let mut hang = sync_step("hang", &raw.url(), &[], &["out"]);
    hang["http"]["timeout"] = json!(120_000);
    register(&a, vec![hang]).await;
    let (status, body) = call(
        &a,
        reqwest::Method::POST,
        "/engine/flow",
        Some(json!({"id": "far", "goals": ["hang"]})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    raw.wait_for_calls(1).await;

    let (status, body) = call(&b, reqwest::Method::POST, "/engine/flow/far/cancel", None).await;
    assert_eq!(status, 202, "{body}");
    // Within the wait of `wait_all_closed` (10 s), well before a renewal.
    raw.wait_all_closed().await;
    let flow = wait_for_terminal(&a, "far").await;
    assert_eq!(flow["status"], "cancelled", "{flow}");
}

/// A limit that is not a whole number of at least 1 stops the server at
/// start-up, naming the variable.
#[tokio::test]
async fn invalid_limits_stop_the_server_at_start_naming_the_variable() {
    let db = TestDb::create(Backend::Sqlite).await.unwrap();
    for (name, value) in [
        ("TARTAN_MAX_ACTIVE_FLOWS", "0"),
        ("TARTAN_MAX_ACTIVE_FLOWS", "many"),
        ("TARTAN_MAX_STEP_ATTEMPTS", "-3"),
    ] {
        let (ok, _, stderr) = crate::helpers::serve_refusing(
            &["--listen", "127.0.0.1:0", "--database-url", &db.url],
            &[(name, value)],
        )
        .await;
        assert!(!ok, "{name}={value} was accepted");
        assert!(
            stderr.contains(name) && stderr.contains("at least 1"),
            "{name}={value}: {stderr}"
        );
    }
}
