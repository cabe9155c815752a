//! While the database takes no writes (see the module above).

use std::time::Duration;

use serde_json::{json, Value};

use super::{
    completes, metrics, ready, registered, set_read_only, set_read_only_cutting, start_held, with_steps,
};
use crate::helpers::{
    call, held_server, json_reply, sync_step, wait_for_terminal, Backend, StepServer, TestDb,
};

/// `/ready` is false, writes are answered `503` with `Retry-After`, reads
/// go on, a result that comes back meanwhile is kept, the outage is marked,
/// and the engine neither crashes nor exits; once writes are taken again it
/// is ready and starts and finishes flows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_takes_no_writes_is_not_ready_and_writes_wait_for_it() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    // /held answers once released: its result comes back while the
    // database takes no writes.
    let (release, svc) = held_server().await;
    let engine = with_steps(&db, "read-only", &svc).await;
    let start = |id: &str| json!({"id": id, "goals": ["s"], "init": {"seed": ["x"]}});
    completes(&engine, start("before")).await;
    start_held(&engine, &svc, "held").await;
    assert_eq!(ready(&engine.addr).await.0, 200);

    set_read_only(&db, true).await;
    let mut answer = ready(&engine.addr).await;
    for _ in 0..300 {
        if answer.0 == 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        answer = ready(&engine.addr).await;
    }
    let (status, retry, problem) = answer;
    assert_eq!(status, 503, "{problem}");
    assert_eq!(retry.as_deref(), Some("5"));
    assert_eq!(problem["type"], "urn:tartan:problem:unavailable", "{problem}");
    assert!(
        problem["detail"].as_str().unwrap().contains("takes no writes"),
        "{problem}"
    );
    let during = metrics(&engine.addr).await;
    assert!(
        during.lines().any(|l| l == "tartan_database_unavailable 1"),
        "{during}"
    );
    // A write: 503 with Retry-After, a problem, and nothing created.
    let refused = reqwest::Client::new()
        .post(format!("http://{}/engine/flow", engine.addr))
        .json(&start("during"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().contains_key("retry-after"));
    let problem: Value = refused.json().await.unwrap();
    assert_eq!(problem["type"], "urn:tartan:problem:unavailable", "{problem}");
    // Reads go on.
    let (status, flow) = call(&engine, reqwest::Method::GET, "/engine/flow/before", None).await;
    assert_eq!(status, 200, "{flow}");
    assert_eq!(flow["status"], "completed");
    let (status, _) = call(&engine, reqwest::Method::GET, "/engine/flow/during", None).await;
    assert_eq!(status, 404, "a refused start creates nothing");
    // The held call ends now: its result cannot be written yet, and is
    // kept until it can.
    release.send_replace(true);
    tokio::time::sleep(Duration::from_millis(500)).await;

    set_read_only(&db, false).await;
    let mut status = 0;
    for _ in 0..300 {
        status = ready(&engine.addr).await.0;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200, "ready again once writes are taken");
    completes(&engine, start("after")).await;
    // The result that came back meanwhile is recorded: called once.
    assert_eq!(wait_for_terminal(&engine, "held").await["status"], "completed");
    let held_calls = svc.requests().iter().filter(|r| r.path == "/held").count();
    assert_eq!(held_calls, 1, "the result was kept, not the call made again");
    // The outage is marked: one, over, logged as it began and as it ended.
    let metrics = metrics(&engine.addr).await;
    for line in ["tartan_database_unavailable 0", "tartan_database_outages_total 1"] {
        assert!(metrics.lines().any(|l| l == line), "{line} in {metrics}");
    }
    let log = engine.log.lock().unwrap().join("\n");
    assert!(log.contains("database outage began"), "{log}");
    assert!(log.contains("database outage ended after"), "{log}");
    let mut engine = engine;
    assert!(
        engine.child.try_wait().unwrap().is_none(),
        "the engine never exited"
    );
}

/// Connections opened while the database took no writes (to a standby,
/// through a proxy or a DNS name not yet moved to the new primary) are not
/// kept once writes are taken again: their sessions would refuse every
/// write until the pool closed them for being idle. Here the database
/// takes writes again while the engine's sessions, opened read-only, stay
/// open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_reached_a_standby_are_not_reused() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let (_release, svc) = held_server().await;
    let engine = with_steps(&db, "standby", &svc).await;
    let start = |id: &str| json!({"id": id, "goals": ["s"], "init": {"seed": ["x"]}});
    set_read_only(&db, true).await;
    // The engine's pool fills with read-only sessions.
    let mut refused = 0;
    for i in 0..100 {
        let (status, _) = call(
            &engine,
            reqwest::Method::POST,
            "/engine/flow",
            Some(start(&format!("ro-{i}"))),
        )
        .await;
        if status == 503 {
            refused += 1;
            if refused == 5 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(refused, 5, "starts are refused while no writes are taken");
    // Readiness checks at once: the pool opens as many sessions.
    let checks: Vec<_> = (0..16).map(|_| ready(&engine.addr)).collect();
    for (status, _, _) in futures::future::join_all(checks).await {
        assert_eq!(status, 503);
    }

    set_read_only_cutting(&db, false, false).await;
    let mut answers = Vec::new();
    for _ in 0..100 {
        let (status, body) = call(
            &engine,
            reqwest::Method::POST,
            "/engine/flow",
            Some(start("after")),
        )
        .await;
        answers.push(status);
        if status == 201 {
            break;
        }
        assert_eq!(status, 503, "{body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(answers.last(), Some(&201), "{answers:?}");
    // One refusal: the session it reached is found read-only, and the
    // others opened before it are not handed out again.
    assert!(answers.len() <= 2, "taken after one refusal: {answers:?}");
    assert_eq!(wait_for_terminal(&engine, "after").await["status"], "completed");
    assert_eq!(ready(&engine.addr).await.0, 200);
}

/// A bulk retry job running while the database takes no writes waits for
/// it: every flow is retried once writes come back, none is marked failed
/// for the outage, and each is retried once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_job_waits_out_a_database_that_takes_no_writes() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    const FLOWS: usize = 12;
    // `/f` refuses (400) until `fixed` is set, then answers.
    let fixed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let svc = {
        let fixed = fixed.clone();
        StepServer::start(move |_, _| {
            if fixed.load(std::sync::atomic::Ordering::SeqCst) {
                json_reply(200, json!({"f": "done"}))
            } else {
                json_reply(400, json!({"error": "not yet"}))
            }
        })
        .await
    };
    let engine = registered(
        &db,
        "bulk",
        &[],
        vec![sync_step("f", &svc.url("/f"), &[], &["f"])],
    )
    .await;
    for i in 0..FLOWS {
        let start = json!({"id": format!("b-{i}"), "goals": ["f"], "labels": {"batch": "outage"}});
        let (status, body) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
        assert_eq!(status, 201, "{body}");
    }
    for i in 0..FLOWS {
        assert_eq!(
            wait_for_terminal(&engine, &format!("b-{i}")).await["status"],
            "failed"
        );
    }
    fixed.store(true, std::sync::atomic::Ordering::SeqCst);
    // Four flows a second: the outage falls in the middle of the job.
    let retry = json!({"filter": {"labels": {"batch": "outage"}}, "rate": 4});
    let (status, job) = call(&engine, reqwest::Method::POST, "/engine/bulk/retry", Some(retry)).await;
    assert_eq!(status, 202, "{job}");
    let path = format!("/engine/bulk/{}", job["id"].as_str().unwrap());
    let started = crate::helpers::wait_until(Duration::from_secs(30), || svc.requests().len() > FLOWS).await;
    assert!(started, "the job retries a first flow");
    set_read_only(&db, true).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    set_read_only(&db, false).await;

    let mut job = Value::Null;
    for _ in 0..600 {
        job = call(&engine, reqwest::Method::GET, &path, None).await.1;
        if job["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(job["status"], "completed", "{job}");
    let counts = (&job["done"], &job["skipped"], &job["failed"]);
    assert_eq!(counts, (&json!(FLOWS), &json!(0), &json!(0)), "{job}");
    for i in 0..FLOWS {
        let flow = wait_for_terminal(&engine, &format!("b-{i}")).await;
        assert_eq!(flow["status"], "completed", "{flow}");
    }
    assert_eq!(svc.requests().len(), 2 * FLOWS, "each flow retried once");
}

/// A retry that falls due while the database takes no writes is made as
/// soon as writes are taken again, not at the next sweep (every 30 s
/// here): its timer is armed again shortly each time it finds the
/// database unreachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_due_during_an_outage_is_made_once_the_database_is_back() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    // `/r` answers 503 to its first call, then 200; each call's time noted.
    let calls: std::sync::Arc<std::sync::Mutex<Vec<std::time::Instant>>> = Default::default();
    let svc = {
        let calls = calls.clone();
        StepServer::start(move |_, n| {
            calls.lock().unwrap().push(std::time::Instant::now());
            if n == 0 {
                json_reply(503, json!({"error": "later"}))
            } else {
                json_reply(200, json!({"r": "done"}))
            }
        })
        .await
    };
    let mut step = sync_step("r", &svc.url("/r"), &[], &["r"]);
    step["work_config"] = json!({"backoff_type": "fixed", "init_backoff": 2000, "max_retries": 3});
    let engine = registered(&db, "retry-outage", &[], vec![step]).await;
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(json!({"id": "r", "goals": ["r"]})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let first =
        crate::helpers::wait_until(Duration::from_secs(30), || calls.lock().unwrap().len() == 1).await;
    assert!(first, "the first call is made");
    // The retry falls due 2 s after the first call, while no writes are taken.
    set_read_only(&db, true).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        calls.lock().unwrap().len(),
        1,
        "no retry while no writes are taken"
    );
    set_read_only(&db, false).await;
    let back = std::time::Instant::now();
    assert_eq!(wait_for_terminal(&engine, "r").await["status"], "completed");
    let made = calls.lock().unwrap()[1];
    let after = made.saturating_duration_since(back);
    assert!(
        after < Duration::from_secs(10),
        "the retry was made {after:?} after writes were taken again"
    );
}
