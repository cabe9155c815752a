//! What the tests of the `tartan` command-line client share (docs/cli.md):
//! running the real binary, with only the environment it is given or in a
//! pseudo-terminal, and what its runs showed.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{json_reply, tartan_output, StepServer, TestApp};

/// What a run of the binary showed.
pub(super) struct Run {
    pub(super) code: i32,
    pub(super) stdout: String,
    pub(super) stderr: String,
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
pub(super) async fn tartan(args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = tartan_output(args, env).await;
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Run `tartan args` against `app`.
pub(super) async fn against(app: &TestApp, args: &[&str]) -> Run {
    let server = app.url("");
    tartan(args, &[("TARTAN_SERVER", &server)]).await
}

pub(super) fn temp_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tartan-cli-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(super) fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// The row of a table whose first cell is `first`.
pub(super) fn row<'a>(text: &'a str, first: &str) -> Option<&'a str> {
    text.lines().find(|l| l.split_whitespace().next() == Some(first))
}

/// A step endpoint answering 503 to its first call, then `{"greeting"}`.
pub(super) async fn flaky_greeter() -> StepServer {
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
pub(super) fn quick_retries(mut step: Value) -> Value {
    step["work_config"] = json!({"max_retries": 3, "init_backoff": 300, "backoff_type": "fixed"});
    step
}

/// Run `tartan args` in a pseudo-terminal (util-linux `script`): the exit
/// code and everything the terminal got.
pub(super) async fn in_terminal(app: &TestApp, args: &[&str]) -> Run {
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
