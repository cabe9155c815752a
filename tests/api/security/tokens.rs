//! Bearer tokens and no accidental exposure (docs/security.md, "Bearer
//! tokens" and "No accidental exposure"), tried as an attacker would:
//! requests without or with the wrong token, a read token on writes, what
//! the session says a token may do; and through the binary, start-up
//! settings that would expose an open engine, tokens from lists and files
//! that are never logged, and tokens too short to be safe.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use tartan_server::ApiSecurity;

use super::support::{as_full, assert_problem, request, secured, FULL, READER, ROTATED};
use crate::helpers::{json_reply, spawn_binary_with, start_secured, sync_step, Backend, StepServer, TestDb};
use tartan_testkit::both_backends;

both_backends!(
    tokens_guard_every_route_but_health_ready_and_webhooks,
    a_read_token_reads_but_cannot_change_anything,
);

// ---------------------------------------------------------------------------
// Bearer tokens.

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
        (Method::POST, "/engine/flow/x/work/t/retry"),
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
        (Method::POST, "/engine/flow/f/work/t/retry", None),
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

// ---------------------------------------------------------------------------
// Through the binary: settings, files, logs, exposure.

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
