//! A lane's concurrency and rate hold across flows, and bad limits are
//! refused naming the field.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::json;

use super::counting;
use crate::helpers::{json_reply, spawn_app, start_on_with, sync_step, Backend, StepServer};
use tartan_testkit::{both_backends, TestDb};

both_backends!(
    a_step_lane_holds_its_concurrency_across_flows_and_uses_no_attempt,
    a_step_lane_holds_its_rate,
    a_host_lane_is_shared_by_every_step_calling_the_host,
    bad_limits_are_refused_naming_the_field,
    time_in_the_lane_is_left_out_of_the_retry_budget,
    a_flow_with_many_items_waiting_does_not_starve_a_flow_with_one,
);

fn limited(id: &str, url: &str, limits: serde_json::Value) -> serde_json::Value {
    let mut step = sync_step(id, url, &["x"], &["y"]);
    step["limits"] = limits;
    step
}

async fn a_step_lane_holds_its_concurrency_across_flows_and_uses_no_attempt(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = counting(Duration::from_millis(60)).await;
    let r = app
        .register(&limited(
            "narrow",
            &svc.server.url("/n"),
            json!({"concurrency": 2}),
        ))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(r.body["step"]["limits"], json!({"concurrency": 2}));
    for i in 0..12 {
        app.start_flow(&json!({"id": format!("f{i}"), "goals": ["narrow"], "init": {"x": ["1"]}}))
            .await;
    }
    for i in 0..12 {
        let flow = app.wait_for_flow(&format!("f{i}")).await;
        assert_eq!(flow["status"], "completed", "{flow}");
        let items = flow["executions"]["narrow"]["work_items"].as_object().unwrap();
        let attempts = items.values().next().unwrap()["attempts"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(attempts, 1, "waiting in the lane uses no attempt: {flow}");
    }
    assert_eq!(
        svc.most.load(Ordering::SeqCst),
        2,
        "at most 2 at once, and the lane used both"
    );
    let lanes = app.get("/engine/lanes").await;
    assert_eq!(lanes.status, StatusCode::OK);
    let lane = &lanes.body["lanes"][0];
    assert_eq!(lane["id"], "step:narrow", "{}", lanes.body);
    assert_eq!(lane["limits"], json!({"concurrency": 2}));
    assert_eq!(lane["here"]["in_flight"], 0);
    assert_eq!(lane["here"]["waiting"], 0);
}

async fn a_step_lane_holds_its_rate(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = counting(Duration::from_millis(1)).await;
    app.register(&limited(
        "paced",
        &svc.server.url("/p"),
        json!({"rate": "20/s", "burst": 2}),
    ))
    .await;
    for i in 0..30 {
        app.start_flow(&json!({"id": format!("p{i}"), "goals": ["paced"], "init": {"x": ["1"]}}))
            .await;
    }
    for i in 0..30 {
        assert_eq!(app.wait_for_flow(&format!("p{i}")).await["status"], "completed");
    }
    let times = svc.times.lock().unwrap().clone();
    assert_eq!(times.len(), 30);
    // 30 calls at 20/s with a burst of 2 take at least (30 - 2) / 20 s.
    let first = times.iter().min().unwrap();
    let last = times.iter().max().unwrap();
    assert!(
        *last - *first >= Duration::from_millis(1_300),
        "{:?}",
        *last - *first
    );
    // In any second, at most the rate and the burst (and one for timing slack).
    for start in &times {
        let within = times
            .iter()
            .filter(|t| **t >= *start && **t < *start + Duration::from_secs(1))
            .count();
        assert!(within <= 20 + 2 + 1, "{within} calls in one second");
    }
}

async fn a_host_lane_is_shared_by_every_step_calling_the_host(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let svc = counting(Duration::from_millis(40)).await;
    let host = format!("127.0.0.1:{}", svc.server.addr.port());
    let lanes =
        tartan_core::lanes::HostLanes::parse("lanes", &json!({ host.clone(): {"concurrency": 1} })).unwrap();
    let app = start_on_with(db, "lanes-node", move |c| c.lanes = lanes).await;
    app.register(&sync_step("one", &svc.server.url("/one"), &["x"], &["y"]))
        .await;
    app.register(&sync_step("two", &svc.server.url("/two"), &["x"], &["z"]))
        .await;
    for i in 0..5 {
        app.start_flow(&json!({"id": format!("a{i}"), "goals": ["one"], "init": {"x": ["1"]}}))
            .await;
        app.start_flow(&json!({"id": format!("b{i}"), "goals": ["two"], "init": {"x": ["1"]}}))
            .await;
    }
    for i in 0..5 {
        assert_eq!(app.wait_for_flow(&format!("a{i}")).await["status"], "completed");
        assert_eq!(app.wait_for_flow(&format!("b{i}")).await["status"], "completed");
    }
    assert_eq!(
        svc.most.load(Ordering::SeqCst),
        1,
        "one call at a time to the host"
    );
    let lanes = app.get("/engine/lanes").await;
    let ids: Vec<&str> = lanes.body["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["id"].as_str())
        .collect();
    assert_eq!(ids, [format!("host:{host}").as_str()], "{}", lanes.body);
}

async fn bad_limits_are_refused_naming_the_field(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    for (limits, field) in [
        (json!({"concurrency": -1}), "limits.concurrency"),
        (json!({"concurrency": 0}), "limits.concurrency"),
        (json!({"rate": "0/s"}), "limits.rate"),
        (json!({"rate": "ten per second"}), "limits.rate"),
        (json!({"rate": "5/s", "burst": -2}), "limits.burst"),
        (
            json!({"breaker": {"failures": 3, "cool_down": "-1s"}}),
            "limits.breaker.cool_down",
        ),
        (json!({"concurrency": 2, "speed": 3}), "limits.speed"),
        (json!("fast"), "limits"),
    ] {
        let r = app
            .register(&limited("bad", "http://127.0.0.1:9/x", limits.clone()))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{limits}: {:?}", r.body);
        let detail = r.body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(field), "{limits}: {detail}");
        assert_eq!(r.content_type, "application/problem+json");
    }
    assert_eq!(app.get("/engine/step/bad").await.status, StatusCode::NOT_FOUND);
}

async fn time_in_the_lane_is_left_out_of_the_retry_budget(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // The first call holds the lane's one slot for 1.5 s; the second flow's
    // call waits for it, then fails once and is retried.
    let svc = StepServer::start_async(|_, n| {
        Box::pin(async move {
            match n {
                0 => {
                    tokio::time::sleep(Duration::from_millis(1_500)).await;
                    json_reply(200, json!({"y": "slow"}))
                }
                1 => json_reply(503, json!({"detail": "busy"})),
                _ => json_reply(200, json!({"y": "ok"})),
            }
        })
    })
    .await;
    let mut step = limited("one", &svc.url("/o"), json!({"concurrency": 1}));
    step["work_config"] = json!({"max_retries": 3, "backoff_type": "fixed", "init_backoff": 10,
        "max_retry_duration": "1s"});
    app.register(&step).await;
    app.start_flow(&json!({"id": "holder", "goals": ["one"], "init": {"x": ["1"]}}))
        .await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while svc.requests().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    app.start_flow(&json!({"id": "waiter", "goals": ["one"], "init": {"x": ["1"]}}))
        .await;
    let flow = app.wait_for_flow("waiter").await;
    assert_eq!(
        flow["status"], "completed",
        "1.5 s in the lane did not spend the 1 s budget: {flow}"
    );
    let events = app.get("/engine/flow/waiter/events").await;
    let waited = events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "work_lane_waited")
        .cloned()
        .unwrap_or_else(|| panic!("no work_lane_waited: {}", events.body));
    assert_eq!(waited["data"]["lanes"], json!(["step:one"]));
    assert!(waited["data"]["waited_ms"].as_u64().unwrap() >= 1_000, "{waited}");
    assert_eq!(app.wait_for_flow("holder").await["status"], "completed");
}

async fn a_flow_with_many_items_waiting_does_not_starve_a_flow_with_one(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start_async(|r, _| {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            json_reply(200, json!({"out": r.body["n"].clone()}))
        })
    })
    .await;
    app.register(&json!({
        "id": "each", "name": "each", "type": "sync", "http": {"endpoint": svc.url("/each")},
        "attributes": {"n": {"role": "required", "required": {"for_each": true}}, "out": {"role": "output"}},
        "work_config": {"parallelism": 100},
        "limits": {"concurrency": 1},
    }))
    .await;
    let many: Vec<i64> = (0..60).collect();
    app.start_flow(&json!({"id": "many", "goals": ["each"], "init": {"n": [many]}}))
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while svc.requests().len() < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    app.start_flow(&json!({"id": "one", "goals": ["each"], "init": {"n": [[1000]]}}))
        .await;
    assert_eq!(app.wait_for_flow("one").await["status"], "completed");
    let calls = svc.requests();
    let at = calls
        .iter()
        .position(|r| r.body["n"] == 1000)
        .expect("the single item was called");
    // Round-robin by flow: the single item goes within a few calls of its
    // start, not after the 57 items queued before it.
    assert!(at < 12, "the single item was call {at} of {}", calls.len());
    assert_eq!(app.wait_for_flow("many").await["status"], "completed");
}
