//! Memoization: a memoizable step's answer is reused for an identical call,
//! by every engine on the database and across restarts.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use tartan_testkit::{both_backends, TestDb};

use crate::helpers::{
    call, events, json_reply, of_type, only_item, spawn_app, spawn_binary, start_on, wait_for_terminal,
    Backend, StepServer, TestApp,
};

both_backends!(
    an_identical_call_is_answered_from_the_memo,
    the_memo_is_kept_in_the_database_across_restarts,
    a_memo_ttl_ends_the_reuse,
    flow_steps_with_other_goals_do_not_share_answers,
    a_changed_child_step_is_not_served_the_old_answer,
    steps_with_other_ids_do_not_share_answers,
    an_answer_too_large_is_not_memoized,
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
    memos_stored(&db.url, 1).await;
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
    let Some((app, url)) = app_and_url(backend).await else {
        return;
    };
    let svc = counter().await;
    app.register(&memoized(&svc.url("/m"), json!({"memo_ttl": "1s"})))
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
    // Stored in the background: t2 would race it.
    memos_stored(&url, 1).await;
    run("t2").await;
    assert_eq!(svc.requests().len(), 1, "within the ttl: reused");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let flow = run("t3").await;
    assert_eq!(svc.requests().len(), 2, "past the ttl: called again");
    assert!(item(&flow)["attempts"][0].get("memo").is_none());
}

/// Wait (bounded) until the database holds `count` memoized answers (they
/// are stored in the background, after the flow moved on).
async fn memos_stored(url: &str, count: i64) {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    for _ in 0..400 {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM memos")
            .fetch_one(&pool)
            .await
            .unwrap_or(0);
        if n >= count {
            pool.close().await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{count} memoized answers were not stored");
}

/// An app and its database's URL, to count the answers stored.
async fn app_and_url(backend: Backend) -> Option<(TestApp, String)> {
    let db = TestDb::create(backend).await?;
    let url = db.url.clone();
    Some((start_on(db, "memo-node").await, url))
}

/// Run flow `id` for `goals` on `item`; it must complete.
async fn completed(app: &TestApp, id: &str, goals: &[&str], item: &str) -> Value {
    let r = app
        .start_flow(&json!({"id": id, "goals": goals, "init": {"item": [item]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let flow = app.wait_for_flow(id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    flow
}

/// The attempts of `step`'s (only) item in `flow`.
fn attempts_of(flow: &Value, step: &str) -> Value {
    only_item(flow, step)["attempts"].clone()
}

fn from_memo(flow: &Value, step: &str) -> bool {
    attempts_of(flow, step)[0]["memo"] == true
}

/// A step answering a `price` for an `item`: over HTTP at `endpoint`, or
/// (`goals`) as a memoizable flow step whose sub-flow runs those.
fn pricer(id: &str, endpoint: Option<String>, goals: &[&str]) -> Value {
    let mut step = json!({
        "id": id, "name": id,
        "attributes": {"item": {"role": "required"}, "price": {"role": "output"}},
        "work_config": {"max_attempts": 1},
    });
    match endpoint {
        Some(endpoint) => {
            step["type"] = json!("sync");
            step["http"] = json!({"endpoint": endpoint});
        }
        None => {
            step["type"] = json!("flow");
            step["flow"] = json!({"goals": goals});
            step["memoizable"] = json!(true);
        }
    }
    step
}

async fn registered(app: &TestApp, steps: &[Value]) {
    for step in steps {
        let r = app.register(step).await;
        assert_eq!(r.status, StatusCode::CREATED, "{step}: {:?}", r.body);
    }
}

/// A price server: `/victim` answers 100, `/attacker` -999, `/old` 1,
/// `/new` 2.
async fn prices() -> StepServer {
    StepServer::start(|r, _| {
        let price = match r.path.as_str() {
            "/victim" => 100,
            "/attacker" => -999,
            "/old" => 1,
            "/new" => 2,
            _ => 0,
        };
        json_reply(200, json!({"price": price}))
    })
    .await
}

/// Issue 45: two memoizable flow steps alike but for their goals (and ids)
/// each get their own answer; the attacker's stored first is not the
/// victim's.
async fn flow_steps_with_other_goals_do_not_share_answers(backend: Backend) {
    let Some((app, url)) = app_and_url(backend).await else {
        return;
    };
    let svc = prices().await;
    registered(
        &app,
        &[
            pricer("victim-leaf", Some(svc.url("/victim")), &[]),
            pricer("attacker-leaf", Some(svc.url("/attacker")), &[]),
            pricer("victim-price", None, &["victim-leaf"]),
            pricer("attacker-price", None, &["attacker-leaf"]),
        ],
    )
    .await;
    let attacker = completed(&app, "a1", &["attacker-price"], "widget").await;
    assert_eq!(attacker["executions"]["attacker-price"]["outputs"]["price"], -999);
    memos_stored(&url, 1).await;

    let victim = completed(&app, "v1", &["victim-price"], "widget").await;
    assert_eq!(
        victim["executions"]["victim-price"]["outputs"]["price"], 100,
        "the victim's own answer: {victim}"
    );
    assert!(!from_memo(&victim, "victim-price"), "{victim}");
    memos_stored(&url, 2).await;

    // Each step's answer is still reused for its own identical calls.
    let again = completed(&app, "v2", &["victim-price"], "widget").await;
    assert_eq!(again["executions"]["victim-price"]["outputs"]["price"], 100);
    assert!(from_memo(&again, "victim-price"), "{again}");
    let again = completed(&app, "a2", &["attacker-price"], "widget").await;
    assert_eq!(again["executions"]["attacker-price"]["outputs"]["price"], -999);
    assert!(from_memo(&again, "attacker-price"), "{again}");
    let paths: Vec<String> = svc.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/attacker", "/victim"]);
}

/// A step of a flow step's sub-flow registered again with another endpoint:
/// flows started since run the new definition, and the flow step's answer
/// computed under the old one is not served to them.
async fn a_changed_child_step_is_not_served_the_old_answer(backend: Backend) {
    let Some((app, url)) = app_and_url(backend).await else {
        return;
    };
    let svc = prices().await;
    let quote = pricer("quote", Some(svc.url("/old")), &[]);
    registered(&app, &[quote.clone(), pricer("priced", None, &["quote"])]).await;
    let first = completed(&app, "p1", &["priced"], "widget").await;
    assert_eq!(first["executions"]["priced"]["outputs"]["price"], 1);
    memos_stored(&url, 1).await;
    let second = completed(&app, "p2", &["priced"], "widget").await;
    assert!(from_memo(&second, "priced"), "unchanged: reused {second}");

    let mut changed = quote;
    changed["http"]["endpoint"] = json!(svc.url("/new"));
    let r = app
        .send(
            axum::http::Method::PUT,
            "/engine/step/quote",
            Some(changed.to_string()),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let third = completed(&app, "p3", &["priced"], "widget").await;
    assert_eq!(
        third["executions"]["priced"]["outputs"]["price"], 2,
        "computed under the new definition: {third}"
    );
    assert!(!from_memo(&third, "priced"), "{third}");
    let paths: Vec<String> = svc.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/old", "/new"]);
}

/// Two HTTP steps alike but for their ids (same endpoint, attributes and
/// inputs) are two steps: neither is served the other's answer.
async fn steps_with_other_ids_do_not_share_answers(backend: Backend) {
    let Some((app, url)) = app_and_url(backend).await else {
        return;
    };
    let svc = counter().await;
    let mut first = memoized(&svc.url("/m"), json!({}));
    first["id"] = json!("memo-a");
    let mut second = first.clone();
    second["id"] = json!("memo-b");
    registered(&app, &[first, second]).await;
    let start = |id: &str, goal: &str| json!({"id": id, "goals": [goal], "init": {"in": ["x"]}});

    app.start_flow(&start("i1", "memo-a")).await;
    let flow = app.wait_for_flow("i1").await;
    assert_eq!(
        flow["executions"]["memo-a"]["outputs"]["out"], "v1-\"x\"",
        "{flow}"
    );
    memos_stored(&url, 1).await;
    app.start_flow(&start("i2", "memo-b")).await;
    let flow = app.wait_for_flow("i2").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(
        flow["executions"]["memo-b"]["outputs"]["out"], "v2-\"x\"",
        "{flow}"
    );
    assert!(!from_memo(&flow, "memo-b"), "{flow}");
    assert_eq!(svc.requests().len(), 2, "each step called once");
}

/// An answer of more than 64 KiB of JSON is not memoized (the memo's table
/// and each process's layer stay bounded in bytes): the step is called
/// each time, while a small answer of the same step is reused.
async fn an_answer_too_large_is_not_memoized(backend: Backend) {
    let Some((app, url)) = app_and_url(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| {
        let size = if r.body["in"] == "big" { 70 * 1024 } else { 10 };
        json_reply(200, json!({"out": "x".repeat(size)}))
    })
    .await;
    assert_eq!(
        app.register(&memoized(&svc.url("/m"), json!({}))).await.status,
        StatusCode::CREATED
    );
    for (id, input) in [
        ("big1", "big"),
        ("small1", "small"),
        ("big2", "big"),
        ("small2", "small"),
    ] {
        if id == "big2" {
            // Stored in the background: the second round would race it.
            memos_stored(&url, 1).await;
        }
        app.start_flow(&json!({"id": id, "goals": ["memo"], "init": {"in": [input]}}))
            .await;
        let flow = app.wait_for_flow(id).await;
        assert_eq!(flow["status"], "completed", "{flow}");
    }
    let called: Vec<String> = svc
        .requests()
        .iter()
        .map(|r| r.body["in"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        called,
        ["big", "small", "big"],
        "the small answer was reused, the big one not"
    );
    assert!(item(&app.flow("big2").await)["attempts"][0].get("memo").is_none());
    assert_eq!(item(&app.flow("small2").await)["attempts"][0]["memo"], true);
}
