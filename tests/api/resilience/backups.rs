//! Backups taken while flows are in flight restore into engines that
//! finish them (docs/operating.md, "Backups"): SQLite's `tartan backup`,
//! and a `pg_dump` of Postgres restored into a fresh database. Each flow
//! waiting on a call when the copy was taken is called again with the same
//! receipt token, and no completed work is redone.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{
    call, json_reply, run_tartan, spawn_binary, sync_step, token_of, wait_for_terminal, wait_until, Backend,
    Binary, StepServer, TestDb,
};

/// Flows in flight when the copy is taken.
const FLOWS: usize = 4;

/// A step server whose first `FLOWS` calls of /slow never answer; every
/// later call, and every other path, answers `{"<path>": "done"}`.
async fn held_calls() -> StepServer {
    StepServer::start_async(|r, n| {
        Box::pin(async move {
            if r.path == "/slow" && n < FLOWS {
                std::future::pending::<()>().await;
            }
            let key = r.path.trim_start_matches('/').to_string();
            json_reply(200, json!({ key: "done" }))
        })
    })
    .await
}

/// Registers fast → slow → last, starts `FLOWS` flows and returns once
/// every one waits on its /slow call.
async fn flows_in_flight(engine: &Binary, svc: &StepServer) {
    for step in [
        sync_step("fast", &svc.url("/fast"), &["seed"], &["fast"]),
        sync_step("slow", &svc.url("/slow"), &["fast"], &["slow"]),
        sync_step("last", &svc.url("/last"), &["slow"], &["last"]),
    ] {
        let (status, body) = call(engine, reqwest::Method::POST, "/engine/step", Some(step)).await;
        assert_eq!(status, 201, "{body}");
    }
    for i in 0..FLOWS {
        let start = json!({"id": format!("b{i}"), "goals": ["last"], "init": {"seed": [i.to_string()]}});
        let (status, body) = call(engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
        assert_eq!(status, 201, "{body}");
    }
    let held = wait_until(Duration::from_secs(30), || {
        svc.requests().iter().filter(|r| r.path == "/slow").count() == FLOWS
    })
    .await;
    assert!(
        held,
        "every flow waits on its slow call: {:?}",
        svc.requests().len()
    );
}

/// On the engine started from the copy: every flow completes, each slow
/// call was made again with the token of the call the copy was taken
/// during, and fast (done before the copy) was not called again.
async fn every_flow_recovers(engine: &Binary, svc: &StepServer) {
    for i in 0..FLOWS {
        let flow = wait_for_terminal(engine, &format!("b{i}")).await;
        assert_eq!(flow["status"], "completed", "{flow}");
    }
    let slow: Vec<_> = svc.requests().into_iter().filter(|r| r.path == "/slow").collect();
    assert_eq!(slow.len(), 2 * FLOWS, "each held call is made again once");
    let (before, after) = slow.split_at(FLOWS);
    let mut held: Vec<String> = before.iter().map(token_of).collect();
    let mut resumed: Vec<String> = after.iter().map(token_of).collect();
    held.sort();
    resumed.sort();
    assert_eq!(
        held, resumed,
        "the calls resumed carry the receipt tokens of those held"
    );
    let fast = svc.requests().iter().filter(|r| r.path == "/fast").count();
    assert_eq!(fast, FLOWS, "completed work is not redone");
    let last = svc.requests().iter().filter(|r| r.path == "/last").count();
    assert_eq!(last, FLOWS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_backup_taken_mid_run_recovers_every_flow_in_flight() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let svc = held_calls().await;
    let engine = spawn_binary(&db, "backed-up").await;
    flows_in_flight(&engine, &svc).await;
    let dir = tempdir();
    let copy = dir.join("copy.db");
    let copy_arg = copy.display().to_string();
    let (ok, stdout, stderr) =
        run_tartan(&["backup", "--database-url", &db.url, "--to", &copy_arg], &[]).await;
    assert!(ok, "{stderr}");
    assert!(stdout.starts_with("backed up "), "{stdout}");
    // Never over an existing file.
    let (ok, _, stderr) = run_tartan(&["backup", "--database-url", &db.url, "--to", &copy_arg], &[]).await;
    assert!(!ok);
    assert!(stderr.contains("exists"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    #[cfg(unix)]
    links_are_never_followed(&db.url, &dir).await;
    // The database and its copy are its owner's alone.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let path = db
            .url
            .trim_start_matches("sqlite://")
            .split('?')
            .next()
            .unwrap_or_default();
        for file in [std::path::PathBuf::from(path), copy.clone()] {
            let mode = std::fs::metadata(&file).map(|m| m.permissions().mode() & 0o777);
            assert_eq!(mode.ok(), Some(0o600), "{}", file.display());
        }
    }
    // The server is lost; the copy is all there is.
    let mut engine = engine;
    engine.child.kill().await.expect("SIGKILL");
    drop(db);
    let restored = TestDb::at_url(format!("sqlite://{copy_arg}"));
    let engine = spawn_binary(&restored, "backed-up").await;
    every_flow_recovers(&engine, &svc).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A link at `FILE` (even to nothing) or at `FILE.partial` is refused,
/// and what it points at is left alone.
#[cfg(unix)]
async fn links_are_never_followed(url: &str, dir: &std::path::Path) {
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious").expect("write");
    let absent = dir.join("nowhere");
    for (name, target) in [("to-victim.db", &victim), ("to-nothing.db", &absent)] {
        let link = dir.join(name);
        std::os::unix::fs::symlink(target, &link).expect("symlink");
        let to = link.display().to_string();
        let (ok, _, stderr) = run_tartan(&["backup", "--database-url", url, "--to", &to], &[]).await;
        assert!(!ok && stderr.contains("exists"), "{name}: {stderr}");
        let partial = dir.join(format!("via-{name}"));
        std::os::unix::fs::symlink(target, dir.join(format!("via-{name}.partial"))).expect("symlink");
        let to = partial.display().to_string();
        let (ok, _, stderr) = run_tartan(&["backup", "--database-url", url, "--to", &to], &[]).await;
        assert!(!ok && stderr.contains("symbolic link"), "{name}: {stderr}");
    }
    assert_eq!(std::fs::read_to_string(&victim).ok().as_deref(), Some("precious"));
    assert!(
        absent.symlink_metadata().is_err(),
        "nothing was made through the link"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pg_dump_taken_mid_run_restores_into_a_fresh_database_that_recovers_every_flow() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let Some(fresh) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let svc = held_calls().await;
    let engine = spawn_binary(&db, "dumped").await;
    flows_in_flight(&engine, &svc).await;
    let dir = tempdir();
    let dump = dir.join("tartan.dump");
    let dumped = std::process::Command::new("pg_dump")
        .args(["--format=custom", "--file"])
        .arg(&dump)
        .arg(&db.url)
        .output()
        .expect("pg_dump runs");
    assert!(
        dumped.status.success(),
        "{}",
        String::from_utf8_lossy(&dumped.stderr)
    );
    let mut engine = engine;
    engine.child.kill().await.expect("SIGKILL");
    let restored = std::process::Command::new("pg_restore")
        .args(["--no-owner", "--exit-on-error", "--dbname"])
        .arg(&fresh.url)
        .arg(&dump)
        .output()
        .expect("pg_restore runs");
    assert!(
        restored.status.success(),
        "{}",
        String::from_utf8_lossy(&restored.stderr)
    );
    let engine = spawn_binary(&fresh, "dumped").await;
    every_flow_recovers(&engine, &svc).await;
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tartan-backup-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}
