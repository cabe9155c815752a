//! The docs' shell examples, run: every ` ```sh run` and ` ```console run`
//! block of README.md, docs/*.md and the examples' READMEs
//! (examples/*/README.md) against a real `tartan serve` and the page's step
//! service (the greeter, or the example's own), each command's output
//! compared with what the page shows (`examples.rs` says how blocks are
//! marked and read). A page's blocks run in order against one fresh
//! server, as a reader following the page would; a block's commands run in
//! one shell, so what one sets the next sees.
//!
//! The pages name the server `localhost:8080` and the step service
//! `127.0.0.1:8081`; here both listen on free ports, and commands, the
//! files under `examples/` they read, and `TARTAN_SERVER` for the CLI are
//! rewritten to them. `tartan` on the PATH is the binary under test.

// Each example is a program of its own to cargo, with its own copy of
// examples/kit; here they are modules of one test, each with that copy.
#![allow(clippy::duplicate_mod)]

mod examples;
mod reference;

// The step services, for their routes (`app`): `main` is each example's own.
#[allow(dead_code)]
#[path = "../../../examples/async-webhooks/main.rs"]
mod async_webhooks;
#[allow(dead_code)]
#[path = "../../../examples/bulk-retry/main.rs"]
mod bulk_retry;
#[allow(dead_code)]
#[path = "../../../examples/for-each/main.rs"]
mod for_each;
#[allow(dead_code)]
#[path = "../../../examples/greeter.rs"]
mod greeter;
#[allow(dead_code)]
#[path = "../../../examples/idempotent-start/main.rs"]
mod idempotent_start;
#[allow(dead_code)]
#[path = "../../../examples/retries/main.rs"]
mod retries;
#[allow(dead_code)]
#[path = "../../../examples/saga/main.rs"]
mod saga;
#[allow(dead_code)]
#[path = "../../../examples/timeouts/main.rs"]
mod timeouts;

use std::path::{Path, PathBuf};
use std::time::Duration;

use examples::{Block, Kind};

use crate::helpers::{spawn_serve, Binary};

/// Far above any example's need (the longest waits for a flow of a few
/// seconds), so a hang fails the test instead of holding the run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every markdown file whose examples must run or be marked as shown only:
/// README.md, docs/*.md and the examples' READMEs.
fn documents() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.extend(
        std::fs::read_dir(repo().join("examples"))
            .expect("examples/")
            .filter_map(|e| e.ok().map(|e| e.path().join("README.md")))
            .filter(|p| p.is_file()),
    );
    docs.sort();
    files.extend(docs);
    files
}

fn name(path: &Path) -> String {
    path.strip_prefix(repo()).unwrap_or(path).display().to_string()
}

/// The file's blocks marked `run`; panics naming every badly marked block.
fn runnable(path: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(path).expect("reading a doc");
    let mut run = Vec::new();
    let mut wrong = Vec::new();
    for block in examples::blocks(&text) {
        match examples::kind(&block) {
            Ok(Kind::Run) => run.push(block),
            Ok(_) => {}
            Err(why) => wrong.push(format!("{}:{}: {why}", name(path), block.line)),
        }
    }
    assert!(wrong.is_empty(), "badly marked examples:\n{}", wrong.join("\n"));
    run
}

/// The pages with runnable examples, each run by a test below.
const PAGES: [&str; 17] = [
    "README.md",
    "docs/cli.md",
    "docs/concurrency.md",
    "docs/lanes.md",
    "docs/quickstart.md",
    "docs/schedules.md",
    "docs/security.md",
    "docs/timeouts.md",
    "examples/async-webhooks/README.md",
    "examples/bulk-retry/README.md",
    "examples/for-each/README.md",
    "examples/idempotent-start/README.md",
    "examples/model/README.md",
    "examples/retries/README.md",
    "examples/saga/README.md",
    "examples/schedules/README.md",
    "examples/timeouts/README.md",
];

#[test]
fn every_shell_example_in_the_docs_is_marked_and_every_runnable_one_runs() {
    let files = documents();
    assert!(files.len() > 10, "README.md and docs/*.md: {files:?}");
    for file in files {
        let page = name(&file);
        let runs = !runnable(&file).is_empty();
        assert_eq!(
            runs,
            PAGES.contains(&page.as_str()),
            "{page}: a page with runnable examples is in PAGES and has its test in tests/api/docs/mod.rs"
        );
    }
}

/// A server, a step service and a working directory for one page's
/// examples.
struct Session {
    _server: Binary,
    server: String,
    steps: String,
    dir: tempfile::TempDir,
}

impl Session {
    async fn start(steps: axum::Router) -> Session {
        let dir = tempfile::Builder::new()
            .prefix("tartan-docs-")
            .tempdir()
            .expect("a working directory");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port for the step service");
        let steps_addr = listener.local_addr().expect("its address").to_string();
        tokio::spawn(async move { axum::serve(listener, steps).await });
        let db = format!("sqlite://{}?mode=rwc", dir.path().join("tartan.db").display());
        let server = spawn_serve(&["--listen", "127.0.0.1:0", "--database-url", &db], &[]).await;
        let session = Session {
            server: server.addr.clone(),
            _server: server,
            steps: steps_addr,
            dir,
        };
        session.copy_examples();
        session
    }

    /// What the docs say, as it is here: their addresses to ours.
    fn localise(&self, text: &str) -> String {
        text.replace("localhost:8080", &self.server)
            .replace("127.0.0.1:8080", &self.server)
            .replace("127.0.0.1:8081", &self.steps)
            .replace("localhost:8081", &self.steps)
    }

    /// The files of examples/ the pages' commands read (step and flow
    /// definitions), under the same paths, with the step service's address
    /// made ours; not its code.
    fn copy_examples(&self) {
        let mut dirs = vec![repo().join("examples")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("examples/") {
                let path = entry.expect("an entry").path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                if !path
                    .extension()
                    .is_some_and(|x| x == "json" || x == "yaml" || x == "yml")
                {
                    continue;
                }
                let to = self
                    .dir
                    .path()
                    .join(path.strip_prefix(repo()).expect("under the repository"));
                std::fs::create_dir_all(to.parent().expect("a parent")).expect("examples dir");
                let text = std::fs::read_to_string(&path).expect("an example file");
                std::fs::write(to, self.localise(&text)).expect("copying an example");
            }
        }
    }

    /// Run a block's commands in one bash, as a reader's shell would from
    /// the checkout: each command's stdout and stderr together, and
    /// whether it exited 0. Each command is fenced by markers on lines of
    /// their own, which carry its exit status.
    async fn run(&self, commands: &[examples::Command]) -> Vec<(bool, String)> {
        let bin = Path::new(env!("CARGO_BIN_EXE_tartan"))
            .parent()
            .expect("the binary's dir");
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let mut script = String::from("exec 2>&1\n");
        for (i, command) in commands.iter().enumerate() {
            script.push_str(&format!("printf '\\n{MARK}{i}\\n'\n"));
            script.push_str(&self.localise(&command.text));
            script.push_str(&format!("\nprintf '\\n{MARK}{i} %d\\n' $?\n"));
        }
        let limit = COMMAND_TIMEOUT * u32::try_from(commands.len()).unwrap_or(u32::MAX).max(1);
        let output = tokio::time::timeout(
            limit,
            tokio::process::Command::new("bash")
                .arg("-c")
                .arg(script)
                .current_dir(self.dir.path())
                .env("PATH", path)
                .env("TARTAN_SERVER", format!("http://{}", self.server))
                .env("NO_COLOR", "1")
                .env_remove("TARTAN_TOKEN")
                .env_remove("TARTAN_API_TOKEN")
                .env_remove("TARTAN_READ_TOKEN")
                .kill_on_drop(true)
                .output(),
        )
        .await
        .unwrap_or_else(|_| panic!("a block ran over {limit:?}"))
        .expect("running bash");
        split_by_marks(&String::from_utf8_lossy(&output.stdout), commands.len())
    }
}

/// Starts the line that fences a command's output: not text a command prints.
const MARK: &str = "\u{1e}tartan-docs ";

/// Each command's output and exit status, from between its marks; a
/// command the shell never reached counts as failed, with no output.
fn split_by_marks(text: &str, commands: usize) -> Vec<(bool, String)> {
    let mut results = vec![(false, String::new()); commands];
    let mut current: Option<usize> = None;
    let mut lines: Vec<&str> = Vec::new();
    for line in text.lines() {
        let Some(mark) = line.strip_prefix(MARK) else {
            lines.push(line);
            continue;
        };
        let mut parts = mark.split(' ');
        let index = parts.next().and_then(|i| i.parse::<usize>().ok());
        match (index, parts.next()) {
            (Some(i), None) => {
                current = Some(i);
                lines.clear();
            }
            (Some(i), Some(status)) if current == Some(i) && i < commands => {
                // The marks' own leading newline aside.
                let end = lines.len().saturating_sub(usize::from(lines.last() == Some(&"")));
                results[i] = (status == "0", lines[..end].join("\n"));
                current = None;
                lines.clear();
            }
            _ => lines.push(line),
        }
    }
    results
}

/// Run every runnable example of `doc` (relative to the repository) and
/// fail naming each command whose output or exit status is not the docs'.
async fn run_examples(doc: &str, steps: axum::Router) {
    assert!(
        std::process::Command::new("jq").arg("--version").output().is_ok(),
        "the docs' examples use jq: install it (apt-get install jq)"
    );
    let path = repo().join(doc);
    let blocks = runnable(&path);
    assert!(!blocks.is_empty(), "{doc} has no runnable example");
    let session = Session::start(steps).await;
    // What each command printed, to write or update what the docs show.
    let print = std::env::var_os("TARTAN_DOCS_PRINT").is_some();
    let mut failures = Vec::new();
    for block in &blocks {
        let commands = examples::commands(block).unwrap_or_else(|e| panic!("{doc}:{}: {e}", block.line));
        let results = session.run(&commands).await;
        for (command, (ok, output)) in commands.iter().zip(results) {
            if print {
                eprintln!("--- {doc}:{}\n$ {}\n{output}", command.line, command.text);
            }
            let shown_error = command
                .shown
                .as_deref()
                .is_some_and(|s| s.lines().any(|l| l.starts_with("error: ")));
            let at = format!("{doc}:{}", command.line);
            if !ok && !shown_error {
                failures.push(format!("{at}: `{}` failed:\n{output}", command.text));
            }
            if let Some(shown) = &command.shown {
                if !examples::matches(&session.localise(shown), &output) {
                    failures.push(format!(
                        "{at}: `{}`\n  the docs show:\n{shown}\n  it printed:\n{output}",
                        command.text
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[tokio::test]
async fn readme() {
    run_examples("README.md", greeter::app()).await;
}

#[tokio::test]
async fn quickstart() {
    run_examples("docs/quickstart.md", greeter::app()).await;
}

#[tokio::test]
async fn timeouts_page() {
    run_examples("docs/timeouts.md", greeter::app()).await;
}

#[tokio::test]
async fn cli() {
    run_examples("docs/cli.md", greeter::app()).await;
}

#[tokio::test]
async fn lanes() {
    run_examples("docs/lanes.md", greeter::app()).await;
}

#[tokio::test]
async fn concurrency() {
    run_examples("docs/concurrency.md", greeter::app()).await;
}

#[tokio::test]
async fn schedules() {
    run_examples("docs/schedules.md", greeter::app()).await;
}

#[tokio::test]
async fn security() {
    run_examples("docs/security.md", greeter::app()).await;
}

#[tokio::test]
async fn example_schedules() {
    run_examples("examples/schedules/README.md", greeter::app()).await;
}

#[tokio::test]
async fn example_model() {
    run_examples("examples/model/README.md", greeter::app()).await;
}

#[tokio::test]
async fn example_retries() {
    run_examples("examples/retries/README.md", retries::app()).await;
}

#[tokio::test]
async fn example_async_webhooks() {
    run_examples("examples/async-webhooks/README.md", async_webhooks::app()).await;
}

#[tokio::test]
async fn example_for_each() {
    run_examples("examples/for-each/README.md", for_each::app()).await;
}

#[tokio::test]
async fn example_saga() {
    run_examples("examples/saga/README.md", saga::app()).await;
}

#[tokio::test]
async fn example_timeouts() {
    run_examples("examples/timeouts/README.md", timeouts::app()).await;
}

#[tokio::test]
async fn example_idempotent_start() {
    run_examples("examples/idempotent-start/README.md", idempotent_start::app()).await;
}

#[tokio::test]
async fn example_bulk_retry() {
    run_examples("examples/bulk-retry/README.md", bulk_retry::app()).await;
}

#[cfg(test)]
mod marks {
    use super::*;

    #[test]
    fn each_command_gets_its_own_output_and_status() {
        let text = format!("\n{MARK}0\nhello\n\n{MARK}0 0\n\n{MARK}1\nno newline\n{MARK}1 3\n\n{MARK}2\n");
        let got = split_by_marks(&text, 3);
        assert_eq!(got[0], (true, "hello".to_string()));
        assert_eq!(got[1], (false, "no newline".to_string()));
        assert_eq!(got[2], (false, String::new()), "never finished");
    }
}
