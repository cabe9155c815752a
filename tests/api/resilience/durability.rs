//! What survives: events reproduce the projection; a killed engine resumes
//! its flows with the same receipt tokens; SIGTERM stops cleanly.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;
use tartan_core::flow::FlowState;

use crate::helpers::{
    call, json_reply, spawn_app, spawn_binary, spawn_binary_with, sync_step, wait_for_terminal,
    work_succeeded, Backend, StepServer, TestDb,
};
use tartan_testkit::both_backends;

both_backends!(
    replaying_a_flows_events_reproduces_its_projection,
    a_flow_survives_sigkill_and_resumes_with_the_same_token,
    a_scheduled_retry_survives_sigkill_and_fires_at_its_time,
);

async fn replaying_a_flows_events_reproduces_its_projection(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/a" => json_reply(200, json!({"mid": 1})),
        "/b" => json_reply(200, json!({"out": [1, 2]})),
        _ => json_reply(500, json!({"detail": "boom"})),
    })
    .await;
    let mut a = sync_step("a", &svc.url("/a"), &["seed"], &["mid"]);
    a["attributes"]["mid"]["type"] = json!("number");
    let mut b = sync_step("b", &svc.url("/b"), &["mid"], &["out"]);
    b["attributes"]["mid"]["type"] = json!("number");
    b["attributes"]["out"]["type"] = json!("array");
    // c keeps failing: two quick retries, then the flow fails. The replay
    // covers retry events too.
    let mut c = sync_step("c", &svc.url("/c"), &["seed"], &["other"]);
    c["work_config"] = json!({"max_retries": 2, "init_backoff": 10, "backoff_type": "fixed"});
    for s in [&a, &b, &c] {
        assert_eq!(app.register(s).await.status, StatusCode::CREATED);
    }
    app.start_flow(&json!({"id": "ok", "goals": ["b"], "init": {"seed": ["s"]}, "labels": {"k": "v"}}))
        .await;
    app.start_flow(&json!({"id": "bad", "goals": ["b", "c"], "init": {"seed": ["s"]}}))
        .await;
    for id in ["ok", "bad"] {
        let projection = app.wait_for_flow(id).await;
        let stored = app.engine.store().flow_events(id).await.unwrap();
        let events: Vec<_> = stored
            .iter()
            .map(|e| (tartan_store::event_of(e).unwrap(), e.timestamp))
            .collect();
        let replayed = FlowState::replay(events.iter().map(|(e, t)| (e, *t))).unwrap();
        assert_eq!(serde_json::to_value(&replayed).unwrap(), projection, "flow {id}");
    }
}

/// A step server whose first call of /slow never answers; later calls, and
/// every other path, answer `{"<path>": "done"}`.
async fn slow_first_call() -> StepServer {
    StepServer::start_async(|r, n| {
        Box::pin(async move {
            if r.path == "/slow" && n == 0 {
                std::future::pending::<()>().await;
            }
            let key = r.path.trim_start_matches('/').to_string();
            json_reply(200, json!({ key: "done" }))
        })
    })
    .await
}

async fn a_flow_survives_sigkill_and_resumes_with_the_same_token(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let svc = slow_first_call().await;
    let engine = spawn_binary(&db, "kill-test").await;
    for step in [
        sync_step("fast", &svc.url("/fast"), &["seed"], &["fast"]),
        sync_step("slow", &svc.url("/slow"), &["fast"], &["slow"]),
        sync_step("last", &svc.url("/last"), &["slow"], &["last"]),
    ] {
        assert_eq!(
            call(&engine, reqwest::Method::POST, "/engine/step", Some(step))
                .await
                .0,
            201
        );
    }
    let (status, _) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(json!({"id": "k", "goals": ["last"], "init": {"seed": ["s"]}})),
    )
    .await;
    assert_eq!(status, 201);
    for _ in 0..200 {
        if svc.requests().iter().any(|r| r.path == "/slow") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        svc.requests().iter().any(|r| r.path == "/slow"),
        "the slow step was called"
    );
    let mut engine = engine;
    engine.child.kill().await.expect("SIGKILL");

    let engine = spawn_binary(&db, "kill-test").await;
    let flow = wait_for_terminal(&engine, "k").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let slow: Vec<_> = svc.requests().into_iter().filter(|r| r.path == "/slow").collect();
    assert_eq!(slow.len(), 2, "called again after the restart");
    assert_eq!(
        slow[0].headers["argyll-receipt-token"],
        slow[1].headers["argyll-receipt-token"]
    );
    assert_eq!(slow[0].headers["tartan-attempt"], "1");
    assert_eq!(slow[1].headers["tartan-attempt"], "2");
    let fast = svc.requests().into_iter().filter(|r| r.path == "/fast").count();
    assert_eq!(fast, 1, "completed work is not redone");
    let token = slow[0].headers["argyll-receipt-token"]
        .to_str()
        .unwrap()
        .to_string();
    let attempts = &flow["executions"]["slow"]["work_items"][&token]["attempts"];
    assert_eq!(attempts[0]["outcome"], "abandoned", "{attempts}");
    assert_eq!(attempts[1]["outcome"], "success");
    assert_eq!(
        work_succeeded(&engine, "k").await,
        3,
        "each work item succeeded exactly once"
    );
}

#[tokio::test]
async fn sigterm_stops_the_server_cleanly() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let engine = spawn_binary(&db, "kill-test").await;
    assert_eq!(call(&engine, reqwest::Method::GET, "/health", None).await.0, 200);
    crate::helpers::sigterm_within(engine, Duration::from_secs(15)).await;
}

async fn a_scheduled_retry_survives_sigkill_and_fires_at_its_time(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    // The first call fails with 503; the retry, 1.5 s later, succeeds.
    let svc = StepServer::start(|_, n| {
        if n == 0 {
            json_reply(503, json!({"detail": "warming up"}))
        } else {
            json_reply(200, json!({"out": "ok"}))
        }
    })
    .await;
    let engine = spawn_binary(&db, "kill-test").await;
    let mut step = sync_step("flaky", &svc.url("/flaky"), &["seed"], &["out"]);
    step["work_config"] = json!({"max_retries": 3, "init_backoff": 1500, "backoff_type": "fixed"});
    assert_eq!(
        call(&engine, reqwest::Method::POST, "/engine/step", Some(step))
            .await
            .0,
        201
    );
    let start = json!({"id": "r", "goals": ["flaky"], "init": {"seed": ["s"]}});
    assert_eq!(
        call(&engine, reqwest::Method::POST, "/engine/flow", Some(start))
            .await
            .0,
        201
    );
    let mut scheduled = false;
    for _ in 0..200 {
        let (_, events) = call(&engine, reqwest::Method::GET, "/engine/flow/r/events", None).await;
        if events["events"]
            .as_array()
            .is_some_and(|a| a.iter().any(|e| e["type"] == "work_retry_scheduled"))
        {
            scheduled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(scheduled, "the 503 scheduled a retry");
    let mut engine = engine;
    engine.child.kill().await.expect("SIGKILL");

    let engine = spawn_binary(&db, "kill-test").await;
    let flow = wait_for_terminal(&engine, "r").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let calls = svc.requests();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[0].headers["argyll-receipt-token"],
        calls[1].headers["argyll-receipt-token"]
    );
    let work = flow["executions"]["flaky"]["work_items"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    let attempts = work["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["outcome"], "retryable");
    assert_eq!(attempts[0]["http_status"], 503);
    assert_eq!(attempts[0]["delay"]["delay_ms"], 1500);
    let ended: chrono::DateTime<chrono::Utc> = attempts[0]["ended_at"].as_str().unwrap().parse().unwrap();
    let retried: chrono::DateTime<chrono::Utc> = attempts[1]["started_at"].as_str().unwrap().parse().unwrap();
    let waited = (retried - ended).num_milliseconds();
    // Not early; late by no more than the restart (generous bound).
    assert!(waited >= 1500, "retry fired after {waited} ms");
    assert!(waited < 10_000, "retry fired after {waited} ms");
    assert_eq!(work["retry_count"], 1);
}

/// Two engines share one Postgres database: flows started on either complete,
/// and when one dies mid-call the other takes its work over once the lease
/// expires, with the same receipt token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_share_one_postgres_and_one_takes_over_when_the_other_dies() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let svc = slow_first_call().await;
    // Short leases: a dead node's calls are taken over within seconds.
    let env = [("TARTAN_LEASE", "1s"), ("TARTAN_STEP_TIMEOUT", "2s")];
    let a = spawn_binary_with(&db, "node-a", &env).await;
    let b = spawn_binary_with(&db, "node-b", &env).await;
    let mut slow = sync_step("slow", &svc.url("/slow"), &["seed"], &["slow"]);
    slow["http"]["timeout"] = json!(60_000);
    slow["work_config"] = json!({"max_retries": 1, "init_backoff": 10});
    assert_eq!(
        call(&a, reqwest::Method::POST, "/engine/step", Some(slow))
            .await
            .0,
        201
    );
    let fast = sync_step("fast", &svc.url("/fast"), &["seed"], &["fast"]);
    // Registered on b: the catalog is shared.
    assert_eq!(
        call(&b, reqwest::Method::POST, "/engine/step", Some(fast))
            .await
            .0,
        201
    );

    let start = |id: &str, goal: &str| json!({"id": id, "goals": [goal], "init": {"seed": ["s"]}});
    assert_eq!(
        call(
            &b,
            reqwest::Method::POST,
            "/engine/flow",
            Some(start("on-b", "fast"))
        )
        .await
        .0,
        201
    );
    assert_eq!(
        call(
            &a,
            reqwest::Method::POST,
            "/engine/flow",
            Some(start("on-a", "slow"))
        )
        .await
        .0,
        201
    );
    for _ in 0..200 {
        if svc.requests().iter().any(|r| r.path == "/slow") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut a = a;
    a.child.kill().await.expect("SIGKILL node a");

    let flow = wait_for_terminal(&b, "on-a").await;
    assert_eq!(flow["status"], "completed", "node b took the work over: {flow}");
    let slow_calls: Vec<_> = svc.requests().into_iter().filter(|r| r.path == "/slow").collect();
    assert_eq!(slow_calls.len(), 2);
    assert_eq!(
        slow_calls[0].headers["argyll-receipt-token"],
        slow_calls[1].headers["argyll-receipt-token"]
    );
    let other = call(&b, reqwest::Method::GET, "/engine/flow/on-b", None).await.1;
    assert_eq!(other["status"], "completed", "{other}");
    let work = call(&b, reqwest::Method::GET, "/engine/flow/on-a/work", None)
        .await
        .1;
    assert_eq!(work["work_items"][0]["status"], "succeeded", "{work}");
}
