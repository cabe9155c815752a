//! `POST /engine/flow/query` with the criteria a bulk job takes (failed
//! step, error class, creation time) and the fields the dashboard's list
//! shows (goals, times, steps running and failed): docs/api.md, "Flows".

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::helpers::{
    call, json_reply, spawn_app, spawn_binary_with, sync_step, wait_for_terminal, Backend, StepServer, TestDb,
};
use axum::response::IntoResponse;
use reqwest::Method;
use tartan_testkit::both_backends;

both_backends!(
    a_query_finds_flows_by_failed_step_error_class_and_time,
    a_page_of_flows_shows_goals_times_and_the_steps_running_or_failed,
    bad_criteria_are_refused_naming_the_field,
    flows_are_listed_running_first_then_ended_as_argyll_lists_them,
);

fn ids(reply: &Value) -> Vec<String> {
    reply["flows"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f["id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// `ok` answers, `refuse` answers 422 (permanent), `hold` waits for the
/// test to let it go.
async fn steps(release: Arc<Notify>) -> StepServer {
    StepServer::start_async(move |r, _| {
        let release = release.clone();
        Box::pin(async move {
            match r.path.as_str() {
                "/ok" => json_reply(200, json!({"done": "yes"})),
                "/hold" => {
                    release.notified().await;
                    json_reply(200, json!({"held": "yes"}))
                }
                _ => json_reply(422, json!({"detail": "refused"})),
            }
            .into_response()
        })
    })
    .await
}

async fn a_query_finds_flows_by_failed_step_error_class_and_time(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = steps(Arc::new(Notify::new())).await;
    app.register(&sync_step("ok", &svc.url("/ok"), &["x"], &["done"]))
        .await;
    app.register(&sync_step("refuse", &svc.url("/refuse"), &["x"], &["nope"]))
        .await;
    for (id, goal) in [("good", "ok"), ("bad-1", "refuse"), ("bad-2", "refuse")] {
        let r = app
            .start_flow(&json!({"id": id, "goals": [goal], "init": {"x": ["1"]}}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
        app.wait_for_flow(id).await;
    }
    let query = |body: Value| {
        let app = &app;
        async move {
            let r = app.post("/engine/flow/query", &body).await;
            assert_eq!(r.status, StatusCode::OK, "{body}: {:?}", r.body);
            let mut found = ids(&r.body);
            found.sort();
            found
        }
    };
    assert_eq!(query(json!({"failed_step": "refuse"})).await, ["bad-1", "bad-2"]);
    assert_eq!(query(json!({"failed_step": "ok"})).await, Vec::<String>::new());
    assert_eq!(
        query(json!({"error_class": "permanent"})).await,
        ["bad-1", "bad-2"]
    );
    assert_eq!(
        query(json!({"error_class": "timeout"})).await,
        Vec::<String>::new()
    );
    // The same filter a bulk retry would act on counts the same flows.
    let dry = app
        .post(
            "/engine/bulk/retry",
            &json!({"filter": {"failed_step": "refuse", "error_class": "permanent"}, "dry_run": true}),
        )
        .await;
    assert_eq!(dry.body["matched"], 2, "{:?}", dry.body);

    let good = app.flow("good").await;
    let created = good["created_at"].as_str().unwrap_or_default().to_string();
    let after = query(json!({"created_after": created})).await;
    assert!(after.contains(&"good".to_string()), "{after:?}");
    assert_eq!(
        query(json!({"created_before": created})).await,
        Vec::<String>::new(),
        "nothing was created before the first flow"
    );
    assert_eq!(
        query(json!({"created_after": "2100-01-01T00:00:00Z"})).await,
        Vec::<String>::new()
    );
    // Empty criteria are none, as an empty id_prefix always was.
    assert_eq!(
        query(json!({"failed_step": "", "error_class": "", "created_after": ""})).await,
        ["bad-1", "bad-2", "good"]
    );
}

async fn a_page_of_flows_shows_goals_times_and_the_steps_running_or_failed(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let release = Arc::new(Notify::new());
    let svc = steps(release.clone()).await;
    app.register(&sync_step("ok", &svc.url("/ok"), &["x"], &["done"]))
        .await;
    app.register(&sync_step("refuse", &svc.url("/refuse"), &["x"], &["nope"]))
        .await;
    app.register(&sync_step("hold", &svc.url("/hold"), &["x"], &["held"]))
        .await;
    for (id, goal) in [("done", "ok"), ("failed", "refuse")] {
        app.start_flow(&json!({"id": id, "goals": [goal], "init": {"x": ["1"]}}))
            .await;
        app.wait_for_flow(id).await;
    }
    app.start_flow(&json!({"id": "running", "goals": ["hold"], "init": {"x": ["1"]}}))
        .await;
    // The held call is in flight once the step server has it.
    for _ in 0..400 {
        if svc.requests().iter().any(|r| r.path == "/hold") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let page = app.post("/engine/flow/query", &json!({})).await;
    assert_eq!(page.status, StatusCode::OK);
    let by_id = |id: &str| -> Value {
        page.body["flows"]
            .as_array()
            .and_then(|a| a.iter().find(|f| f["id"] == id).cloned())
            .unwrap_or_else(|| panic!("{id} not in {:?}", page.body))
    };
    let done = by_id("done");
    assert_eq!(done["goals"], json!(["ok"]));
    assert_eq!(done["status"], "completed");
    assert!(
        done["completed_at"].is_string() && done["completed_at"] == done["timestamp"],
        "{done}"
    );
    assert!(
        done.get("running_steps").is_none() && done.get("failed_steps").is_none(),
        "{done}"
    );
    let failed = by_id("failed");
    assert_eq!(failed["failed_steps"], json!(["refuse"]), "{failed}");
    assert!(
        failed["error"].as_str().unwrap_or_default().contains("refused"),
        "{failed}"
    );
    let running = by_id("running");
    assert_eq!(running["running_steps"], json!(["hold"]), "{running}");
    assert!(running.get("completed_at").is_none(), "{running}");
    // The bare list stays Argyll's: id, status and time only.
    let bare = app.get("/engine/flow").await;
    let first = &bare.body[0];
    assert!(
        first.get("goals").is_none() && first.get("running_steps").is_none(),
        "{first}"
    );
    release.notify_waiters();
    release.notify_one();
    app.wait_for_flow("running").await;
}

async fn bad_criteria_are_refused_naming_the_field(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    for (body, field) in [
        (json!({"error_class": "flaky"}), "error_class"),
        (json!({"created_after": "yesterday"}), "created_after"),
        (
            json!({"created_before": "2026-13-01T00:00:00Z"}),
            "created_before",
        ),
        (json!({"failed_step": "///"}), "failed_step"),
        (json!({"failed_step": "x".repeat(300)}), "failed_step"),
        (json!({"failed_step": 7}), "failed_step"),
    ] {
        let r = app.post("/engine/flow/query", &body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {:?}", r.body);
        assert_eq!(r.content_type, "application/problem+json");
        let detail = r.body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(field), "{body}: {detail}");
    }
}

/// Argyll's order (docs/api.md, "Listing flows"), through the binary:
/// running flows first, by start, then ended ones, by end; `GET
/// /engine/flow` newest first, the query oldest first unless asked, with
/// `total` on every page and cursors that cross from one group to the
/// other.
async fn flows_are_listed_running_first_then_ended_as_argyll_lists_them(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "lister", &[]).await;
    let release = Arc::new(Notify::new());
    let svc = steps(release.clone()).await;
    let post = |path: &'static str, body: Value| {
        let engine = &engine;
        async move {
            let (status, reply) = call(engine, Method::POST, path, Some(body)).await;
            assert!(status < 300, "{path}: {status} {reply}");
            reply
        }
    };
    post(
        "/engine/step",
        sync_step("ok", &svc.url("/ok"), &["x"], &["done"]),
    )
    .await;
    post(
        "/engine/step",
        sync_step("hold", &svc.url("/hold"), &["x"], &["held"]),
    )
    .await;
    // Started in this order: r1, d1, r2, d2; d1 and d2 end at once, the
    // others run on.
    for (id, goal) in [("r1", "hold"), ("d1", "ok"), ("r2", "hold"), ("d2", "ok")] {
        post(
            "/engine/flow",
            json!({"id": id, "goals": [goal], "init": {"x": ["1"]}}),
        )
        .await;
        if goal == "ok" {
            assert_eq!(wait_for_terminal(&engine, id).await["status"], "completed");
        }
    }
    let (_, list) = call(&engine, Method::GET, "/engine/flow", None).await;
    let listed: Vec<&str> = list
        .as_array()
        .map(|a| a.iter().filter_map(|f| f["id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(listed, ["r2", "r1", "d2", "d1"], "{list}");

    // The query: oldest first by default, a page of one at a time.
    let mut seen = Vec::new();
    let mut cursor = String::new();
    for _ in 0..10 {
        let page = post("/engine/flow/query", json!({"limit": 1, "cursor": cursor})).await;
        assert_eq!(page["total"], 4, "{page}");
        seen.extend(ids(&page));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = c.to_string(),
            None => break,
        }
    }
    assert_eq!(seen, ["r1", "r2", "d1", "d2"]);
    let first = post("/engine/flow/query", json!({"limit": 3, "sort": "recent_desc"})).await;
    assert_eq!(ids(&first), ["r2", "r1", "d2"], "{first}");
    let rest = post(
        "/engine/flow/query",
        json!({"limit": 3, "sort": "recent_desc", "cursor": first["next_cursor"]}),
    )
    .await;
    assert_eq!(ids(&rest), ["d1"], "{rest}");
    assert_eq!(rest["total"], 4);
    assert!(rest.get("next_cursor").is_none(), "{rest}");

    // Not counted when the query says so (the dashboard's pages).
    let uncounted = post("/engine/flow/query", json!({"total": false})).await;
    assert!(uncounted.get("total").is_none(), "{uncounted}");
    assert_eq!(ids(&uncounted), ["r1", "r2", "d1", "d2"]);

    // A filter counts what it matches; a status leaves the other group out.
    let ended = post(
        "/engine/flow/query",
        json!({"statuses": ["completed"], "sort": "recent_desc"}),
    )
    .await;
    assert_eq!(ids(&ended), ["d2", "d1"]);
    assert_eq!(ended["total"], 2);

    // Each flow's time is when it took its status.
    for f in first["flows"].as_array().into_iter().flatten() {
        let when = if f["status"] == "active" {
            "created_at"
        } else {
            "completed_at"
        };
        assert_eq!(f["timestamp"], f[when], "{f}");
    }
    let cursor = first["next_cursor"].as_str().unwrap_or_default();
    assert!(cursor.starts_with('e'), "a cursor names its group: {cursor}");
    // A cursor of another kind (a work listing's) is refused.
    let (status, bad) = call(
        &engine,
        Method::POST,
        "/engine/flow/query",
        Some(json!({"cursor": "123.r1"})),
    )
    .await;
    assert_eq!(status, 400, "{bad}");
    release.notify_waiters();
}
