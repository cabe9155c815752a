//! One configuration (docs/operating.md, "Configuration"): defaults, the TOML
//! file, the environment and flags merged by one loader, every value checked
//! whatever its source; and the logs an operator reads (docs/operating.md,
//! "Logs").

use std::time::Duration;

use serde_json::Value;

use crate::helpers::{call, spawn_binary_with, Backend, TestDb};

/// `tartan config check` with these arguments and environment: exit status,
/// stdout, stderr.
async fn config_check(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let args: Vec<&str> = ["config", "check"]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    crate::helpers::run_tartan(&args, env).await
}

/// The line of `key` in the output of `config check`.
fn line_of<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("no line for {key} in:\n{out}"))
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tartan-config-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn config_check_prints_each_value_with_its_source_in_order_of_precedence() {
    let file = temp_file(
        "tartan.toml",
        "max_calls = 64\nmax_queued_calls = 50\nstep_timeout = 1500\nlease = \"2s\"\nretention = 0\n",
    );
    let file_arg = file.display().to_string();
    let (ok, out, err) = config_check(
        &["--config", &file_arg, "--max-queued-calls", "70"],
        &[
            ("TARTAN_MAX_CALLS", "32"),
            ("TARTAN_MAX_QUEUED_CALLS", "60"),
            (
                "TARTAN_DATABASE_URL",
                "postgres://tartan:hunter2@db.internal/tartan",
            ),
            ("DATABASE_URL", "postgres://other@elsewhere/db"),
            ("TARTAN_API_TOKEN", "secret-token-value"),
        ],
    )
    .await;
    assert!(ok, "{err}");
    // Environment over file, flag over environment, file over default.
    assert_eq!(
        line_of(&out, "max_calls"),
        "max_calls = 32  # TARTAN_MAX_CALLS (environment variable)"
    );
    assert_eq!(
        line_of(&out, "max_queued_calls"),
        "max_queued_calls = 70  # --max-queued-calls (command-line flag)"
    );
    assert!(
        line_of(&out, "lease").contains(&format!("# lease in {file_arg}")),
        "{out}"
    );
    assert_eq!(
        line_of(&out, "header_timeout"),
        "header_timeout = \"10s\"  # header_timeout (default)"
    );
    // Durations take integer milliseconds in the file too.
    assert!(
        line_of(&out, "step_timeout").starts_with("step_timeout = 1500  #"),
        "{out}"
    );
    assert!(
        line_of(&out, "retention").starts_with("retention = 0  #"),
        "{out}"
    );
    // TARTAN_DATABASE_URL wins over DATABASE_URL; its password is hidden.
    let db = line_of(&out, "database_url");
    assert!(
        db.contains("db.internal") && db.contains("TARTAN_DATABASE_URL"),
        "{db}"
    );
    assert!(
        !out.contains("hunter2") && !out.contains("secret-token-value"),
        "{out}"
    );
    assert!(line_of(&out, "api_token").contains("<redacted>"), "{out}");

    // DATABASE_URL alone is still read.
    let (ok, out, err) = config_check(&[], &[("DATABASE_URL", "sqlite://fallback.db")]).await;
    assert!(ok, "{err}");
    assert!(line_of(&out, "database_url").contains("fallback.db"), "{out}");
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}

/// An Argyll deployment's variables configure Tartan (docs/argyll.md,
/// "Settings"): each value names the Argyll variable it came from, Tartan's
/// own names win, and Argyll's Raft settings are said to be ignored.
#[tokio::test]
async fn argylls_variables_are_read_where_tartans_are_not_set() {
    let argyll = [
        ("API_HOST", "10.1.2.3"),
        ("API_PORT", "9000"),
        ("WEBHOOK_BASE_URL", "http://argyll-engine-1:9000"),
        ("RAFT_NODE_ID", "argyll-1"),
        ("MEMO_CACHE_SIZE", "1000"),
        ("RAFT_SERVERS", "argyll-1=argyll-engine-1:9701"),
        ("RAFT_DATA_DIR", "/data/argyll-raft"),
        // Beyond loopback, Tartan wants tokens or this (docs/argyll.md).
        ("TARTAN_ALLOW_UNAUTHENTICATED", "true"),
    ];
    let (ok, out, err) = config_check(&[], &argyll).await;
    assert!(ok, "{err}");
    let listen = line_of(&out, "listen");
    assert!(
        listen.contains("\"10.1.2.3:9000\"")
            && listen.contains("API_HOST and API_PORT (environment variable)"),
        "{out}"
    );
    let webhook = line_of(&out, "webhook_base_url");
    assert!(
        webhook.contains("argyll-engine-1:9000") && webhook.contains("WEBHOOK_BASE_URL"),
        "{out}"
    );
    assert!(
        line_of(&out, "node_id").contains("\"argyll-1\"  # RAFT_NODE_ID"),
        "{out}"
    );
    assert!(
        line_of(&out, "memo_cache_size").contains("1000  # MEMO_CACHE_SIZE"),
        "{out}"
    );
    for name in ["RAFT_SERVERS", "RAFT_DATA_DIR"] {
        assert!(
            err.lines()
                .any(|l| l.starts_with("warning: ") && l.contains(name) && l.contains("ignored")),
            "{name}: {err}"
        );
    }
    assert!(
        !err.contains("RAFT_NODE_ID"),
        "RAFT_NODE_ID is read, not ignored: {err}"
    );

    // API_PORT alone listens on every address, as Argyll does; Tartan's
    // own names win.
    let open = ("TARTAN_ALLOW_UNAUTHENTICATED", "true");
    let (ok, out, err) = config_check(&[], &[("API_PORT", "9001"), open]).await;
    assert!(ok, "{err}");
    assert!(line_of(&out, "listen").contains("\"0.0.0.0:9001\""), "{out}");
    let (ok, out, err) = config_check(
        &[],
        &[
            ("API_PORT", "9001"),
            ("TARTAN_LISTEN", "127.0.0.1:7000"),
            ("RAFT_NODE_ID", "a"),
            ("TARTAN_NODE_ID", "b"),
        ],
    )
    .await;
    assert!(ok, "{err}");
    assert!(
        line_of(&out, "listen").contains("\"127.0.0.1:7000\"  # TARTAN_LISTEN"),
        "{out}"
    );
    assert!(
        line_of(&out, "node_id").contains("\"b\"  # TARTAN_NODE_ID"),
        "{out}"
    );

    // A port that is not one is named with the variables it came from.
    let (ok, _, err) = config_check(&[], &[("API_HOST", "127.0.0.1"), ("API_PORT", "http")]).await;
    assert!(!ok, "a bad port is refused");
    assert!(err.contains("API_HOST and API_PORT"), "{err}");
}

/// Values from the file are checked as values from the environment are:
/// `max_active_flows = 0` would refuse every start, a misspelt backoff type
/// every registration.
#[tokio::test]
async fn an_invalid_value_stops_start_up_naming_the_key_and_its_source() {
    // The file, the environment, the flags, and what the error must say.
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str], &'a [&'a str]);
    let cases: [Case; 7] = [
        (
            "max_active_flows = 0\n",
            &[],
            &[],
            &["max_active_flows in ", "at least 1"],
        ),
        (
            "retry_backoff_type = \"exponentail\"\n",
            &[],
            &[],
            &["retry_backoff_type in ", "exponentail"],
        ),
        (
            "step_timeout = \"soon\"\n",
            &[],
            &[],
            &["step_timeout in ", "soon"],
        ),
        ("max_calls = 8\nmax_callz = 9\n", &[], &[], &["max_callz"]),
        (
            "",
            &[("TARTAN_LOG_FORMAT", "xml")],
            &[],
            &["TARTAN_LOG_FORMAT (environment variable)", "xml"],
        ),
        (
            "",
            &[],
            &["--db-pool", "none"],
            &["--db-pool (command-line flag)", "at least 1"],
        ),
        (
            "retry_initial_backoff = 5000\n",
            &[("TARTAN_RETRY_MAX_BACKOFF", "1s")],
            &[],
            &[
                "TARTAN_RETRY_MAX_BACKOFF (environment variable)",
                "retry_initial_backoff in ",
            ],
        ),
    ];
    for (toml, env, flags, said) in cases {
        let file = temp_file("tartan.toml", toml);
        let file_arg = file.display().to_string();
        let mut args = vec!["--config", file_arg.as_str()];
        args.extend_from_slice(flags);
        let (ok, out, err) = config_check(&args, env).await;
        assert!(!ok, "{toml:?} {env:?} {flags:?} was accepted:\n{out}");
        for part in said {
            assert!(
                err.contains(part),
                "{toml:?} {env:?} {flags:?}: expected {part:?} in:\n{err}"
            );
        }
        if toml.contains("max_active_flows") {
            assert!(err.contains(&file_arg), "the file is named: {err}");
        }
        // `serve` refuses the same configuration before it opens anything.
        let (ok, _, serve_err) = crate::helpers::serve_refusing(&args, env).await;
        assert!(!ok && serve_err.contains(said[0]), "{serve_err}");
        let _ = std::fs::remove_dir_all(file.parent().unwrap());
    }
    // A file that was named must exist.
    let (ok, _, err) = config_check(&["--config", "/nonexistent/tartan.toml"], &[]).await;
    assert!(!ok && err.contains("/nonexistent/tartan.toml"), "{err}");
}

/// A duration past its ceiling stops start-up naming the setting, its
/// source and the ceiling (`TARTAN_LEASE=99999999999d` once made every
/// start a 503 on Postgres); at the ceilings the engine runs flows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durations_past_their_ceiling_stop_start_up() {
    let file = temp_file("tartan.toml", "retention = \"3651d\"\n");
    let file_arg = file.display().to_string();
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], String);
    let cases: [Case; 6] = [
        (
            &[],
            &[("TARTAN_LEASE", "99999999999d")],
            "TARTAN_LEASE (environment variable): at most 1h, got \"99999999999d\"".into(),
        ),
        (
            &[],
            &[("STEP_TIMEOUT", "25h")],
            "STEP_TIMEOUT (environment variable): at most 24h".into(),
        ),
        (
            &["--body-timeout", "7200000"],
            &[],
            "--body-timeout (command-line flag): at most 1h, got 7200000".into(),
        ),
        (
            &["--config", &file_arg],
            &[],
            format!("retention in {file_arg}: at most 3650d"),
        ),
        // A count that sizes memory: it aborted the server allocating 2 TB.
        (
            &[],
            &[("TARTAN_MEMO_CACHE_SIZE", "99999999999")],
            "TARTAN_MEMO_CACHE_SIZE (environment variable): at most 10000000, got 99999999999".into(),
        ),
        (
            &[],
            &[("MEMO_CACHE_SIZE", "99999999999")],
            "MEMO_CACHE_SIZE (environment variable): at most 10000000".into(),
        ),
    ];
    for (flags, env, said) in cases {
        let (ok, out, err) = config_check(flags, env).await;
        assert!(!ok, "{flags:?} {env:?} was accepted:\n{out}");
        assert!(
            err.contains(&said),
            "{flags:?} {env:?}: expected {said:?} in:\n{err}"
        );
        let (ok, _, serve_err) = crate::helpers::serve_refusing(flags, env).await;
        assert!(!ok && serve_err.contains(&said), "{serve_err}");
    }
    let _ = std::fs::remove_dir_all(file.parent().unwrap());

    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let at_ceilings = [
        ("TARTAN_LEASE", "1h"),
        ("TARTAN_STEP_TIMEOUT", "24h"),
        ("TARTAN_RETENTION", "3650d"),
        ("TARTAN_MAX_RETRY_AFTER", "24h"),
        ("TARTAN_SHUTDOWN_GRACE", "1h"),
        ("TARTAN_BODY_TIMEOUT", "1h"),
        ("TARTAN_HEADER_TIMEOUT", "10m"),
    ];
    let engine = spawn_binary_with(&db, "ceilings", &at_ceilings).await;
    let svc = crate::helpers::StepServer::start(|_, _| {
        crate::helpers::json_reply(200, serde_json::json!({"out": "done"}))
    })
    .await;
    let step = crate::helpers::sync_step("s", &svc.url("/s"), &["in"], &["out"]);
    let (status, body) = call(&engine, reqwest::Method::POST, "/engine/step", Some(step)).await;
    assert_eq!(status, 201, "{body}");
    let start = serde_json::json!({"id": "f", "goals": ["s"], "init": {"in": ["x"]}});
    let (status, body) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
    assert_eq!(status, 201, "a lease of an hour leases: {body}");
    let flow = crate::helpers::wait_for_terminal(&engine, "f").await;
    assert_eq!(flow["status"], "completed", "{flow}");
}

/// `worker_threads` sets the runtime's workers; past its ceiling it stops
/// start-up naming the setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_threads_sets_the_threads_serve_runs_and_has_a_ceiling() {
    let (ok, _, err) = crate::helpers::serve_refusing(&[], &[("TARTAN_WORKER_THREADS", "100000")]).await;
    assert!(
        !ok && err.contains("TARTAN_WORKER_THREADS (environment variable): at most 1024, got 100000"),
        "{err}"
    );
    for n in [1, 3] {
        let db = tartan_testkit::TestDb::create(tartan_testkit::Backend::Sqlite)
            .await
            .unwrap();
        let threads = n.to_string();
        let engine =
            crate::helpers::spawn_binary_with(&db, "threads", &[("TARTAN_WORKER_THREADS", &threads)]).await;
        // The runtime says how many workers it runs; the process has that
        // many threads of their name at least (its blocking threads, made
        // as needed, share it).
        let log = engine.log.lock().unwrap().join("\n");
        assert!(
            log.contains(&format!("workers={n}")),
            "TARTAN_WORKER_THREADS={n}: {log}"
        );
        let pid = engine.child.id().unwrap();
        let named = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|name| name.trim() == "tokio-rt-worker")
            .count();
        assert!(named >= n, "TARTAN_WORKER_THREADS={n}: {named} worker threads");
    }
}

/// The example file lists every key, and is itself a valid configuration.
#[tokio::test]
async fn the_example_file_lists_every_key_and_is_valid() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/tartan.example.toml");
    let text = std::fs::read_to_string(example).unwrap();
    let (ok, out, err) = config_check(&[], &[]).await;
    assert!(ok, "{err}");
    for line in out.lines().filter(|l| !l.starts_with("# The")) {
        let key = line.trim_start_matches("# ").split([' ', '=']).next().unwrap();
        assert!(
            text.lines().any(|l| l
                .trim_start_matches('#')
                .trim_start()
                .starts_with(&format!("{key} ="))),
            "tartan.example.toml does not mention {key}"
        );
    }
    // Uncommented, its values are the defaults: check it loads.
    let uncommented: String = text
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest) if rest.contains(" = ") && !rest.starts_with(' ') => rest,
            _ => l,
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let file = temp_file("example.toml", &uncommented);
    let (ok, _, err) = config_check(
        &["--config", &file.display().to_string()],
        &[("TARTAN_API_TOKEN_FILE", "")],
    )
    .await;
    assert!(ok, "the example, uncommented, is refused: {err}\n{uncommented}");
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}

const TOKEN: &str = "log-test-token-0123456789";

/// JSON log lines: the configuration once at start-up (secrets redacted),
/// then one line per request with method, matched route, status, latency
/// and the request id, which the response echoes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_a_line_per_request_with_its_request_id() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let bin = spawn_binary_with(
        &db,
        "log-node",
        &[("TARTAN_LOG_FORMAT", "json"), ("TARTAN_API_TOKEN", TOKEN)],
    )
    .await;
    let client = reqwest::Client::new();
    let url = |path: &str| format!("http://{}{path}", bin.addr);
    let mine = client
        .get(url("/engine/flow/some-flow-id"))
        .bearer_auth(TOKEN)
        .header("X-Request-Id", "req-42")
        .send()
        .await
        .unwrap();
    assert_eq!(mine.status(), 404);
    assert_eq!(mine.headers()["x-request-id"], "req-42");
    // Without one, or with one too long to log, the server makes one.
    let refused = client.get(url("/engine/step")).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let made = refused.headers()["x-request-id"].to_str().unwrap().to_string();
    assert_eq!(made.len(), 32, "{made}");
    let long = client
        .get(url("/health"))
        .header("X-Request-Id", "x".repeat(500))
        .send()
        .await
        .unwrap();
    assert_eq!(long.headers()["x-request-id"].len(), 32);
    let (status, _) = call(&bin, reqwest::Method::GET, "/health", None).await;
    assert_eq!(status, 200);

    // Every line is a JSON object; find the request lines.
    let lines = || -> Vec<Value> {
        bin.log
            .lock()
            .unwrap()
            .iter()
            .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    };
    let mut found = Vec::new();
    for _ in 0..100 {
        found = lines()
            .into_iter()
            .filter(|l| l["target"] == "tartan::request")
            .collect();
        if found.len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mine = found
        .iter()
        .find(|l| l["request_id"] == "req-42")
        .unwrap_or_else(|| panic!("{found:?}"));
    assert_eq!(mine["method"], "GET");
    assert_eq!(mine["route"], "/engine/flow/{id}", "the route, not the path");
    assert_eq!(mine["status"], 404);
    assert!(mine["latency_ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{mine}");
    let refused = found.iter().find(|l| l["request_id"] == made.as_str()).unwrap();
    assert_eq!(refused["status"], 401);
    assert_eq!(refused["route"], "/engine/step");
    // The configuration, once, with the token hidden.
    let all = lines();
    let configs: Vec<_> = all.iter().filter(|l| l["settings"].is_string()).collect();
    assert_eq!(configs.len(), 1, "{all:?}");
    let settings = configs[0]["settings"].as_str().unwrap();
    assert!(
        settings.contains("max_calls=1024") && settings.contains("api_token=\"<redacted>\""),
        "{settings}"
    );
    assert!(
        !bin.log.lock().unwrap().iter().any(|l| l.contains(TOKEN)),
        "the token was logged"
    );
}

/// Webhook URLs derived from 0.0.0.0 reach no other host: said at start-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_base_url_other_hosts_cannot_reach_is_warned_about() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let bin = spawn_binary_with(
        &db,
        "warn-node",
        &[("TARTAN_API_TOKEN", TOKEN), ("TARTAN_LISTEN", "0.0.0.0:0")],
    )
    .await;
    // The flag given by the helper (127.0.0.1:0) wins over TARTAN_LISTEN:
    // no warning for a loopback address.
    assert!(!bin
        .log
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("TARTAN_WEBHOOK_BASE_URL")));
    // Gone before the next start: a SQLite file serves one process, and a
    // dropped child may still hold it when the next one starts.
    let mut bin = bin;
    bin.child.kill().await.expect("SIGKILL");

    let bin = crate::helpers::spawn_serve(
        &[
            "--listen",
            "0.0.0.0:0",
            "--database-url",
            &db.url,
            "--node-id",
            "warn-2",
        ],
        &[("TARTAN_API_TOKEN", TOKEN)],
    )
    .await;
    // Logged before `listening on`, so there by now.
    let warned = bin
        .log
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("WARN") && l.contains("TARTAN_WEBHOOK_BASE_URL"));
    assert!(warned, "no warning about the webhook base URL");
}

#[tokio::test]
async fn a_user_error_is_printed_as_error_and_its_causes_never_a_backtrace() {
    // A database that cannot be opened: the server's start fails.
    let dir = temp_file("x", "");
    let url = format!("sqlite://{}/no/such/dir/tartan.db", dir.display());
    let (ok, _, err) = crate::helpers::run_tartan(
        &["serve", "--listen", "127.0.0.1:0"],
        &[("TARTAN_DATABASE_URL", url.as_str()), ("RUST_BACKTRACE", "1")],
    )
    .await;
    assert!(!ok);
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with("error: opening sqlite://"), "{err}");
    assert!(!err.contains("stack backtrace"), "{err}");
    assert!(!err.contains("Caused by"), "{err}");
    // A bad setting the same way.
    let (ok, _, err) = config_check(&[], &[("TARTAN_MAX_CALLS", "-3"), ("RUST_BACKTRACE", "1")]).await;
    assert!(!ok);
    assert!(err.starts_with("error: invalid configuration"), "{err}");
    assert!(err.contains("TARTAN_MAX_CALLS"), "{err}");
    assert!(
        !err.contains("stack backtrace") && !err.contains("Caused by"),
        "{err}"
    );
}

#[tokio::test]
async fn config_check_names_every_problem_at_once_and_suggests_the_key_meant() {
    let file = temp_file(
        "tartan.toml",
        "lese = \"2s\"\nmax_calls = 0\nmax_queued_calls = 10\n",
    );
    let file_arg = file.display().to_string();
    let (ok, _, err) = config_check(
        &["--config", &file_arg],
        &[("TARTAN_STEP_TIMEOUT", "soon"), ("RUST_BACKTRACE", "1")],
    )
    .await;
    assert!(!ok);
    assert!(err.starts_with("error: invalid configuration:"), "{err}");
    assert!(
        err.contains(&format!(
            "lese in {file_arg}: no such setting; did you mean `lease`?"
        )),
        "{err}"
    );
    assert!(err.contains(&format!("max_calls in {file_arg}: ")), "{err}");
    assert!(
        err.contains("TARTAN_STEP_TIMEOUT (environment variable): "),
        "{err}"
    );
    // The good value is not reported.
    assert!(!err.contains("max_queued_calls"), "{err}");
}

#[tokio::test]
async fn config_check_warns_of_a_lease_in_milliseconds_and_a_tiny_timeout() {
    let file = temp_file("tartan.toml", "lease = \"30\"\n");
    let file_arg = file.display().to_string();
    let (ok, _, err) = config_check(&["--config", &file_arg], &[("TARTAN_STEP_TIMEOUT", "50ms")]).await;
    assert!(ok, "{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 2, "{err}");
    assert!(
        warnings[0].contains(&format!("lease in {file_arg} is 30 ms, under 1000 ms"))
            && warnings[0].contains("a bare number is milliseconds"),
        "{err}"
    );
    assert!(
        warnings[1].contains("TARTAN_STEP_TIMEOUT (environment variable) is 50 ms, under 100 ms")
            && !warnings[1].contains("bare number"),
        "{err}"
    );
    // Sensible values say nothing.
    let (ok, _, err) = config_check(&[], &[("TARTAN_LEASE", "5s")]).await;
    assert!(ok, "{err}");
    assert!(!err.contains("warning"), "{err}");
}

/// A wrong Postgres URL is named by its cause at once (docs/operating.md,
/// "Configuration"): a port nothing listens on, a host that does not
/// resolve, a database that does not exist. Not a pool's "timed out" after
/// its 30 s.
#[tokio::test]
async fn a_wrong_postgres_url_names_its_cause_at_once() {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut cases = vec![
        (
            format!("postgres://postgres@127.0.0.1:{closed}/test"),
            format!("connection refused by 127.0.0.1:{closed}"),
        ),
        (
            "postgres://postgres@no-such-host.invalid/test".to_string(),
            "unknown host in no-such-host.invalid:5432".to_string(),
        ),
    ];
    // The database's own refusal, where a Postgres is there to refuse.
    if let Some(db) = TestDb::create(Backend::Postgres).await {
        let (server, _) = db.url.rsplit_once('/').unwrap();
        cases.push((
            format!("{server}/tartan_no_such_database"),
            "has no database \"tartan_no_such_database\"".to_string(),
        ));
    }
    for (url, cause) in cases {
        let started = std::time::Instant::now();
        let (ok, _, err) = crate::helpers::run_tartan(
            &["serve", "--listen", "127.0.0.1:0"],
            &[("TARTAN_DATABASE_URL", url.as_str())],
        )
        .await;
        let took = started.elapsed();
        assert!(!ok, "{url} started");
        let last = err.lines().last().unwrap_or_default();
        assert!(last.starts_with("error: opening postgres://"), "{err}");
        assert!(last.contains(&cause), "{url}: wanted {cause:?} in {last}");
        assert!(!last.contains("timed out"), "{last}");
        // Bounded generously: a pool would have taken its 30 s.
        assert!(took < Duration::from_secs(20), "{url} took {took:?}");
    }
}

/// The commands that only open the database list only what they use, so
/// that their help fits a screen; the database is still the one `serve`
/// would use (the environment's, the file's).
#[tokio::test]
async fn the_help_of_migrate_purge_and_backup_fits_a_screen() {
    for command in ["migrate", "purge", "backup"] {
        let (ok, out, err) = crate::helpers::run_tartan(&[command, "--help"], &[]).await;
        assert!(ok, "{err}");
        assert!(out.lines().count() <= 24, "{command} --help:\n{out}");
        assert!(out.contains("--database-url"), "{out}");
        assert!(!out.contains("--max-calls"), "{out}");
    }
    // A setting of `serve` is no flag of theirs.
    let (ok, _, err) = crate::helpers::run_tartan(&["migrate", "--max-calls", "3"], &[]).await;
    assert!(!ok && err.contains("--max-calls"), "{err}");
}

/// The placeholders of deploy/k8s/secret.yaml, applied unchanged, are
/// refused by name: its tokens (mounted as files, as the StatefulSet
/// does) and its database password. A password merely containing the
/// words is not.
#[tokio::test]
async fn the_example_secrets_placeholders_cannot_start_a_server() {
    let secret =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/k8s/secret.yaml")).unwrap();
    let value = |key: &str| {
        secret
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_else(|| panic!("{key} in secret.yaml"))
    };
    for key in ["api-token", "read-token"] {
        let file = temp_file(key, &value(key));
        let var = format!("TARTAN_{}_FILE", key.to_uppercase().replace('-', "_"));
        let (ok, _, err) = config_check(&[], &[(var.as_str(), file.to_str().unwrap())]).await;
        assert!(!ok, "{key} accepted");
        assert!(err.contains(&var) && err.contains("placeholder"), "{err}");
    }
    let (ok, _, err) = config_check(&[], &[("TARTAN_DATABASE_URL", &value("database-url"))]).await;
    assert!(
        !ok && err.contains("TARTAN_DATABASE_URL") && err.contains("placeholder"),
        "{err}"
    );
    let (ok, _, err) = config_check(
        &[],
        &[(
            "TARTAN_DATABASE_URL",
            "postgres://tartan:do-not-change-me@exchange-metrics:5432/tartan",
        )],
    )
    .await;
    assert!(ok, "{err}");
}
