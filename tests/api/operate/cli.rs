//! The `tartan` command-line client end to end (docs/cli.md): the
//! real binary against a real server on 127.0.0.1:0, asserting on what a
//! user sees: stdout, stderr and the exit code.

use std::path::Path;
use std::time::Duration;

use axum::response::IntoResponse;
use serde_json::{json, Value};

use crate::helpers::{
    json_reply, spawn_app, start_secured, sync_step, tartan_output, Backend, StepServer, TestApp, TestDb,
};

tartan_testkit::both_backends!(
    steps_apply_from_a_directory_then_list_show_and_remove,
    a_watched_flow_shows_each_attempt_the_retry_and_the_result,
    bulk_retry_waits_for_its_job_and_lists_it,
    control_characters_from_steps_never_reach_the_terminal,
);

/// What a run of the binary showed.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Run `tartan args` to its end with only `env`.
async fn tartan(args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = tartan_output(args, env).await;
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Run `tartan args` against `app`.
async fn against(app: &TestApp, args: &[&str]) -> Run {
    let server = app.url("");
    tartan(args, &[("TARTAN_SERVER", &server)]).await
}

fn temp_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tartan-cli-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// The row of a table whose first cell is `first`.
fn row<'a>(text: &'a str, first: &str) -> Option<&'a str> {
    text.lines().find(|l| l.split_whitespace().next() == Some(first))
}

async fn steps_apply_from_a_directory_then_list_show_and_remove(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let dir = temp_dir();
    write(
        &dir,
        "a.json",
        &sync_step("alpha", "http://127.0.0.1:9/alpha", &["name"], &["greeting"]).to_string(),
    );
    let yaml = "- id: beta\n  name: Beta\n  type: sync\n  http:\n    endpoint: http://127.0.0.1:9/beta\n  attributes:\n    greeting: {role: required, type: string}\n    shout: {role: output, type: string}\n";
    write(&dir, "b.yaml", yaml);
    write(&dir, "notes.txt", "not a step");
    let d = dir.to_string_lossy().to_string();

    let r = against(&app, &["step", "apply", "-f", &d]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        row(&r.stdout, "alpha").is_some_and(|l| l.contains("created") && l.contains("a.json")),
        "{r:?}"
    );
    assert!(
        row(&r.stdout, "beta").is_some_and(|l| l.contains("created") && l.contains("b.yaml")),
        "{r:?}"
    );

    let r = against(&app, &["step", "apply", "-f", &d]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        row(&r.stdout, "alpha").is_some_and(|l| l.contains("unchanged")),
        "{r:?}"
    );
    assert!(
        row(&r.stdout, "beta").is_some_and(|l| l.contains("unchanged")),
        "{r:?}"
    );

    let r = against(&app, &["step", "apply", "-f", &d, "-o", "json"]).await;
    let body: Value = serde_json::from_str(&r.stdout).expect("step apply -o json is JSON");
    assert_eq!(body["count"], 2, "{body}");
    assert!(
        body["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["result"] == "unchanged"),
        "{body}"
    );

    write(&dir, "b.yaml", &yaml.replace("name: Beta", "name: Beta Two"));
    let r = against(&app, &["step", "apply", "-f", &d]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        row(&r.stdout, "alpha").is_some_and(|l| l.contains("unchanged")),
        "{r:?}"
    );
    assert!(
        row(&r.stdout, "beta").is_some_and(|l| l.contains("updated")),
        "{r:?}"
    );
    assert_eq!(app.get("/engine/step/beta").await.body["name"], "Beta Two");

    // A file that is not YAML: named, exit 1, and nothing of the others is sent.
    write(&dir, "c.yml", "id: [unclosed");
    write(&dir, "b.yaml", &yaml.replace("name: Beta", "name: Beta Three"));
    let r = against(&app, &["step", "apply", "-f", &d]).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("c.yml") && r.stderr.contains("not valid YAML"),
        "{r:?}"
    );
    assert_eq!(app.get("/engine/step/beta").await.body["name"], "Beta Two");
    std::fs::remove_file(dir.join("c.yml")).unwrap();

    // A step the server refuses: its detail, exit 1.
    write(
        &dir,
        "d.json",
        r#"{"id": "gamma", "name": "Gamma", "type": "script", "http": {"endpoint": "http://127.0.0.1:9/"}}"#,
    );
    let r = against(
        &app,
        &["step", "apply", "-f", &dir.join("d.json").to_string_lossy()],
    )
    .await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("script required"), "{r:?}");
    std::fs::remove_file(dir.join("d.json")).unwrap();

    let r = against(&app, &["step", "ls"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("ID"), "{r:?}");
    assert!(
        row(&r.stdout, "alpha").is_some_and(|l| l.contains("name") && l.contains("greeting")),
        "{r:?}"
    );
    assert!(row(&r.stdout, "beta").is_some(), "{r:?}");

    let r = against(&app, &["step", "ls", "-o", "json"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let body: Value = serde_json::from_str(&r.stdout).expect("step ls -o json is JSON");
    assert_eq!(body["count"], 2, "{body}");

    let r = against(&app, &["step", "get", "beta", "--output", "json"]).await;
    let body: Value = serde_json::from_str(&r.stdout).expect("step get -o json is JSON");
    assert_eq!(body["name"], "Beta Two");
    let r = against(&app, &["step", "get", "beta"]).await;
    assert!(
        row(&r.stdout, "endpoint").is_some_and(|l| l.contains("127.0.0.1:9/beta")),
        "{r:?}"
    );
    // The retry policy in words (docs/retries.md, "In words").
    assert!(
        row(&r.stdout, "retry").is_some_and(|l| l.contains("up to 11 attempts, waiting 1s, 2s, 4s, 8s, 16s")),
        "{r:?}"
    );

    let r = against(&app, &["step", "rm", "alpha"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("removed alpha"), "{r:?}");
    let r = against(&app, &["step", "get", "alpha"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("error: step not found: alpha"), "{r:?}");
    assert!(r.stderr.contains("404"), "{r:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A step endpoint answering 503 to its first call, then `{"greeting"}`.
async fn flaky_greeter() -> StepServer {
    StepServer::start(|_, n| {
        if n == 0 {
            json_reply(503, json!({"error": "warming up"}))
        } else {
            json_reply(200, json!({"greeting": "hello Ada"}))
        }
    })
    .await
}

/// Retries quickly: the watch sees the countdown without a long wait.
fn quick_retries(mut step: Value) -> Value {
    step["work_config"] = json!({"max_retries": 3, "init_backoff": 300, "backoff_type": "fixed"});
    step
}

async fn a_watched_flow_shows_each_attempt_the_retry_and_the_result(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = flaky_greeter().await;
    let refuses = StepServer::start(|_, _| json_reply(400, json!({"error": "no such person"}))).await;
    let greet = quick_retries(sync_step("greet", &svc.url("/greet"), &["name"], &["greeting"]));
    assert_eq!(app.register(&greet).await.status, 201);
    let bad = sync_step("lookup", &refuses.url("/lookup"), &["name"], &["record"]);
    assert_eq!(app.register(&bad).await.status, 201);

    let r = against(&app, &["plan", "greet", "--init", "name=Ada"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with('#'), "{r:?}");
    assert!(
        r.stdout
            .lines()
            .any(|l| l.contains("greet (goal)") && l.contains("name") && l.contains("greeting")),
        "{r:?}"
    );

    let r = against(
        &app,
        &[
            "flow",
            "start",
            "greet",
            "--init",
            "name=Ada",
            "--id",
            "watched-1",
            "--label",
            "team=web",
            "--watch",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let out = &r.stdout;
    assert!(out.contains("started flow watched-1"), "{r:?}");
    assert!(out.contains("step greet attempt 1 failed (retryable:"), "{r:?}");
    assert!(out.contains("step greet retry in 0.3s"), "{r:?}");
    assert!(out.contains("step greet attempt 2 succeeded (HTTP 200)"), "{r:?}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("result:") && l.contains("hello Ada")),
        "{r:?}"
    );
    // In that order.
    let at = |s: &str| out.find(s).unwrap_or(usize::MAX);
    assert!(
        at("attempt 1 failed") < at("retry in") && at("retry in") < at("attempt 2 succeeded"),
        "{r:?}"
    );
    // Each line starts with the event's time.
    assert!(
        out.lines()
            .filter(|l| l.contains("step greet"))
            .all(|l| l.as_bytes().get(2) == Some(&b':')),
        "{r:?}"
    );

    // For programs: the start's answer, then each event, one JSON object a line.
    let r = against(
        &app,
        &[
            "flow",
            "start",
            "greet",
            "--init",
            "name=Bo",
            "--id",
            "watched-2",
            "--watch",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines[0]["flow_id"], "watched-2", "{r:?}");
    assert_eq!(
        lines.last().map(|e| e["type"].clone()),
        Some(json!("flow_deactivated")),
        "{r:?}"
    );

    let r = against(
        &app,
        &[
            "flow", "start", "lookup", "--init", "name=Ada", "--id", "doomed-1", "--watch",
        ],
    )
    .await;
    assert_eq!(r.code, 4, "a failed flow exits 4: {r:?}");
    assert!(
        r.stdout.contains("step lookup attempt 1 failed (permanent:"),
        "{r:?}"
    );
    assert!(r.stdout.contains("flow doomed-1 failed"), "{r:?}");
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("error:") && l.contains("lookup")),
        "{r:?}"
    );

    // An id is generated and printed when none is given.
    let r = against(&app, &["flow", "start", "lookup", "--init", "name=Bob"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let generated = r
        .stdout
        .trim()
        .strip_prefix("started flow ")
        .expect("the id is printed")
        .to_string();
    app.wait_for_flow(&generated).await;

    let r = against(&app, &["flow", "ls", "--status", "completed"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        row(&r.stdout, "watched-1").is_some_and(|l| l.contains("team=web")),
        "{r:?}"
    );
    assert!(row(&r.stdout, "doomed-1").is_none(), "{r:?}");
    let r = against(&app, &["flow", "ls", "--prefix", "doomed", "-o", "json"]).await;
    let body: Value = serde_json::from_str(&r.stdout).expect("flow ls -o json is JSON");
    assert_eq!(body["count"], 1, "{body}");
    assert_eq!(body["flows"][0]["id"], "doomed-1");
    let r = against(&app, &["flow", "ls", "--label", "team=web"]).await;
    assert_eq!(r.stdout.lines().count(), 2, "{r:?}");
    assert!(row(&r.stdout, "watched-1").is_some(), "{r:?}");
    let r = against(&app, &["flow", "ls", "--limit", "2"]).await;
    assert_eq!(r.stdout.lines().count(), 3, "the header and two flows: {r:?}");

    let r = against(&app, &["flow", "get", "watched-1"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        row(&r.stdout, "status").is_some_and(|l| l.contains("completed")),
        "{r:?}"
    );
    assert!(
        row(&r.stdout, "greet").is_some_and(|l| l.contains("completed")),
        "{r:?}"
    );
    assert!(r.stdout.contains("result: {\"greeting\":\"hello Ada\"}"), "{r:?}");

    let r = against(&app, &["work", "ls", "--flow", "watched-1"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        row(&r.stdout, "watched-1").is_some_and(|l| l.contains("greet") && l.contains("succeeded")),
        "{r:?}"
    );
    let r = against(&app, &["work", "ls", "--status", "failed", "-o", "json"]).await;
    let body: Value = serde_json::from_str(&r.stdout).expect("work ls -o json is JSON");
    // doomed-1 and the flow with the generated id.
    assert_eq!(body["count"], 2, "{body}");
    let flows: Vec<&str> = body["work_items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["flow_id"].as_str())
        .collect();
    assert!(
        flows.contains(&"doomed-1") && flows.contains(&generated.as_str()),
        "{body}"
    );

    let r = against(&app, &["flow", "events", "watched-1"]).await;
    assert!(r.stdout.contains("flow watched-1 completed"), "{r:?}");
    // Following a flow that is over prints its history and ends with its outcome.
    let r = against(&app, &["flow", "events", "doomed-1", "--follow"]).await;
    assert_eq!(r.code, 4, "{r:?}");
    assert!(r.stdout.contains("flow doomed-1 deactivated"), "{r:?}");
    let r = against(&app, &["flow", "events", "watched-1", "--follow", "-o", "json"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(
        lines.last().map(|e| e["type"].clone()),
        Some(json!("flow_deactivated")),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn problems_and_an_unreachable_server_say_what_is_wrong() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let r = against(&app, &["plan", "nowhere"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.starts_with("error: ") && r.stderr.contains("nowhere"),
        "{r:?}"
    );
    assert!(r.stderr.contains("404 Not Found"), "{r:?}");
    assert!(r.stdout.is_empty(), "{r:?}");

    let r = against(&app, &["flow", "start", "x", "--init", "broken"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("--init \"broken\": expected name=value"),
        "{r:?}"
    );

    let r = against(&app, &["flow", "get", "no-such-flow"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("no-such-flow"), "{r:?}");

    // Nothing listens on port 1 of loopback.
    let r = tartan(&["step", "ls"], &[("TARTAN_SERVER", "http://127.0.0.1:1")]).await;
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr
            .contains("cannot reach the Tartan server at http://127.0.0.1:1"),
        "{r:?}"
    );
    let r = tartan(&["health", "--server", "http://127.0.0.1:1"], &[]).await;
    assert_eq!(r.code, 3, "{r:?}");
    let r = tartan(&["step", "ls", "--server", "not a url"], &[]).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("is not a URL"), "{r:?}");

    let r = against(&app, &["health"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        row(&r.stdout, "ready").is_some_and(|l| l.contains("ready")),
        "{r:?}"
    );
    assert!(
        row(&r.stdout, "store").is_some_and(|l| l.contains("sqlite")),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_come_from_the_flag_or_the_environment() {
    const FULL: &str = "cli-full-token-0123456789";
    const READER: &str = "cli-read-token-0123456789";
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let security = tartan_server::ApiSecurity::new(&[FULL.into()], &[READER.into()], &[]).unwrap();
    let app = start_secured(db, "test-node", security).await;
    let server = app.url("");
    let svc = flaky_greeter().await;
    let dir = temp_dir();
    let greet = quick_retries(sync_step("greet", &svc.url("/greet"), &["name"], &["greeting"]));
    write(&dir, "greet.json", &greet.to_string());
    let file = dir.join("greet.json").to_string_lossy().to_string();

    let r = tartan(&["step", "ls"], &[("TARTAN_SERVER", &server)]).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("401"), "{r:?}");
    let r = tartan(
        &["step", "apply", "-f", &file, "--token", READER],
        &[("TARTAN_SERVER", &server)],
    )
    .await;
    assert_eq!(r.code, 1, "a read token cannot register: {r:?}");
    assert!(r.stderr.contains("403"), "{r:?}");

    let r = tartan(&["--help"], &[]).await;
    assert!(r.stdout.contains("step"), "{r:?}");
    let r = tartan(
        &["step", "apply", "-f", &file, "--token", FULL],
        &[("TARTAN_SERVER", &server)],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("created"), "{r:?}");
    let env = [("TARTAN_SERVER", server.as_str()), ("TARTAN_TOKEN", FULL)];
    let r = tartan(&["step", "ls"], &env).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(row(&r.stdout, "greet").is_some(), "{r:?}");
    // The live view carries the token too.
    let r = tartan(
        &[
            "flow", "start", "greet", "--init", "name=Ada", "--id", "tok-1", "--watch",
        ],
        &env,
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("hello Ada"), "{r:?}");
    let r = tartan(&["flow", "ls", "--token", READER], &[("TARTAN_SERVER", &server)]).await;
    assert_eq!(r.code, 0, "a read token lists flows: {r:?}");
    assert!(row(&r.stdout, "tok-1").is_some(), "{r:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Run `tartan args` in a pseudo-terminal (util-linux `script`): the exit
/// code and everything the terminal got.
async fn in_terminal(app: &TestApp, args: &[&str]) -> Run {
    let command = std::iter::once(env!("CARGO_BIN_EXE_tartan"))
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("script")
            .args(["-qefc", &command, "/dev/null"])
            .env("TARTAN_SERVER", app.url(""))
            .env("COLUMNS", "120")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("tartan ends by itself")
    .expect("running script");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_the_view_is_a_table_redrawn_in_place() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: util-linux `script` is not installed");
        return;
    }
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let svc = flaky_greeter().await;
    let refuses = StepServer::start(|_, _| json_reply(400, json!({"error": "no such person"}))).await;
    let greet = quick_retries(sync_step("greet", &svc.url("/greet"), &["name"], &["greeting"]));
    assert_eq!(app.register(&greet).await.status, 201);
    let bad = sync_step("lookup", &refuses.url("/lookup"), &["name"], &["record"]);
    assert_eq!(app.register(&bad).await.status, 201);

    let r = in_terminal(
        &app,
        &[
            "flow", "start", "greet", "--init", "name=Ada", "--id", "tty-1", "--watch",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let screen = &r.stdout;
    assert!(
        screen.contains("\x1b[?25l"),
        "the cursor is hidden while drawing: {r:?}"
    );
    assert!(screen.contains("\x1b[J"), "the table is drawn over: {r:?}");
    assert!(screen.contains("STEP") && screen.contains("ATTEMPT"), "{r:?}");
    assert!(screen.contains("flow tty-1 completed"), "{r:?}");
    assert!(screen.contains("result: {\"greeting\":\"hello Ada\"}"), "{r:?}");
    assert!(
        screen.rfind("\x1b[?25h") > screen.rfind("\x1b[?25l"),
        "the cursor is given back: {r:?}"
    );
    // Not the plain lines: those are for pipes and --plain.
    assert!(!screen.contains("attempt 2 succeeded"), "{r:?}");

    let r = in_terminal(
        &app,
        &[
            "flow", "start", "lookup", "--init", "name=Ada", "--id", "tty-2", "--watch",
        ],
    )
    .await;
    assert_eq!(r.code, 4, "{r:?}");
    assert!(r.stdout.contains("flow tty-2 failed"), "{r:?}");

    let r = in_terminal(&app, &["flow", "watch", "tty-1", "--plain"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("attempt 2 succeeded"),
        "--plain prints lines on a terminal too: {r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_ends_a_watch_with_130_and_cancel_stops_the_flow() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let slow = StepServer::start_async(|_, _| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            json_reply(200, json!({"out": "late"}))
        })
    })
    .await;
    let step = sync_step("slow", &slow.url("/slow"), &[], &["out"]);
    assert_eq!(app.register(&step).await.status, 201);
    assert_eq!(
        app.start_flow(&json!({"id": "slow-1", "goals": ["slow"]}))
            .await
            .status,
        201
    );

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_tartan"))
        .args(["flow", "watch", "slow-1"])
        .env_clear()
        .env("TARTAN_SERVER", app.url(""))
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // Once it printed the attempt, it is watching.
    let mut seen = String::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 4096];
        while !seen.contains("attempt 1 started") {
            let n = stdout.read(&mut buf).await.unwrap();
            assert!(n > 0, "the watch ended early: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    })
    .await
    .expect("the watch prints the attempt");
    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(130), "{seen}");

    let r = against(&app, &["flow", "cancel", "slow-1", "--no-compensate"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("cancelled flow slow-1"), "{r:?}");
    assert_eq!(app.wait_for_flow("slow-1").await["status"], "cancelled");
    let r = against(&app, &["flow", "watch", "slow-1"]).await;
    assert_eq!(r.code, 5, "a cancelled flow exits 5: {r:?}");
    let r = against(&app, &["flow", "cancel", "slow-1"]).await;
    assert_eq!(r.code, 1, "a flow that is over cannot be cancelled: {r:?}");
    assert!(r.stderr.contains("409"), "{r:?}");
}

/// Needs `POST /engine/flow/{id}/retry` (the `retry` branch): passes with it
/// merged; drop the `ignore` then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_runs_a_failed_flow_again() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    // Refuses the first call for good, then answers.
    let svc = StepServer::start(|_, n| {
        if n == 0 {
            json_reply(400, json!({"error": "not yet"}))
        } else {
            json_reply(200, json!({"greeting": "hello again"}))
        }
    })
    .await;
    let step = sync_step("greet", &svc.url("/greet"), &["name"], &["greeting"]);
    assert_eq!(app.register(&step).await.status, 201);
    let r = against(
        &app,
        &[
            "flow", "start", "greet", "--init", "name=Ada", "--id", "again-1", "--watch",
        ],
    )
    .await;
    assert_eq!(r.code, 4, "{r:?}");
    let r = against(&app, &["flow", "retry", "again-1", "--watch"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("retrying flow again-1"), "{r:?}");
    assert!(
        r.stdout
            .contains("flow again-1 retried (steps: greet; attempts reset)"),
        "{r:?}"
    );
    // Only what happened since the retry.
    assert!(!r.stdout.contains("flow again-1 started"), "{r:?}");
    assert!(r.stdout.contains("hello again"), "{r:?}");
    let r = against(&app, &["flow", "retry", "again-1"]).await;
    assert_eq!(r.code, 1, "a completed flow is not retried: {r:?}");
    assert!(r.stderr.contains("409"), "{r:?}");
}

/// A stand-in for the server's event stream (`GET /engine/flow/{id}/stream`,
/// the `streams` branch's contract): the history route answers the first
/// two events, then the stream sends three and `dropped`, and on the
/// reconnection (which must resume after the fifth) the rest and the state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_view_follows_the_stream_and_resumes_after_a_drop() {
    use std::sync::{Arc, Mutex};

    use axum::extract::{Path as UrlPath, Query};
    use axum::http::HeaderMap;

    let at = |i: u64| format!("2026-11-23T12:00:{i:02}.000Z");
    let ev = |seq: u64, kind: &str, data: Value| json!({"type": kind, "aggregate_id": ["flow", "s-1"], "sequence": seq, "timestamp": at(seq), "data": data});
    let plan = json!({"goals": ["greet"], "required": ["name"], "steps": {"greet": sync_step("greet", "http://127.0.0.1:9/", &["name"], &["greeting"])}, "attributes": {}, "excluded": {}});
    let item = |extra: Value| {
        let mut d = json!({"flow_id": "s-1", "step_id": "greet", "token": "t1"});
        for (k, v) in extra.as_object().unwrap() {
            d[k] = v.clone();
        }
        d
    };
    let events = vec![
        ev(
            1,
            "flow_started",
            json!({"flow_id": "s-1", "plan": plan, "init": {"name": ["Ada"]}}),
        ),
        ev(
            2,
            "step_started",
            json!({"flow_id": "s-1", "step_id": "greet", "inputs": {}, "work_items": {"t1": {}}}),
        ),
        ev(3, "work_started", item(json!({"attempt": 1, "inputs": {}}))),
        ev(
            4,
            "work_not_completed",
            item(
                json!({"attempt": 1, "error": "HTTP 503: warming up", "class": "retryable", "http_status": 503}),
            ),
        ),
        ev(
            5,
            "work_retry_scheduled",
            item(
                json!({"retry_count": 1, "error": "HTTP 503", "next_retry_at": at(7), "delay_ms": 1500, "class": "retryable",
                    "delay": {"computed_ms": 1500, "capped_ms": 1500, "cap_applied": false, "jitter_ms": 0,
                              "retry_after_applied": false, "delay_ms": 1500}}),
            ),
        ),
        ev(6, "work_started", item(json!({"attempt": 2, "inputs": {}}))),
        ev(
            7,
            "work_succeeded",
            item(json!({"attempt": 2, "outputs": {"greeting": "hi"}, "http_status": 200})),
        ),
        ev(
            8,
            "step_completed",
            json!({"flow_id": "s-1", "step_id": "greet", "outputs": {"greeting": "hi"}, "duration": 1600}),
        ),
        ev(
            9,
            "flow_completed",
            json!({"flow_id": "s-1", "result": {"greeting": "hi"}}),
        ),
        ev(
            10,
            "flow_deactivated",
            json!({"flow_id": "s-1", "status": "completed"}),
        ),
    ];
    let state = json!({"id": "s-1", "status": "completed", "plan": plan, "executions": {}});
    let sse = |list: &[Value]| {
        list.iter()
            .map(|e| {
                format!(
                    "id: {}\nevent: {}\ndata: {}\n\n",
                    e["sequence"],
                    e["type"].as_str().unwrap(),
                    e
                )
            })
            .collect::<String>()
    };
    let first = format!(
        ": keep-alive\n\n{}event: dropped\ndata: {{\"last_event_id\": 5}}\n\n",
        sse(&events[2..5])
    );
    let second = format!("{}event: state\ndata: {}\n\n", sse(&events[5..]), state);

    let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let history_calls = Arc::new(Mutex::new(0usize));
    let head = events[..2].to_vec();
    let (seen2, calls2) = (seen.clone(), history_calls.clone());
    let app = axum::Router::new()
        .route(
            "/engine/flow/{id}/events",
            axum::routing::get(
                move |Query(q): Query<std::collections::HashMap<String, String>>| {
                    let calls = calls2.clone();
                    let head = head.clone();
                    async move {
                        let mut n = calls.lock().unwrap();
                        *n += 1;
                        let list = if *n == 1 && q.get("after").map(String::as_str) == Some("0") {
                            head
                        } else {
                            vec![]
                        };
                        axum::Json(json!({"count": list.len(), "events": list, "next": null}))
                    }
                },
            ),
        )
        .route(
            "/engine/flow/{id}/stream",
            axum::routing::get(move |UrlPath(id): UrlPath<String>, headers: HeaderMap| {
                let seen = seen2.clone();
                let (first, second) = (first.clone(), second.clone());
                async move {
                    let last = headers
                        .get("last-event-id")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    let auth = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    let mut seen = seen.lock().unwrap();
                    seen.push((last, auth));
                    let body = if seen.len() == 1 { first } else { second };
                    assert_eq!(id, "s-1");
                    ([("content-type", "text/event-stream")], body).into_response()
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let server = format!("http://{addr}");
    let r = tartan(
        &["flow", "watch", "s-1", "--token", "sekrit"],
        &[("TARTAN_SERVER", &server)],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            ("2".to_string(), "Bearer sekrit".to_string()),
            ("5".to_string(), "Bearer sekrit".to_string())
        ],
        "{r:?}"
    );
    let lines: Vec<&str> = r.stdout.lines().collect();
    for want in [
        "12:00:01.000 flow s-1 started (goals: greet)",
        "12:00:02.000 step greet started",
        "12:00:03.000 step greet attempt 1 started",
        "12:00:04.000 step greet attempt 1 failed (retryable: HTTP 503: warming up)",
        "12:00:05.000 step greet retry in 1.5s (at 12:00:07.000)",
        "12:00:06.000 step greet attempt 2 started",
        "12:00:07.000 step greet attempt 2 succeeded (HTTP 200)",
        "12:00:08.000 step greet completed in 1600ms",
        "12:00:09.000 flow s-1 completed, result: {\"greeting\":\"hi\"}",
        "12:00:10.000 flow s-1 deactivated (completed)",
    ] {
        assert!(lines.contains(&want), "missing {want:?}: {r:?}");
    }
    assert_eq!(lines.last(), Some(&"result: {\"greeting\":\"hi\"}"), "{r:?}");
}

/// What a broken proxy or a wrong URL answers, and inputs that never end:
/// a message and an exit code, never a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_answers_and_endless_files_are_errors_not_panics() {
    let garbage = StepServer::start(|r, _| {
        let status = if r.path.starts_with("/engine/flow") {
            502
        } else {
            200
        };
        (
            axum::http::StatusCode::from_u16(status).unwrap(),
            [("content-type", "text/html")],
            "<html>\u{1b}[31mBad gateway</html>",
        )
            .into_response()
    })
    .await;
    let server = garbage.url("");
    let env = [("TARTAN_SERVER", server.as_str())];
    let r = tartan(&["flow", "get", "x"], &env).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("the server answered 502 Bad Gateway: <html>\\x1b[31mBad"),
        "{r:?}"
    );
    assert_inert(&r.stderr, "");
    assert!(!r.stderr.contains("panicked"), "{r:?}");
    let r = tartan(&["flow", "watch", "x"], &env).await;
    assert_eq!(r.code, 1, "{r:?}");
    // A 200 that is not the API: read as the API's type, it is not one;
    // exit 3, as for a server that cannot be reached, and no crash.
    let r = tartan(&["step", "ls"], &env).await;
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("an answer that is not this API's"), "{r:?}");
    assert!(r.stdout.is_empty(), "{r:?}");
    assert_inert(&r.stderr, "");
    let r = tartan(&["health"], &env).await;
    assert_eq!(r.code, 1, "a page that is not Tartan's is not ready: {r:?}");

    // A file that never ends is read up to the limit only.
    let r = tartan(&["step", "apply", "-f", "/dev/zero"], &env).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("larger than 4194304 bytes"), "{r:?}");
    let r = tartan(&["step", "apply", "-f", "/no/such/dir"], &env).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("/no/such/dir"), "{r:?}");
    assert!(
        garbage
            .requests()
            .iter()
            .all(|r| r.path != "/engine/step" || r.method == "GET"),
        "nothing was registered"
    );
}

async fn bulk_retry_waits_for_its_job_and_lists_it(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| {
        if r.body["name"] == "fixed" {
            json_reply(200, json!({"greeting": "ok"}))
        } else {
            json_reply(400, json!({"error": "refused"}))
        }
    })
    .await;
    let step = sync_step("greet", &svc.url("/greet"), &["name"], &["greeting"]);
    assert_eq!(app.register(&step).await.status, 201);
    for i in 0..3 {
        let id = format!("bulk-{i}");
        let r = app
            .start_flow(
                &json!({"id": id, "goals": ["greet"], "init": {"name": ["x"]}, "labels": {"batch": "b1"}}),
            )
            .await;
        assert_eq!(r.status, 201);
        app.wait_for_flow(&id).await;
    }
    let r = against(&app, &["bulk", "retry"]).await;
    assert_eq!(r.code, 1, "no filter is refused locally: {r:?}");
    assert!(r.stderr.contains("at least one filter"), "{r:?}");
    let r = against(
        &app,
        &[
            "bulk",
            "retry",
            "--label",
            "batch=b1",
            "--status",
            "failed",
            "--dry-run",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let counted: Value = serde_json::from_str(&r.stdout).expect("the count as JSON");
    assert_eq!(counted["matched"], 3, "{r:?}");
    let r = against(&app, &["bulk", "retry", "--status", "completed"]).await;
    assert_eq!(r.code, 1, "the server refuses: {r:?}");
    assert!(r.stderr.contains("statuses"), "{r:?}");

    let r = against(
        &app,
        &["bulk", "retry", "--prefix", "bulk-", "--rate", "50", "--wait"],
    )
    .await;
    // The flows fail again (the step still refuses "x"), but each was retried.
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("(retry) started"), "{r:?}");
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains("completed"))
        .unwrap_or_else(|| panic!("a completed job: {r:?}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        cells[1..8],
        ["retry", "completed", "3", "3", "0", "0", "0"],
        "{r:?}"
    );
    let id = cells[0].to_string();
    for i in 0..3 {
        let evs = app.event_types(&format!("bulk-{i}")).await;
        assert_eq!(evs.iter().filter(|t| *t == "flow_retried").count(), 1, "{evs:?}");
    }

    let r = against(&app, &["bulk", "get", &id, "--wait"]).await;
    assert_eq!(r.code, 2, "get takes no --wait: {r:?}");
    let r = against(&app, &["bulk", "get", &id, "-o", "json"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let job: Value = serde_json::from_str(&r.stdout).expect("a job as JSON");
    assert_eq!(job["done"], 3, "{r:?}");
    let r = against(&app, &["bulk", "ls"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(row(&r.stdout, &id).is_some(), "the job is listed: {r:?}");
    let r = against(&app, &["bulk", "stop", &id]).await;
    assert_eq!(r.code, 1, "a completed job cannot be stopped: {r:?}");
    assert!(r.stderr.contains("completed"), "{r:?}");
}

/// What a terminal obeys: ESC (and so CSI and OSC sequences), BEL, DEL,
/// and the C1 controls (U+009B is CSI on its own).
const OBEYED: [char; 4] = ['\x1b', '\x07', '\x7f', '\u{9b}'];

/// No control character in `text` but the CLI's own sequences, those of
/// the terminal view (`keep`: drawn on a terminal).
#[track_caller]
fn assert_inert(text: &str, keep: &str) {
    let mut rest = text.to_string();
    if !keep.is_empty() {
        for own in ["\x1b[?25l", "\x1b[?25h", "\x1b[J"] {
            rest = rest.replace(own, "");
        }
        // `ESC [ n A`: up n lines, to draw over the table.
        while let Some(at) = rest.find("\x1b[") {
            let digits = rest[at + 2..].chars().take_while(char::is_ascii_digit).count();
            assert!(
                digits > 0 && rest[at + 2 + digits..].starts_with('A'),
                "{keep}: a sequence that is not the view's own at {at}: {rest:?}"
            );
            rest.replace_range(at..at + 3 + digits, "");
        }
    }
    for c in OBEYED {
        assert!(!rest.contains(c), "{keep}: {c:?} reached the terminal: {text:?}");
    }
}

/// A step's output and error, and a flow's label, carry sequences that
/// would retitle and clear an operator's terminal: every command shows
/// them escaped (`\x1b]0;pwned\x07`), none prints them; JSON output keeps
/// them as JSON escapes, the same value.
async fn control_characters_from_steps_never_reach_the_terminal(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    const PWNED: &str = "\x1b]0;pwned\x07\x1b[2J";
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/leak" => json_reply(200, json!({"mid": format!("\u{9b}2J{PWNED}\x7f")})),
        _ => json_reply(400, json!({"error": format!("refused {PWNED} \u{9b}31m")})),
    })
    .await;
    let leak = sync_step("leak", &svc.url("/leak"), &["name"], &["mid"]);
    assert_eq!(app.register(&leak).await.status, 201);
    let boom = sync_step("boom", &svc.url("/boom"), &["mid"], &["out"]);
    assert_eq!(app.register(&boom).await.status, 201);
    let label = format!("note={PWNED}");
    let r = against(
        &app,
        &[
            "flow", "start", "boom", "--init", "name=x", "--id", "evil-1", "--label", &label, "--watch",
        ],
    )
    .await;
    assert_eq!(r.code, 4, "{r:?}");
    assert!(
        r.stdout.contains("\\x1b]0;pwned\\x07\\x1b[2J"),
        "shown escaped: {r:?}"
    );
    assert!(r.stdout.contains("\\u{9b}31m"), "{r:?}");
    assert_inert(&r.stdout, "");
    assert_inert(&r.stderr, "");

    for args in [
        vec!["flow", "events", "evil-1"],
        vec!["flow", "watch", "evil-1", "--plain"],
        vec!["flow", "get", "evil-1"],
        vec!["flow", "ls"],
        vec!["work", "ls"],
        vec!["flow", "ls", "--label", &label],
    ] {
        let r = against(&app, &args).await;
        assert!(r.code == 0 || r.code == 4, "{args:?}: {r:?}");
        assert!(r.stdout.contains("\\x1b"), "{args:?}: shown escaped: {r:?}");
        assert_inert(&r.stdout, "");
        assert_inert(&r.stderr, "");
    }
    // For programs: the same JSON value, its controls as JSON escapes.
    let r = against(&app, &["flow", "get", "evil-1", "-o", "json"]).await;
    assert_inert(&r.stdout, "");
    let state: Value = serde_json::from_str(&r.stdout).expect("JSON");
    assert_eq!(state["labels"]["note"], PWNED, "{state}");
    let r = against(&app, &["flow", "watch", "evil-1", "-o", "json"]).await;
    assert_eq!(r.code, 4, "{r:?}");
    assert_inert(&r.stdout, "");
    for line in r.stdout.lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    }

    // The live view on a terminal draws with its own sequences only.
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED (terminal view): util-linux `script` is not installed");
        return;
    }
    let r = in_terminal(&app, &["flow", "watch", "evil-1"]).await;
    assert_eq!(r.code, 4, "{r:?}");
    assert!(r.stdout.contains("\\x1b]0;pwned"), "{r:?}");
    assert_inert(&r.stdout, "terminal");
}
