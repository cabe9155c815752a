//! Concurrency keys and priority (docs/concurrency.md): at most `limit`
//! flows of a key run at once, across engines, the others waiting their
//! turn with their place; a flow's timeout counts while it waits; priority
//! orders the flows of a key and the calls waiting in a lane.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use tartan_testkit::{both_backends, TestDb};

use crate::helpers::{
    call, held_server, json_reply, spawn_app, spawn_binary_with, start_on_with, sync_step, wait_for_terminal,
    wait_until, Backend, StepServer, TestApp,
};

both_backends!(
    a_key_runs_its_limit_and_the_others_wait_their_turn_with_their_place,
    the_sweep_lets_in_the_turns_a_dead_engine_left,
    priority_orders_the_calls_waiting_in_a_saturated_lane,
    bad_concurrency_and_priority_are_refused_naming_the_field,
);

fn keyed(id: &str, key: &str, limit: u32) -> Value {
    json!({"id": id, "goals": ["work"], "init": {"x": [id]},
           "concurrency": {"key": key, "limit": limit}})
}

/// The flows whose call the step server has received, in order.
fn called(svc: &StepServer) -> Vec<String> {
    svc.requests()
        .iter()
        .filter_map(|r| r.body["x"].as_str().map(str::to_string))
        .collect()
}

async fn turn(app: &TestApp, id: &str) -> Value {
    let r = app.get(&format!("/engine/flow/{id}/turn")).await;
    assert_eq!(r.status, StatusCode::OK, "{id}: {:?}", r.body);
    r.body
}

async fn a_key_runs_its_limit_and_the_others_wait_their_turn_with_their_place(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let (release, svc) = held_server().await;
    let r = app
        .register(&sync_step("work", &svc.url("/held"), &["x"], &["held"]))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    for id in ["k1", "k2", "k3", "k4", "k5"] {
        let r = app.start_flow(&keyed(id, "customer-7", 2)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    }
    assert!(
        wait_until(Duration::from_secs(10), || svc.requests().len() == 2).await,
        "the first two run"
    );
    // A later flow of higher priority goes ahead of those waiting; one
    // whose timeout ends while it waits times out, never called.
    let mut urgent = keyed("k6", "customer-7", 2);
    urgent["priority"] = json!(100);
    assert_eq!(app.start_flow(&urgent).await.status, StatusCode::CREATED);
    let mut hurried = keyed("k7", "customer-7", 2);
    hurried["timeout"] = json!("1s");
    assert_eq!(app.start_flow(&hurried).await.status, StatusCode::CREATED);
    assert_eq!(called(&svc), ["k1", "k2"]);

    let first = turn(&app, "k1").await;
    assert_eq!(first["state"], "running", "{first}");
    assert_eq!(first["place"], 0);
    let waiting = turn(&app, "k5").await;
    assert_eq!(
        waiting,
        json!({"id": "k5", "key": "customer-7", "limit": 2, "state": "waiting", "place": 4,
               "running": 2, "waiting": 5}),
    );
    assert_eq!(turn(&app, "k6").await["place"], 1, "priority 100 is next");
    assert_eq!(turn(&app, "k3").await["place"], 2);
    let state = app.flow("k3").await;
    assert_eq!(state["status"], "active", "{state}");
    assert_eq!(state["queued"], true, "{state}");
    assert_eq!(state["concurrency"], json!({"key": "customer-7", "limit": 2}));

    // Cancelled while it waits: it ends, never called, and leaves the line.
    let r = app.post("/engine/flow/k4/cancel", &json!({})).await;
    assert!(r.status.is_success(), "{:?}", r.body);
    assert_eq!(app.wait_for_flow("k4").await["status"], "cancelled");
    let gone = app.get("/engine/flow/k4/turn").await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND, "{:?}", gone.body);
    assert_eq!(gone.body["type"], "urn:tartan:problem:not-found");
    let timed_out = app.wait_for_flow("k7").await;
    assert_eq!(timed_out["status"], "failed", "{timed_out}");

    let _ = release.send(true);
    for id in ["k1", "k2", "k3", "k5", "k6"] {
        let flow = app.wait_for_flow(id).await;
        assert_eq!(flow["status"], "completed", "{id}: {flow}");
    }
    assert_eq!(
        called(&svc),
        ["k1", "k2", "k6", "k3", "k5"],
        "in turn order: the priority first, the cancelled and the timed out never"
    );
    let events = app.event_types("k3").await;
    let admitted = events.iter().position(|t| t == "flow_admitted");
    let stepped = events.iter().position(|t| t == "step_started");
    assert!(
        admitted.is_some() && admitted < stepped,
        "no step before its turn: {events:?}"
    );
    assert_eq!(
        app.get("/engine/flow/k3/turn").await.status,
        StatusCode::NOT_FOUND,
        "an ended flow left its line"
    );
    // The line is empty: the next flow of the key runs at once.
    assert_eq!(
        app.start_flow(&keyed("k8", "customer-7", 2)).await.status,
        StatusCode::CREATED
    );
    assert_eq!(app.wait_for_flow("k8").await["status"], "completed");
}

/// Run `sql` on the test's database beside the engine.
async fn on_db(url: &str, sql: &str) {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    sqlx::query(sql).execute(&pool).await.unwrap();
    pool.close().await;
}

/// What an engine that died at the wrong moment leaves in the lines, made
/// by hand: a flow let in whose `flow_admitted` never committed, and a
/// key whose running flow's row went (its end committed) with nobody
/// letting the next in. The sweep (every lease, here 1 s) finishes both.
async fn the_sweep_lets_in_the_turns_a_dead_engine_left(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let url = db.url.clone();
    let app = start_on_with(db, "lines-sweep", |c| c.lease = Duration::from_secs(1)).await;
    let (_release, svc) = held_server().await;
    assert_eq!(
        app.register(&sync_step("work", &svc.url("/held"), &["x"], &["held"]))
            .await
            .status,
        StatusCode::CREATED
    );
    for (id, key) in [("a1", "key-a"), ("a2", "key-a"), ("b1", "key-b"), ("b2", "key-b")] {
        assert_eq!(
            app.start_flow(&keyed(id, key, 1)).await.status,
            StatusCode::CREATED
        );
    }
    assert!(wait_until(Duration::from_secs(10), || svc.requests().len() == 2).await);
    on_db(
        &url,
        "UPDATE flow_lines SET state = 'admitting', admitted_us = 0 WHERE flow_id = 'a2'",
    )
    .await;
    on_db(&url, "DELETE FROM flow_lines WHERE flow_id = 'b1'").await;
    assert!(
        wait_until(Duration::from_secs(20), || svc.requests().len() == 4).await,
        "the sweep let a2 and b2 in: {:?}",
        called(&svc)
    );
    let mut later = called(&svc)[2..].to_vec();
    later.sort();
    assert_eq!(later, ["a2", "b2"]);
    assert_eq!(turn(&app, "a2").await["state"], "running");
}

async fn priority_orders_the_calls_waiting_in_a_saturated_lane(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let (release, svc) = held_server().await;
    let mut step = sync_step("work", &svc.url("/held"), &["x"], &["held"]);
    step["limits"] = json!({"concurrency": 1});
    assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    let start = |id: &str, priority: i32| json!({"id": id, "goals": ["work"], "init": {"x": [id]}, "priority": priority});
    assert_eq!(
        app.start_flow(&start("first", 0)).await.status,
        StatusCode::CREATED
    );
    assert!(wait_until(Duration::from_secs(10), || svc.requests().len() == 1).await);
    for (id, priority) in [
        ("low-1", 0),
        ("low-2", 0),
        ("neg", -5),
        ("high-1", 100),
        ("high-2", 100),
    ] {
        assert_eq!(
            app.start_flow(&start(id, priority)).await.status,
            StatusCode::CREATED
        );
    }
    let mut waiting = 0;
    for _ in 0..100 {
        let lanes = app.get("/engine/lanes").await;
        waiting = lanes.body["lanes"][0]["here"]["waiting"].as_u64().unwrap_or(0);
        if waiting == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(waiting, 5, "five calls wait in the lane");
    let _ = release.send(true);
    for id in ["first", "low-1", "low-2", "neg", "high-1", "high-2"] {
        assert_eq!(app.wait_for_flow(id).await["status"], "completed", "{id}");
    }
    assert_eq!(
        called(&svc),
        ["first", "high-1", "high-2", "low-1", "low-2", "neg"],
        "higher priority first, then arrival"
    );
    assert_eq!(app.flow("high-1").await["priority"], 100);
}

async fn bad_concurrency_and_priority_are_refused_naming_the_field(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"y": "done"}))).await;
    assert_eq!(
        app.register(&sync_step("work", &svc.url("/s"), &["x"], &["y"]))
            .await
            .status,
        StatusCode::CREATED
    );
    let long = "k".repeat(300);
    for (body, field) in [
        (
            json!({"concurrency": {"key": "c", "limit": 0}}),
            "concurrency.limit",
        ),
        (
            json!({"concurrency": {"key": "c", "limit": -1}}),
            "concurrency.limit",
        ),
        (
            json!({"concurrency": {"key": "c", "limit": 10001}}),
            "concurrency.limit",
        ),
        (json!({"concurrency": {"key": "", "limit": 1}}), "concurrency.key"),
        (
            json!({"concurrency": {"key": long, "limit": 1}}),
            "concurrency.key",
        ),
        (json!({"concurrency": {"limit": 1}}), "concurrency"),
        (json!({"concurrency": "c"}), "concurrency"),
        (json!({"priority": 1001}), "priority"),
        (json!({"priority": "high"}), "priority"),
    ] {
        let mut start = json!({"id": "refused", "goals": ["work"], "init": {"x": ["1"]}});
        for (k, v) in body.as_object().unwrap() {
            start[k] = v.clone();
        }
        let r = app.start_flow(&start).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{start}: {:?}", r.body);
        let said = r.body.to_string();
        assert!(said.contains(field), "{start} names {field}: {said}");
    }
    assert_eq!(
        app.get("/engine/flow/refused").await.status,
        StatusCode::NOT_FOUND
    );
    assert!(svc.requests().is_empty());
}

/// Two engines on one Postgres, each starting every other flow of one
/// key of limit 1: the twenty flows run one at a time, in start order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_limit_one_runs_twenty_flows_one_at_a_time_in_order_across_two_engines() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    // Each call: the flow, and when it began and ended at the step.
    type Spans = Arc<Mutex<Vec<(String, std::time::Instant, std::time::Instant)>>>;
    let spans: Spans = Arc::default();
    let seen = Arc::clone(&spans);
    let svc = StepServer::start_async(move |r, _| {
        let seen = Arc::clone(&seen);
        Box::pin(async move {
            let began = std::time::Instant::now();
            tokio::time::sleep(Duration::from_millis(30)).await;
            let who = r.body["x"].as_str().unwrap_or_default().to_string();
            seen.lock().unwrap().push((who, began, std::time::Instant::now()));
            json_reply(200, json!({"y": "done"}))
        })
    })
    .await;
    let env = [("TARTAN_LEASE", "2s")];
    let a = spawn_binary_with(&db, "turns-a", &env).await;
    let b = spawn_binary_with(&db, "turns-b", &env).await;
    let step = sync_step("work", &svc.url("/w"), &["x"], &["y"]);
    assert_eq!(
        call(&a, reqwest::Method::POST, "/engine/step", Some(step))
            .await
            .0,
        201
    );
    let ids: Vec<String> = (0..20).map(|i| format!("order-{i:02}")).collect();
    for (i, id) in ids.iter().enumerate() {
        let engine = if i % 2 == 0 { &a } else { &b };
        let (status, body) = call(
            engine,
            reqwest::Method::POST,
            "/engine/flow",
            Some(keyed(id, "tenant-1", 1)),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    for (i, id) in ids.iter().enumerate() {
        let engine = if i % 2 == 0 { &b } else { &a };
        let flow = wait_for_terminal(engine, id).await;
        assert_eq!(flow["status"], "completed", "{flow}");
    }
    let spans = spans.lock().unwrap().clone();
    let order: Vec<&str> = spans.iter().map(|(who, _, _)| who.as_str()).collect();
    assert_eq!(order, ids, "one call each, in start order");
    for pair in spans.windows(2) {
        assert!(
            pair[1].1 >= pair[0].2,
            "{} began before {} ended: two flows of the key ran at once",
            pair[1].0,
            pair[0].0
        );
    }
}
