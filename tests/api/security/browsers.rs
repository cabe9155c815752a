//! Browsers (docs/security.md, "Browsers"), tried as an attacker would: a
//! cross-origin `text/plain` POST and every other write that is not JSON
//! is refused and changes nothing; no origin gets CORS unless it is
//! listed.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::json;

use super::support::{
    as_full, assert_problem, header, request, secured, silent_async_step, wait_for_call, wait_until_terminal,
    FULL,
};
use crate::helpers::{Backend, TestApp};
use tartan_testkit::both_backends;

both_backends!(writes_take_json_only_and_anything_else_changes_nothing);

// ---------------------------------------------------------------------------
// Browsers: CORS and JSON-only writes.

async fn writes_take_json_only_and_anything_else_changes_nothing(backend: Backend) {
    let Some(app) = secured(backend, &[]).await else {
        return;
    };
    let (svc, step) = silent_async_step(&app).await;
    let flow = json!({"id": "f", "goals": ["job"]});
    let call = {
        assert_eq!(
            as_full(&app, Method::POST, "/engine/flow", Some(&flow))
                .await
                .status,
            201
        );
        wait_for_call(&svc).await
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let hook = header(&call, "argyll-webhook-url");
    let hook_path = hook
        .splitn(4, '/')
        .nth(3)
        .map(|p| format!("/{p}"))
        .unwrap_or_default();
    let before = as_full(&app, Method::GET, "/engine/flow/f", None).await.body;

    let mut other = step.clone();
    other["id"] = json!("other");
    // What a page on another origin can send without a CORS preflight, and
    // a few more: all refused, whatever the token.
    for ct in [
        None,
        Some("text/plain"),
        Some("text/plain; charset=utf-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/jsonp"),
        Some("application/problem+json"),
    ] {
        for (method, path, body) in [
            (Method::POST, "/engine/step", Some(&other)),
            (Method::PUT, "/engine/step/job", Some(&step)),
            (
                Method::POST,
                "/engine/flow",
                Some(&json!({"id": "g", "goals": ["job"]})),
            ),
            (Method::POST, "/engine/flow/f/cancel", None),
            (Method::POST, "/engine/plan", Some(&json!({"goals": ["job"]}))),
        ] {
            let (r, _) = request(&app, method.clone(), path, Some(FULL), ct, body).await;
            assert_problem(&r, 415, "application/json");
        }
    }
    // DELETE carries no body; a declared non-JSON one is refused too.
    let (r, _) = request(
        &app,
        Method::DELETE,
        "/engine/step/job",
        Some(FULL),
        Some("text/plain"),
        None,
    )
    .await;
    assert_problem(&r, 415, "application/json");
    // A webhook takes JSON or problem+json, nothing else.
    for ct in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let (r, _) = request(
            &app,
            Method::POST,
            &hook_path,
            None,
            ct,
            Some(&json!({"out": "no"})),
        )
        .await;
        assert_problem(&r, 415, "application/problem+json");
        let (r, _) = request(
            &app,
            Method::POST,
            &format!("{hook_path}/heartbeat"),
            None,
            ct,
            None,
        )
        .await;
        assert_problem(&r, 415, "application/json");
    }
    assert_eq!(
        as_full(&app, Method::GET, "/engine/flow/f", None).await.body,
        before
    );
    let steps = as_full(&app, Method::GET, "/engine/step", None).await;
    assert_eq!(steps.body["count"], 1, "{:?}", steps.body);
    assert_eq!(
        as_full(&app, Method::GET, "/engine/flow/g", None).await.status,
        404
    );

    // Media types match case-insensitively, with parameters.
    let (r, _) = request(
        &app,
        Method::POST,
        "/engine/step",
        Some(FULL),
        Some("Application/JSON; charset=UTF-8"),
        Some(&other),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let (r, _) = request(&app, Method::DELETE, "/engine/step/other", Some(FULL), None, None).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let (r, _) = request(
        &app,
        Method::POST,
        &hook_path,
        None,
        Some("APPLICATION/PROBLEM+JSON; charset=utf-8"),
        Some(&json!({"title": "Unprocessable", "status": 422, "detail": "no thanks"})),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let done = wait_until_terminal(&app, "f").await;
    assert_eq!(done["status"], "failed", "the problem failed the step: {done}");
}

async fn preflight(app: &TestApp, origin: &str) -> reqwest::Response {
    app.client
        .request(Method::OPTIONS, app.url("/engine/step"))
        .header("Origin", origin)
        .header("Access-Control-Request-Method", "POST")
        .header("Access-Control-Request-Headers", "content-type, authorization")
        .send()
        .await
        .unwrap()
}

fn allow_origin(resp: &reqwest::Response) -> Option<String> {
    resp.headers()
        .get("access-control-allow-origin")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browsers_get_no_cors_unless_origins_are_listed() {
    // Default: no origin is allowed, not in a preflight nor in a response.
    let Some(app) = secured(Backend::Sqlite, &[]).await else {
        return;
    };
    assert_eq!(allow_origin(&preflight(&app, "https://evil.example").await), None);
    let resp = app
        .client
        .get(app.url("/engine/step"))
        .header("Origin", "https://evil.example")
        .header("Authorization", format!("Bearer {FULL}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(allow_origin(&resp), None);
    // Unauthenticated and open routes too.
    let resp = app
        .client
        .get(app.url("/health"))
        .header("Origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(allow_origin(&resp), None);

    // Listed origins: exactly those.
    let Some(app) = secured(Backend::Sqlite, &["https://ui.example", "http://localhost:3000"]).await else {
        return;
    };
    let ok = preflight(&app, "https://ui.example").await;
    assert!(ok.status().is_success(), "{}", ok.status());
    assert_eq!(allow_origin(&ok).as_deref(), Some("https://ui.example"));
    let methods = ok
        .headers()
        .get("access-control-allow-methods")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_uppercase();
    assert!(methods.contains("POST"), "{methods}");
    assert_eq!(allow_origin(&preflight(&app, "https://evil.example").await), None);
    assert_eq!(
        allow_origin(&preflight(&app, "https://ui.example.evil.example").await),
        None
    );
    let resp = app
        .client
        .get(app.url("/engine/step"))
        .header("Origin", "http://localhost:3000")
        .header("Authorization", format!("Bearer {FULL}"))
        .send()
        .await
        .unwrap();
    assert_eq!(allow_origin(&resp).as_deref(), Some("http://localhost:3000"));

    // `*` only when asked for.
    let Some(app) = secured(Backend::Sqlite, &["*"]).await else {
        return;
    };
    assert_eq!(
        allow_origin(&preflight(&app, "https://any.example").await).as_deref(),
        Some("*")
    );
}
