//! Nothing a client names grows without bound (issue 24): identifiers,
//! names and labels are at most `MAX_ID_LEN` bytes (docs/api.md, "Limits"),
//! each refusal a 400 naming the field, and what is accepted keeps
//! `/metrics` small.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use chrono::Utc;
use serde_json::{json, Value};
use tartan_core::ids::MAX_ID_LEN;
use tartan_core::retry::RetryDefaults;
use tartan_core::step::Step;
use tartan_store::CatalogChange;

use crate::helpers::{json_reply, start_on, sync_step, Backend, Reply, StepServer, TestApp, TestDb};
use tartan_testkit::both_backends;

both_backends!(
    identifiers_over_the_bound_are_refused_naming_the_field,
    identifiers_at_the_bound_are_accepted_and_metrics_stay_small,
    a_stored_step_id_over_the_bound_is_labelled_as_other,
    filters_over_their_limits_are_a_400_naming_the_limit,
    unknown_goals_are_answered_from_the_cached_catalog,
);

/// What an attacker sends: 400,000 characters.
fn huge() -> String {
    "a".repeat(400_000)
}

/// How a key over the bound is named in an error: its start, cut.
fn cut() -> String {
    format!("{}…", "a".repeat(32))
}

#[track_caller]
fn assert_refused(r: &Reply, field: &str) {
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{field}: {:?}", r.body);
    assert_eq!(r.content_type, "application/problem+json", "{field}");
    let detail = r.body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with(&format!("{field}: ")) && detail.contains("more than the 256"),
        "{field}: {detail}"
    );
    // The refusal does not echo what it refuses.
    assert!(detail.len() < 300, "{field}: a detail of {} bytes", detail.len());
}

async fn identifiers_over_the_bound_are_refused_naming_the_field(backend: Backend) {
    let Some(app) = crate::helpers::spawn_app(backend).await else {
        return;
    };
    let step = |patch: Value| {
        let mut s = sync_step("s", "http://127.0.0.1:9/s", &["in"], &["out"]);
        if let (Some(s), Value::Object(patch)) = (s.as_object_mut(), patch) {
            s.extend(patch);
        }
        s
    };
    let over = "b".repeat(MAX_ID_LEN + 1);
    let cases = [
        (step(json!({"id": huge()})), "id".to_string()),
        (step(json!({"name": huge()})), "name".to_string()),
        (
            step(json!({"attributes": {huge(): {"role": "required"}, "out": {"role": "output"}}})),
            format!("attributes.{}", cut()),
        ),
        (
            step(json!({"labels": {huge(): "v"}})),
            format!("labels.{}", cut()),
        ),
        (step(json!({"labels": {"team": over}})), "labels.team".to_string()),
    ];
    for (body, field) in &cases {
        assert_refused(&app.register(body).await, field);
        let put = app
            .send(axum::http::Method::PUT, "/engine/step/s", Some(body.to_string()))
            .await;
        assert!(put.status.is_client_error(), "PUT {field}: {:?}", put.body);
    }
    assert_eq!(app.get("/engine/step").await.body["count"], 0, "nothing stored");

    let okay = sync_step("s", "http://127.0.0.1:9/s", &["in"], &["out"]);
    assert_eq!(app.register(&okay).await.status, StatusCode::CREATED);
    let start = |patch: Value| {
        let mut s = json!({"id": "f", "goals": ["s"], "init": {"in": ["x"]}});
        if let (Some(s), Value::Object(patch)) = (s.as_object_mut(), patch) {
            s.extend(patch);
        }
        s
    };
    for (body, field) in [
        (start(json!({"id": huge()})), "id".to_string()),
        (start(json!({"goals": ["s", huge()]})), "goals[1]".to_string()),
        (
            start(json!({"init": {"in": ["x"], huge(): ["y"]}})),
            format!("init.{}", cut()),
        ),
        (
            start(json!({"labels": {huge(): "v"}})),
            format!("labels.{}", cut()),
        ),
        (
            start(json!({"labels": {"team": huge()}})),
            "labels.team".to_string(),
        ),
    ] {
        assert_refused(&app.start_flow(&body).await, &field);
        let mut plan = body.clone();
        if field != "id" && !field.starts_with("labels") {
            // The preview takes the goals and inputs of a start, bounded alike.
            if let Some(p) = plan.as_object_mut() {
                p.remove("id");
            }
            assert_refused(&app.post("/engine/plan", &plan).await, &field);
        }
    }
    let flows = app.post("/engine/flow/query", &json!({})).await;
    assert_eq!(flows.body["count"], 0, "no flow started: {:?}", flows.body);
    let metrics = app.get("/metrics").await;
    let text = metrics.body.as_str().unwrap_or_default();
    assert!(
        text.contains(r#"tartan_flow_starts_refused_total{reason="invalid"} 5"#),
        "{text}"
    );
}

async fn identifiers_at_the_bound_are_accepted_and_metrics_stay_small(backend: Backend) {
    let Some(app) = crate::helpers::spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": "done"}))).await;
    let id = "s".repeat(MAX_ID_LEN);
    let name = "n".repeat(MAX_ID_LEN);
    let mut step = sync_step(&id, &svc.url("/s"), &[&name], &["out"]);
    step["name"] = json!("N".repeat(MAX_ID_LEN));
    step["labels"] = json!({ "l".repeat(MAX_ID_LEN): "v".repeat(MAX_ID_LEN) });
    let r = app.register(&step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let flow = "f".repeat(MAX_ID_LEN);
    let r = app
        .start_flow(&json!({"id": flow, "goals": [id], "init": {name.clone(): ["x"]},
            "labels": {"k".repeat(MAX_ID_LEN): "w".repeat(MAX_ID_LEN)}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(app.wait_for_flow(&flow).await["status"], "completed");
    let found = app
        .post(
            "/engine/flow/query",
            &json!({"labels": {"k".repeat(MAX_ID_LEN): "w".repeat(MAX_ID_LEN)}}),
        )
        .await;
    assert_eq!(found.body["count"], 1, "{:?}", found.body);

    let metrics = app.get("/metrics").await;
    let text = metrics.body.as_str().unwrap_or_default();
    assert!(text.contains(&format!("step=\"{id}\"")), "the step is labelled");
    // A few dozen series name the step: tens of kilobytes, not megabytes.
    assert!(text.len() < 64 * 1024, "/metrics is {} bytes", text.len());
}

/// A step stored before ids were bounded (here written to the store
/// directly) still runs; its calls are counted under `step="(other)"`,
/// never with its long id as a label.
async fn a_stored_step_id_over_the_bound_is_labelled_as_other(backend: Backend) {
    let Some(app) = crate::helpers::spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/long" => json_reply(200, json!({"mid": "m"})),
        _ => json_reply(200, json!({"out": "done"})),
    })
    .await;
    // Long, but within what both databases index (Postgres: 2,704 bytes).
    let long = "l".repeat(1000);
    let stored: Step =
        serde_json::from_value(sync_step(&long, &svc.url("/long"), &["in"], &["mid"])).expect("a step");
    let stored = stored
        .with_effective_retry(&RetryDefaults::default())
        .expect("its policies");
    app.engine
        .store()
        .commit_catalog_batch(0, &[CatalogChange::Registered(stored, Utc::now())])
        .await
        .expect("stored");
    app.engine.catalog().refresh_catalog().await.expect("read back");
    let goal = sync_step("goal", &svc.url("/goal"), &["mid"], &["out"]);
    assert_eq!(app.register(&goal).await.status, StatusCode::CREATED);
    let r = app
        .start_flow(&json!({"id": "f", "goals": ["goal"], "init": {"in": ["x"]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(app.wait_for_flow("f").await["status"], "completed");

    let metrics = app.get("/metrics").await;
    let text = metrics.body.as_str().unwrap_or_default();
    assert!(!text.contains(&long), "the long id is no label");
    assert!(
        text.contains(r#"tartan_attempts_total{step="(other)",call="work",outcome="success"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"tartan_attempts_total{step="goal",call="work",outcome="success"} 1"#),
        "{text}"
    );
}

/// Queries, work listings and bulk filters with more labels or statuses
/// than a filter may hold, or ids over the bound: each a 400 naming the
/// field and the limit, where they used to reach the database and come
/// back as a 503 (too many parameters, a stack too deep).
async fn filters_over_their_limits_are_a_400_naming_the_limit(backend: Backend) {
    let Some(app) = crate::helpers::spawn_app(backend).await else {
        return;
    };
    let labels =
        |n: usize| -> Value { Value::Object((0..n).map(|i| (format!("k{i}"), json!("v"))).collect()) };
    let statuses = |n: usize, s: &str| json!(vec![s; n]);
    let over = "c".repeat(MAX_ID_LEN + 1);
    #[track_caller]
    fn refused(r: &Reply, field: &str, limit: &str) {
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{field}: {:?}", r.body);
        assert_eq!(r.content_type, "application/problem+json", "{field}");
        let detail = r.body["detail"].as_str().unwrap_or_default();
        assert!(
            detail.starts_with(&format!("{field}: ")) && detail.contains(limit),
            "{field}: {detail}"
        );
    }
    for (body, field, limit) in [
        (
            json!({"labels": labels(33)}),
            "labels".to_string(),
            "more than the 32",
        ),
        (
            json!({"labels": labels(20_000)}),
            "labels".to_string(),
            "more than the 32",
        ),
        (
            json!({"labels": {"k": over}}),
            "labels.k".to_string(),
            "more than the 256",
        ),
        (
            json!({"labels": {over.clone(): "v"}}),
            format!("labels.{}", "c".repeat(32) + "…"),
            "more than the 256",
        ),
        (
            json!({"statuses": statuses(70_000, "active")}),
            "statuses".to_string(),
            "more than the 4",
        ),
        (
            json!({"statuses": statuses(5, "failed")}),
            "statuses".to_string(),
            "more than the 4",
        ),
        (
            json!({"id_prefix": over}),
            "id_prefix".to_string(),
            "more than the 256",
        ),
        (
            json!({"cursor": format!("1.{}", "c".repeat(10_000))}),
            "cursor".to_string(),
            "invalid cursor",
        ),
    ] {
        refused(&app.post("/engine/flow/query", &body).await, &field, limit);
    }
    // Repeats within the limit are one status.
    let r = app
        .post(
            "/engine/flow/query",
            &json!({"statuses": ["failed", "failed", "active"]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let r = app
        .post("/engine/flow/query", &json!({"labels": labels(32)}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);

    for (query, field, limit) in [
        (format!("step={}", "s".repeat(5000)), "step", "more than the 256"),
        (format!("flow_id={over}"), "flow_id", "more than the 256"),
        (
            "status=active&status=failed".to_string(),
            "invalid query",
            "duplicate field",
        ),
    ] {
        refused(&app.get(&format!("/engine/work?{query}")).await, field, limit);
    }
    let r = app.get("/engine/work?step=&flow_id=&cursor=").await;
    assert_eq!(r.status, StatusCode::OK, "empty filters are none: {:?}", r.body);

    for path in ["/engine/bulk/retry", "/engine/bulk/cancel"] {
        let status = if path.ends_with("retry") {
            "failed"
        } else {
            "active"
        };
        for (filter, field, limit) in [
            (
                json!({"statuses": statuses(50_000, status)}),
                "filter.statuses".to_string(),
                "more than the 4",
            ),
            (
                json!({"labels": labels(33)}),
                "filter.labels".to_string(),
                "more than the 32",
            ),
            (
                json!({"labels": {"k": over}}),
                "filter.labels.k".to_string(),
                "more than the 256",
            ),
            (
                json!({"ids": ["a", over]}),
                "filter.ids[1]".to_string(),
                "more than the 256",
            ),
            (
                json!({"id_prefix": over}),
                "filter.id_prefix".to_string(),
                "more than the 256",
            ),
            (
                json!({"failed_step": over}),
                "filter.failed_step".to_string(),
                "more than the 256",
            ),
        ] {
            for dry_run in [true, false] {
                let r = app
                    .post(path, &json!({"filter": filter, "dry_run": dry_run}))
                    .await;
                refused(&r, &field, limit);
            }
        }
    }
    let jobs = app.get("/engine/bulk").await;
    assert_eq!(jobs.body["count"], 0, "no job was created: {:?}", jobs.body);
}

/// The value of one series in a scrape of `/metrics` (0 when absent).
async fn series(app: &TestApp, series: &str) -> f64 {
    let metrics = app.get("/metrics").await;
    let text = metrics.body.as_str().unwrap_or_default().to_string();
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

const UNKNOWN_GOAL_RELOADS: &str = r#"tartan_catalog_reloads_total{reason="unknown_goal"}"#;

/// Many starts and plans naming goals nobody registered: each a 404 from
/// the cached catalog, not a read of the whole catalog from the database
/// per request (which a client could repeat as fast as it likes). On
/// SQLite the cache is the catalog (one process per database): never read
/// again. On Postgres other processes' changes arrive by notice, and an
/// unknown goal re-reads at most once a second: a step registered through
/// another process is still found at once.
async fn unknown_goals_are_answered_from_the_cached_catalog(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let url = db.url.clone();
    let a = start_on(db, "node-a").await;
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": "done"}))).await;
    let known = sync_step("known", &svc.url("/known"), &["in"], &["out"]);
    assert_eq!(a.register(&known).await.status, StatusCode::CREATED);

    let began = Instant::now();
    for round in 0..25 {
        let requests = (0..8).map(|i| {
            let a = &a;
            async move {
                let goal = format!("nope-{round}-{i}");
                if i % 2 == 0 {
                    a.start_flow(
                        &json!({"id": format!("f-{round}-{i}"), "goals": [goal], "init": {"in": ["x"]}}),
                    )
                    .await
                } else {
                    a.post("/engine/plan", &json!({"goals": [goal]})).await
                }
            }
        });
        for r in futures::future::join_all(requests).await {
            assert_eq!(r.status, StatusCode::NOT_FOUND, "{:?}", r.body);
            let detail = r.body["detail"].as_str().unwrap_or_default();
            assert!(detail.starts_with("step not found: nope-"), "{detail}");
        }
    }
    let took = began.elapsed();
    let reloads = series(&a, UNKNOWN_GOAL_RELOADS).await;
    match backend {
        Backend::Sqlite => assert_eq!(reloads, 0.0, "200 unknown goals read the catalog"),
        // At most once a second (and the first at once).
        Backend::Postgres => assert!(
            reloads <= 2.0 + took.as_secs_f64(),
            "200 unknown goals in {took:?} read the catalog {reloads} times"
        ),
    }
    let r = a
        .start_flow(&json!({"id": "ok", "goals": ["known"], "init": {"in": ["x"]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    if backend == Backend::Sqlite {
        return;
    }

    // A second process, which has just been told about unknown goals: a
    // step registered through the first is found through it all the same.
    let b = start_on(TestDb::at_url(url), "node-b").await;
    for i in 0..20 {
        let r = b
            .post("/engine/plan", &json!({"goals": [format!("late-{i}")]}))
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{:?}", r.body);
    }
    let late = sync_step("late", &svc.url("/late"), &["in"], &["out"]);
    assert_eq!(a.register(&late).await.status, StatusCode::CREATED);
    let start = json!({"id": "late-1", "goals": ["late"], "init": {"in": ["x"]}});
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let r = b.start_flow(&start).await;
        if r.status == StatusCode::CREATED {
            break;
        }
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{:?}", r.body);
        assert!(
            Instant::now() < until,
            "the step registered through a never reached b"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(b.wait_for_flow("late-1").await["status"], "completed");
}
