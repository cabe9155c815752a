//! Where steps may call, tried as an attacker would: endpoints at the cloud
//! metadata address in every spelling, host lists (`TARTAN_STEP_HOSTS`),
//! redirects to a "metadata" server on another origin, and placeholder
//! values that try to climb the path or change the host.

use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::{json, Value};
use tartan_core::hosts::StepHosts;

use crate::helpers::{
    call, json_reply, spawn_app, spawn_binary_with, start_on_with, sync_step, wait_for_terminal, Backend,
    StepServer, TestApp, TestDb,
};
use tartan_testkit::both_backends;

both_backends!(
    a_listed_name_is_called,
    a_name_resolving_outside_the_ranges_fails_for_good_with_nothing_sent,
    a_step_stored_before_the_policy_is_loaded_and_refused_at_call_time,
    a_redirect_to_another_origin_is_refused_and_the_target_never_called,
    same_origin_redirects_are_followed_up_to_five,
    placeholder_values_stay_one_path_segment_on_the_intended_server,
    a_host_placeholder_takes_one_label_and_nothing_else,
    the_binary_reads_the_host_list_from_its_environment,
);

/// The secret a metadata service would hand out.
const SECRET: &str = "AKIA-TOP-SECRET-42";

/// A step with quick retries: a refusal that were retried would show as
/// three attempts, not one.
fn step(id: &str, endpoint: &str, inputs: &[&str]) -> Value {
    let mut s = sync_step(id, endpoint, inputs, &["out"]);
    s["work_config"] =
        json!({"max_retries": 2, "init_backoff": 10, "max_backoff": 10, "backoff_type": "fixed"});
    s
}

/// A step server that answers every call with an output.
async fn answering() -> StepServer {
    StepServer::start(|_, _| json_reply(200, json!({"out": "ok"}))).await
}

/// A server holding a secret, which must never be asked for it.
async fn metadata_server() -> StepServer {
    StepServer::start(|_, _| json_reply(200, json!({"AccessKeyId": SECRET, "out": SECRET}))).await
}

async fn app_with(backend: Backend, hosts: &str) -> Option<TestApp> {
    let db = TestDb::create(backend).await?;
    let hosts = StepHosts::parse(hosts).unwrap();
    Some(start_on_with(db, "test-node", move |c| c.step_hosts = hosts).await)
}

async fn sqlite_app() -> TestApp {
    spawn_app(Backend::Sqlite).await.expect("SQLite is always there")
}

/// Register `step` and expect a 400 whose detail names `field`; return the detail.
async fn refused(app: &TestApp, step: &Value, field: &str) -> String {
    let r = app.register(step).await;
    assert_eq!(
        r.status,
        StatusCode::BAD_REQUEST,
        "{step} was accepted: {:?}",
        r.body
    );
    assert_eq!(r.content_type, "application/problem+json");
    let detail = r.body["detail"].as_str().unwrap_or_default().to_string();
    assert!(detail.starts_with(&format!("{field}: ")), "{step}: {detail}");
    detail
}

/// Start a flow of `goal` with one input and wait for it to end.
async fn run(app: &TestApp, id: &str, goal: &str, init: Value) -> Value {
    let r = app
        .start_flow(&json!({"id": id, "goals": [goal], "init": init}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    app.wait_for_flow(id).await
}

/// The only work item of `step` in `flow`.
fn only_item<'a>(flow: &'a Value, step: &str) -> &'a Value {
    let items = flow["executions"][step]["work_items"]
        .as_object()
        .unwrap_or_else(|| panic!("no work items of {step}: {flow}"));
    assert_eq!(items.len(), 1, "{flow}");
    items.values().next().unwrap()
}

/// The flow failed at `step` after one attempt, classified permanent, with
/// an error containing `text`; returns the error.
fn failed_for_good(flow: &Value, step: &str, text: &str) -> String {
    assert_eq!(flow["status"], "failed", "{flow}");
    let item = only_item(flow, step);
    assert_eq!(item["status"], "failed", "{flow}");
    let attempts = item["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "no retry of a refused call: {flow}");
    assert_eq!(attempts[0]["outcome"], "permanent", "{flow}");
    let error = flow["executions"][step]["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(error.contains(text), "{text:?} not in {error:?}");
    assert_eq!(attempts[0]["error"], error, "{flow}");
    error
}

// ---------------------------------------------------------------------------
// Registration

#[tokio::test]
async fn link_local_urls_are_refused_at_registration_in_every_spelling() {
    let app = sqlite_app().await;
    for endpoint in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/latest/meta-data/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://2852039166/latest/meta-data/",
        "http://0xa9.0xfe.0xa9.0xfe/",
        "http://0251.0376.0251.0376/",
        "http://169.254.43518/",
        "https://169.254.170.2/v2/credentials",
        "http://[fe80::a9fe:a9fe]/",
        "http://[64:ff9b::a9fe:a9fe]/",
    ] {
        let detail = refused(&app, &step("meta", endpoint, &[]), "http.endpoint").await;
        assert!(
            detail.contains("is not allowed by the step host policy (TARTAN_STEP_HOSTS)"),
            "{detail}"
        );
    }
    let mut comp = step("comp", "http://127.0.0.1:9/book", &[]);
    comp["http"]["compensate"] = json!("http://169.254.169.254/undo");
    refused(&app, &comp, "http.compensate").await;
    let mut health = step("health", "http://127.0.0.1:9/book", &[]);
    health["http"]["health_check"] = json!("http://[fe80::1]:8080/health");
    refused(&app, &health, "http.health_check").await;
    assert_eq!(
        app.get("/engine/step").await.body["count"],
        0,
        "nothing was stored"
    );

    // An update is checked the same way.
    let ok = step("upd", "http://127.0.0.1:9/x", &[]);
    assert_eq!(app.register(&ok).await.status, StatusCode::CREATED);
    let bad = step("upd", "http://169.254.169.254/", &[]);
    let r = app
        .send(reqwest::Method::PUT, "/engine/step/upd", Some(bad.to_string()))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    assert!(
        r.body["detail"].as_str().unwrap().starts_with("http.endpoint: "),
        "{:?}",
        r.body
    );
    assert_eq!(
        app.get("/engine/step/upd").await.body["http"]["endpoint"],
        "http://127.0.0.1:9/x"
    );
}

#[tokio::test]
async fn link_local_is_reachable_only_when_a_range_lists_it() {
    let app = app_with(Backend::Sqlite, "169.254.169.254/32").await.unwrap();
    let r = app
        .register(&step("meta", "http://169.254.169.254/latest/", &[]))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    // Only what the range holds.
    refused(
        &app,
        &step("other", "http://169.254.169.253/", &[]),
        "http.endpoint",
    )
    .await;
}

#[tokio::test]
async fn malformed_endpoints_are_refused_at_registration() {
    let app = sqlite_app().await;
    for endpoint in [
        "http://exa mple.com/",
        "http://[::1/",
        "http://:80/",
        "http://h:99999/",
        "http://300.1.1.1/",
        "http://h/\nx",
        "http://h/x ",
    ] {
        let detail = refused(&app, &step("bad", endpoint, &[]), "http.endpoint").await;
        assert!(detail.contains("not a valid URL"), "{endpoint}: {detail}");
    }
    // Placeholders may not stand in the port or the user info.
    refused(&app, &step("port", "http://h:{p}/", &["p"]), "http.endpoint").await;
    let detail = refused(&app, &step("user", "http://{u}@h/", &["u"]), "http.endpoint").await;
    assert!(detail.contains("{u}") && detail.contains("user info"), "{detail}");
    let mut comp = step("comp", "http://h/book", &[]);
    comp["http"]["compensate"] = json!("ftp://h/undo");
    refused(&app, &comp, "http.compensate").await;
    let mut health = step("health", "http://h/book", &[]);
    health["http"]["health_check"] = json!("http://[::1/health");
    refused(&app, &health, "http.health_check").await;
    assert_eq!(app.get("/engine/step").await.body["count"], 0);
}

#[tokio::test]
async fn dot_ids_are_refused() {
    let app = sqlite_app().await;
    for id in ["..", ".", " .. "] {
        let mut s = step("x", "http://127.0.0.1:9/x", &[]);
        s["id"] = json!(id);
        let detail = refused(&app, &s, "id").await;
        assert!(detail.contains("relative path segment"), "{detail}");
    }
    assert_eq!(
        app.register(&step("a..b", "http://127.0.0.1:9/x", &[]))
            .await
            .status,
        StatusCode::CREATED
    );
    for id in [".", "..", "-.-"] {
        let r = app.start_flow(&json!({"id": id, "goals": ["a..b"]})).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{id}: {:?}", r.body);
        assert!(
            r.body["detail"].as_str().unwrap().starts_with("id: "),
            "{:?}",
            r.body
        );
    }
    assert_eq!(app.get("/engine/flow").await.body, json!([]), "no flow started");
}

#[tokio::test]
async fn a_list_refuses_what_it_does_not_name() {
    // Names only: an address or another name is refused at registration.
    let app = app_with(Backend::Sqlite, "api.example.com, *.svc.example.com")
        .await
        .unwrap();
    for endpoint in [
        "http://127.0.0.1:8080/x",
        "http://[::1]:8080/x",
        "http://2130706433:8080/x",
        "http://localhost:8080/x",
        "http://example.com/x",
        "http://svc.example.com/x",
        "http://api.example.com.evil.org/x",
    ] {
        let detail = refused(&app, &step("s", endpoint, &[]), "http.endpoint").await;
        assert!(
            detail.contains("is not allowed by the step host policy"),
            "{detail}"
        );
    }
    for (n, endpoint) in [
        "http://api.example.com/x",
        "https://API.Example.com./x",
        "http://a.svc.example.com:8443/x",
        "http://{region}.svc.example.com/x",
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("ok{n}");
        let r = app.register(&step(&id, endpoint, &["region"])).await;
        assert_eq!(r.status, StatusCode::CREATED, "{endpoint}: {:?}", r.body);
    }
    // With ranges listed, names are decided by the addresses they resolve
    // to, when the call is made; addresses outside the ranges are refused now.
    let app = app_with(Backend::Sqlite, "10.0.0.0/8").await.unwrap();
    refused(&app, &step("lo", "http://127.0.0.1:8080/x", &[]), "http.endpoint").await;
    let r = app.register(&step("name", "http://localhost:8080/x", &[])).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let r = app.register(&step("ten", "http://10.1.2.3:8080/x", &[])).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
}

// ---------------------------------------------------------------------------
// Call time: names and addresses

async fn a_listed_name_is_called(backend: Backend) {
    let Some(app) = app_with(backend, "localhost").await else {
        return;
    };
    let svc = answering().await;
    let endpoint = format!("http://localhost:{}/ok", svc.addr.port());
    assert_eq!(
        app.register(&step("s", &endpoint, &[])).await.status,
        StatusCode::CREATED
    );
    refused(&app, &step("direct", &svc.url("/ok"), &[]), "http.endpoint").await;
    let flow = run(&app, "f", "s", json!({})).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(svc.requests().len(), 1);
}

async fn a_name_resolving_outside_the_ranges_fails_for_good_with_nothing_sent(backend: Backend) {
    let Some(app) = app_with(backend, "10.0.0.0/8").await else {
        return;
    };
    let svc = answering().await;
    // Registration passes: `localhost` is a name, and ranges are listed.
    let endpoint = format!("http://localhost:{}/ok", svc.addr.port());
    assert_eq!(
        app.register(&step("s", &endpoint, &[])).await.status,
        StatusCode::CREATED
    );
    let flow = run(&app, "f", "s", json!({})).await;
    failed_for_good(
        &flow,
        "s",
        "address 127.0.0.1 of host localhost is not allowed by the step host policy (TARTAN_STEP_HOSTS)",
    );
    assert!(svc.requests().is_empty(), "the step server was called");
}

async fn a_step_stored_before_the_policy_is_loaded_and_refused_at_call_time(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let svc = answering().await;
    let first = start_on_with(TestDb::at_url(db.url.clone()), "n1", |_| {}).await;
    assert_eq!(
        first.register(&step("s", &svc.url("/ok"), &[])).await.status,
        StatusCode::CREATED
    );
    first.engine.shutdown(Duration::from_secs(5)).await;
    drop(first);

    // Restarted with a list that leaves loopback out: the step still loads.
    let hosts = StepHosts::parse("10.0.0.0/8").unwrap();
    let app = start_on_with(db, "n1", move |c| c.step_hosts = hosts).await;
    let got = app.get("/engine/step/s").await;
    assert_eq!(got.status, StatusCode::OK, "{:?}", got.body);
    let flow = run(&app, "f", "s", json!({})).await;
    let error = failed_for_good(&flow, "s", "is not allowed by the step host policy");
    assert!(error.starts_with("address 127.0.0.1 "), "{error}");
    assert!(svc.requests().is_empty(), "the step server was called");
}

// ---------------------------------------------------------------------------
// Redirects

async fn a_redirect_to_another_origin_is_refused_and_the_target_never_called(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let meta = metadata_server().await;
    let target = meta.url("/latest/meta-data/iam/security-credentials/admin");
    let svc = {
        let target = target.clone();
        StepServer::start(move |r, _| match r.path.as_str() {
            // Another port on the same host is another origin.
            "/to-meta" => (StatusCode::FOUND, [("location", target.clone())]).into_response(),
            // So is another spelling of the same host and port.
            p if p.starts_with("/to-name") => {
                let port = r.headers["host"]
                    .to_str()
                    .unwrap()
                    .rsplit(':')
                    .next()
                    .unwrap()
                    .to_string();
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [("location", format!("http://localhost:{port}/landed"))],
                )
                    .into_response()
            }
            _ => json_reply(200, json!({"out": "landed"})),
        })
        .await
    };
    app.register(&step("meta", &svc.url("/to-meta"), &[])).await;
    app.register(&step("name", &svc.url("/to-name"), &[])).await;

    let flow = run(&app, "f1", "meta", json!({})).await;
    let error = failed_for_good(&flow, "meta", "redirect to another origin refused");
    assert_eq!(
        error,
        format!("redirect to another origin refused: Location {target}")
    );
    assert!(meta.requests().is_empty(), "the metadata server was called");
    let events = app.get("/engine/flow/f1/events").await.body;
    for text in [flow.to_string(), events.to_string()] {
        assert!(!text.contains(SECRET), "the secret leaked: {text}");
    }

    let flow = run(&app, "f2", "name", json!({})).await;
    failed_for_good(&flow, "name", "Location http://localhost:");
    assert!(
        !svc.requests().iter().any(|r| r.path == "/landed"),
        "the redirect was followed"
    );
}

async fn same_origin_redirects_are_followed_up_to_five(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // `/chain/{length}/{i}` redirects to `/chain/{length}/{i+1}` until `i`
    // reaches `length`.
    let svc = StepServer::start(|r, _| {
        let parts: Vec<usize> = r.path.split('/').filter_map(|p| p.parse().ok()).collect();
        match parts.as_slice() {
            [length, i] if i < length => (
                StatusCode::TEMPORARY_REDIRECT,
                [("location", format!("/chain/{length}/{}", i + 1))],
            )
                .into_response(),
            _ => json_reply(200, json!({"out": r.path})),
        }
    })
    .await;
    app.register(&step("five", &svc.url("/chain/5/0"), &[])).await;
    app.register(&step("six", &svc.url("/chain/6/0"), &[])).await;

    let flow = run(&app, "f5", "five", json!({})).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["attributes"]["out"][0]["value"], "/chain/5/5");
    let five: Vec<_> = svc
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/chain/5/"))
        .collect();
    assert_eq!(five.len(), 6, "the call and five redirects");
    assert_eq!(
        five[5].headers["argyll-flow-id"], "f5",
        "same origin keeps the headers"
    );

    let flow = run(&app, "f6", "six", json!({})).await;
    let error = failed_for_good(&flow, "six", "more than 5 redirects");
    assert!(
        error.ends_with(&format!("Location {}", svc.url("/chain/6/6"))),
        "{error}"
    );
    let six: Vec<String> = svc
        .requests()
        .into_iter()
        .map(|r| r.path)
        .filter(|p| p.starts_with("/chain/6/"))
        .collect();
    assert_eq!(six.len(), 6, "the sixth redirect was not followed: {six:?}");
}

// ---------------------------------------------------------------------------
// Placeholders

async fn placeholder_values_stay_one_path_segment_on_the_intended_server(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = answering().await;
    app.register(&step("get", &svc.url("/items/{item}/view"), &["item"]))
        .await;
    let cases = [
        ("f1", "../admin", "/items/..%2Fadmin/view"),
        ("f2", "evil.com@", "/items/evil.com%40/view"),
        ("f3", "a/b", "/items/a%2Fb/view"),
        ("f4", "x?y#z", "/items/x%3Fy%23z/view"),
        ("f5", "..\\..\\admin", "/items/..%5C..%5Cadmin/view"),
        ("f6", "%2e%2e", "/items/%252e%252e/view"),
    ];
    for (id, value, path) in cases {
        let flow = run(&app, id, "get", json!({"item": [value]})).await;
        assert_eq!(flow["status"], "completed", "{value}: {flow}");
        let last = svc.requests().pop().unwrap();
        assert_eq!(last.path, path, "{value}");
        assert_eq!(last.headers["argyll-flow-id"], id, "{value}");
        assert_eq!(last.headers["host"], svc.addr.to_string().as_str(), "{value}");
    }
    // A value that is a whole `..` segment cannot be sent safely (URL
    // parsers and servers treat `%2e%2e` as `..` too): refused.
    for (id, value) in [("g1", ".."), ("g2", ".")] {
        let flow = run(&app, id, "get", json!({"item": [value]})).await;
        failed_for_good(&flow, "get", "placeholder {item}");
    }
    assert_eq!(
        svc.requests().len(),
        cases.len(),
        "nothing sent for the refused values"
    );
}

async fn a_host_placeholder_takes_one_label_and_nothing_else(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = answering().await;
    let evil = answering().await;
    let port = svc.addr.port();
    app.register(&step("ported", &format!("http://{{host}}:{port}/x"), &["host"]))
        .await;
    app.register(&step("bare", "http://{host}/x", &["host"])).await;

    let flow = run(&app, "ok", "ported", json!({"host": ["localhost"]})).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(svc.requests().len(), 1);

    let evil_authority = evil.addr.to_string();
    for (id, value) in [
        ("a", "evil.com"),
        ("b", evil_authority.as_str()),
        ("c", "evil.com/x?"),
        ("d", "user@localhost"),
    ] {
        let flow = run(&app, id, "bare", json!({"host": [value]})).await;
        let error = failed_for_good(&flow, "bare", "placeholder {host} stands in the host");
        assert!(error.contains("label"), "{error}");
    }
    // A label of digits is read as an address, which the policy checks.
    let flow = run(&app, "e", "bare", json!({"host": ["2852039166"]})).await;
    failed_for_good(&flow, "bare", "address 169.254.169.254 is not allowed");
    assert!(evil.requests().is_empty(), "the other server was called");
    assert_eq!(svc.requests().len(), 1);
}

// ---------------------------------------------------------------------------
// The binary

async fn the_binary_reads_the_host_list_from_its_environment(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let svc = answering().await;
    let engine = spawn_binary_with(&db, "n1", &[("TARTAN_STEP_HOSTS", "localhost")]).await;
    let post = reqwest::Method::POST;
    let (status, body) = call(
        &engine,
        post.clone(),
        "/engine/step",
        Some(step("lo", &svc.url("/x"), &[])),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("http.endpoint: address 127.0.0.1 is not allowed"),
        "{body}"
    );
    let named = step("s", &format!("http://localhost:{}/x", svc.addr.port()), &[]);
    let (status, body) = call(&engine, post.clone(), "/engine/step", Some(named)).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        &engine,
        post,
        "/engine/flow",
        Some(json!({"id": "f", "goals": ["s"]})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let flow = wait_for_terminal(&engine, "f").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(svc.requests().len(), 1);
}

#[tokio::test]
async fn an_invalid_host_list_stops_the_server_naming_the_entry() {
    let dir = std::env::temp_dir().join(format!("tartan-hosts-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tartan.toml");
    std::fs::write(&file, "step_hosts = [\"localhost\", \"a.*.example.com\"]\n").unwrap();
    let file = file.display().to_string();
    // Environment, flags, the setting named and the entry named.
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], &'a str, &'a str);
    let cases: [Case; 4] = [
        (
            &[("TARTAN_STEP_HOSTS", "localhost,10.0.0.0/33")],
            &[],
            "TARTAN_STEP_HOSTS",
            "10.0.0.0/33",
        ),
        (
            &[("TARTAN_STEP_HOSTS", "http://169.254.169.254/")],
            &[],
            "TARTAN_STEP_HOSTS",
            "http://169.254.169.254/",
        ),
        (&[], &["--step-hosts", "*"], "--step-hosts", "\"*\""),
        (&[], &["--config", &file], "step_hosts", "a.*.example.com"),
    ];
    for (env, args, setting, entry) in cases {
        let args: Vec<&str> = crate::helpers::UNUSED_SERVER
            .iter()
            .chain(args)
            .copied()
            .collect();
        let (ok, _, stderr) = crate::helpers::serve_refusing(&args, env).await;
        assert!(!ok, "{env:?} {args:?} was accepted");
        assert!(
            stderr.contains(setting) && stderr.contains(entry),
            "{env:?} {args:?}: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
