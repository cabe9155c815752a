//! Bulk retry and cancel of many flows as a background job (docs/api.md,
//! "Bulk operations").

use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use tartan_core::flow::FlowStatus;

use crate::helpers::{
    call, events, json_reply, of_type, read_reply, register, spawn_app, spawn_binary_with, spawn_with_tokens,
    start_on_with, sync_step, Backend, Binary, StepServer, TestApp, TestDb,
};
use tartan_testkit::both_backends;

both_backends!(
    a_bulk_retry_retries_exactly_the_flows_its_filter_matched,
    a_bulk_cancel_stops_the_matched_active_flows,
    an_empty_or_bad_filter_is_refused,
    a_job_shows_its_progress_keeps_its_rate_and_can_be_stopped,
    a_job_survives_a_restart_and_acts_on_each_flow_once,
    a_job_whose_process_died_is_taken_over_by_another_once_its_lease_ran_out,
    a_read_token_may_read_jobs_but_not_start_or_stop_them,
    finished_jobs_go_with_the_retention,
    a_flow_the_job_retried_before_it_could_record_it_is_skipped,
    a_flow_the_job_cancelled_before_it_could_record_it_is_not_cancelled_again,
    a_filter_matching_more_flows_than_a_job_may_take_is_refused,
);

/// A step that declines every call for good: its flows fail at once.
fn refusing() -> axum::response::Response {
    json_reply(
        400,
        json!({"type": "about:blank", "status": 400, "detail": "declined"}),
    )
}

/// `a` and `b` both decline; `a` outputs `x`, `b` outputs `y`.
async fn failing_steps(app: &TestApp) -> StepServer {
    let svc = StepServer::start(|_, _| refusing()).await;
    for step in [
        sync_step("a", &svc.url("/a"), &[], &["x"]),
        sync_step("b", &svc.url("/b"), &[], &["y"]),
    ] {
        let r = app.register(&step).await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    }
    svc
}

/// Step `slow`, whose calls hang: its flows stay active until cancelled.
async fn slow_step(app: &TestApp) -> StepServer {
    let svc = StepServer::start_async(|_, _| {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            json_reply(200, json!({"s": "late"}))
        })
    })
    .await;
    let r = app
        .register(&sync_step("slow", &svc.url("/slow"), &[], &["s"]))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    svc
}

async fn start(app: &TestApp, id: &str, goal: &str, labels: Value) {
    let r = app
        .start_flow(&json!({"id": id, "goals": [goal], "labels": labels}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
}

/// Poll a job until it is no longer queued or running (bounded).
async fn wait_for_job(app: &TestApp, id: &str) -> Value {
    for _ in 0..1200 {
        let r = app.get(&format!("/engine/bulk/{id}")).await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        if !matches!(r.body["status"].as_str(), Some("queued" | "running")) {
            return r.body;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("bulk job {id} did not finish");
}

/// The `by` of each `flow_retried` of a flow.
async fn retried_by(app: &TestApp, flow: &str) -> Vec<Value> {
    let evs = events(app, flow).await;
    of_type(&evs, "flow_retried")
        .iter()
        .map(|e| e["data"]["by"].clone())
        .collect()
}

async fn a_bulk_retry_retries_exactly_the_flows_its_filter_matched(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let _svc = failing_steps(&app).await;
    for (id, goal, team) in [
        ("batch-1", "a", "red"),
        ("batch-2", "a", "red"),
        ("batch-3", "a", "red"),
        ("batch-b", "b", "red"),
        ("other-1", "a", "blue"),
    ] {
        start(&app, id, goal, json!({"team": team})).await;
    }
    for id in ["batch-1", "batch-2", "batch-3", "batch-b", "other-1"] {
        assert_eq!(app.wait_for_flow(id).await["status"], "failed");
    }

    // By id prefix and failed step: batch-b failed at `b`, other-1 has another prefix.
    let r = app
        .post(
            "/engine/bulk/retry",
            &json!({"filter": {"id_prefix": "batch-", "failed_step": "a"}, "rate": 100}),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    assert_eq!(r.body["kind"], "retry");
    assert_eq!(r.body["total"], 3, "{:?}", r.body);
    assert_eq!(r.body["reset_attempts"], true);
    assert_eq!(
        r.body["filter"],
        json!({"id_prefix": "batch-", "failed_step": "a"})
    );
    let job = r.body["id"].as_str().unwrap().to_string();
    let done = wait_for_job(&app, &job).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        (
            &done["done"],
            &done["skipped"],
            &done["failed"],
            &done["remaining"]
        ),
        (&json!(3), &json!(0), &json!(0), &json!(0)),
        "{done}"
    );
    assert!(done["finished_at"].is_string(), "{done}");
    for id in ["batch-1", "batch-2", "batch-3"] {
        assert_eq!(retried_by(&app, id).await, [json!(job)], "{id}");
    }
    for id in ["batch-b", "other-1"] {
        assert!(retried_by(&app, id).await.is_empty(), "{id} is not retried");
    }

    // By label and error class: only other-1 is blue.
    for id in ["batch-1", "batch-2", "batch-3"] {
        app.wait_for_flow(id).await;
    }
    let r = app
        .post(
            "/engine/bulk/retry",
            &json!({"filter": {"labels": {"team": "blue"}, "error_class": "permanent"}, "reset_attempts": false}),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    assert_eq!(r.body["total"], 1, "{:?}", r.body);
    assert_eq!(r.body["reset_attempts"], false);
    let second = r.body["id"].as_str().unwrap().to_string();
    assert_eq!(wait_for_job(&app, &second).await["done"], 1);
    assert_eq!(retried_by(&app, "other-1").await, [json!(second)]);
    assert_eq!(retried_by(&app, "batch-1").await, [json!(job)]);

    // Both jobs are listed, the most recent first.
    let r = app.get("/engine/bulk").await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body["count"], 2, "{:?}", r.body);
    assert_eq!(r.body["jobs"][0]["id"], json!(second));
    assert_eq!(r.body["jobs"][1]["id"], json!(job));
}

async fn a_bulk_cancel_stops_the_matched_active_flows(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let _svc = slow_step(&app).await;
    for (id, batch) in [("c-1", "b7"), ("c-2", "b7"), ("c-3", "b8")] {
        start(&app, id, "slow", json!({"batch": batch})).await;
    }
    let r = app
        .post(
            "/engine/bulk/cancel",
            &json!({"filter": {"labels": {"batch": "b7"}}, "compensate": false}),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    assert_eq!(r.body["kind"], "cancel");
    assert_eq!(r.body["compensate"], false);
    assert_eq!(r.body["total"], 2, "{:?}", r.body);
    let job = r.body["id"].as_str().unwrap().to_string();
    let done = wait_for_job(&app, &job).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["done"], 2, "{done}");
    for id in ["c-1", "c-2"] {
        let flow = app.flow(id).await;
        assert_eq!(flow["status"], "cancelled", "{flow}");
        let evs = events(&app, id).await;
        let cancelled = of_type(&evs, "flow_cancelled");
        assert_eq!(cancelled.len(), 1, "{evs:?}");
        assert_eq!(cancelled[0]["data"]["compensate"], false, "a kill");
    }
    assert_eq!(app.flow("c-3").await["status"], "active", "not matched");

    // Cancelled flows are not active: a second cancel matches nothing.
    let r = app
        .post("/engine/bulk/cancel", &json!({"filter": {"ids": ["c-1", "c-2"]}}))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    assert_eq!(r.body["total"], 0, "{:?}", r.body);
    let r = app
        .post(&format!("/engine/flow/{}/cancel", "c-3"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
}

async fn an_empty_or_bad_filter_is_refused(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let _svc = failing_steps(&app).await;
    start(&app, "f-1", "a", json!({})).await;
    app.wait_for_flow("f-1").await;
    for (path, body, says) in [
        ("/engine/bulk/retry", json!({"filter": {}}), "empty"),
        ("/engine/bulk/cancel", json!({"filter": {}}), "empty"),
        ("/engine/bulk/retry", json!({}), "filter"),
        (
            "/engine/bulk/retry",
            json!({"filter": {"prefix": "f-"}}),
            "prefix",
        ),
        (
            "/engine/bulk/retry",
            json!({"filter": {"ids": ["f-1"]}, "speed": 3}),
            "speed",
        ),
        (
            "/engine/bulk/retry",
            json!({"filter": {"statuses": ["completed"]}}),
            "statuses",
        ),
        (
            "/engine/bulk/cancel",
            json!({"filter": {"statuses": ["failed"]}}),
            "statuses",
        ),
        (
            "/engine/bulk/retry",
            json!({"filter": {"ids": ["f-1"]}, "rate": 0}),
            "rate",
        ),
        (
            "/engine/bulk/retry",
            json!({"filter": {"ids": ["f-1"]}, "rate": 5000}),
            "rate",
        ),
        (
            "/engine/bulk/retry",
            json!({"filter": {"error_class": "bad"}}),
            "error_class",
        ),
        (
            "/engine/bulk/retry",
            json!({"filter": {"created_after": "yesterday"}}),
            "created_after",
        ),
        (
            "/engine/bulk/retry",
            json!({"filter": {"id_prefix": "a/b"}}),
            "id_prefix",
        ),
    ] {
        let r = app.post(path, &body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path} {body}: {:?}", r.body);
        assert_eq!(r.content_type, "application/problem+json");
        let detail = r.body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(says), "{path} {body}: {detail}");
    }
    let ids: Vec<String> = (0..1001).map(|i| format!("x-{i}")).collect();
    let r = app
        .post("/engine/bulk/retry", &json!({"filter": {"ids": ids}}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    assert!(r.body["detail"].as_str().unwrap_or_default().contains("1000"));

    // A dry run counts and creates nothing.
    let r = app
        .post(
            "/engine/bulk/retry",
            &json!({"filter": {"id_prefix": "f-", "created_after": "2000-01-01T00:00:00Z"}, "dry_run": true}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body, json!({"dry_run": true, "kind": "retry", "matched": 1}));
    let r = app.get("/engine/bulk").await;
    assert_eq!(r.body["count"], 0, "{:?}", r.body);
    let r = app
        .post(
            "/engine/bulk/retry",
            &json!({"filter": {"created_before": "2000-01-01T00:00:00Z"}, "dry_run": true}),
        )
        .await;
    assert_eq!(r.body["matched"], 0, "{:?}", r.body);

    for (method, path) in [
        (Method::GET, "/engine/bulk/nope"),
        (Method::POST, "/engine/bulk/nope/cancel"),
    ] {
        let r = app.send(method, path, Some("{}".into())).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}: {:?}", r.body);
        assert!(r.body["detail"].as_str().unwrap_or_default().contains("nope"));
    }
    let r = app.get("/engine/bulk?limit=0").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
}

/// `n` failed flows `p-0` ... on step `a`.
async fn failed_flows(app: &TestApp, n: usize) -> Vec<String> {
    let ids: Vec<String> = (0..n).map(|i| format!("p-{i}")).collect();
    for id in &ids {
        start(app, id, "a", json!({})).await;
    }
    for id in &ids {
        assert_eq!(app.wait_for_flow(id).await["status"], "failed");
    }
    ids
}

async fn a_job_shows_its_progress_keeps_its_rate_and_can_be_stopped(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let _svc = failing_steps(&app).await;
    let ids = failed_flows(&app, 5).await;
    let r = app
        .post(
            "/engine/bulk/retry",
            &json!({"filter": {"id_prefix": "p-"}, "rate": 2}),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    assert_eq!(r.body["rate"], 2);
    let job = r.body["id"].as_str().unwrap().to_string();
    // Part way: running, some done, some remaining.
    let mut seen = None;
    for _ in 0..400 {
        let r = app.get(&format!("/engine/bulk/{job}")).await;
        let done = r.body["done"].as_u64().unwrap_or(0);
        if r.body["status"] == "running" && done >= 1 && r.body["remaining"].as_u64().unwrap_or(0) >= 1 {
            seen = Some(r.body);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let seen = seen.expect("the job seen part way");
    assert_eq!(seen["node"], "test-node", "{seen}");
    assert!(seen["started_at"].is_string(), "{seen}");
    assert_eq!(wait_for_job(&app, &job).await["done"], 5);
    // Two a second: the five retries span about two seconds.
    let mut times = Vec::new();
    for id in &ids {
        let evs = events(&app, id).await;
        let retried = of_type(&evs, "flow_retried");
        assert_eq!(retried.len(), 1, "{id}");
        let at = retried[0]["timestamp"].as_str().unwrap_or_default();
        times.push(chrono::DateTime::parse_from_rfc3339(at).expect("a timestamp"));
    }
    times.sort();
    let span = times[4] - times[0];
    assert!(
        span >= chrono::Duration::milliseconds(1500),
        "five retries at 2 a second took {span}"
    );

    // A second job, slower, stopped part way: it acts on no more flows.
    for id in &ids {
        app.wait_for_flow(id).await;
    }
    let r = app
        .post(
            "/engine/bulk/retry",
            &json!({"filter": {"id_prefix": "p-"}, "rate": 1}),
        )
        .await;
    let second = r.body["id"].as_str().unwrap().to_string();
    for _ in 0..400 {
        let r = app.get(&format!("/engine/bulk/{second}")).await;
        if r.body["done"].as_u64().unwrap_or(0) >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let r = app
        .post(&format!("/engine/bulk/{second}/cancel"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    assert_eq!(r.body["status"], "cancelled");
    // Settled: what it retried is what it counted, and some flows were left.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stopped = app.get(&format!("/engine/bulk/{second}")).await.body;
    assert_eq!(stopped["status"], "cancelled", "{stopped}");
    let mut retried = 0;
    for id in &ids {
        retried += retried_by(&app, id)
            .await
            .iter()
            .filter(|by| **by == json!(second))
            .count();
    }
    assert_eq!(json!(retried), stopped["done"], "{stopped}");
    assert!(stopped["remaining"].as_u64().unwrap_or(0) >= 1, "{stopped}");
    let r = app.post(&format!("/engine/bulk/{job}/cancel"), &json!({})).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "a completed job: {:?}", r.body);
}

async fn binary_job(engine: &Binary, job: &str) -> Value {
    let (status, body) = call(engine, Method::GET, &format!("/engine/bulk/{job}"), None).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn a_job_survives_a_restart_and_acts_on_each_flow_once(backend: Backend) {
    killed_part_way(backend, "bulk-node").await;
}

/// Another node id: the job's lease (5 s) must run out first; the new
/// process, idle, wakes for it then.
async fn a_job_whose_process_died_is_taken_over_by_another_once_its_lease_ran_out(backend: Backend) {
    killed_part_way(backend, "bulk-node-b").await;
}

/// A job's first process is killed part way; `next_node` finishes it, and
/// each flow was retried once, by the job.
async fn killed_part_way(backend: Backend, next_node: &str) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| refusing()).await;
    let env = [("TARTAN_LEASE", "5s")];
    let mut first = spawn_binary_with(&db, "bulk-node", &env).await;
    register(&first, vec![sync_step("a", &svc.url("/a"), &[], &["x"])]).await;
    let ids: Vec<String> = (0..8).map(|i| format!("r-{i}")).collect();
    for id in &ids {
        let (status, body) = call(
            &first,
            Method::POST,
            "/engine/flow",
            Some(json!({"id": id, "goals": ["a"]})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    for id in &ids {
        let mut flow = Value::Null;
        for _ in 0..400 {
            flow = call(&first, Method::GET, &format!("/engine/flow/{id}"), None)
                .await
                .1;
            if flow["status"] == "failed" && flow["deactivated_at"].is_string() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(flow["status"], "failed", "{flow}");
    }
    let (status, body) = call(
        &first,
        Method::POST,
        "/engine/bulk/retry",
        Some(json!({"filter": {"id_prefix": "r-"}, "rate": 3})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let job = body["id"].as_str().unwrap().to_string();
    for _ in 0..400 {
        if binary_job(&first, &job).await["done"].as_u64().unwrap_or(0) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    first.child.start_kill().expect("SIGKILL");
    let _ = first.child.wait().await;
    let before = {
        let second = spawn_binary_with(&db, next_node, &env).await;
        let mut job_now = Value::Null;
        for _ in 0..1200 {
            job_now = binary_job(&second, &job).await;
            if job_now["status"] == "completed" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(job_now["status"], "completed", "{job_now}");
        assert_eq!(job_now["failed"], 0, "{job_now}");
        assert_eq!(
            job_now["done"].as_u64().unwrap_or(0) + job_now["skipped"].as_u64().unwrap_or(0),
            8,
            "{job_now}"
        );
        let mut by = Vec::new();
        for id in &ids {
            let (_, body) = call(&second, Method::GET, &format!("/engine/flow/{id}/events"), None).await;
            let evs = body["events"].as_array().cloned().unwrap_or_default();
            let retried: Vec<Value> = evs
                .iter()
                .filter(|e| e["type"] == "flow_retried")
                .map(|e| e["data"]["by"].clone())
                .collect();
            by.push((id.clone(), retried));
        }
        by
    };
    for (id, retried) in before {
        assert_eq!(retried, [json!(job)], "{id}: retried once, by the job");
    }
}

async fn a_read_token_may_read_jobs_but_not_start_or_stop_them(backend: Backend) {
    let Some(app) = spawn_with_tokens(backend, "full-token-0123456789", "reader-token-abcdefghij").await
    else {
        return;
    };
    let send = |method: Method, path: &str, token: &str| {
        app.client
            .request(method, app.url(path))
            .header("Authorization", format!("Bearer {token}"))
            .header("Content-Type", "application/json")
            .body(json!({"filter": {"id_prefix": "x"}}).to_string())
            .send()
    };
    for path in [
        "/engine/bulk/retry",
        "/engine/bulk/cancel",
        "/engine/bulk/j/cancel",
    ] {
        let resp = send(Method::POST, path, "reader-token-abcdefghij")
            .await
            .expect("request");
        let reply = read_reply(resp).await.0;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}: {:?}", reply.body);
    }
    let resp = send(Method::POST, "/engine/bulk/retry", "full-token-0123456789")
        .await
        .expect("request");
    let job = read_reply(resp).await.0;
    assert_eq!(job.status, StatusCode::ACCEPTED, "{:?}", job.body);
    let id = job.body["id"].as_str().unwrap().to_string();
    for path in ["/engine/bulk".to_string(), format!("/engine/bulk/{id}")] {
        let resp = send(Method::GET, &path, "reader-token-abcdefghij")
            .await
            .expect("request");
        let reply = read_reply(resp).await.0;
        assert_eq!(reply.status, StatusCode::OK, "{path}: {:?}", reply.body);
    }
    let resp = app
        .client
        .get(app.url("/engine/bulk"))
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status().as_u16(), 401);
}

async fn finished_jobs_go_with_the_retention(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let app = start_on_with(db, "retention", |c| {
        c.retention = Some(Duration::from_millis(200));
    })
    .await;
    let r = app
        .post("/engine/bulk/retry", &json!({"filter": {"id_prefix": "none-"}}))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    let id = r.body["id"].as_str().unwrap().to_string();
    assert_eq!(wait_for_job(&app, &id).await["status"], "completed");
    // The sweep runs every second at this retention.
    let mut status = StatusCode::OK;
    for _ in 0..400 {
        status = app.get(&format!("/engine/bulk/{id}")).await.status;
        if status == StatusCode::NOT_FOUND {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(status, StatusCode::NOT_FOUND, "purged after the retention");
}

async fn a_flow_the_job_retried_before_it_could_record_it_is_skipped(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let _svc = failing_steps(&app).await;
    let ids = failed_flows(&app, 3).await;
    let job = stored_job(
        &app,
        "retry",
        "p-",
        vec![FlowStatus::Failed, FlowStatus::Cancelled],
        json!({"reset_attempts": true}),
    )
    .await;
    // As a process that retried p-1 for the job and died before recording it.
    app.engine
        .flows()
        .retry_flow("p-1", true, Some(job.id.clone()))
        .await
        .expect("retried");
    let done = wake_and_wait(&app, &job.id).await;
    assert_eq!(
        (&done["done"], &done["skipped"], &done["failed"]),
        (&json!(2), &json!(1), &json!(0)),
        "{done}"
    );
    for id in &ids {
        assert_eq!(retried_by(&app, id).await, [json!(job.id)], "{id}: once");
    }
}

/// A job of three flows, created straight in the store as a process that
/// died before it ran it would leave it: the runner is not woken (on
/// Postgres it is; at one flow a second it reaches the third flow two
/// seconds later).
async fn stored_job(
    app: &TestApp,
    kind: &str,
    prefix: &str,
    statuses: Vec<FlowStatus>,
    options: Value,
) -> tartan_store::NewBulkJob {
    let job = tartan_store::NewBulkJob {
        id: uuid::Uuid::new_v4().simple().to_string(),
        action: tartan_core::bulk::BulkAction::stored(kind, &options).expect("a known kind"),
        shown_filter: json!({"id_prefix": prefix}),
        filter: tartan_core::filter::FlowFilter {
            id_prefix: Some(prefix.into()),
            statuses,
            ..Default::default()
        },
        rate: 1,
        created_at: chrono::Utc::now(),
    };
    match app.engine.store().create_bulk_job(&job, 100).await {
        Ok(tartan_store::BulkCreated::Created(created)) => assert_eq!(created.total, 3),
        other => panic!("{other:?}"),
    }
    job
}

/// Wake the runner (any new job does, and it takes up every job waiting),
/// then wait for job `id` to end.
async fn wake_and_wait(app: &TestApp, id: &str) -> Value {
    let r = app
        .post("/engine/bulk/cancel", &json!({"filter": {"ids": ["none"]}}))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    wait_for_job(app, id).await
}

/// A cancel job taken over after its process cancelled a flow and died
/// before recording it does not cancel that flow again, even when someone
/// has retried it since: the flow's `flow_cancelled` names the job.
async fn a_flow_the_job_cancelled_before_it_could_record_it_is_not_cancelled_again(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let _svc = slow_step(&app).await;
    for id in ["k-1", "k-2", "k-3"] {
        start(&app, id, "slow", json!({"batch": "k"})).await;
    }
    let job = stored_job(
        &app,
        "cancel",
        "k-",
        vec![FlowStatus::Active],
        json!({"compensate": true}),
    )
    .await;
    // As a process that cancelled k-3 for the job and died before
    // recording it; then someone retried k-3.
    app.engine
        .flows()
        .cancel_flow("k-3", true, Some(&job.id))
        .await
        .expect("cancelled");
    let cancelled = app.wait_for_flow("k-3").await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let r = app.post("/engine/flow/k-3/retry", &json!({})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    let done = wake_and_wait(&app, &job.id).await;
    assert_eq!(
        (&done["done"], &done["skipped"], &done["failed"]),
        (&json!(2), &json!(1), &json!(0)),
        "{done}"
    );
    assert_eq!(app.flow("k-3").await["status"], "active", "not cancelled again");
    for id in ["k-1", "k-2", "k-3"] {
        let evs = events(&app, id).await;
        let by_job: Vec<_> = of_type(&evs, "flow_cancelled")
            .into_iter()
            .filter(|e| e["data"]["reason"].as_str().is_some_and(|r| r.contains(&job.id)))
            .collect();
        assert_eq!(by_job.len(), 1, "{id}: cancelled once by the job: {evs:?}");
    }
}

async fn a_filter_matching_more_flows_than_a_job_may_take_is_refused(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let app = start_on_with(db, "test-node", |c| c.max_bulk_flows = 2).await;
    let _svc = failing_steps(&app).await;
    failed_flows(&app, 3).await;
    let r = app
        .post("/engine/bulk/retry", &json!({"filter": {"id_prefix": "p-"}}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    let detail = r.body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("matches 3 flows") && detail.contains("2"),
        "{detail}"
    );
    assert_eq!(app.get("/engine/bulk").await.body["count"], 0, "no job");
    let r = app
        .post("/engine/bulk/retry", &json!({"filter": {"ids": ["p-0", "p-1"]}}))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    assert_eq!(r.body["total"], 2);
}
