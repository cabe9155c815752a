//! Step health and the cluster (docs/operating.md, "Health checks and the
//! cluster"): the engines check each step's `http.health_check`, shared out
//! among them, and every view shows what they found.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use tartan_testkit::{both_backends, Backend, TestDb};

use crate::helpers::{
    held_server, json_reply, start_on_with, sync_step, waiting_status, StepServer, TestApp,
};

mod gate;
mod haproxy;
mod notices;

both_backends!(
    a_health_check_that_flips_is_seen_by_every_view,
    flow_and_script_steps_take_their_health_from_what_they_run,
    a_slow_health_check_costs_its_own_step_only,
    each_engine_shows_the_calls_it_holds,
);

/// Each engine in the cluster's answer says how many calls it holds
/// (`calls_held`: work items under its lease, in flight or waiting for a
/// slot): three calls that hang count while they run, none once answered.
async fn each_engine_shows_the_calls_it_holds(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let app = start_on_with(db, "holder", quick_checks).await;
    let (release, svc) = held_server().await;
    assert_eq!(
        app.register(&sync_step("hold", &svc.url("/held"), &["x"], &["held"]))
            .await
            .status,
        201
    );
    until(&app, "/engine/cluster", |c| {
        c["nodes"]["holder"]["calls_held"] == 0
    })
    .await;
    for i in 0..3 {
        let r = app
            .start_flow(&json!({"id": format!("hold-{i}"), "goals": ["hold"], "init": {"x": [i]}}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    }
    until(&app, "/engine/cluster", |c| {
        c["nodes"]["holder"]["calls_held"] == 3
    })
    .await;
    let health = app.get("/engine/health").await.body;
    assert_eq!(health["nodes"]["holder"]["calls_held"], 3, "{health}");
    release.send(true).expect("release");
    for i in 0..3 {
        assert_eq!(
            app.wait_for_flow(&format!("hold-{i}")).await["status"],
            "completed"
        );
    }
    until(&app, "/engine/cluster", |c| {
        c["nodes"]["holder"]["calls_held"] == 0
    })
    .await;
}

/// Health checks every 100 ms, each given a second.
pub(super) fn quick_checks(config: &mut tartan_engine::EngineConfig) {
    config.health = tartan_engine::HealthConfig {
        interval: Duration::from_millis(100),
        timeout: Duration::from_secs(1),
    };
}

/// A step server that is up while `up`: its `/health` answers 200 and its
/// other routes `{"out": "done"}`; else 503, both.
pub(super) async fn flipping(up: Arc<AtomicBool>) -> StepServer {
    StepServer::start(move |r, _| match (r.path.as_str(), up.load(Ordering::SeqCst)) {
        ("/health", true) => json_reply(200, json!({"status": "ok"})),
        (_, true) => json_reply(200, json!({"out": "done"})),
        (_, false) => json_reply(503, json!({"status": "down"})),
    })
    .await
}

pub(super) fn checked_step(id: &str, svc: &StepServer) -> Value {
    json!({"id": id, "name": id, "type": "sync",
           "http": {"endpoint": svc.url("/run"), "health_check": svc.url("/health")},
           "attributes": {"seed": {"role": "required"}, "out": {"role": "output"}}})
}

/// Poll `GET path` until `done` holds of its body (bounded).
pub(super) async fn until(app: &TestApp, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..400 {
        let r = app.get(path).await;
        if r.status == StatusCode::OK && done(&r.body) {
            return r.body;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{path} never got there: {:?}", app.get(path).await.body);
}

async fn a_health_check_that_flips_is_seen_by_every_view(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let app = start_on_with(db, "health-node", quick_checks).await;
    let up = Arc::new(AtomicBool::new(true));
    let svc = flipping(up.clone()).await;
    let r = app.register(&checked_step("checked", &svc)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);

    let healthy = until(&app, "/engine/health/checked", |h| h["status"] == "healthy").await;
    assert_eq!(healthy["checked_by"], "health-node", "{healthy}");
    up.store(false, Ordering::SeqCst);
    let down = until(&app, "/engine/health/checked", |h| h["status"] == "unhealthy").await;
    assert_eq!(down["error"], "HTTP 503", "{down}");

    // The metric follows at the next round.
    let series = r#"tartan_step_health{step="checked",status="unhealthy"} 1"#;
    let mut seen = false;
    for _ in 0..200 {
        let r = app.get("/metrics").await;
        let text = match &r.body {
            Value::String(s) => s.clone(),
            _ => String::new(),
        };
        if text.contains(series) {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(seen, "no {series} in /metrics");

    // Argyll's views: by node, with the heartbeat.
    let engine = app.get("/engine").await.body;
    let node = &engine["health"]["health-node"];
    assert!(node["last_seen"].is_string(), "{engine}");
    assert_eq!(node["health"]["checked"]["status"], "unhealthy", "{engine}");
    let cluster = app.get("/engine/cluster").await.body;
    assert!(
        cluster["nodes"]["health-node"]["last_seen"].is_string(),
        "{cluster}"
    );
    assert!(cluster["last_updated"].is_string(), "{cluster}");
    let health = app.get("/engine/health").await.body;
    assert_eq!(
        health["nodes"]["health-node"]["health"]["checked"]["error"],
        "HTTP 503"
    );

    // Each change is an event, once.
    up.store(true, Ordering::SeqCst);
    until(&app, "/engine/health/checked", |h| h["status"] == "healthy").await;
    let events = app.get("/engine/cluster/events").await.body;
    let changes: Vec<(&str, &str)> = events["events"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|e| e["type"] == "step_health_changed" && e["data"]["step_id"] == "checked")
                .map(|e| {
                    (
                        e["data"]["status"].as_str().unwrap_or(""),
                        e["data"]["node_id"].as_str().unwrap_or(""),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        changes,
        [
            ("healthy", "health-node"),
            ("unhealthy", "health-node"),
            ("healthy", "health-node")
        ],
        "{events}"
    );

    // Updating the step forgets its health until the next check.
    let mut updated = checked_step("checked", &svc);
    updated["name"] = json!("renamed");
    let r = app
        .send(
            reqwest::Method::PUT,
            "/engine/step/checked",
            Some(updated.to_string()),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    until(&app, "/engine/health/checked", |h| h["status"] == "healthy").await;
    assert_eq!(
        app.get("/engine/health/nothing").await.status,
        StatusCode::NOT_FOUND
    );
}

async fn flow_and_script_steps_take_their_health_from_what_they_run(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let app = start_on_with(db, "health-node", quick_checks).await;
    let up = Arc::new(AtomicBool::new(false));
    let svc = flipping(up.clone()).await;
    let plain = json!({"id": "plain", "name": "plain", "type": "sync", "http": {"endpoint": svc.url("/run")},
                       "attributes": {"out": {"role": "output"}}});
    let script = json!({"id": "scripted", "name": "scripted", "type": "script",
                        "script": {"language": "lua", "script": "return {x = 1}"},
                        "attributes": {"x": {"role": "output"}}});
    let flow = json!({"id": "wrapper", "name": "wrapper", "type": "flow", "flow": {"goals": ["checked"]},
                      "attributes": {"seed": {"role": "required"}, "wrapped": {"role": "output", "output": {"mapping": {"name": "out"}}}}});
    for step in [checked_step("checked", &svc), plain, script, flow] {
        let r = app.register(&step).await;
        assert_eq!(r.status, StatusCode::CREATED, "{step}: {:?}", r.body);
    }
    let wrapper = until(&app, "/engine/health/wrapper", |h| h["status"] == "unhealthy").await;
    assert_eq!(wrapper["error"], "step checked: HTTP 503", "{wrapper}");
    assert_eq!(app.get("/engine/health/scripted").await.body["status"], "healthy");
    // No check says anything of a step without one.
    assert_eq!(app.get("/engine/health/plain").await.body["status"], "unknown");
    up.store(true, Ordering::SeqCst);
    until(&app, "/engine/health/wrapper", |h| h["status"] == "healthy").await;
}

/// Two engines on one Postgres: both are in the cluster, and the checks are
/// shared out between them rather than made by each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_share_the_checks_and_agree_on_the_cluster() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let a = start_on_with(TestDb::at_url(db.url.clone()), "node-a", quick_checks).await;
    let b = start_on_with(TestDb::at_url(db.url.clone()), "node-b", quick_checks).await;
    let svc = StepServer::start(|_, _| json_reply(200, json!({}))).await;
    let steps: Vec<String> = (0..12).map(|i| format!("s{i}")).collect();
    for id in &steps {
        let step = json!({"id": id, "name": id, "type": "sync",
                          "http": {"endpoint": svc.url("/run"), "health_check": svc.url(&format!("/health/{id}"))},
                          "attributes": {"out": {"role": "output"}}});
        let r = a.register(&step).await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    }
    // Both engines see both in the cluster.
    for app in [&a, &b] {
        until(app, "/engine/cluster", |c| {
            c["nodes"]["node-a"].is_object() && c["nodes"]["node-b"].is_object()
        })
        .await;
    }
    // Every step checked, each by one engine; both engines take a share.
    let health = until(&b, "/engine/health", |h| {
        let node = &h["nodes"]["node-b"]["health"];
        (0..12).all(|i| node[format!("s{i}")]["status"] == "healthy")
    })
    .await;
    let checkers: std::collections::BTreeSet<String> = steps
        .iter()
        .filter_map(|id| {
            health["nodes"]["node-b"]["health"][id]["checked_by"]
                .as_str()
                .map(String::from)
        })
        .collect();
    assert_eq!(
        checkers,
        ["node-a".to_string(), "node-b".to_string()].into(),
        "{health}"
    );
    // Over a few rounds, each step is checked about once a round, not
    // once per engine per round: count the calls over a window.
    let before = svc.requests().len();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let calls = svc.requests().len() - before;
    // At most one check per step per round (10 rounds of 100 ms, one more
    // for the window's edges), where two engines checking every step
    // would make twice that.
    assert!(
        calls <= steps.len() * 12,
        "{calls} checks of {} steps in 10 rounds",
        steps.len()
    );
    let statuses = |h: &Value, node: &str| -> Vec<String> {
        steps
            .iter()
            .map(|id| {
                h["nodes"][node]["health"][id]["status"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
            .collect()
    };
    let from_a = a.get("/engine/health").await.body;
    assert_eq!(
        statuses(&from_a, "node-a"),
        statuses(&health, "node-b"),
        "both engines show the same health"
    );
}

/// Twenty steps whose health checks never answer (each takes its whole
/// timeout, 2 s) do not hold up the check of another: checks run side by
/// side, so a step that goes down is seen within a round or two, not
/// after the twenty timeouts one after another (40 s).
async fn a_slow_health_check_costs_its_own_step_only(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let app = start_on_with(db, "slow-checks", |config| {
        config.health = tartan_engine::HealthConfig {
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(2),
        };
    })
    .await;
    let (_release, hanging) = held_server().await;
    for i in 0..20 {
        let step = json!({"id": format!("a-hangs-{i:02}"), "name": "hangs", "type": "sync",
            "http": {"endpoint": hanging.url("/run"), "health_check": hanging.url("/held")},
            "attributes": {"seed": {"role": "required"}, format!("out{i}"): {"role": "output"}}});
        assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    }
    let up = Arc::new(AtomicBool::new(true));
    let svc = flipping(up.clone()).await;
    // Last in the engine's order of checks.
    assert_eq!(
        app.register(&checked_step("z-checked", &svc)).await.status,
        StatusCode::CREATED
    );
    until(&app, "/engine/health/z-checked", |h| h["status"] == "healthy").await;
    up.store(false, Ordering::SeqCst);
    let down = std::time::Instant::now();
    until(&app, "/engine/health/z-checked", |h| h["status"] == "unhealthy").await;
    assert!(
        down.elapsed() < Duration::from_secs(10),
        "seen unhealthy {:?} after it went down",
        down.elapsed()
    );
}

/// A client waiting on the engine that runs a flow hears of its end when
/// another engine ends it: the first look at a flow this engine holds
/// active reads nothing, so the next one, a moment later, must read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_hears_of_a_cancel_made_through_another_engine() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let a = start_on_with(TestDb::at_url(db.url.clone()), "node-a", |_| {}).await;
    let b = start_on_with(TestDb::at_url(db.url.clone()), "node-b", |_| {}).await;
    let (release, svc) = held_server().await;
    a.register(&sync_step("held", &svc.url("/held"), &["who"], &["held"]))
        .await;
    let r = a
        .start_flow(&json!({"id": "kept", "goals": ["held"], "init": {"who": ["a"]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    // Engine a holds the flow, its call in flight.
    while svc.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waiting = waiting_status(&a, "kept");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = b.post("/engine/flow/kept/cancel", &json!({})).await;
    assert!(r.status.is_success(), "cancel through b: {:?}", r.body);
    // A wait with no time left answers what is stored, not what a holds.
    let r = a.get("/engine/flow/kept/status?wait=0").await;
    assert_eq!(r.body["status"], "cancelled", "{:?}", r.body);
    let r = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .unwrap_or_else(|_| panic!("the waiter on a did not hear of b's cancel"))
        .unwrap_or_else(|e| panic!("waiting task: {e}"));
    assert_eq!(r.body, json!({"id": "kept", "status": "cancelled"}));
    let _ = release.send(true);
}
