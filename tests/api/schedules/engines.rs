//! Three engines on one Postgres make a schedule's every fire exactly once
//! for a minute, one of them killed on the way (docs/schedules.md,
//! "Exactly once").

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::json;
use tartan_testkit::TestDb;

use super::{counting_step, flows_of, tick, time};
use crate::helpers::{call, spawn_binary_with, wait_for_terminal, Backend};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_engines_make_every_fire_once_with_one_killed() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let (svc, calls) = counting_step(0).await;
    // A short lease: the sweep that shows the others a new schedule runs
    // every lease.
    let env = [("TARTAN_LEASE", "2s")];
    let a = spawn_binary_with(&db, "sched-1", &env).await;
    let b = spawn_binary_with(&db, "sched-2", &env).await;
    let c = spawn_binary_with(&db, "sched-3", &env).await;
    assert_eq!(
        call(&a, reqwest::Method::POST, "/engine/step", Some(tick(&svc)))
            .await
            .0,
        201
    );
    let body = json!({"id": "pulse", "every": "1s", "catchup": "all", "flow": {"goals": ["tick"]}});
    let (status, made) = call(&b, reqwest::Method::POST, "/engine/schedule", Some(body)).await;
    assert_eq!(status, 201, "{made}");
    tokio::time::sleep(Duration::from_secs(20)).await;
    let mut b = b;
    b.child.kill().await.expect("SIGKILL");
    tokio::time::sleep(Duration::from_secs(40)).await;
    let (status, paused) = call(
        &c,
        reqwest::Method::POST,
        "/engine/schedule/pulse/pause",
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 200, "{paused}");

    let flows = flows_of(&a, "pulse").await;
    let times: BTreeSet<i64> = flows
        .iter()
        .map(|f| time(&f["labels"]["scheduled_at"]).timestamp())
        .collect();
    assert_eq!(times.len(), flows.len(), "a fire time with two flows");
    let (first, last) = (*times.first().unwrap(), *times.last().unwrap());
    let missing: Vec<i64> = (first..=last).filter(|t| !times.contains(t)).collect();
    assert!(missing.is_empty(), "fire times with no flow: {missing:?}");
    assert!(times.len() >= 55, "{} fires in a minute", times.len());
    for flow in &flows {
        let id = flow["id"].as_str().unwrap();
        let done = wait_for_terminal(&a, id).await;
        assert_eq!(done["status"], "completed", "{done}");
    }
    let calls = calls.lock().unwrap().clone();
    let twice: Vec<_> = calls.iter().filter(|(_, n)| **n > 1).collect();
    // A flow of the killed engine may have had its call made again by the
    // engine that took it over; no other flow is called twice.
    assert!(twice.len() <= 1, "flows called more than once: {twice:?}");
    assert_eq!(calls.len(), flows.len());
    drop(c);
}
