//! What the tests of bearer tokens, webhook signatures and browsers share
//! (docs/security.md, `tokens.rs`, `webhook_signatures.rs`,
//! `browsers.rs`): an app secured by tokens, requests with or without one,
//! a silent async step and the call it gets, and the problem a refusal is.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use tartan_server::ApiSecurity;

use crate::helpers::{
    json_reply, read_reply, start_secured, sync_step, Backend, Reply, StepServer, TestApp, TestDb,
};

pub(super) const FULL: &str = "full-token-0123456789";
pub(super) const ROTATED: &str = "rotated-token-9876543210";
pub(super) const READER: &str = "reader-token-abcdefghij";

pub(super) async fn secured(backend: Backend, cors: &[&str]) -> Option<TestApp> {
    let db = TestDb::create(backend).await?;
    let cors: Vec<String> = cors.iter().map(|s| s.to_string()).collect();
    let security = ApiSecurity::new(&[FULL.into(), ROTATED.into()], &[READER.into()], &cors)
        .unwrap_or_else(|e| panic!("security settings: {e}"));
    Some(start_secured(db, "test-node", security).await)
}

/// One request with an optional bearer token and content type.
pub(super) async fn request(
    app: &TestApp,
    method: Method,
    path: &str,
    token: Option<&str>,
    content_type: Option<&str>,
    body: Option<&Value>,
) -> (Reply, reqwest::header::HeaderMap) {
    let mut req = app.client.request(method, app.url(path));
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    if let Some(ct) = content_type {
        req = req.header("Content-Type", ct);
    }
    if let Some(b) = body {
        req = req.body(b.to_string());
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("{path}: {e}"));
    let headers = resp.headers().clone();
    (read_reply(resp).await.0, headers)
}

pub(super) async fn as_full(app: &TestApp, method: Method, path: &str, body: Option<&Value>) -> Reply {
    request(app, method, path, Some(FULL), Some("application/json"), body)
        .await
        .0
}

pub(super) fn assert_problem(r: &Reply, status: u16, contains: &str) {
    assert_eq!(r.status.as_u16(), status, "{:?}", r.body);
    assert_eq!(r.content_type, "application/problem+json", "{:?}", r.body);
    let detail = r.body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(contains), "{detail:?} should name {contains:?}");
    assert_eq!(r.body["status"], status);
}

/// An async step whose server accepts and never calls back: the test holds
/// the webhook URL the engine handed out.
pub(super) async fn silent_async_step(app: &TestApp) -> (StepServer, Value) {
    let svc = StepServer::start(|_, _| json_reply(202, json!({}))).await;
    let mut step = sync_step("job", &svc.url("/job"), &[], &["out"]);
    step["type"] = json!("async");
    let r = as_full(app, Method::POST, "/engine/step", Some(&step)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    (svc, step)
}

pub(super) async fn wait_for_call(svc: &StepServer) -> crate::helpers::Received {
    for _ in 0..200 {
        if let Some(r) = svc.requests().into_iter().next() {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the step was never called");
}

pub(super) fn header(r: &crate::helpers::Received, name: &str) -> String {
    r.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

pub(super) async fn wait_until_terminal(app: &TestApp, id: &str) -> Value {
    for _ in 0..300 {
        let f = as_full(app, Method::GET, &format!("/engine/flow/{id}"), None)
            .await
            .body;
        if f["status"] != "active" {
            return f;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("flow {id} did not finish");
}
