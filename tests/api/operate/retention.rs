//! Retention and event histories: finished flows past the retention are
//! deleted with everything of theirs while active and recent ones stay (by
//! the store, by the engine's sweep, by `tartan purge`); event histories
//! come a page at a time (docs/operating.md, "Retention", docs/api.md "Event
//! histories").

use std::time::Duration;

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use tartan_store::CatalogChange;

use crate::helpers::{
    json_reply, read_reply, spawn_app, start_on, start_on_with, sync_step, Backend, StepServer, TestApp,
    TestDb,
};
use tartan_testkit::both_backends;

both_backends!(
    finished_flows_past_the_cutoff_are_purged_with_everything_of_theirs,
    the_engine_purges_finished_flows_past_its_retention,
    purges_running_at_once_delete_each_flow_once,
    a_flow_history_walked_in_pages_gives_every_event_once_in_order,
    a_long_catalog_history_is_answered_a_page_at_a_time,
    bad_page_parameters_are_refused_naming_them,
    a_catalog_history_of_large_steps_comes_in_pages_bounded_in_bytes,
    a_flow_history_of_large_outputs_comes_in_pages_bounded_in_bytes,
);

/// `/ok` answers at once; `/busy` is unavailable, and the `stuck` step waits
/// an hour before it tries again: its flow stays active.
async fn steps(app: &TestApp) -> StepServer {
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/ok" => json_reply(200, json!({"out": "done"})),
        _ => json_reply(503, json!({})),
    })
    .await;
    let finish = sync_step("finish", &svc.url("/ok"), &["who"], &["out"]);
    assert_eq!(app.register(&finish).await.status, StatusCode::CREATED);
    let mut stuck = sync_step("stuck", &svc.url("/busy"), &["who"], &["later"]);
    stuck["work_config"] =
        json!({"max_retries": 3, "init_backoff": "1h", "max_backoff": "1h", "backoff_type": "fixed"});
    assert_eq!(app.register(&stuck).await.status, StatusCode::CREATED);
    svc
}

/// Start a flow of `goal` labelled `keep: <id>`.
async fn start(app: &TestApp, id: &str, goal: &str) {
    let r = app
        .start_flow(&json!({"id": id, "goals": [goal], "init": {"who": ["a"]}, "labels": {"keep": id}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
}

/// Start a flow that stays active: its call failed and its retry is an
/// hour away.
async fn start_stuck(app: &TestApp, id: &str) {
    start(app, id, "stuck").await;
    for _ in 0..400 {
        if app
            .event_types(id)
            .await
            .iter()
            .any(|t| t == "work_retry_scheduled")
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{id} never scheduled its retry: {}", app.flow(id).await);
}

fn deactivated_at(flow: &Value) -> DateTime<Utc> {
    flow["deactivated_at"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|| panic!("no deactivated_at: {flow}"))
}

/// The rows of a flow in every table keyed by one: flows, events, work
/// items, labels.
async fn rows_of(url: &str, flow_id: &str) -> [i64; 4] {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let mut counts = [0; 4];
    for (n, sql) in [
        "SELECT COUNT(*) AS n FROM flows WHERE id = $1",
        "SELECT COUNT(*) AS n FROM events WHERE aggregate_type = 'flow' AND aggregate_id = $1",
        "SELECT COUNT(*) AS n FROM work_items WHERE flow_id = $1",
        "SELECT COUNT(*) AS n FROM flow_labels WHERE flow_id = $1",
    ]
    .iter()
    .enumerate()
    {
        let row = sqlx::query(sql).bind(flow_id).fetch_one(&pool).await.unwrap();
        counts[n] = sqlx::Row::try_get::<i64, _>(&row, "n").unwrap();
    }
    pool.close().await;
    counts
}

async fn assert_gone(app: &TestApp, id: &str) {
    for path in [
        format!("/engine/flow/{id}"),
        format!("/engine/flow/{id}/events"),
        format!("/engine/flow/{id}/events?after=0&limit=10"),
        format!("/engine/flow/{id}/status"),
        format!("/engine/flow/{id}/work"),
    ] {
        let r = app.get(&path).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}: {:?}", r.body);
        assert_eq!(r.content_type, "application/problem+json", "{path}");
    }
    let work = app.get(&format!("/engine/work?flow_id={id}")).await;
    assert_eq!(work.body["count"], 0, "{:?}", work.body);
    let labelled = app
        .post("/engine/flow/query", &json!({"labels": {"keep": id}}))
        .await;
    assert_eq!(labelled.body["count"], 0, "{:?}", labelled.body);
}

async fn finished_flows_past_the_cutoff_are_purged_with_everything_of_theirs(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let url = db.url.clone();
    let app = start_on(db, "retention").await;
    let _svc = steps(&app).await;
    start(&app, "old", "finish").await;
    let old = app.wait_for_flow("old").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    start(&app, "recent", "finish").await;
    let recent = app.wait_for_flow("recent").await;
    start_stuck(&app, "running").await;
    for id in ["old", "recent", "running"] {
        let rows = rows_of(&url, id).await;
        assert!(rows.iter().all(|n| *n > 0), "{id} before the purge: {rows:?}");
    }

    // Between the two finished flows: the older goes, the newer stays.
    let cutoff = deactivated_at(&old) + (deactivated_at(&recent) - deactivated_at(&old)) / 2;
    let store = app.engine.store();
    assert_eq!(store.purge_finished(cutoff, 500).await.unwrap(), 1);
    assert_eq!(rows_of(&url, "old").await, [0; 4]);
    assert_gone(&app, "old").await;
    assert_eq!(app.flow("recent").await["status"], "completed");
    assert!(rows_of(&url, "recent").await.iter().all(|n| *n > 0));
    // Purging again finds nothing more.
    assert_eq!(store.purge_finished(cutoff, 500).await.unwrap(), 0);

    // A cutoff in the future takes every finished flow, never an active one.
    let later = Utc::now() + chrono::Duration::hours(1);
    assert_eq!(store.purge_finished(later, 500).await.unwrap(), 1);
    assert_gone(&app, "recent").await;
    let running = app.flow("running").await;
    assert_eq!(running["status"], "active", "{running}");
    assert!(rows_of(&url, "running").await.iter().all(|n| *n > 0));
}

async fn the_engine_purges_finished_flows_past_its_retention(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let app = start_on_with(db, "retention", |c| {
        c.retention = Some(Duration::from_millis(200));
    })
    .await;
    let _svc = steps(&app).await;
    start_stuck(&app, "running").await;
    start(&app, "brief", "finish").await;
    app.wait_for_flow("brief").await;
    // The sweep runs every second or so here: a generous bound.
    let mut gone = false;
    for _ in 0..300 {
        if app.get("/engine/flow/brief").await.status == StatusCode::NOT_FOUND {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the finished flow is still there");
    assert_gone(&app, "brief").await;
    assert_eq!(app.flow("running").await["status"], "active");
    assert!(!app.event_types("running").await.is_empty());
}

/// Every event of a history, walked with `limit`.
async fn walk(app: &TestApp, path: &str, limit: usize) -> Vec<Value> {
    let mut all = Vec::new();
    let mut query = format!("limit={limit}");
    for _ in 0..10_000 {
        let r = app.get(&format!("{path}?{query}")).await;
        assert_eq!(r.status, StatusCode::OK, "{path}?{query}: {:?}", r.body);
        let events = r.body["events"].as_array().cloned().unwrap_or_default();
        assert!(events.len() <= limit, "{path}?{query}: {} events", events.len());
        assert_eq!(r.body["count"], events.len());
        all.extend(events);
        match r.body.get("next") {
            Some(Value::Number(next)) => query = format!("after={next}&limit={limit}"),
            Some(Value::Null) => return all,
            other => panic!("{path}?{query}: `next` is {other:?}"),
        }
    }
    panic!("{path}: the pages never ended");
}

fn sequences(events: &[Value]) -> Vec<i64> {
    events.iter().filter_map(|e| e["sequence"].as_i64()).collect()
}

async fn a_flow_history_walked_in_pages_gives_every_event_once_in_order(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/a" => json_reply(200, json!({"x": "1"})),
        "/b" => json_reply(200, json!({"y": "2"})),
        _ => json_reply(200, json!({"z": "3"})),
    })
    .await;
    for (id, input, output) in [("a", "who", "x"), ("b", "x", "y"), ("c", "y", "z")] {
        let step = sync_step(id, &svc.url(&format!("/{id}")), &[input], &[output]);
        assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    }
    start(&app, "long", "c").await;
    assert_eq!(app.wait_for_flow("long").await["status"], "completed");

    // Unpaged: today's answer, no `next`.
    let whole = app.get("/engine/flow/long/events").await;
    assert_eq!(whole.status, StatusCode::OK);
    assert!(whole.body.get("next").is_none(), "{:?}", whole.body);
    let events = whole.body["events"].as_array().cloned().unwrap_or_default();
    assert!(events.len() >= 10, "{} events", events.len());
    assert_eq!(whole.body["count"], events.len());
    let n = i64::try_from(events.len()).unwrap();
    assert_eq!(sequences(&events), (1..=n).collect::<Vec<_>>());

    for limit in [1, 3, 7, 1000] {
        let walked = walk(&app, "/engine/flow/long/events", limit).await;
        assert_eq!(walked, events, "limit {limit}");
    }
    // `after` alone pages with the default limit, from the event after it.
    let rest = app.get("/engine/flow/long/events?after=4").await;
    assert_eq!(
        sequences(rest.body["events"].as_array().unwrap()),
        (5..=n).collect::<Vec<_>>()
    );
    assert_eq!(rest.body["next"], Value::Null);
    // Past the end of a flow that exists: an empty last page.
    let past = app.get(&format!("/engine/flow/long/events?after={n}")).await;
    assert_eq!(past.status, StatusCode::OK, "{:?}", past.body);
    assert_eq!(past.body["count"], 0);
    assert_eq!(past.body["next"], Value::Null);
}

async fn a_long_catalog_history_is_answered_a_page_at_a_time(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": "x"}))).await;
    let step = sync_step("one", &svc.url("/one"), &["who"], &["out"]);
    assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    // 1,004 more catalog events in one commit (removals of steps that are
    // not there change no step).
    let changes: Vec<CatalogChange> = (0..1004)
        .map(|i| CatalogChange::Unregistered(format!("gone-{i}"), Utc::now()))
        .collect();
    app.engine
        .store()
        .commit_catalog_batch(1, &changes)
        .await
        .unwrap();

    // Without parameters: the first 1,000 and where the rest starts.
    let first = app.get("/engine/catalog/events").await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.body["count"], 1000);
    assert_eq!(first.body["next"], 1000);
    let first_events = first.body["events"].as_array().cloned().unwrap_or_default();
    assert_eq!(sequences(&first_events), (1..=1000).collect::<Vec<_>>());
    let rest = app.get("/engine/catalog/events?after=1000").await;
    assert_eq!(
        sequences(rest.body["events"].as_array().unwrap()),
        (1001..=1005).collect::<Vec<_>>()
    );
    assert_eq!(rest.body["next"], Value::Null);

    let walked = walk(&app, "/engine/catalog/events", 333).await;
    assert_eq!(sequences(&walked), (1..=1005).collect::<Vec<_>>());
    assert_eq!(walked[..1000], first_events[..]);
    assert_eq!(walked[0]["type"], "step_registered");
    assert_eq!(walked[1004]["type"], "step_unregistered");
}

/// What a page of a history may hold: 4 MiB of event data (docs/api.md,
/// "Event histories"), and the events' envelopes around it.
const PAGE_BYTES: usize = 4 * 1024 * 1024;
const ENVELOPES: usize = 64 * 1024;

/// Every event of a history, page by page from `first` (a query, or none),
/// following `next`: each page holds an event, and is at most a page's
/// bytes unless it holds one event alone.
async fn walk_bounded(app: &TestApp, path: &str, first: &str) -> (Vec<Value>, usize) {
    let mut all = Vec::new();
    let mut query = first.to_string();
    for pages in 1..=1000 {
        let resp = app
            .client
            .get(app.url(&format!("{path}?{query}")))
            .send()
            .await
            .unwrap();
        let (r, bytes) = read_reply(resp).await;
        assert_eq!(r.status, StatusCode::OK, "{path}?{query}: {:?}", r.body);
        let events = r.body["events"].as_array().cloned().unwrap_or_default();
        assert!(
            bytes <= PAGE_BYTES + ENVELOPES || events.len() == 1,
            "{path}?{query}: {bytes} bytes in {} events",
            events.len()
        );
        all.extend(events);
        match r.body.get("next") {
            Some(Value::Number(next)) => query = format!("after={next}"),
            Some(Value::Null) | None => return (all, pages),
            other => panic!("{path}?{query}: `next` is {other:?}"),
        }
    }
    panic!("{path}: the pages never ended");
}

/// 24 steps of about 300 KB each: 7 MB of catalog events, which one page
/// (with or without parameters) does not hold.
async fn a_catalog_history_of_large_steps_comes_in_pages_bounded_in_bytes(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": "x"}))).await;
    const STEPS: usize = 24;
    for k in 0..STEPS {
        let mut step = sync_step(&format!("large-{k}"), &svc.url("/large"), &["who"], &["out"]);
        // Its bulk in const values: names and labels are bounded, values not.
        for n in 0..4 {
            step["attributes"][format!("note-{n}")] = json!({
                "role": "const",
                "type": "string",
                "const": {"value": format!("\"{}\"", "x".repeat(75_000))},
            });
        }
        let r = app.register(&step).await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    }
    // Without parameters: the first pages' worth, and where the rest starts.
    let first = app.get("/engine/catalog/events").await;
    let count = first.body["count"].as_u64().unwrap_or(0);
    assert!((1..STEPS as u64).contains(&count), "{count} events in one answer");
    assert_eq!(first.body["next"], count);
    for first in ["", "limit=1000", "after=0"] {
        let (walked, pages) = walk_bounded(&app, "/engine/catalog/events", first).await;
        assert_eq!(
            sequences(&walked),
            (1..=STEPS as i64).collect::<Vec<_>>(),
            "{first}"
        );
        assert!(pages >= 2, "{first}: {pages} pages");
        assert!(walked.iter().all(|e| e["type"] == "step_registered"));
    }
}

/// A step answering 1 MB: its flow's history holds that megabyte four
/// times (the result, the attribute, the step's outputs, the flow's), more
/// than one page.
async fn a_flow_history_of_large_outputs_comes_in_pages_bounded_in_bytes(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let big = "x".repeat(1024 * 1024);
    let svc = StepServer::start(move |_, _| json_reply(200, json!({"out": big}))).await;
    let step = sync_step("big", &svc.url("/big"), &["who"], &["out"]);
    assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    start(&app, "large", "big").await;
    assert_eq!(app.wait_for_flow("large").await["status"], "completed");
    let stored = app.engine.store().flow_events("large").await.unwrap();
    let whole = app.get("/engine/flow/large/events").await;
    assert!(whole.body["next"].is_number(), "one answer held it all");
    for first in ["", "limit=1000", "after=0&limit=2"] {
        let (walked, pages) = walk_bounded(&app, "/engine/flow/large/events", first).await;
        assert_eq!(
            sequences(&walked),
            (1..=stored.len() as i64).collect::<Vec<_>>(),
            "{first}"
        );
        assert!(pages >= 2, "{first}: {pages} pages");
        for (served, kept) in walked.iter().zip(&stored) {
            assert_eq!(served["type"], kept.event_type.as_str());
            assert_eq!(served["data"], kept.data);
        }
    }
}

async fn bad_page_parameters_are_refused_naming_them(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": "x"}))).await;
    let step = sync_step("one", &svc.url("/one"), &["who"], &["out"]);
    assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    start(&app, "f", "one").await;
    app.wait_for_flow("f").await;
    for path in ["/engine/flow/f/events", "/engine/catalog/events"] {
        for (query, named) in [
            ("limit=0", "limit"),
            ("limit=1001", "limit"),
            ("limit=ten", "limit"),
            ("limit=-5", "limit"),
            ("limit=", "limit"),
            ("after=-1", "after"),
            ("after=x", "after"),
            ("after=1.5", "after"),
            ("after=3&limit=0", "limit"),
        ] {
            let r = app.get(&format!("{path}?{query}")).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}?{query}: {:?}", r.body);
            assert_eq!(r.content_type, "application/problem+json");
            let detail = r.body["detail"].as_str().unwrap_or_default();
            assert!(detail.starts_with(named), "{path}?{query}: {detail}");
        }
    }
    for path in [
        "/engine/flow/nope/events",
        "/engine/flow/nope/events?limit=5",
        "/engine/flow/nope/events?after=3",
    ] {
        let r = app.get(path).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}: {:?}", r.body);
        assert_eq!(r.content_type, "application/problem+json");
    }
}

/// Run `tartan purge` with `args` and only the environment `env`: whether
/// it succeeded, its stdout and stderr.
async fn purge(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let args: Vec<&str> = std::iter::once("purge").chain(args.iter().copied()).collect();
    crate::helpers::run_tartan(&args, env).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_purge_command_deletes_flows_finished_before_its_cutoff() {
    let db = TestDb::create(Backend::Sqlite).await.expect("a SQLite file");
    let url = db.url.clone();
    let app = start_on(db, "purge-cli").await;
    let _svc = steps(&app).await;
    start(&app, "done", "finish").await;
    app.wait_for_flow("done").await;
    start_stuck(&app, "running").await;

    for bad in ["0", "0s", "soon", "-1d"] {
        let (ok, _, stderr) = purge(&["--before", bad, "--database-url", &url], &[]).await;
        assert!(!ok, "--before {bad} was accepted");
        assert!(stderr.contains("--before"), "--before {bad}: {stderr}");
    }
    assert!(rows_of(&url, "done").await.iter().all(|n| *n > 0));

    // Finished less than an hour ago: kept. The database from the environment.
    let (ok, stdout, stderr) = purge(&["--before", "1h"], &[("TARTAN_DATABASE_URL", &url)]).await;
    assert!(ok, "{stderr}");
    assert!(stdout.starts_with("purged 0 "), "{stdout}");
    assert_eq!(app.flow("done").await["status"], "completed");

    tokio::time::sleep(Duration::from_millis(50)).await;
    // A dry run counts and deletes nothing.
    let (ok, stdout, stderr) = purge(&["--before", "10ms", "--dry-run", "--database-url", &url], &[]).await;
    assert!(ok, "{stderr}");
    assert!(stdout.starts_with("would purge 1 "), "{stdout}");
    assert!(rows_of(&url, "done").await.iter().all(|n| *n > 0));
    let (ok, stdout, stderr) = purge(&["--before", "10ms", "--database-url", &url], &[]).await;
    assert!(ok, "{stderr}");
    assert!(stdout.starts_with("purged 1 "), "{stdout}");
    assert_eq!(rows_of(&url, "done").await, [0; 4]);
    assert_gone(&app, "done").await;
    assert_eq!(app.flow("running").await["status"], "active");

    // A purge never migrates: on a file no release made, it says so and
    // creates nothing.
    let missing = format!("{url}-none");
    let (ok, _, stderr) = purge(&["--before", "1d", "--database-url", &missing], &[]).await;
    assert!(!ok);
    assert!(
        stderr.contains("no SQLite database at") && stderr.contains("tartan migrate"),
        "{stderr}"
    );
    assert!(!std::path::Path::new(missing.trim_start_matches("sqlite://")).exists());
}

async fn purges_running_at_once_delete_each_flow_once(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let url = db.url.clone();
    let app = start_on(db, "retention").await;
    let _svc = steps(&app).await;
    let ids: Vec<String> = (0..30).map(|i| format!("f{i}")).collect();
    for id in &ids {
        start(&app, id, "finish").await;
    }
    for id in &ids {
        app.wait_for_flow(id).await;
    }
    start_stuck(&app, "running").await;
    // Three purgers, as three processes would be: each its own store, small
    // batches, all at once.
    let later = Utc::now() + chrono::Duration::hours(1);
    let purgers = (0..3).map(|_| {
        let url = url.clone();
        tokio::spawn(async move {
            let store = tartan_store::open(&url).await.unwrap();
            let mut total = 0;
            loop {
                let n = store.purge_finished(later, 4).await.unwrap();
                total += n;
                if n == 0 {
                    return total;
                }
            }
        })
    });
    let totals: Vec<usize> = futures::future::join_all(purgers)
        .await
        .into_iter()
        .map(|t| t.unwrap())
        .collect();
    assert_eq!(totals.iter().sum::<usize>(), ids.len(), "{totals:?}");
    for id in &ids {
        assert_eq!(rows_of(&url, id).await, [0; 4], "{id}");
    }
    assert_eq!(app.flow("running").await["status"], "active");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_purges_after_tartan_retention() {
    use crate::helpers::{call, register, spawn_binary_with, wait_for_terminal};
    let db = TestDb::create(Backend::Sqlite).await.expect("a SQLite file");
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": "done"}))).await;
    let engine = spawn_binary_with(&db, "retention", &[("TARTAN_RETENTION", "1s")]).await;
    register(
        &engine,
        vec![sync_step("finish", &svc.url("/ok"), &["who"], &["out"])],
    )
    .await;
    let start = json!({"id": "brief", "goals": ["finish"], "init": {"who": ["a"]}});
    let (status, body) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(wait_for_terminal(&engine, "brief").await["status"], "completed");
    let mut gone = false;
    for _ in 0..300 {
        if call(&engine, reqwest::Method::GET, "/engine/flow/brief", None)
            .await
            .0
            == 404
        {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the finished flow is still there");
    // The sweep logs what it deleted once its batches are done.
    let logged = || {
        engine
            .log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("purged finished flows past their retention"))
    };
    for _ in 0..100 {
        if logged() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(logged(), "{}", engine.log.lock().unwrap().join("\n"));
}
