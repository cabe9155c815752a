//! A rolling update (docs/operating.md, "Upgrading"): the previous
//! release's engine and this one's on one Postgres at once. The old one
//! migrates and starts flows, the new one migrates forward beside it
//! (expand only) and starts its own, each reads the other's, then the old
//! one is stopped with work in flight and the new one finishes every flow,
//! each work item completed once.
//!
//! It needs the previous release's binary, which the default test run
//! does not build: `bench/upgrade.sh` builds it (from the last tag) and
//! runs this test with `TARTAN_PREVIOUS_BINARY` set.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{
    call, held_server, register, spawn_binary_with, spawn_program, sync_step, token_of, wait_for_terminal,
    wait_until, work_succeeded, Backend, TestDb,
};

/// Flows each engine starts.
const EACH: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the previous release's binary (TARTAN_PREVIOUS_BINARY): run bench/upgrade.sh"]
async fn the_previous_release_and_this_one_run_together_and_finish_each_others_flows() {
    let previous = std::env::var("TARTAN_PREVIOUS_BINARY")
        .expect("TARTAN_PREVIOUS_BINARY names the previous release's tartan binary");
    let db = TestDb::create(Backend::Postgres).await.unwrap();
    // /held answers once released; /fast at once.
    let (release, svc) = held_server().await;
    // Short leases and grace: the stopped engine's work moves at once.
    let env = [("TARTAN_LEASE", "3s"), ("TARTAN_SHUTDOWN_GRACE", "1s")];
    let old = spawn_program(
        &previous,
        &[
            "--listen",
            "127.0.0.1:0",
            "--node-id",
            "old",
            "--database-url",
            &db.url,
        ],
        &env,
    )
    .await;
    register(
        &old,
        vec![
            sync_step("fast", &svc.url("/fast"), &["seed"], &["fast"]),
            sync_step("held", &svc.url("/held"), &["fast"], &["held"]),
        ],
    )
    .await;
    let start = |id: String| json!({"id": id, "goals": ["held"], "init": {"seed": ["x"]}});
    for i in 0..EACH {
        let (status, body) = call(
            &old,
            reqwest::Method::POST,
            "/engine/flow",
            Some(start(format!("old-{i}"))),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    // The new release beside it: it migrates forward while the old runs.
    let new = spawn_binary_with(&db, "new", &env).await;
    for i in 0..EACH {
        let (status, body) = call(
            &new,
            reqwest::Method::POST,
            "/engine/flow",
            Some(start(format!("new-{i}"))),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let all_held = wait_until(Duration::from_secs(30), || {
        svc.requests().iter().filter(|r| r.path == "/held").count() >= 2 * EACH
    })
    .await;
    assert!(all_held, "every flow reached its held step");
    // Each reads the other's flows, and the old one still serves.
    let (status, flow) = call(&old, reqwest::Method::GET, "/engine/flow/new-0", None).await;
    assert_eq!(status, 200, "{flow}");
    let (status, flow) = call(&new, reqwest::Method::GET, "/engine/flow/old-0", None).await;
    assert_eq!(status, 200, "{flow}");
    assert_eq!(call(&old, reqwest::Method::GET, "/ready", None).await.0, 200);

    // The rolling update stops the old engine with its calls in flight.
    let stopped = std::process::Command::new("kill")
        .args(["-TERM", &old.child.id().unwrap().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let mut old = old;
    let exited = tokio::time::timeout(Duration::from_secs(30), old.child.wait()).await;
    assert!(
        matches!(exited, Ok(Ok(s)) if s.success()),
        "the old engine stops cleanly: {exited:?}"
    );
    release.send_replace(true);
    for id in (0..EACH).flat_map(|i| [format!("old-{i}"), format!("new-{i}")]) {
        let flow = wait_for_terminal(&new, &id).await;
        assert_eq!(flow["status"], "completed", "{flow}");
        let succeeded = work_succeeded(&new, &id).await;
        assert_eq!(succeeded, 2, "each of {id}'s work items completed once");
    }
    // Calls made again after the handover carry the tokens they had.
    let held: Vec<String> = svc
        .requests()
        .iter()
        .filter(|r| r.path == "/held")
        .map(token_of)
        .collect();
    let mut distinct = held.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 2 * EACH, "one token per held item: {held:?}");
}
