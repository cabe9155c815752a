//! Safe to expose (docs/security.md), tried as an attacker would: requests
//! without or with the wrong token, a read token on writes, a cross-origin
//! `text/plain` POST, a webhook forged from a token read through the API,
//! and start-up settings that would expose an open engine.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use tartan_server::ApiSecurity;

use crate::helpers::{
    call, json_reply, read_reply, spawn_binary_with, start_secured, sync_step, Backend, Binary, Reply,
    StepServer, TestApp, TestDb,
};
use tartan_testkit::both_backends;

both_backends!(
    tokens_guard_every_route_but_health_ready_and_webhooks,
    a_read_token_reads_but_cannot_change_anything,
    a_webhook_forged_from_a_token_read_through_the_api_is_refused_and_changes_nothing,
    the_webhook_key_survives_a_restart_and_is_shared_by_engines_on_one_database,
    writes_take_json_only_and_anything_else_changes_nothing,
);

const FULL: &str = "full-token-0123456789";
const ROTATED: &str = "rotated-token-9876543210";
const READER: &str = "reader-token-abcdefghij";

async fn secured(backend: Backend, cors: &[&str]) -> Option<TestApp> {
    let db = TestDb::create(backend).await?;
    let cors: Vec<String> = cors.iter().map(|s| s.to_string()).collect();
    let security = ApiSecurity::new(&[FULL.into(), ROTATED.into()], &[READER.into()], &cors)
        .unwrap_or_else(|e| panic!("security settings: {e}"));
    Some(start_secured(db, "test-node", security).await)
}

/// One request with an optional bearer token and content type.
async fn request(
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

async fn as_full(app: &TestApp, method: Method, path: &str, body: Option<&Value>) -> Reply {
    request(app, method, path, Some(FULL), Some("application/json"), body)
        .await
        .0
}

fn assert_problem(r: &Reply, status: u16, contains: &str) {
    assert_eq!(r.status.as_u16(), status, "{:?}", r.body);
    assert_eq!(r.content_type, "application/problem+json", "{:?}", r.body);
    let detail = r.body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(contains), "{detail:?} should name {contains:?}");
    assert_eq!(r.body["status"], status);
}

/// An async step whose server accepts and never calls back: the test holds
/// the webhook URL the engine handed out.
async fn silent_async_step(app: &TestApp) -> (StepServer, Value) {
    let svc = StepServer::start(|_, _| json_reply(202, json!({}))).await;
    let mut step = sync_step("job", &svc.url("/job"), &[], &["out"]);
    step["type"] = json!("async");
    let r = as_full(app, Method::POST, "/engine/step", Some(&step)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    (svc, step)
}

async fn wait_for_call(svc: &StepServer) -> crate::helpers::Received {
    for _ in 0..200 {
        if let Some(r) = svc.requests().into_iter().next() {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the step was never called");
}

fn header(r: &crate::helpers::Received, name: &str) -> String {
    r.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

// ---------------------------------------------------------------------------
// 1. Bearer tokens.

async fn tokens_guard_every_route_but_health_ready_and_webhooks(backend: Backend) {
    let Some(app) = secured(backend, &[]).await else {
        return;
    };
    let step = sync_step("s", "http://127.0.0.1:9/s", &[], &["out"]);
    for (method, path) in [
        (Method::GET, "/engine"),
        (Method::GET, "/engine/step"),
        (Method::POST, "/engine/step"),
        (Method::GET, "/engine/flow/x"),
        (Method::GET, "/engine/work"),
        (Method::DELETE, "/engine/step/s"),
        (Method::GET, "/no/such/route"),
    ] {
        for token in [None, Some("wrong-token"), Some("")] {
            let (r, headers) = request(
                &app,
                method.clone(),
                path,
                token,
                Some("application/json"),
                Some(&step),
            )
            .await;
            assert_problem(&r, 401, "token");
            let challenge = headers
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            assert!(challenge.starts_with("Bearer"), "{method} {path}: {challenge:?}");
        }
    }
    // Another scheme, or the token without one, is no bearer token.
    for auth in [
        format!("Basic {FULL}"),
        FULL.to_string(),
        format!("Bearer {FULL}x"),
    ] {
        let resp = app
            .client
            .get(app.url("/engine/step"))
            .header("Authorization", auth.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 401, "{auth}");
    }
    // Nothing was registered by the refused requests.
    let steps = as_full(&app, Method::GET, "/engine/step", None).await;
    assert_eq!(steps.body["count"], 0, "{:?}", steps.body);

    // Probes and webhooks need no token.
    for path in ["/health", "/ready"] {
        let (r, _) = request(&app, Method::GET, path, None, None, None).await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
    }
    let hook = app.webhook_path("nope", "s", "t");
    let (r, _) = request(
        &app,
        Method::POST,
        &hook,
        None,
        Some("application/json"),
        Some(&json!({})),
    )
    .await;
    assert_problem(&r, 400, "unknown flow");

    // Either listed API token works (rotation); the scheme's case does not matter.
    let r = as_full(&app, Method::POST, "/engine/step", Some(&step)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let resp = app
        .client
        .get(app.url("/engine/step/s"))
        .header("Authorization", format!("bearer {ROTATED}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

async fn a_read_token_reads_but_cannot_change_anything(backend: Backend) {
    let Some(app) = secured(backend, &[]).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": "x"}))).await;
    let step = sync_step("s", &svc.url("/s"), &[], &["out"]);
    assert_eq!(
        as_full(&app, Method::POST, "/engine/step", Some(&step))
            .await
            .status,
        201
    );
    let started = as_full(
        &app,
        Method::POST,
        "/engine/flow",
        Some(&json!({"id": "f", "goals": ["s"]})),
    )
    .await;
    assert_eq!(started.status, StatusCode::CREATED, "{:?}", started.body);

    let read = |method: Method, path: &'static str, body: Option<Value>| {
        let app = &app;
        async move {
            request(
                app,
                method,
                path,
                Some(READER),
                Some("application/json"),
                body.as_ref(),
            )
            .await
            .0
        }
    };
    for path in [
        "/engine/step",
        "/engine/step/s",
        "/engine",
        "/engine/flow",
        "/engine/flow/f",
        "/engine/work",
    ] {
        assert_eq!(
            read(Method::GET, path, None).await.status,
            StatusCode::OK,
            "GET {path}"
        );
    }
    // The two POSTs that only read are open to readers.
    assert_eq!(
        read(Method::POST, "/engine/flow/query", Some(json!({})))
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        read(Method::POST, "/engine/plan", Some(json!({"goals": ["s"]})))
            .await
            .status,
        StatusCode::OK
    );
    // Every write is 403 and changes nothing.
    let mut other = step.clone();
    other["id"] = json!("t");
    for (method, path, body) in [
        (Method::DELETE, "/engine/step/s", None),
        (Method::PUT, "/engine/step/s", Some(step.clone())),
        (Method::POST, "/engine/step", Some(other)),
        (
            Method::POST,
            "/engine/flow",
            Some(json!({"id": "g", "goals": ["s"]})),
        ),
        (Method::POST, "/engine/flow/f/cancel", None),
    ] {
        let r = read(method.clone(), path, body).await;
        assert_problem(&r, 403, "read token");
    }
    let steps = as_full(&app, Method::GET, "/engine/step", None).await;
    assert_eq!(steps.body["count"], 1, "{:?}", steps.body);
    assert_eq!(
        as_full(&app, Method::GET, "/engine/flow/g", None).await.status,
        StatusCode::NOT_FOUND
    );
}

// ---------------------------------------------------------------------------
// 3. Webhooks cannot be forged by readers.

async fn a_webhook_forged_from_a_token_read_through_the_api_is_refused_and_changes_nothing(backend: Backend) {
    let Some(app) = secured(backend, &[]).await else {
        return;
    };
    let (svc, _) = silent_async_step(&app).await;
    let reg = |body: Value| {
        let app = &app;
        async move { as_full(app, Method::POST, "/engine/flow", Some(&body)).await }
    };
    assert_eq!(reg(json!({"id": "victim", "goals": ["job"]})).await.status, 201);
    let call = wait_for_call(&svc).await;
    let real_hook = header(&call, "argyll-webhook-url");
    assert_eq!(reg(json!({"id": "attacker", "goals": ["job"]})).await.status, 201);
    // Let both calls be accepted, so the state is quiet.
    for _ in 0..100 {
        if svc.requests().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let attacker_hook = svc
        .requests()
        .iter()
        .map(|r| header(r, "argyll-webhook-url"))
        .find(|h| h.contains("/webhook/attacker/"))
        .expect("the attacker's own flow was called");

    // What a reader sees: the token, but not the signature.
    let before = request(&app, Method::GET, "/engine/flow/victim", Some(READER), None, None)
        .await
        .0;
    let token = before.body["executions"]["job"]["work_items"]
        .as_object()
        .and_then(|items| items.keys().next().cloned())
        .expect("the victim's work item is in flow state");
    let signature = real_hook.rsplit('/').next().unwrap_or_default().to_string();
    assert!(signature.len() >= 20, "{real_hook}");
    for path in [
        "/engine/flow/victim".to_string(),
        "/engine/flow/victim/events".to_string(),
        "/engine/flow/victim/work".to_string(),
        "/engine/work".to_string(),
        "/engine/flow".to_string(),
    ] {
        let body = as_full(&app, Method::GET, &path, None).await.body.to_string();
        assert!(
            body.contains(&token) || path == "/engine/flow",
            "{path} shows the token"
        );
        assert!(
            !body.contains(&signature),
            "{path} shows the webhook signature: {body}"
        );
    }

    // Forgeries: Argyll's unsigned form, a made-up signature, the signature
    // of the attacker's own work item, and each as a heartbeat.
    let attacker_sig = attacker_hook.rsplit('/').next().unwrap_or_default().to_string();
    let base = format!("/webhook/victim/job/{token}");
    let forged = [
        base.clone(),
        format!("{base}/heartbeat"),
        format!("{base}/AAAAAAAAAAAAAAAAAAAAAA"),
        format!("{base}/AAAAAAAAAAAAAAAAAAAAAA/heartbeat"),
        format!("{base}/{attacker_sig}"),
        format!("{base}/{attacker_sig}/heartbeat"),
        format!("/webhook/victim/job/{token}x/{signature}"),
        format!("{base}/{signature}x"),
    ];
    for path in &forged {
        for token in [None, Some(READER), Some(FULL)] {
            let (r, _) = request(
                &app,
                Method::POST,
                path,
                token,
                Some("application/json"),
                Some(&json!({"out": "forged"})),
            )
            .await;
            assert_problem(&r, 403, "webhook URL");
        }
    }
    let after = as_full(&app, Method::GET, "/engine/flow/victim", None).await;
    assert_eq!(after.body, before.body, "forgeries changed the flow");
    let events = as_full(&app, Method::GET, "/engine/flow/victim/events", None).await;
    let kinds: Vec<&str> = events.body["events"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["type"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        !kinds
            .iter()
            .any(|k| k.contains("heartbeat") || k.contains("late") || k.contains("succeeded")),
        "{kinds:?}"
    );

    // The URL the engine handed out, used verbatim as Argyll's SDKs do, works.
    let resp = app
        .client
        .post(format!("{real_hook}/heartbeat"))
        .header("Content-Type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = app
        .client
        .post(&real_hook)
        .json(&json!({"out": "real"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let flow = wait_until_terminal(&app, "victim").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["attributes"]["out"][0]["value"], "real", "{flow}");
}

/// A `webhook_url` meta input carries the signed URL to the step, while
/// flow state keeps the unsigned one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_url_meta_input_is_signed_for_the_step_only() {
    let Some(app) = secured(Backend::Sqlite, &[]).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(202, json!({}))).await;
    let step = json!({
        "id": "meta", "name": "meta", "type": "async",
        "http": {"endpoint": svc.url("/meta")},
        "attributes": {
            "callback": {"role": "meta", "meta": {"key": "webhook_url"}},
            "out": {"role": "output"}
        }
    });
    assert_eq!(
        as_full(&app, Method::POST, "/engine/step", Some(&step))
            .await
            .status,
        201
    );
    let r = as_full(
        &app,
        Method::POST,
        "/engine/flow",
        Some(&json!({"id": "m", "goals": ["meta"]})),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let call = wait_for_call(&svc).await;
    let hook = header(&call, "argyll-webhook-url");
    assert_eq!(
        call.body["callback"],
        hook.as_str(),
        "the body's meta input is the signed URL"
    );
    let signature = hook.rsplit('/').next().unwrap_or_default();
    let flow = as_full(&app, Method::GET, "/engine/flow/m", None).await.body;
    assert!(
        !flow.to_string().contains(signature),
        "flow state shows the signature: {flow}"
    );
    let resp = app
        .client
        .post(&hook)
        .json(&json!({"out": "ok"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(wait_until_terminal(&app, "m").await["status"], "completed");
}

async fn wait_until_terminal(app: &TestApp, id: &str) -> Value {
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

async fn the_webhook_key_survives_a_restart_and_is_shared_by_engines_on_one_database(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let hooks: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = hooks.clone();
    let svc = StepServer::start(move |r, _| {
        if let Some(h) = r.headers.get("argyll-webhook-url").and_then(|v| v.to_str().ok()) {
            seen.lock().unwrap_or_else(|p| p.into_inner()).push(h.to_string());
        }
        json_reply(202, json!({}))
    })
    .await;
    let mut first = spawn_binary_with(&db, "node-a", &[]).await;
    let mut step = sync_step("job", &svc.url("/job"), &[], &["out"]);
    step["type"] = json!("async");
    let (status, body) = call(&first, reqwest::Method::POST, "/engine/step", Some(step)).await;
    assert_eq!(status, 201, "{body}");
    for id in ["before", "other"] {
        let (status, body) = call(
            &first,
            reqwest::Method::POST,
            "/engine/flow",
            Some(json!({"id": id, "goals": ["job"]})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let handed_out = crate::helpers::noted(&hooks, 2).await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    // Postgres: a second engine beside the first; SQLite: the engine
    // restarted (SIGKILL) as another node.
    let second = match backend {
        Backend::Postgres => spawn_binary_with(&db, "node-b", &[]).await,
        Backend::Sqlite => {
            first.child.kill().await.ok();
            spawn_binary_with(&db, "node-b", &[]).await
        }
    };
    for hook in &handed_out {
        let flow = if hook.contains("/webhook/before/") {
            "before"
        } else {
            "other"
        };
        let on_second = move_to(hook, &second);
        let resp = reqwest::Client::new()
            .post(&on_second)
            .json(&json!({"out": flow}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{on_second} refused by the other engine");
    }
    for flow in ["before", "other"] {
        let state = crate::helpers::wait_for_terminal(&second, flow).await;
        assert_eq!(state["status"], "completed", "{state}");
    }
    // A URL signed for one flow does not fit another's token.
    let before = handed_out
        .iter()
        .find(|h| h.contains("/webhook/before/"))
        .expect("the flow `before` was handed a URL");
    let swapped = before.replace("/webhook/before/", "/webhook/other/");
    let resp = reqwest::Client::new()
        .post(move_to(&swapped, &second))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    drop(first);
}

/// The same URL path on another engine's address.
fn move_to(hook: &str, engine: &Binary) -> String {
    let path = hook
        .splitn(4, '/')
        .nth(3)
        .unwrap_or_else(|| panic!("not a URL: {hook}"));
    format!("http://{}/{path}", engine.addr)
}

// ---------------------------------------------------------------------------
// 4. Browsers: CORS and JSON-only writes.

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

// ---------------------------------------------------------------------------
// 1 and 2 through the binary: settings, files, logs, exposure.

/// Run `tartan serve` expecting it to refuse to start: its exit status and
/// everything it printed.
async fn refused_start(db: &TestDb, listen: &str, env: &[(&str, &str)]) -> (bool, String) {
    let (ok, stdout, stderr) =
        crate::helpers::serve_refusing(&["--listen", listen, "--database-url", &db.url], env).await;
    (ok, format!("{stdout}{stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_the_server_refuses_a_non_loopback_address() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    for listen in ["0.0.0.0:0", "[::]:0"] {
        let (ok, text) = refused_start(&db, listen, &[]).await;
        assert!(!ok, "{listen}: started without a token: {text}");
        assert!(text.contains("TARTAN_API_TOKEN"), "{text}");
        assert!(text.contains("TARTAN_ALLOW_UNAUTHENTICATED"), "{text}");
    }
    let (ok, text) = refused_start(&db, "0.0.0.0:0", &[("TARTAN_ALLOW_UNAUTHENTICATED", "maybe")]).await;
    assert!(!ok, "{text}");
    assert!(
        text.contains("allow-unauthenticated") || text.contains("ALLOW_UNAUTHENTICATED"),
        "{text}"
    );
    // Explicitly allowed, or with a token: it starts (and answers).
    for env in [
        vec![("TARTAN_ALLOW_UNAUTHENTICATED", "true")],
        vec![("TARTAN_API_TOKEN", FULL)],
    ] {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_tartan"));
        command
            .args(["serve", "--listen", "0.0.0.0:0", "--database-url", &db.url])
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn");
        let stdout = child.stdout.take().expect("stdout");
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let listening = tokio::time::timeout(Duration::from_secs(30), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("listening on") {
                    return true;
                }
            }
            false
        })
        .await
        .unwrap_or(false);
        assert!(listening, "{env:?}: did not start");
        child.kill().await.ok();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_come_from_lists_and_files_and_are_never_logged() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("tartan-tokens-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let read_file = dir.join("read-token");
    // As a mounted Kubernetes secret: a trailing newline.
    std::fs::write(&read_file, format!("{READER}\n")).unwrap();
    let api_tokens = format!("{FULL}, {ROTATED}");
    let engine = spawn_binary_with(
        &db,
        "tokens",
        &[
            ("TARTAN_API_TOKEN", &api_tokens),
            ("TARTAN_READ_TOKEN_FILE", read_file.to_str().unwrap()),
            ("RUST_LOG", "debug"),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let url = |path: &str| format!("http://{}{path}", engine.addr);
    let step = sync_step("s", "http://127.0.0.1:9/s", &[], &["out"]);
    for (method, path, token, status) in [
        (reqwest::Method::POST, "/engine/step", "nope", 401),
        (reqwest::Method::POST, "/engine/step", READER, 403),
        (reqwest::Method::POST, "/engine/step", ROTATED, 201),
        (reqwest::Method::GET, "/engine/step/s", READER, 200),
        (reqwest::Method::DELETE, "/engine/step/s", READER, 403),
        (reqwest::Method::DELETE, "/engine/step/s", FULL, 200),
    ] {
        let resp = client
            .request(method.clone(), url(path))
            .header("Authorization", format!("Bearer {token}"))
            .header("Content-Type", "application/json")
            .body(step.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), status, "{method} {path} with {token}");
    }
    // No token in any log line, at debug level, whatever was sent.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = engine.log.lock().unwrap_or_else(|p| p.into_inner()).join("\n");
    assert!(log.contains("listening on"), "{log}");
    for secret in [FULL, ROTATED, READER] {
        assert!(!log.contains(secret), "a token was logged:\n{log}");
    }
    drop(engine);

    // A value and a file for one setting, an empty file, a missing file:
    // each stops start-up naming the setting, without printing the token.
    let empty = dir.join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let cases: [(Vec<(&str, &str)>, &str); 4] = [
        (
            vec![
                ("TARTAN_API_TOKEN", FULL),
                ("TARTAN_API_TOKEN_FILE", read_file.to_str().unwrap()),
            ],
            "TARTAN_API_TOKEN_FILE",
        ),
        (
            vec![("TARTAN_READ_TOKEN_FILE", empty.to_str().unwrap())],
            "TARTAN_READ_TOKEN",
        ),
        (
            vec![("TARTAN_API_TOKEN_FILE", "/no/such/file")],
            "TARTAN_API_TOKEN_FILE",
        ),
        (
            vec![("TARTAN_CORS_ORIGINS", "https://ui.example/path")],
            "TARTAN_CORS_ORIGINS",
        ),
    ];
    for (env, named) in cases {
        let (ok, text) = refused_start(&db, "127.0.0.1:0", &env).await;
        assert!(!ok, "{env:?} started: {text}");
        assert!(text.contains(named), "{env:?}: {text}");
        assert!(!text.contains(FULL) && !text.contains(READER), "{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A token shorter than 16 characters could be guessed (nothing limits
/// failed attempts): refused at start-up, from every source, naming the
/// setting that gave it and never printing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_shorter_than_16_characters_are_refused_at_start_up() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    const SHORT: &str = "abc123def456ghi";
    assert_eq!(SHORT.len(), tartan_server::MIN_TOKEN_LEN - 1);
    let dir = std::env::temp_dir().join(format!("tartan-short-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("read-token");
    std::fs::write(&file, format!("{READER}\n{SHORT}\n")).unwrap();
    let config = dir.join("tartan.toml");
    std::fs::write(&config, format!("api_token = [\"{FULL}\", \"{SHORT}\"]\n")).unwrap();
    let rotated = format!("{FULL},{SHORT}");
    /// Flags, environment, and how the refusal names the setting.
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);
    let cases: [Case; 5] = [
        (
            vec![],
            vec![("TARTAN_API_TOKEN", SHORT)],
            "TARTAN_API_TOKEN (environment variable)",
        ),
        (
            vec![],
            vec![("TARTAN_API_TOKEN", &rotated)],
            "TARTAN_API_TOKEN (environment variable)",
        ),
        (
            vec![],
            vec![("TARTAN_READ_TOKEN_FILE", file.to_str().unwrap())],
            "TARTAN_READ_TOKEN_FILE (environment variable)",
        ),
        (
            vec!["--read-token", SHORT],
            vec![],
            "--read-token (command-line flag)",
        ),
        (vec!["--config", config.to_str().unwrap()], vec![], "api_token in"),
    ];
    for (flags, env, named) in cases {
        let mut args = vec!["--listen", "127.0.0.1:0", "--database-url", &db.url];
        args.extend(flags.iter().copied());
        let (ok, stdout, stderr) = crate::helpers::serve_refusing(&args, &env).await;
        let text = format!("{stdout}{stderr}");
        assert!(!ok, "{env:?} {flags:?} started: {text}");
        assert!(text.contains(named), "{env:?} {flags:?}: {text}");
        assert!(text.contains("at least 16"), "{text}");
        assert!(!text.contains(SHORT), "the token was printed: {text}");
    }
    // The server's own check, for whoever builds its settings in code.
    let refused = ApiSecurity::new(&[FULL.into()], &[SHORT.into()], &[]);
    let why = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        why.starts_with("TARTAN_READ_TOKEN: ") && why.contains("at least 16"),
        "{why}"
    );
    assert!(ApiSecurity::new(&["0123456789abcdef".into()], &[], &[]).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without any token (the loopback default) everything stays open, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_on_loopback_no_token_is_asked_for() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let app = start_secured(db, "open", ApiSecurity::open()).await;
    let r = app.get("/engine/step").await;
    assert_eq!(r.status, StatusCode::OK);
    let r = app
        .register(&sync_step("s", "http://127.0.0.1:9/s", &[], &["out"]))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    // Still JSON only.
    let (r, _) = request(
        &app,
        Method::DELETE,
        "/engine/step/s",
        None,
        Some("text/plain"),
        None,
    )
    .await;
    assert_eq!(r.status.as_u16(), 415);
}

/// `GET /engine/session` tells a client what its token may do: the
/// dashboard offers its actions only to a full token.
#[tokio::test]
async fn the_session_says_what_the_token_may_do() {
    let Some(app) = secured(Backend::Sqlite, &[]).await else {
        return;
    };
    for (token, access) in [(FULL, "full"), (ROTATED, "full"), (READER, "read")] {
        let (r, _) = request(&app, Method::GET, "/engine/session", Some(token), None, None).await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        assert_eq!(r.body, json!({ "access": access }));
    }
    let (r, _) = request(&app, Method::GET, "/engine/session", None, None, None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{:?}", r.body);
    let (r, _) = request(
        &app,
        Method::GET,
        "/engine/session",
        Some("not-a-token-at-all"),
        None,
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{:?}", r.body);
    // Without tokens everyone may do everything.
    let Some(open) = crate::helpers::spawn_app(Backend::Sqlite).await else {
        return;
    };
    assert_eq!(
        open.get("/engine/session").await.body,
        json!({ "access": "open" })
    );
}
