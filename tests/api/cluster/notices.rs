//! Event notices between engines on one Postgres (docs/architecture.md,
//! "The event relay"): an engine alone on its database sends none (its own
//! relay is woken in memory); an engine that starts says so, and from then
//! on the others announce their commits.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;
use sqlx::postgres::PgListener;
use tartan_testkit::{Backend, TestDb};

use crate::helpers::{json_reply, start_on, sync_step, StepServer, TestApp};

/// The next `tartan_events` notice's payload (`<commits> <node>`) within
/// `within`, if any.
async fn next_notice(listener: &mut PgListener, within: Duration) -> Option<String> {
    match tokio::time::timeout(within, listener.recv()).await {
        Ok(Ok(n)) => Some(n.payload().to_string()),
        Ok(Err(e)) => panic!("listening for notices: {e}"),
        Err(_) => None,
    }
}

async fn run_flow(app: &TestApp, id: &str) {
    let r = app.start_flow(&json!({"id": id, "goals": ["one"]})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(app.wait_for_flow(id).await["status"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_alone_sends_no_event_notices_until_another_engine_starts() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let a = start_on(TestDb::at_url(db.url.clone()), "node-a").await;
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": "done"}))).await;
    let r = a
        .register(&sync_step("one", &svc.url("/one"), &[], &["out"]))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let mut listener = PgListener::connect(&db.url)
        .await
        .unwrap_or_else(|e| panic!("a listener: {e}"));
    listener
        .listen("tartan_events")
        .await
        .unwrap_or_else(|e| panic!("listening: {e}"));

    // Alone: four commits, no notice of them (the one `a` sent as it
    // started, "0 node-a", may arrive late).
    run_flow(&a, "alone").await;
    while let Some(payload) = next_notice(&mut listener, Duration::from_secs(1)).await {
        assert_eq!(payload, "0 node-a", "an engine alone announced its commits");
    }

    // A second engine says it is there, and `a` announces its commits.
    let b = start_on(TestDb::at_url(db.url.clone()), "node-b").await;
    let hello = next_notice(&mut listener, Duration::from_secs(10)).await;
    assert_eq!(hello.as_deref(), Some("0 node-b"));
    run_flow(&a, "together").await;
    let heard = next_notice(&mut listener, Duration::from_secs(10))
        .await
        .unwrap_or_else(|| panic!("no notice from node-a with node-b there"));
    assert!(heard.ends_with(" node-a"), "{heard}");
    // (`streams::sse::streams_carry_the_events_of_other_processes`: what
    // they carry reaches the other engine's streams.)
    drop(b);
}
