//! The database failing over (docs/durability.md, "Failover"), played on
//! the test's own database:
//! - `read_only`: while it answers but takes no writes (a standby reached
//!   before the proxy moves; a database set `default_transaction_read_only`
//!   stands in for it), the engine is not ready, answers writes `503` with
//!   `Retry-After`, serves reads, neither crashes nor exits, and once
//!   writes are taken again it goes on at once: starts, results kept
//!   meanwhile, retries due, bulk jobs; sessions opened read-only are not
//!   reused.
//! - `lost_commits`: an asynchronous standby promoted without the last
//!   commits (the flow's rows deleted, or put back to an earlier copy,
//!   under a running engine): the engine reports what it held and the
//!   database lost, gives back its place in memory, and goes on from what
//!   the database holds.

mod lost_commits;
mod read_only;

use std::time::Duration;

use serde_json::{json, Value};
use sqlx::Connection;

use crate::helpers::{call, register, spawn_binary_with, sync_step, Binary, StepServer, TestDb};

/// Set the test database read-only (or back) and cut its connections, so
/// that the engine's next ones see the change.
pub(super) async fn set_read_only(db: &TestDb, on: bool) {
    set_read_only_cutting(db, on, true).await
}

/// The same, cutting the connections open or not: those kept go on as
/// they began (a session's `default_transaction_read_only` is read when it
/// starts), as connections to a standby do after a failover.
pub(super) async fn set_read_only_cutting(db: &TestDb, on: bool, cut: bool) {
    let name = db
        .url
        .rsplit('/')
        .next()
        .unwrap()
        .split('?')
        .next()
        .unwrap()
        .to_string();
    let mut admin = sqlx::PgConnection::connect(&tartan_testkit::pg_admin_url())
        .await
        .unwrap();
    let setting = if on {
        format!("ALTER DATABASE {name} SET default_transaction_read_only = on")
    } else {
        format!("ALTER DATABASE {name} RESET default_transaction_read_only")
    };
    sqlx::raw_sql(&setting).execute(&mut admin).await.unwrap();
    if !cut {
        let _ = admin.close().await;
        return;
    }
    sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()")
        .bind(&name)
        .execute(&mut admin)
        .await
        .unwrap();
    let _ = admin.close().await;
}

/// `GET /ready`: its status, `Retry-After` and body.
pub(super) async fn ready(addr: &str) -> (u16, Option<String>, Value) {
    let resp = reqwest::get(format!("http://{addr}/ready")).await.unwrap();
    let status = resp.status().as_u16();
    let retry = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (status, retry, resp.json().await.unwrap_or(Value::Null))
}

/// `tartan serve` on `db` as `node`, with `s` (answers at once) and `h`
/// (its call held until released) registered on `svc`.
pub(super) async fn with_steps(db: &TestDb, node: &str, svc: &StepServer) -> Binary {
    let steps = vec![
        sync_step("s", &svc.url("/s"), &["seed"], &["s"]),
        sync_step("h", &svc.url("/held"), &["seed"], &["held"]),
    ];
    registered(db, node, &[], steps).await
}

/// `tartan serve` on `db` as `node`, with `env`, and `steps` registered.
pub(super) async fn registered(db: &TestDb, node: &str, env: &[(&str, &str)], steps: Vec<Value>) -> Binary {
    let engine = spawn_binary_with(db, node, env).await;
    register(&engine, steps).await;
    engine
}

/// Start flow `id` of `h` and return once its call is held.
pub(super) async fn start_held(engine: &Binary, svc: &StepServer, id: &str) {
    let start = json!({"id": id, "goals": ["h"], "init": {"seed": ["x"]}});
    let (status, body) = call(engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
    assert_eq!(status, 201, "{body}");
    let called = crate::helpers::wait_until(Duration::from_secs(30), || {
        svc.requests().iter().any(|r| r.path == "/held")
    })
    .await;
    assert!(called, "the held step is called");
}

/// The tables that hold a flow's rows, and the column naming it.
pub(super) const FLOW_TABLES: [(&str, &str); 5] = [
    ("flows", "id"),
    ("events", "aggregate_id"),
    ("work_items", "flow_id"),
    ("flow_values", "flow_id"),
    ("flow_labels", "flow_id"),
];

/// Delete every row of flow `id`, as a database that never received its
/// start would be.
pub(super) async fn forget_flow(conn: &mut sqlx::PgConnection, id: &str) {
    for (table, column) in FLOW_TABLES.iter().rev() {
        sqlx::query(&format!("DELETE FROM {table} WHERE {column} = $1"))
            .bind(id)
            .execute(&mut *conn)
            .await
            .unwrap();
    }
}

/// `GET /metrics`, as text.
pub(super) async fn metrics(addr: &str) -> String {
    reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// `/metrics` shows `line`, within 60 s.
pub(super) async fn metric_reaches(engine: &Binary, line: &str) -> String {
    let mut text = String::new();
    for _ in 0..600 {
        text = metrics(&engine.addr).await;
        if text.lines().any(|l| l == line) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{line} never in {text}");
}

/// Flow `id` once its step `step` has a call the step accepted (`202`)
/// recorded, within 60 s.
pub(super) async fn accepted(engine: &Binary, id: &str, step: &str) -> Value {
    let mut flow = Value::Null;
    for _ in 0..600 {
        flow = call(engine, reqwest::Method::GET, &format!("/engine/flow/{id}"), None)
            .await
            .1;
        let items = flow["executions"][step]["work_items"].as_object();
        if items.is_some_and(|items| items.values().any(|w| w["accepted_at"].is_string())) {
            return flow;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{step} of {id} never accepted: {flow}");
}

/// An async step `id` at `endpoint` with output `id`.
pub(super) fn async_step(id: &str, endpoint: &str, inputs: &[&str]) -> Value {
    let mut step = sync_step(id, endpoint, inputs, &[id]);
    step["type"] = json!("async");
    step
}

/// Start the flow `start` describes on `engine`: `201`, then completed.
pub(super) async fn completes(engine: &Binary, start: Value) {
    let id = start["id"].as_str().unwrap().to_string();
    let (status, body) = call(engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
    assert_eq!(status, 201, "{body}");
    let flow = crate::helpers::wait_for_terminal(engine, &id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
}
