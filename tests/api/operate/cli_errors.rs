//! The `tartan` command-line client when something is wrong, end to end
//! (docs/cli.md, "Settings" and "Exit codes"): a problem, an unreachable
//! server, an answer that is not the API's or an endless file is a message
//! and an exit code, never a panic; tokens come from the flag or the
//! environment, and a missing or read-only one is refused; control
//! characters from steps never reach the terminal.
//! The real binary against a real server on 127.0.0.1:0, asserting on what
//! a user sees: stdout, stderr and the exit code.

use axum::response::IntoResponse;
use serde_json::{json, Value};

use super::cli_support::{against, flaky_greeter, in_terminal, quick_retries, row, tartan, temp_dir, write};
use crate::helpers::{json_reply, spawn_app, start_secured, sync_step, Backend, StepServer, TestDb};

tartan_testkit::both_backends!(control_characters_from_steps_never_reach_the_terminal);

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

    // Text that starts as JSON does and is not: an error, nothing started
    // (as a string it would start a flow on input nobody meant).
    let r = against(
        &app,
        &[
            "flow",
            "start",
            "x",
            "--id",
            "half-json",
            "--init",
            r#"name={"a":"#,
        ],
    )
    .await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("name is not valid JSON"), "{r:?}");
    let r = against(&app, &["flow", "get", "half-json"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    // Plain text is still text, and JSON still JSON.
    let r = against(
        &app,
        &["plan", "x", "--init", "name=Ada", "--init", r#"n={"a":1}"#],
    )
    .await;
    assert!(!r.stderr.contains("not valid JSON"), "{r:?}");

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

/// `tartan completions SHELL` prints a script the shell takes: bash's
/// completes the commands and their subcommands; zsh's and fish's name
/// them; a closed pipe is no panic.
#[tokio::test]
async fn completions_complete_commands_in_bash_and_are_printed_for_zsh_and_fish() {
    let r = tartan(&["completions", "bash"], &[]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let dir = temp_dir();
    write(&dir, "tartan.bash", &r.stdout);
    let script = dir.join("tartan.bash");
    let probe = format!(
        "source {}; COMP_WORDS=(tartan fl); COMP_CWORD=1; _tartan tartan fl tartan; echo \"${{COMPREPLY[@]}}\"; \
         COMP_WORDS=(tartan flow st); COMP_CWORD=2; _tartan tartan st flow; echo \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(&probe)
        .output()
        .expect("bash");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().collect::<Vec<_>>(), ["flow", "start"], "{text}");
    for (shell, mark) in [("zsh", "#compdef tartan"), ("fish", "complete -c tartan")] {
        let r = tartan(&["completions", shell], &[]).await;
        assert_eq!(r.code, 0, "{r:?}");
        assert!(
            r.stdout.contains(mark) && r.stdout.contains("schedule"),
            "{shell}: {}",
            &r.stdout[..200.min(r.stdout.len())]
        );
    }
    let r = tartan(&["completions", "tcsh"], &[]).await;
    assert_eq!(r.code, 2, "{r:?}");
    // Read by nobody: no panic, no error.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tartan"))
        .args(["completions", "zsh"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tartan");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("tartan");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{out:?}"
    );
}

/// `tartan --version` names the release and the commit it was built from
/// (build.rs): the checkout's HEAD, as `git` reads it.
#[tokio::test]
async fn version_names_the_release_and_the_commit() {
    let r = tartan(&["--version"], &[]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("git");
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    assert_eq!(head.len(), 40, "the tests run in a git checkout");
    assert_eq!(
        r.stdout.trim(),
        format!("tartan {} (commit {})", env!("CARGO_PKG_VERSION"), &head[..12]),
        "{r:?}"
    );
}
