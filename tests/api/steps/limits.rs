//! What a client controls cannot take the server down (docs/api.md,
//! "Limits"): a catalog of 10,000 chained steps registers in seconds, plans
//! and runs, and loads back after a restart; JSON nested deeper than 64
//! levels is refused wherever it comes from, so nothing is stored that could
//! not be read back.

use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{json_reply, start_on, sync_step, Backend, StepServer, TestApp, TestDb};
use tartan_testkit::both_backends;

both_backends!(
    a_chain_of_10_000_steps_registers_in_seconds_plans_runs_and_loads_back,
    json_nested_deeper_than_64_levels_is_refused_and_64_is_stored_and_read_back,
    a_step_answering_with_json_nested_too_deeply_fails_permanently,
);

const CHAIN: usize = 10_000;
/// Steps the flow in the big catalog runs: all of them.
const RUN: usize = CHAIN;
/// Registrations in flight at once, as a client with a small pool would.
const CLIENTS: usize = 16;

/// Step `i` needs `a{i-1}` and outputs `a{i}`; its endpoint says which.
fn chain_step(svc: &StepServer, i: usize) -> Value {
    let output = format!("a{i}");
    let input = format!("a{}", i.wrapping_sub(1));
    let inputs: &[&str] = if i == 0 { &[] } else { &[&input] };
    sync_step(
        &format!("c{i:05}"),
        &svc.url(&format!("/c/{i}")),
        inputs,
        &[&output],
    )
}

/// A step server that answers `/c/{i}` with `{"a{i}": "v{i}"}`.
async fn chain_server() -> StepServer {
    StepServer::start(|r, _| {
        let i = r.path.trim_start_matches("/c/");
        json_reply(200, json!({ format!("a{i}"): format!("v{i}") }))
    })
    .await
}

async fn a_chain_of_10_000_steps_registers_in_seconds_plans_runs_and_loads_back(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let app = start_on(TestDb::at_url(db.url.clone()), "limits").await;
    let svc = chain_server().await;

    // Two halves, timed apart: a registration costs the same whether the
    // catalog holds 0 or 5,000 steps.
    let mut halves = Vec::new();
    for half in [0..CHAIN / 2, CHAIN / 2..CHAIN] {
        let started = Instant::now();
        let statuses: Vec<(usize, StatusCode, Value)> = stream::iter(half)
            .map(|i| {
                let (app, step) = (&app, chain_step(&svc, i));
                async move {
                    let r = app.register(&step).await;
                    (i, r.status, r.body)
                }
            })
            .buffer_unordered(CLIENTS)
            .collect()
            .await;
        halves.push(started.elapsed());
        for (i, status, body) in &statuses {
            assert_eq!(*status, StatusCode::CREATED, "step {i}: {body}");
        }
    }
    let registration = halves[0] + halves[1];
    eprintln!(
        "{backend:?}: {CHAIN} chained steps registered in {registration:?} (first half {:?}, second {:?})",
        halves[0], halves[1]
    );
    // Generous: debug build, two shared cores (BENCHMARKS.md, "Large catalogs").
    assert!(
        registration < Duration::from_secs(300),
        "registering {CHAIN} steps took {registration:?}"
    );
    assert!(
        halves[1] < halves[0] * 3 + Duration::from_secs(5),
        "the second half of the chain registered much slower than the first: {halves:?}"
    );

    let goal = format!("c{:05}", CHAIN - 1);
    let started = Instant::now();
    let plan = app.post("/engine/plan", &json!({ "goals": [goal] })).await;
    let planning = started.elapsed();
    assert_eq!(plan.status, StatusCode::OK, "{:?}", plan.body);
    assert_eq!(plan.body["steps"].as_object().map(|s| s.len()), Some(CHAIN));
    assert_eq!(plan.body["required"], json!([]));
    eprintln!("{backend:?}: plan of {CHAIN} steps in {planning:?}");

    // A loop back to the start of the chain is refused, not a crash.
    let looped = sync_step("loop", &svc.url("/c/0"), &[&format!("a{}", CHAIN - 1)], &["a0"]);
    assert_refused(&app.register(&looped).await, "circular dependency");

    // A flow over the whole chain runs: 10,000 decisions, each costing what
    // it changes (docs/durability.md, "Flow snapshots").
    let short = format!("c{:05}", RUN - 1);
    let started = Instant::now();
    let r = app.start_flow(&json!({ "id": "long", "goals": [short] })).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let flow = wait_long(&app, "long", Duration::from_secs(600)).await;
    let run = started.elapsed();
    assert_eq!(flow["status"], "completed", "{}", flow["error"]);
    assert_eq!(svc.requests().len(), RUN, "each step called once");
    eprintln!("{backend:?}: flow of {RUN} sequential steps ran in {run:?}");

    // After a restart the catalog loads back whole and still plans.
    drop(app);
    let started = Instant::now();
    let app = start_on(TestDb::at_url(db.url.clone()), "limits").await;
    eprintln!(
        "{backend:?}: restarted with {CHAIN} steps in {:?}",
        started.elapsed()
    );
    let steps = app.get("/engine/step").await;
    assert_eq!(steps.body["count"], json!(CHAIN));
    let plan = app.post("/engine/plan", &json!({ "goals": [goal] })).await;
    assert_eq!(plan.status, StatusCode::OK, "{:?}", plan.body);
    assert_eq!(plan.body["steps"].as_object().map(|s| s.len()), Some(CHAIN));
    assert_eq!(app.flow("long").await["status"], "completed");
}

/// Poll until the flow is no longer active, for as long as a long flow needs.
async fn wait_long(app: &TestApp, id: &str, bound: Duration) -> Value {
    let started = Instant::now();
    loop {
        let r = app.get(&format!("/engine/flow/{id}/status")).await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        if r.body["status"] != "active" {
            return app.flow(id).await;
        }
        assert!(
            started.elapsed() < bound,
            "flow {id} still active after {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A JSON array nested `levels` deep around `1`.
fn nested(levels: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..levels {
        v = json!([v]);
    }
    v
}

/// How many levels a value nests (arrays and objects), computed without
/// recursion.
fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 0)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|x| (x, d + 1))),
            Value::Object(o) => stack.extend(o.values().map(|x| (x, d + 1))),
            _ => deepest = deepest.max(d),
        }
    }
    deepest
}

#[track_caller]
/// A 400 problem whose detail says `says`.
fn assert_refused(r: &crate::helpers::Reply, says: &str) {
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    assert_eq!(r.content_type, "application/problem+json");
    assert!(
        r.body["detail"].as_str().is_some_and(|d| d.contains(says)),
        "{:?}",
        r.body
    );
}

fn assert_too_deep(r: &crate::helpers::Reply) {
    assert_refused(r, "nested deeper than 64 levels");
}

async fn json_nested_deeper_than_64_levels_is_refused_and_64_is_stored_and_read_back(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let app = start_on(TestDb::at_url(db.url.clone()), "limits").await;
    let svc = StepServer::start(|r, _| json_reply(200, json!({ "out": r.body["deep"] }))).await;
    let mut step = sync_step("echo", &svc.url("/echo"), &["deep"], &["out"]);
    step["attributes"]["deep"]["type"] = json!("any");
    step["attributes"]["out"]["type"] = json!("any");
    assert_eq!(app.register(&step).await.status, StatusCode::CREATED);

    // The body {"id":..,"goals":[..],"init":{"deep":[V]}} nests V three
    // levels in: V at 61 makes the body 64 deep, V at 62 makes it 65.
    let start = |id: &str, levels: usize| json!({ "id": id, "goals": ["echo"], "init": { "deep": [nested(levels)] } });
    assert_eq!(depth(&start("x", 61)), 64);
    let too_deep = app.start_flow(&start("too-deep", 62)).await;
    assert_too_deep(&too_deep);
    assert_eq!(
        app.get("/engine/flow/too-deep").await.status,
        StatusCode::NOT_FOUND,
        "nothing was stored"
    );

    let r = app.start_flow(&start("deepest", 61)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let flow = app.wait_for_flow("deepest").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    // The step got the value and gave it back; the flow reads back whole.
    assert_eq!(svc.requests()[0].body["deep"], nested(61));
    let text = flow.to_string();
    assert!(
        text.contains(&nested(61).to_string()),
        "the value is in the flow: {text}"
    );

    // Every JSON route: plan, query, steps (register and update), webhooks.
    let deep_body = |levels: usize| json!({ "goals": ["echo"], "init": { "deep": [nested(levels)] } });
    assert_too_deep(&app.post("/engine/plan", &deep_body(62)).await);
    assert_eq!(
        app.post("/engine/plan", &deep_body(61)).await.status,
        StatusCode::OK
    );
    assert_too_deep(
        &app.post("/engine/flow/query", &json!({ "labels": { "x": nested(70) } }))
            .await,
    );
    let mut deep_step = sync_step("deep-step", &svc.url("/d"), &[], &["d"]);
    deep_step["labels"] = json!({ "x": nested(100) });
    assert_too_deep(&app.register(&deep_step).await);
    assert_too_deep(
        &app.send(
            reqwest::Method::PUT,
            "/engine/step/echo",
            Some(json!({ "id": "echo", "name": "echo", "x": nested(64) }).to_string()),
        )
        .await,
    );
    let path = app.webhook_path("deepest", "echo", "token");
    assert_too_deep(&app.post(&path, &json!({ "out": nested(80) })).await);
    // A default value is JSON text of its own, held to the same limit.
    let mut with_default = sync_step("defaulted", &svc.url("/d"), &[], &["d2"]);
    with_default["attributes"]["opt"] = json!({
        "role": "optional",
        "type": "any",
        "optional": { "default": nested(65).to_string() },
    });
    assert_too_deep(&app.register(&with_default).await);
    // Serde's own limit (128) is not what answers: far deeper is the same 400.
    let r = app
        .send(
            reqwest::Method::POST,
            "/engine/flow",
            Some(format!("{}{}", "[".repeat(100_000), "]".repeat(100_000))),
        )
        .await;
    assert_too_deep(&r);

    // After a restart the stored flow loads back.
    drop(app);
    let app = start_on(TestDb::at_url(db.url.clone()), "limits").await;
    let flow = app.flow("deepest").await;
    assert_eq!(flow["status"], "completed");
    assert!(flow.to_string().contains(&nested(61).to_string()));
}

async fn a_step_answering_with_json_nested_too_deeply_fails_permanently(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let app = start_on(TestDb::at_url(db.url.clone()), "limits").await;
    let svc = StepServer::start(|_, _| json_reply(200, json!({ "out": nested(100) }))).await;
    let mut step = sync_step("abyss", &svc.url("/abyss"), &[], &["out"]);
    step["attributes"]["out"]["type"] = json!("any");
    step["work_config"] = json!({ "max_retries": 3, "init_backoff": 10 });
    assert_eq!(
        app.register(&step).await.status,
        StatusCode::CREATED,
        "registration"
    );

    let r = app
        .start_flow(&json!({ "id": "abyss", "goals": ["abyss"] }))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let flow = app.wait_for_flow("abyss").await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let text = flow.to_string();
    assert!(
        text.contains("nested deeper than 64 levels"),
        "the error names the limit: {text}"
    );
    assert_eq!(svc.requests().len(), 1, "a permanent failure is not retried");

    drop(app);
    let app = start_on(TestDb::at_url(db.url.clone()), "limits").await;
    assert_eq!(app.flow("abyss").await["status"], "failed");
}
