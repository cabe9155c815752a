//! DNS rebinding (docs/security.md, "DNS rebinding"): a page on a name the
//! attacker points at 127.0.0.1 is same-origin for the browser, so only the
//! name it sends (`Host`, HTTP/2's authority) tells it from the operator's
//! own tools. Tried with the headers such a page sends.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use tartan_server::{AllowedHosts, ApiSecurity};

use crate::helpers::{
    read_reply, spawn_binary_with, start_secured, sync_step, Backend, Reply, TestApp, TestDb,
};
use crate::wire::{h2_connect, h2_get, raw_request};
use tartan_testkit::both_backends;

both_backends!(without_tokens_a_rebinding_host_is_refused_and_loopback_names_are_served);

const REBIND: &str = "rebind.attacker.example";
const TOKEN: &str = "hosts-token-0123456789";

/// A request naming `host` in its `Host` header.
async fn with_host(
    app: &TestApp,
    method: Method,
    path: &str,
    host: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Reply {
    let mut req = app
        .client
        .request(method, app.url(path))
        .header("Host", host)
        .header("Content-Type", "application/json");
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    if let Some(b) = body {
        req = req.body(b.to_string());
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("{path}: {e}"));
    read_reply(resp).await.0
}

fn assert_refused(r: &Reply, host: &str) {
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{host}: {:?}", r.body);
    assert_eq!(r.content_type, "application/problem+json", "{host}");
    assert_eq!(r.body["type"], "urn:tartan:problem:forbidden", "{host}");
    let detail = r.body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("TARTAN_ALLOWED_HOSTS"), "{host}: {detail}");
}

/// The WebSocket handshake a page on `host` would send: `Origin` is the
/// page's own, which is the server's as far as the browser knows.
async fn ws_handshake(addr: &str, host: &str) -> (u16, String, String) {
    let request = format!(
        "GET /engine/ws HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\nConnection: Upgrade\r\n\
         Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    raw_request(addr, &request, Duration::from_secs(10)).await
}

async fn without_tokens_a_rebinding_host_is_refused_and_loopback_names_are_served(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let app = start_secured(db, "hosts", ApiSecurity::open()).await;
    let port = app.addr.port();
    let addr = app.addr.to_string();
    let step = sync_step("s", "http://127.0.0.1:9/s", &[], &["out"]);
    let refused = [
        REBIND.to_string(),
        format!("{REBIND}:{port}"),
        format!("localhost.attacker.example:{port}"),
        format!("0.0.0.0:{port}"),
        format!("10.0.0.1:{port}"),
    ];
    for host in &refused {
        let r = with_host(&app, Method::POST, "/engine/step", host, None, Some(&step)).await;
        assert_refused(&r, host);
        for path in ["/engine/step", "/health", "/no/such/route"] {
            let r = with_host(&app, Method::GET, path, host, None, None).await;
            assert_refused(&r, host);
        }
        // The WebSocket handshake, which the origin check alone lets in
        // (the page's origin is the server's as far as the browser knows).
        let (status, head, body) = ws_handshake(&addr, host).await;
        assert_eq!(status, 403, "{host}: {head}");
        assert!(head.contains("application/problem+json"), "{head}");
        assert!(body.contains("TARTAN_ALLOWED_HOSTS"), "{body}");
    }
    // Nothing was registered.
    let steps = app.get("/engine/step").await;
    assert_eq!(steps.body["count"], 0, "{:?}", steps.body);

    // Loopback names, with and without the port, in any case.
    let served = [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        format!("LocalHost:{port}"),
        format!("ui.localhost:{port}"),
        "127.0.0.1".to_string(),
    ];
    for (i, host) in served.iter().enumerate() {
        let mut step = step.clone();
        step["id"] = json!(format!("s{i}"));
        let r = with_host(&app, Method::POST, "/engine/step", host, None, Some(&step)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{host}: {:?}", r.body);
        let r = with_host(&app, Method::GET, "/health", host, None, None).await;
        assert_eq!(r.status, StatusCode::OK, "{host}: {:?}", r.body);
    }
    let (status, head, _) = ws_handshake(&addr, &format!("localhost:{port}")).await;
    assert_eq!(status, 101, "{head}");

    // HTTP/2 names the server in the authority.
    let (mut h2, _) = h2_connect(&addr).await;
    let (status, body) = h2_get(&mut h2, &format!("{REBIND}:{port}"), "/engine/step").await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("TARTAN_ALLOWED_HOSTS"), "{body}");
    let (status, body) = h2_get(&mut h2, &format!("localhost:{port}"), "/engine/step").await;
    assert_eq!(status, 200, "{body}");

    // An absolute-form target names the server too.
    let (status, _, body) = raw_request(
        &addr,
        &format!("GET http://{REBIND}/engine/step HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    // HTTP/1.0 without Host is no browser's request: served.
    let (status, head, _) = raw_request(&addr, "GET /health HTTP/1.0\r\n\r\n", Duration::from_secs(10)).await;
    assert_eq!(status, 200, "{head}");
}

fn listed(entries: &[&str]) -> AllowedHosts {
    let entries: Vec<String> = entries.iter().map(|s| s.to_string()).collect();
    AllowedHosts::parse(&entries).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_listed_in_allowed_hosts_is_served() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let security = ApiSecurity::open().with_allowed_hosts(listed(&["tartan.internal", "ui.example:8443"]));
    let app = start_secured(db, "hosts", security).await;
    let port = app.addr.port();
    for host in [
        "tartan.internal".to_string(),
        format!("tartan.internal:{port}"),
        "TARTAN.internal.".to_string(),
        "ui.example:8443".to_string(),
        format!("localhost:{port}"),
    ] {
        let r = with_host(&app, Method::GET, "/engine/step", &host, None, None).await;
        assert_eq!(r.status, StatusCode::OK, "{host}: {:?}", r.body);
    }
    // A port listed is a port required; other names stay refused.
    for host in [format!("ui.example:{port}"), format!("{REBIND}:{port}")] {
        let r = with_host(&app, Method::GET, "/engine/step", &host, None, None).await;
        assert_refused(&r, &host);
    }

    // `*` serves any name, as Jupyter's, Docker's and Vite's do.
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let app = start_secured(
        db,
        "hosts",
        ApiSecurity::open().with_allowed_hosts(listed(&["*"])),
    )
    .await;
    let r = with_host(&app, Method::GET, "/engine/step", REBIND, None, None).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_any_host_is_served_unless_hosts_are_listed() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let tokens = ApiSecurity::new(&[TOKEN.into()], &[], &[]).unwrap_or_else(|e| panic!("{e}"));
    let app = start_secured(db, "hosts", tokens.clone()).await;
    let step = sync_step("s", "http://127.0.0.1:9/s", &[], &["out"]);
    // A page cannot attach the token, and whoever holds it is the operator:
    // the name is not what protects this engine.
    let r = with_host(
        &app,
        Method::POST,
        "/engine/step",
        REBIND,
        Some(TOKEN),
        Some(&step),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let r = with_host(&app, Method::GET, "/engine/step", REBIND, None, None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{:?}", r.body);

    // Listed hosts are enforced with tokens too, probes' loopback included.
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let app = start_secured(
        db,
        "hosts",
        tokens.with_allowed_hosts(listed(&["tartan.example.com"])),
    )
    .await;
    let r = with_host(&app, Method::GET, "/engine/step", REBIND, Some(TOKEN), None).await;
    assert_refused(&r, REBIND);
    let detail = r.body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("is not listed in TARTAN_ALLOWED_HOSTS"),
        "{detail}"
    );
    for host in ["tartan.example.com", "localhost"] {
        let r = with_host(&app, Method::GET, "/engine/step", host, Some(TOKEN), None).await;
        assert_eq!(r.status, StatusCode::OK, "{host}: {:?}", r.body);
    }
    let r = with_host(&app, Method::GET, "/health", "127.0.0.1", None, None).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
}

/// The setting through the binary: environment and flag, the webhook URLs'
/// host served as well, and an entry that is not a host stops start-up
/// naming the setting as it was given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_reads_allowed_hosts_and_refuses_an_entry_that_is_not_a_host() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let engine = spawn_binary_with(
        &db,
        "hosts",
        &[
            ("TARTAN_ALLOWED_HOSTS", "tartan.internal, *.svc.local"),
            ("TARTAN_WEBHOOK_BASE_URL", "http://hooks.tartan.example:9999"),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    for (host, status) in [
        ("tartan.internal", 200),
        ("a.svc.local:8080", 200),
        ("localhost", 200),
        // Step services name the host of the webhook URLs they were given.
        ("hooks.tartan.example:9999", 200),
        (REBIND, 403),
    ] {
        let resp = client
            .get(format!("http://{}/engine/step", engine.addr))
            .header("Host", host)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{host}: {e}"));
        assert_eq!(resp.status().as_u16(), status, "{host}");
    }
    drop(engine);

    for (env, flags, named) in [
        (
            vec![("TARTAN_ALLOWED_HOSTS", "http://tartan.internal")],
            vec![],
            "TARTAN_ALLOWED_HOSTS",
        ),
        (
            vec![],
            vec!["--allowed-hosts", "tartan.internal/x"],
            "--allowed-hosts",
        ),
        (vec![], vec!["--allowed-hosts", "host:port"], "--allowed-hosts"),
    ] {
        let mut args = vec!["--listen", "127.0.0.1:0", "--database-url", &db.url];
        args.extend(flags);
        let (ok, stdout, stderr) = crate::helpers::serve_refusing(&args, &env).await;
        let text = format!("{stdout}{stderr}");
        assert!(!ok, "{env:?}: started: {text}");
        assert!(text.contains(named) && text.contains("is not a host"), "{text}");
    }
}
