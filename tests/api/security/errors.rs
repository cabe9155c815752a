//! Every error a client can cause is a 4xx problem+json naming what is wrong.

use axum::http::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{spawn_app, sync_step, Backend, Reply, TestApp};

fn assert_problem(r: &Reply, status: StatusCode, contains: &str) {
    assert_eq!(r.status, status, "{:?}", r.body);
    assert_eq!(r.content_type, "application/problem+json");
    for member in ["type", "title", "status", "detail", "error"] {
        assert!(!r.body[member].is_null(), "problem lacks {member}: {:?}", r.body);
    }
    assert_eq!(r.body["status"], status.as_u16());
    assert_eq!(r.body["error"], r.body["detail"]);
    let detail = r.body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains(contains),
        "{detail:?} should contain {contains:?}"
    );
}

async fn raw(app: &TestApp, method: Method, path: &str, body: &str) -> Reply {
    app.send(method, path, Some(body.to_string())).await
}

#[tokio::test]
async fn malformed_and_mistyped_bodies_are_400s_naming_the_field() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    assert_problem(
        &raw(&app, Method::POST, "/engine/step", "{not json").await,
        StatusCode::BAD_REQUEST,
        "invalid JSON",
    );
    assert_problem(
        &raw(&app, Method::POST, "/engine/step", "").await,
        StatusCode::BAD_REQUEST,
        "body required",
    );
    assert_problem(
        &raw(&app, Method::POST, "/engine/step", "[1,2]").await,
        StatusCode::BAD_REQUEST,
        "invalid",
    );
    assert_problem(
        &raw(&app, Method::POST, "/engine/step", "{} trailing").await,
        StatusCode::BAD_REQUEST,
        "invalid JSON",
    );
    let mut step = sync_step("s", "http://127.0.0.1:9/s", &[], &[]);
    step["work_config"] = json!({"max_retries": "many"});
    assert_problem(
        &app.register(&step).await,
        StatusCode::BAD_REQUEST,
        "work_config.max_retries",
    );
    step["work_config"] = json!({"init_backoff": "5 fortnights"});
    assert_problem(
        &app.register(&step).await,
        StatusCode::BAD_REQUEST,
        "work_config.init_backoff",
    );
    assert_problem(
        &app.register(&json!({"id": 5})).await,
        StatusCode::BAD_REQUEST,
        "id",
    );
    assert_problem(
        &app.start_flow(&json!({"id": "f", "goals": "shout"})).await,
        StatusCode::BAD_REQUEST,
        "goals",
    );
    assert_problem(
        &app.start_flow(&json!({"id": "f", "goals": ["a"], "init": {"x": 1}}))
            .await,
        StatusCode::BAD_REQUEST,
        "init.x",
    );
    assert_problem(
        &app.start_flow(&json!({"id": "***", "goals": ["a"]})).await,
        StatusCode::BAD_REQUEST,
        "flow ID empty",
    );
    assert_problem(
        &app.start_flow(&json!({"id": "x".repeat(300), "goals": ["a"]}))
            .await,
        StatusCode::BAD_REQUEST,
        "too long",
    );
    assert_problem(
        &app.start_flow(&json!({"id": "f", "goals": []})).await,
        StatusCode::BAD_REQUEST,
        "goal",
    );
    assert_problem(
        &app.start_flow(&json!({"id": "f", "goals": ["a"], "timeout": "5 parsecs"}))
            .await,
        StatusCode::BAD_REQUEST,
        "timeout",
    );
    assert_problem(
        &app.start_flow(&json!({"id": "f", "goals": ["a"], "deadline_at": "2001-01-01T00:00:00Z"}))
            .await,
        StatusCode::BAD_REQUEST,
        "deadline_at",
    );
    assert_problem(
        &app.post("/engine/plan", &json!({"goals": []})).await,
        StatusCode::BAD_REQUEST,
        "goal",
    );
    assert_problem(
        &app.post("/engine/plan", &json!({"goals": ["nope"]})).await,
        StatusCode::NOT_FOUND,
        "nope",
    );
    assert_problem(
        &app.post("/engine/flow/query", &json!({"sort": "sideways"})).await,
        StatusCode::BAD_REQUEST,
        "sort",
    );
    assert_problem(
        &app.post("/engine/flow/query", &json!({"id_prefix": "a/b"})).await,
        StatusCode::BAD_REQUEST,
        "id_prefix",
    );
    assert_problem(
        &app.post("/engine/flow/query", &json!({"cursor": "zzz"})).await,
        StatusCode::BAD_REQUEST,
        "cursor",
    );
    assert_problem(
        &app.get("/engine/work?limit=abc").await,
        StatusCode::BAD_REQUEST,
        "query",
    );
    assert_problem(
        &app.get("/engine/work?status=bogus").await,
        StatusCode::BAD_REQUEST,
        "status",
    );
    assert_eq!(app.get("/engine/step").await.body["count"], 0);
    assert_eq!(app.get("/engine/flow").await.body, json!([]));
}

#[tokio::test]
async fn oversized_bodies_are_413() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let big = format!(r#"{{"id":"s","name":"{}"}}"#, "x".repeat(600 * 1024));
    assert_problem(
        &raw(&app, Method::POST, "/engine/step", &big).await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "limit",
    );
    let big_flow = format!(
        r#"{{"id":"f","goals":["a"],"init":{{"x":["{}"]}}}}"#,
        "x".repeat(1100 * 1024)
    );
    assert_problem(
        &raw(&app, Method::POST, "/engine/flow", &big_flow).await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "limit",
    );
    // A step body under 512 KiB is fine (its names are bounded, its values not).
    let mut ok = sync_step("s", "http://127.0.0.1:9/s", &[], &[]);
    ok["attributes"]["big"] = json!({
        "role": "const",
        "type": "string",
        "const": {"value": format!("\"{}\"", "y".repeat(400 * 1024))},
    });
    assert_eq!(app.register(&ok).await.status, StatusCode::CREATED);
}

#[tokio::test]
async fn unknown_routes_methods_and_resources_are_problems() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    assert_problem(&app.get("/nope").await, StatusCode::NOT_FOUND, "no such route");
    assert_problem(
        &app.send(Method::PATCH, "/engine/step", None).await,
        StatusCode::METHOD_NOT_ALLOWED,
        "method",
    );
    assert_problem(
        &app.get("/engine/flow/missing").await,
        StatusCode::NOT_FOUND,
        "missing",
    );
    assert_problem(
        &app.get("/engine/flow/missing/status").await,
        StatusCode::NOT_FOUND,
        "missing",
    );
    assert_problem(
        &app.get("/engine/flow/missing/events").await,
        StatusCode::NOT_FOUND,
        "missing",
    );
    assert_problem(
        &app.get("/engine/flow/missing/work").await,
        StatusCode::NOT_FOUND,
        "missing",
    );
    // A correctly signed URL of a flow that does not exist.
    let hook = app.webhook_path("missing", "s", "t");
    assert_problem(
        &app.post(&hook, &json!({})).await,
        StatusCode::BAD_REQUEST,
        "unknown flow",
    );
    assert_problem(
        &app.post(&hook, &json!([1])).await,
        StatusCode::BAD_REQUEST,
        "object",
    );
    let health = app.get("/health").await;
    assert_eq!(health.status, StatusCode::OK);
    assert_eq!(health.body["status"], "healthy");
    assert_eq!(health.body["service"], "tartan");
    assert_eq!(app.get("/ready").await.status, StatusCode::OK);
}
