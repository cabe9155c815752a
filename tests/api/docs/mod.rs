//! The docs' shell examples, run: every ` ```sh run` and ` ```console run`
//! block of README.md and docs/*.md against a real `tartan serve` and the
//! example greeter, each command's output compared with what the docs show
//! (`examples.rs` says how blocks are marked and read). A file's blocks run
//! in order against one fresh server, as a reader following the page would.
//!
//! The docs name the server `localhost:8080` and the greeter
//! `127.0.0.1:8081`; here both listen on free ports, and commands, the
//! files under `examples/` they read, and `TARTAN_SERVER` for the CLI are
//! rewritten to them. `tartan` on the PATH is the binary under test.

mod examples;

#[allow(dead_code)] // only its routes: `main` is the example's own
#[path = "../../../examples/greeter.rs"]
mod greeter;

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

/// Every markdown file whose examples must run or be marked as shown only.
fn documents() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
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
const PAGES: [&str; 5] = [
    "README.md",
    "docs/cli.md",
    "docs/lanes.md",
    "docs/security.md",
    "docs/timeouts.md",
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

/// A server, the greeter and a working directory for one file's examples.
struct Session {
    _server: Binary,
    server: String,
    greeter: String,
    dir: tempfile::TempDir,
}

impl Session {
    async fn start() -> Session {
        let dir = tempfile::Builder::new()
            .prefix("tartan-docs-")
            .tempdir()
            .expect("a working directory");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("greeter port");
        let greeter = listener.local_addr().expect("greeter address").to_string();
        tokio::spawn(async move { axum::serve(listener, greeter::app()).await });
        let db = format!("sqlite://{}?mode=rwc", dir.path().join("tartan.db").display());
        let server = spawn_serve(&["--listen", "127.0.0.1:0", "--database-url", &db], &[]).await;
        let session = Session {
            server: server.addr.clone(),
            _server: server,
            greeter,
            dir,
        };
        session.copy_examples();
        session
    }

    /// What the docs say, as it is here: their addresses to ours.
    fn localise(&self, text: &str) -> String {
        text.replace("localhost:8080", &self.server)
            .replace("127.0.0.1:8080", &self.server)
            .replace("127.0.0.1:8081", &self.greeter)
            .replace("localhost:8081", &self.greeter)
    }

    /// examples/steps, flows and tour, which the docs' commands read by
    /// those paths, with the greeter's address made ours.
    fn copy_examples(&self) {
        for sub in ["steps", "flows", "tour"] {
            let to = self.dir.path().join("examples").join(sub);
            std::fs::create_dir_all(&to).expect("examples dir");
            for entry in std::fs::read_dir(repo().join("examples").join(sub)).expect("examples/") {
                let path = entry.expect("an entry").path();
                let text = std::fs::read_to_string(&path).expect("an example file");
                let file = path.file_name().expect("a file name");
                std::fs::write(to.join(file), self.localise(&text)).expect("copying an example");
            }
        }
    }

    /// Run one command as bash would from the reader's checkout; its
    /// stdout and stderr together, and whether it exited 0.
    async fn run(&self, command: &str) -> (bool, String) {
        let bin = Path::new(env!("CARGO_BIN_EXE_tartan"))
            .parent()
            .expect("the binary's dir");
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let script = format!("exec 2>&1\n{}", self.localise(command));
        let output = tokio::time::timeout(
            COMMAND_TIMEOUT,
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
        .unwrap_or_else(|_| panic!("`{command}` ran over {COMMAND_TIMEOUT:?}"))
        .expect("running bash");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    }
}

/// Run every runnable example of `doc` (relative to the repository) and
/// fail naming each command whose output or exit status is not the docs'.
async fn run_examples(doc: &str) {
    assert!(
        std::process::Command::new("jq").arg("--version").output().is_ok(),
        "the docs' examples use jq: install it (apt-get install jq)"
    );
    let path = repo().join(doc);
    let blocks = runnable(&path);
    assert!(!blocks.is_empty(), "{doc} has no runnable example");
    let session = Session::start().await;
    // What each command printed, to write or update what the docs show.
    let print = std::env::var_os("TARTAN_DOCS_PRINT").is_some();
    let mut failures = Vec::new();
    for block in &blocks {
        let commands = examples::commands(block).unwrap_or_else(|e| panic!("{doc}:{}: {e}", block.line));
        for command in commands {
            let (ok, output) = session.run(&command.text).await;
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
    run_examples("README.md").await;
}

#[tokio::test]
async fn timeouts() {
    run_examples("docs/timeouts.md").await;
}

#[tokio::test]
async fn cli() {
    run_examples("docs/cli.md").await;
}

#[tokio::test]
async fn lanes() {
    run_examples("docs/lanes.md").await;
}

#[tokio::test]
async fn security() {
    run_examples("docs/security.md").await;
}
