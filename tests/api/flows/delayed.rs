//! Delayed starts (`start_at`, `start_in`): stored at once, no call before
//! the time, started on time by a restarted engine, cancellable before.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use tartan_testkit::{both_backends, TestDb};

use crate::helpers::{
    call, json_reply, spawn_app, spawn_binary, sync_step, types, wait_for_terminal, Backend, StepServer,
};

both_backends!(
    a_delayed_flow_calls_nothing_before_its_time_and_a_restarted_engine_starts_it,
    a_delayed_start_is_refused_naming_what_is_wrong,
);

/// Who the step was called for, and when.
type Calls = Arc<Mutex<Vec<(String, DateTime<Utc>)>>>;

fn time(v: &Value) -> DateTime<Utc> {
    match v.as_str().map(DateTime::parse_from_rfc3339) {
        Some(Ok(t)) => t.with_timezone(&Utc),
        _ => panic!("not a time: {v}"),
    }
}

/// Through the binary: two flows put off by 2 s, one cancelled at once;
/// the engine is killed while they wait and another one started.
async fn a_delayed_flow_calls_nothing_before_its_time_and_a_restarted_engine_starts_it(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let called: Calls = Arc::default();
    let seen = Arc::clone(&called);
    let svc = StepServer::start(move |r, _| {
        let who = r.body["who"].as_str().unwrap_or_default().to_string();
        seen.lock().unwrap().push((who.clone(), Utc::now()));
        json_reply(200, json!({"greeting": format!("hello {who}")}))
    })
    .await;
    let engine = spawn_binary(&db, "delay-a").await;
    let step = sync_step("later", &svc.url("/s"), &["who"], &["greeting"]);
    assert_eq!(
        call(&engine, reqwest::Method::POST, "/engine/step", Some(step))
            .await
            .0,
        201
    );
    let start = |id: &str, who: &str| json!({"id": id, "goals": ["later"], "init": {"who": [who]}, "start_in": "2s", "timeout": "1m"});
    let asked = Utc::now();
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(start("d1", "ada")),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(start("d2", "bob")),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // The same request again is the same flow.
    let (status, _) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(start("d1", "ada")),
    )
    .await;
    assert_eq!(status, 201);

    let (_, flow) = call(&engine, reqwest::Method::GET, "/engine/flow/d1", None).await;
    assert_eq!(flow["status"], "active", "{flow}");
    let starts_at = time(&flow["starts_at"]);
    let after = (starts_at - asked).num_milliseconds();
    assert!(
        (1_900..=3_000).contains(&after),
        "starts {after} ms after the request"
    );
    // The flow's timeout counts from its start.
    assert_eq!((time(&flow["deadline_at"]) - starts_at).num_seconds(), 60);
    assert_eq!(flow["executions"]["later"]["status"], "pending", "{flow}");
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow/d2/cancel",
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    assert!(
        called.lock().unwrap().is_empty(),
        "a step was called before its flow's time"
    );

    let mut engine = engine;
    engine.child.kill().await.expect("SIGKILL");
    let engine = spawn_binary(&db, "delay-b").await;
    let flow = wait_for_terminal(&engine, "d1").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert!(flow.get("starts_at").is_none(), "{flow}");
    let calls = called.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].0, "ada");
    assert!(
        calls[0].1 >= starts_at,
        "called at {} before {starts_at}",
        calls[0].1
    );
    let (_, events) = call(&engine, reqwest::Method::GET, "/engine/flow/d1/events", None).await;
    let events = events["events"].as_array().cloned().unwrap_or_default();
    let kinds = types(&events);
    assert_eq!(
        kinds[..3],
        ["flow_started", "flow_released", "step_started"],
        "{kinds:?}"
    );
    assert_eq!(time(&events[0]["data"]["starts_at"]), starts_at);

    // The cancelled one never ran, past its time too.
    let flow = wait_for_terminal(&engine, "d2").await;
    assert_eq!(flow["status"], "cancelled", "{flow}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(called.lock().unwrap().len(), 1);
}

/// Each bad delayed start is a 400 naming its field, and stores nothing.
async fn a_delayed_start_is_refused_naming_what_is_wrong(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"greeting": "hi"}))).await;
    let r = app
        .register(&sync_step("later", &svc.url("/s"), &["who"], &["greeting"]))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let far = (Utc::now() + chrono::Duration::days(400)).to_rfc3339();
    for (extra, field) in [
        (
            json!({"start_at": "2030-01-01T00:00:00Z", "start_in": "1m"}),
            "start_in",
        ),
        (json!({"start_at": "next tuesday"}), "start_at"),
        (json!({"start_at": far}), "start_at"),
        (json!({"start_in": "400d"}), "start_in"),
        (json!({"start_in": "soon"}), "start_in"),
        (
            json!({"start_in": "1h", "deadline_at": (Utc::now() + chrono::Duration::minutes(30)).to_rfc3339()}),
            "deadline_at",
        ),
    ] {
        let mut body = json!({"id": "bad", "goals": ["later"], "init": {"who": ["x"]}});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = app.start_flow(&body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{extra}: {:?}", r.body);
        let detail = r.body["detail"].as_str().unwrap_or_default();
        assert!(detail.starts_with(&format!("{field}: ")), "{extra}: {detail}");
    }
    let r = app.get("/engine/flow/bad").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:?}", r.body);
    // A time already past starts the flow at once.
    let past = (Utc::now() - chrono::Duration::minutes(1)).to_rfc3339();
    let r = app
        .start_flow(&json!({"id": "now", "goals": ["later"], "init": {"who": ["x"]}, "start_at": past}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let flow = app.wait_for_flow("now").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(svc.requests().len(), 1);
}
