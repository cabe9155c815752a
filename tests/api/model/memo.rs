//! Memoization: a memoizable step's answer is reused for an identical call,
//! by every engine on the database and across restarts.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use tartan_testkit::{both_backends, TestDb};

use crate::helpers::{
    call, events, json_reply, of_type, spawn_app, spawn_binary, wait_for_terminal, Backend, StepServer,
};

both_backends!(
    an_identical_call_is_answered_from_the_memo,
    the_memo_is_kept_in_the_database_across_restarts,
    a_memo_ttl_ends_the_reuse,
);

async fn counter() -> StepServer {
    StepServer::start(|r, n| json_reply(200, json!({"out": format!("v{}-{}", n + 1, r.body["in"])}))).await
}

fn memoized(endpoint: &str, extra: Value) -> Value {
    let mut step = json!({
        "id": "memo", "name": "memo", "type": "sync", "http": {"endpoint": endpoint},
        "memoizable": true,
        "attributes": {
            "in": {"role": "required"},
            "flow": {"role": "meta", "meta": {"key": "flow_id"}},
            "out": {"role": "output"}
        }
    });
    if let (Some(step), Some(extra)) = (step.as_object_mut(), extra.as_object()) {
        step.extend(extra.clone());
    }
    step
}

fn item(flow: &Value) -> Value {
    flow["executions"]["memo"]["work_items"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone()
}

/// Argyll's TestMemoizationHit and TestMemoizationMiss; the flow id (a meta
/// input) differs between the flows and does not count.
async fn an_identical_call_is_answered_from_the_memo(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = counter().await;
    assert_eq!(
        app.register(&memoized(&svc.url("/m"), json!({}))).await.status,
        StatusCode::CREATED
    );
    for (id, input) in [("m1", "a"), ("m2", "a"), ("m3", "b")] {
        app.start_flow(&json!({"id": id, "goals": ["memo"], "init": {"in": [input]}}))
            .await;
        let flow = app.wait_for_flow(id).await;
        assert_eq!(flow["status"], "completed", "{flow}");
    }
    assert_eq!(
        svc.requests().len(),
        2,
        "a, then b: the second a came from the memo"
    );
    let second = app.flow("m2").await;
    assert_eq!(second["executions"]["memo"]["outputs"]["out"], "v1-\"a\"");
    let attempt = &item(&second)["attempts"][0];
    assert_eq!(attempt["memo"], true, "{attempt}");
    assert_eq!(attempt["outcome"], "success");
    let succeeded = events(&app, "m2").await;
    assert_eq!(of_type(&succeeded, "work_succeeded")[0]["data"]["memo"], true);
    assert_eq!(
        app.flow("m3").await["executions"]["memo"]["outputs"]["out"],
        "v2-\"b\""
    );
    assert!(item(&app.flow("m1").await)["attempts"][0].get("memo").is_none());

    // memo_ttl needs memoizable; memoizable refuses a compensation.
    let mut bad = memoized(&svc.url("/m"), json!({"memo_ttl": "1s", "memoizable": false}));
    bad["id"] = json!("bad");
    let r = app.register(&bad).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    assert!(r.body["detail"].as_str().unwrap().starts_with("memo_ttl: "));
    let mut bad = memoized(&svc.url("/m"), json!({}));
    bad["id"] = json!("bad");
    bad["http"]["compensate"] = json!(svc.url("/undo"));
    let r = app.register(&bad).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
}

/// Beyond Argyll's per-process cache: the answer is in the database, so a
/// restarted engine (or another one) reuses it.
async fn the_memo_is_kept_in_the_database_across_restarts(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let svc = counter().await;
    let engine = spawn_binary(&db, "memo-a").await;
    let step = memoized(&svc.url("/m"), json!({}));
    assert_eq!(
        call(&engine, reqwest::Method::POST, "/engine/step", Some(step))
            .await
            .0,
        201
    );
    let start = |id: &str| json!({"id": id, "goals": ["memo"], "init": {"in": ["x"]}});
    assert_eq!(
        call(&engine, reqwest::Method::POST, "/engine/flow", Some(start("r1")))
            .await
            .0,
        201
    );
    assert_eq!(wait_for_terminal(&engine, "r1").await["status"], "completed");
    // The answer is stored in the background once the item succeeds (the
    // flow does not wait for it): kill the process only once it is there.
    memo_stored(&db).await;
    let mut engine = engine;
    engine.child.kill().await.expect("SIGKILL");
    let engine = spawn_binary(&db, "memo-b").await;
    assert_eq!(
        call(&engine, reqwest::Method::POST, "/engine/flow", Some(start("r2")))
            .await
            .0,
        201
    );
    let flow = wait_for_terminal(&engine, "r2").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(item(&flow)["attempts"][0]["memo"], true, "{flow}");
    assert_eq!(svc.requests().len(), 1);
}

/// `memo_ttl`: past it, the step is called again.
async fn a_memo_ttl_ends_the_reuse(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = counter().await;
    app.register(&memoized(&svc.url("/m"), json!({"memo_ttl": "300ms"})))
        .await;
    let run = |id: &'static str| {
        let app = &app;
        async move {
            app.start_flow(&json!({"id": id, "goals": ["memo"], "init": {"in": ["t"]}}))
                .await;
            app.wait_for_flow(id).await
        }
    };
    run("t1").await;
    run("t2").await;
    assert_eq!(svc.requests().len(), 1, "within the ttl: reused");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let flow = run("t3").await;
    assert_eq!(svc.requests().len(), 2, "past the ttl: called again");
    assert!(item(&flow)["attempts"][0].get("memo").is_none());
}

/// Wait (bounded) until the database holds a memoized answer.
async fn memo_stored(db: &TestDb) {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&db.url)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    for _ in 0..400 {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM memos")
            .fetch_one(&pool)
            .await
            .unwrap_or(0);
        if n > 0 {
            pool.close().await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no memoized answer was stored");
}
