//! Active flows are counted exactly: every path that ends a decision lets
//! go of what it holds, so `TARTAN_MAX_ACTIVE_FLOWS` is never used up by
//! flows that are over (docs/durability.md, "Overload"). Each test runs the
//! real binary at `TARTAN_MAX_ACTIVE_FLOWS=3`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{
    call, json_reply, register, spawn_binary_with, sync_step, wait_for_terminal, Backend, Binary, StepServer,
    TestDb,
};
use tartan_testkit::both_backends;

both_backends!(
    flow_deadlines_firing_after_the_flows_completed_release_their_places,
    timers_heartbeats_and_webhooks_of_cancelled_flows_release_their_places,
    racing_identical_starts_release_their_places,
    timers_of_finished_flows_leave_memory,
);

const LIMIT: &[(&str, &str)] = &[("TARTAN_MAX_ACTIVE_FLOWS", "3")];

async fn start(engine: &Binary, body: Value) -> (u16, Value) {
    call(engine, reqwest::Method::POST, "/engine/flow", Some(body)).await
}

async fn health_detail(engine: &Binary, name: &str) -> u64 {
    let (status, health) = call(engine, reqwest::Method::GET, "/health", None).await;
    assert_eq!(status, 200, "{health}");
    health["details"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("/health shows no {name}: {health}"))
}

async fn active_flows(engine: &Binary) -> u64 {
    health_detail(engine, "active_flows").await
}

/// The count drops to 0 (bounded wait: the last decisions may still run).
async fn assert_no_active_flows(engine: &Binary) {
    let mut n = u64::MAX;
    for _ in 0..100 {
        n = active_flows(engine).await;
        if n == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{n} flows still counted as active");
}

/// Three more flows of a fast step are all accepted and complete.
async fn three_more_flows_run(engine: &Binary, prefix: &str) {
    for i in 0..3 {
        let id = format!("{prefix}-{i}");
        let (status, body) = start(engine, json!({"id": id, "goals": ["quick"]})).await;
        assert_eq!(status, 201, "{id} refused: {body}");
        let state = wait_for_terminal(engine, &id).await;
        assert_eq!(state["status"], "completed", "{state}");
    }
    assert_no_active_flows(engine).await;
}

async fn quick_step(engine: &Binary) -> StepServer {
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": "x"}))).await;
    register(
        engine,
        vec![sync_step("quick", &svc.url("/quick"), &[], &["out"])],
    )
    .await;
    svc
}

async fn flow_deadlines_firing_after_the_flows_completed_release_their_places(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "bookkeeping", LIMIT).await;
    let _svc = quick_step(&engine).await;
    // Three flows that finish well before their deadline.
    for i in 0..3 {
        let id = format!("early-{i}");
        let (status, body) = start(&engine, json!({"id": id, "goals": ["quick"], "timeout": "300ms"})).await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(wait_for_terminal(&engine, &id).await["status"], "completed");
    }
    // Their deadlines fire on finished flows.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_no_active_flows(&engine).await;
    three_more_flows_run(&engine, "after").await;
}

async fn timers_heartbeats_and_webhooks_of_cancelled_flows_release_their_places(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "bookkeeping", LIMIT).await;
    let _quick = quick_step(&engine).await;
    // /quiet accepts and never calls back (its inactivity timer is armed);
    // /busy answers 503 (a retry is scheduled).
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/quiet" => json_reply(202, json!({})),
        _ => json_reply(503, json!({})),
    })
    .await;
    let mut quiet = sync_step("quiet", &svc.url("/quiet"), &[], &["q"]);
    quiet["type"] = json!("async");
    quiet["timeouts"] = json!({"inactivity": 300});
    let mut busy = sync_step("busy", &svc.url("/busy"), &[], &["b"]);
    busy["work_config"] = json!({"max_retries": 3, "init_backoff": 300, "backoff_type": "fixed"});
    register(&engine, vec![quiet, busy]).await;

    let ids = ["quiet-1", "quiet-2", "busy-1"];
    for (id, goal) in ids.iter().zip(["quiet", "quiet", "busy"]) {
        // Long enough that the cancel comes first on a loaded machine.
        let (status, body) = start(&engine, json!({"id": id, "goals": [goal], "timeout": "1500ms"})).await;
        assert_eq!(status, 201, "{body}");
    }
    // Every call made (and the async ones accepted), then all three cancelled.
    let mut hooks = Vec::new();
    for _ in 0..200 {
        hooks = svc
            .requests()
            .iter()
            .filter_map(|r| {
                r.headers
                    .get("argyll-webhook-url")
                    .and_then(|v| v.to_str().ok())
                    .map(String::from)
            })
            .collect();
        if hooks.len() == 2 && svc.requests().len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(hooks.len(), 2, "both async calls made");
    tokio::time::sleep(Duration::from_millis(50)).await;
    for id in ids {
        let (status, body) = call(
            &engine,
            reqwest::Method::POST,
            &format!("/engine/flow/{id}/cancel"),
            None,
        )
        .await;
        assert_eq!(status, 202, "{id}: {body}");
    }
    // A heartbeat and a late webhook on cancelled flows: answered, nothing held.
    let client = reqwest::Client::new();
    let heartbeat = client
        .post(format!("{}/heartbeat", hooks[0]))
        .header("Content-Type", "application/json")
        .send()
        .await
        .unwrap();
    assert!(heartbeat.status().as_u16() < 500, "{}", heartbeat.status());
    let late = client
        .post(&hooks[1])
        .json(&json!({"q": "late"}))
        .send()
        .await
        .unwrap();
    assert_eq!(late.status(), 200);
    // The inactivity, retry and flow deadline timers fire on cancelled
    // flows (or were dropped with them).
    tokio::time::sleep(Duration::from_millis(1600)).await;
    for id in ids {
        assert_eq!(wait_for_terminal(&engine, id).await["status"], "cancelled");
    }
    assert_no_active_flows(&engine).await;
    three_more_flows_run(&engine, "after").await;
}

async fn racing_identical_starts_release_their_places(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "bookkeeping", LIMIT).await;
    let _svc = quick_step(&engine).await;
    // Identical starts at once: one creates the flow, the others are repeats,
    // some of them found only when their own commit is refused.
    for round in 0..5 {
        let id = format!("race-{round}");
        let starts = (0..8).map(|_| start(&engine, json!({"id": id, "goals": ["quick"]})));
        for (status, body) in futures::future::join_all(starts).await {
            assert!(status == 201 || status == 503, "{status}: {body}");
        }
        assert_eq!(wait_for_terminal(&engine, &id).await["status"], "completed");
    }
    assert_no_active_flows(&engine).await;
    three_more_flows_run(&engine, "after").await;
}

async fn timers_of_finished_flows_leave_memory(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "bookkeeping", LIMIT).await;
    let _quick = quick_step(&engine).await;
    let svc = StepServer::start(|_, _| json_reply(503, json!({}))).await;
    let mut busy = sync_step("busy", &svc.url("/busy"), &[], &["b"]);
    busy["work_config"] =
        json!({"max_retries": 3, "init_backoff": "1h", "max_backoff": "1h", "backoff_type": "fixed"});
    register(&engine, vec![busy]).await;
    // Flows that finish long before their hour-long deadline...
    for i in 0..3 {
        let id = format!("done-{i}");
        let (status, body) = start(&engine, json!({"id": id, "goals": ["quick"], "timeout": "1h"})).await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(wait_for_terminal(&engine, &id).await["status"], "completed");
    }
    // ...and one cancelled while it waits an hour for its retry.
    let (status, body) = start(
        &engine,
        json!({"id": "waiting", "goals": ["busy"], "timeout": "1h"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let mut timers = 0;
    for _ in 0..200 {
        timers = health_detail(&engine, "timers").await;
        if timers == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(timers, 2, "the waiting flow's deadline and retry are held");
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow/waiting/cancel",
        None,
    )
    .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(wait_for_terminal(&engine, "waiting").await["status"], "cancelled");
    assert_eq!(
        health_detail(&engine, "timers").await,
        0,
        "no timer outlives its flow"
    );
    assert_no_active_flows(&engine).await;
    three_more_flows_run(&engine, "after").await;
    assert_eq!(health_detail(&engine, "timers").await, 0);
}
