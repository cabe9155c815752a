//! The edges of the server and of a process's life (docs/durability.md):
//! slow clients are cut off, a stopping engine hands its work to another at
//! once, a node id runs in one process at a time, leases hold on the
//! database's clock and for as long as a call runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{
    call, check_flow, json_reply, register, spawn_binary, spawn_binary_with, sync_step, Backend, StepServer,
    TestDb,
};
use tartan_testkit::both_backends;

both_backends!(a_node_id_runs_in_one_process_at_a_time);

/// Send `head` at once, then `trickle` one byte per second, and read what
/// the server answers until it closes the connection (or `bound` passes):
/// the answer, and when it came.
async fn trickle(addr: &str, head: &[u8], trickle: &'static [u8], bound: Duration) -> (String, Duration) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    write.write_all(head).await.unwrap();
    let started = Instant::now();
    let writer = tokio::spawn(async move {
        for b in trickle {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if write.write_all(&[*b]).await.is_err() {
                return;
            }
        }
    });
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(bound, async {
        let mut buf = [0u8; 4096];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    writer.abort();
    (String::from_utf8_lossy(&answer).into_owned(), started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trickling_its_headers_is_cut_off() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "edges-headers", &[("TARTAN_HEADER_TIMEOUT", "1s")]).await;
    // Sending all of it would take a minute: the connection must be closed
    // long before, and nothing served.
    let (answer, after) = trickle(
        &engine.addr,
        b"GET /health HTTP/1.1\r\nHo",
        b"st: example\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n",
        Duration::from_secs(8),
    )
    .await;
    assert!(
        after < Duration::from_secs(6),
        "connection still open after {after:?} (header timeout 1s)"
    );
    assert!(!answer.contains(" 200 "), "the request was served: {answer}");
    // The server itself is fine.
    assert_eq!(call(&engine, reqwest::Method::GET, "/health", None).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trickling_its_body_gets_a_408() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "edges-body", &[("TARTAN_BODY_TIMEOUT", "1s")]).await;
    let (answer, after) = trickle(
        &engine.addr,
        b"POST /engine/flow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
          Content-Length: 80\r\n\r\n{",
        b"\"id\": \"slow\", \"goals\": [\"nothing\"], \"init\": {}, \"labels\": {\"a\": \"bbbbbbbbbbbbbb\"}}",
        Duration::from_secs(8),
    )
    .await;
    assert!(
        after < Duration::from_secs(6),
        "no answer after {after:?} (body timeout 1s): {answer}"
    );
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("application/problem+json"), "{answer}");
    assert!(answer.contains("urn:tartan:problem:body-timeout"), "{answer}");
    assert_eq!(call(&engine, reqwest::Method::GET, "/health", None).await.0, 200);
}

/// A webhook is a request like any other: its body too must arrive within
/// `TARTAN_BODY_TIMEOUT`, and the work item keeps waiting for a real result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_trickling_its_webhook_body_gets_a_408() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "edges-webhook", &[("TARTAN_BODY_TIMEOUT", "1s")]).await;
    let svc = StepServer::start(|_, _| json_reply(202, json!({}))).await;
    let mut step = sync_step("later", &svc.url("/later"), &[], &["out"]);
    step["type"] = json!("async");
    register(&engine, vec![step]).await;
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(json!({"id": "slow-hook", "goals": ["later"]})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let mut hook = None;
    for _ in 0..500 {
        hook = svc.requests().first().and_then(|r| {
            r.headers
                .get("argyll-webhook-url")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        });
        if hook.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let hook = hook.expect("the step was called with a webhook URL");
    let path = hook
        .split_once(&engine.addr)
        .map(|(_, p)| p.to_string())
        .expect("a URL of this engine");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: 40\r\n\r\n{{"
    );
    let (answer, after) = trickle(
        &engine.addr,
        head.as_bytes(),
        b"\"out\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
        Duration::from_secs(20),
    )
    .await;
    assert!(
        after < Duration::from_secs(15),
        "no answer after {after:?} (body timeout 1s): {answer}"
    );
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("urn:tartan:problem:body-timeout"), "{answer}");
    let flow = call(&engine, reqwest::Method::GET, "/engine/flow/slow-hook", None)
        .await
        .1;
    assert_eq!(flow["status"], "active", "{flow}");
}

/// A step server whose paths answer `{"<path>": "done"}` after a delay
/// (`/quick` 400 ms, `/slow` and `/long` 3 s; `/flaky` fails its first call
/// per token with a 503), counting per path the calls that ran to their end
/// (an aborted call's handler is dropped before it counts).
async fn timed_steps(done: Arc<Mutex<HashMap<String, usize>>>) -> StepServer {
    let seen: Arc<Mutex<std::collections::HashSet<String>>> = Arc::default();
    StepServer::start_async(move |r, _| {
        let done = done.clone();
        let seen = seen.clone();
        Box::pin(async move {
            let key = r.path.trim_start_matches('/').to_string();
            let token = crate::helpers::token_of(&r);
            let pause = match key.as_str() {
                "quick" => 400,
                "flaky" => 0,
                _ => 3000,
            };
            tokio::time::sleep(Duration::from_millis(pause)).await;
            if key == "flaky" && seen.lock().unwrap().insert(token) {
                return json_reply(503, json!({"detail": "not yet"}));
            }
            *done.lock().unwrap().entry(key.clone()).or_default() += 1;
            json_reply(200, json!({ key: "done" }))
        })
    })
    .await
}

/// Two engines on one Postgres with a long lease; the one holding all the
/// work is stopped (SIGTERM) while calls run, results are due and a retry
/// waits: the other finishes everything long before the lease would have
/// let it, and what the stopped one finished within its grace is not redone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_engine_hands_its_work_to_another_at_once() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let done: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let svc = timed_steps(done.clone()).await;
    let env = [
        ("TARTAN_LEASE", "60s"),
        ("TARTAN_SHUTDOWN_GRACE", "1s"),
        ("TARTAN_RETRY_INITIAL_BACKOFF", "1500ms"),
        ("TARTAN_RETRY_BACKOFF_TYPE", "fixed"),
    ];
    let mut a = spawn_binary_with(&db, "edges-a", &env).await;
    let b = spawn_binary_with(&db, "edges-b", &env).await;
    register(
        &a,
        vec![
            sync_step("quick", &svc.url("/quick"), &["seed"], &["quick"]),
            sync_step("slow", &svc.url("/slow"), &["quick"], &["slow"]),
            sync_step("long", &svc.url("/long"), &["seed"], &["long"]),
            sync_step("flaky", &svc.url("/flaky"), &["seed"], &["flaky"]),
        ],
    )
    .await;
    const EACH: usize = 4;
    let mut ids = Vec::new();
    for goal in ["slow", "long", "flaky"] {
        for i in 0..EACH {
            let id = format!("{goal}-{i}");
            let (status, body) = call(
                &a,
                reqwest::Method::POST,
                "/engine/flow",
                Some(json!({"id": id, "goals": [goal], "init": {"seed": ["s"]}})),
            )
            .await;
            assert_eq!(status, 201, "{body}");
            ids.push(id);
        }
    }
    // Every first call is out: quick and long calls running, flaky ones
    // answered 503 and waiting for their retry.
    let until = Instant::now() + Duration::from_secs(10);
    let first_calls = || {
        let r = svc.requests();
        ["/quick", "/long", "/flaky"]
            .iter()
            .all(|p| r.iter().filter(|x| x.path == *p).count() >= EACH)
    };
    while !first_calls() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(first_calls(), "calls went out: {:?}", svc.requests().len());
    let stopped = Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &a.child.id().unwrap().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(10), a.child.wait())
        .await
        .expect("A exits within its grace and a little")
        .unwrap();
    assert!(status.success(), "exit status {status:?}");

    for id in &ids {
        check_flow(&b, id, &svc, 1 + usize::from(id.starts_with("slow"))).await;
    }
    let took = stopped.elapsed();
    // Without the hand-back B would wait for the lease (30 s attempt
    // timeout + 60 s); the slowest path here is a 3 s call started again.
    assert!(
        took < Duration::from_secs(15),
        "B finished the work {took:?} after A was stopped"
    );
    let done = done.lock().unwrap().clone();
    assert_eq!(
        done.get("quick"),
        Some(&EACH),
        "calls A finished within its grace are not repeated: {done:?}"
    );
    assert_eq!(done.get("flaky"), Some(&EACH), "{done:?}");
    // The long calls were cut off at the end of A's grace and made again on B.
    let long_calls = svc.requests().iter().filter(|r| r.path == "/long").count();
    assert_eq!(long_calls, 2 * EACH, "each long call cut off once and made again");
    let log = a.log.lock().unwrap().join("\n");
    assert!(log.contains("handed back"), "{log}");
}

/// A second process under a node id that is live on the same database is
/// refused, naming the id and the way out; once the first is killed, the
/// id starts again at once. On SQLite any second process is refused (one
/// process serves the file), naming the file.
async fn a_node_id_runs_in_one_process_at_a_time(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let mut first = spawn_binary(&db, "twin-node").await;
    let second = |node: &'static str| {
        let url = db.url.clone();
        async move {
            let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_tartan"))
                .args([
                    "serve",
                    "--listen",
                    "127.0.0.1:0",
                    "--node-id",
                    node,
                    "--database-url",
                    &url,
                ])
                .env("RUST_BACKTRACE", "1")
                .kill_on_drop(true)
                .output();
            let out = tokio::time::timeout(Duration::from_secs(20), run)
                .await
                .expect("the second process exits instead of serving")
                .unwrap();
            assert!(!out.status.success(), "{:?}", out.status);
            String::from_utf8_lossy(&out.stderr).into_owned()
        }
    };
    let said = second("twin-node").await;
    assert!(!said.contains("stack backtrace"), "{said}");
    match backend {
        Backend::Postgres => {
            assert!(said.contains("\"twin-node\""), "{said}");
            assert!(said.contains("TARTAN_NODE_ID"), "{said}");
        }
        Backend::Sqlite => {
            let file = db.url.trim_start_matches("sqlite://");
            assert!(
                said.contains("error: another tartan process serves the SQLite database"),
                "{said}"
            );
            assert!(said.contains(file), "{said}");
        }
    }
    // The first one was not disturbed.
    assert_eq!(call(&first, reqwest::Method::GET, "/health", None).await.0, 200);
    // Another id on the same database is fine on Postgres; on SQLite it is
    // refused too.
    if backend == Backend::Postgres {
        let other = spawn_binary(&db, "other-node").await;
        assert_eq!(call(&other, reqwest::Method::GET, "/health", None).await.0, 200);
    } else {
        let said = second("other-node").await;
        assert!(said.contains("SQLite is for one process"), "{said}");
    }
    first.child.kill().await.unwrap();
    let again = spawn_binary(&db, "twin-node").await;
    assert_eq!(call(&again, reqwest::Method::GET, "/health", None).await.0, 200);
}

/// A step whose own attempt timeout is longer than the lease, and whose call
/// outlasts the lease many times over, keeps its lease (renewed while it
/// runs): the second engine on the database never takes it over, and the
/// step is called exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_longer_than_the_lease_keeps_its_lease() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let svc = StepServer::start_async(|_, _| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(4)).await;
            json_reply(200, json!({"patient": "done"}))
        })
    })
    .await;
    let env = [("TARTAN_LEASE", "1s"), ("TARTAN_STEP_TIMEOUT", "500ms")];
    let a = spawn_binary_with(&db, "edges-long-a", &env).await;
    let b = spawn_binary_with(&db, "edges-long-b", &env).await;
    let mut step = sync_step("patient", &svc.url("/patient"), &["seed"], &["patient"]);
    step["http"]["timeout"] = json!(10_000);
    register(&a, vec![step]).await;
    let (status, body) = call(
        &a,
        reqwest::Method::POST,
        "/engine/flow",
        Some(json!({"id": "long-call", "goals": ["patient"], "init": {"seed": ["s"]}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    check_flow(&b, "long-call", &svc, 1).await;
    assert_eq!(svc.requests().len(), 1, "the call was made once, not taken over");
}
