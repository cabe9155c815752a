//! Three engines on one Postgres share one lane: its concurrency and rate
//! hold across them, every flow completes, and when one engine is killed
//! its slots come back (docs/lanes.md, "Across processes").

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;

use super::counting;
use crate::helpers::{call, spawn_binary_with, sync_step};
use tartan_testkit::{Backend, TestDb};

const FLOWS: usize = 90;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_engines_hold_one_lane_and_a_killed_engines_slots_come_back() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    // Calls of 250 ms: two at once make 8 a second, so the concurrency
    // binds before the rate of 10/s does, and both are exercised.
    let svc = counting(Duration::from_millis(250)).await;
    let (most, times, loads) = (svc.most.clone(), svc.times.clone(), svc.loads.clone());
    // Short leases: the killed engine's slots and work come back in
    // seconds.
    let env = [("TARTAN_LEASE", "4s"), ("TARTAN_STEP_TIMEOUT", "5s")];
    let engines = [
        spawn_binary_with(&db, "lane-a", &env).await,
        spawn_binary_with(&db, "lane-b", &env).await,
        spawn_binary_with(&db, "lane-c", &env).await,
    ];
    let mut step = sync_step("shared", &svc.server.url("/s"), &["x"], &["y"]);
    step["limits"] = json!({"concurrency": 2, "rate": "10/s", "burst": 2});
    let (status, body) = call(&engines[0], reqwest::Method::POST, "/engine/step", Some(step)).await;
    assert_eq!(status, 201, "{body}");
    for i in 0..FLOWS {
        let start = json!({"id": format!("f{i}"), "goals": ["shared"], "init": {"x": ["1"]}});
        let (status, body) = call(
            &engines[i % 3],
            reqwest::Method::POST,
            "/engine/flow",
            Some(start),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    // A third of the way through, engine c dies with calls waiting and
    // running.
    let deadline = Instant::now() + Duration::from_secs(60);
    while times.lock().unwrap().len() < FLOWS / 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let [a, b, mut c] = engines;
    c.child.kill().await.expect("SIGKILL engine c");
    let killed_at = Instant::now();

    let deadline = Instant::now() + Duration::from_secs(120);
    let mut completed = 0;
    while Instant::now() < deadline {
        let (_, flows) = call(&a, reqwest::Method::GET, "/engine/flow", None).await;
        let flows = flows.as_array().cloned().unwrap_or_default();
        completed = flows.iter().filter(|f| f["status"] == "completed").count();
        let failed: Vec<_> = flows.iter().filter(|f| f["status"] == "failed").collect();
        assert!(failed.is_empty(), "{failed:?}");
        if completed == FLOWS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(completed, FLOWS, "every flow completes");

    assert_eq!(
        most.load(Ordering::SeqCst),
        2,
        "never more than 2 at once, and 2 were used"
    );
    let times = times.lock().unwrap().clone();
    assert!(times.len() >= FLOWS, "{} calls", times.len());
    for start in &times {
        let within = times
            .iter()
            .filter(|t| **t >= *start && **t < *start + Duration::from_secs(1))
            .count();
        assert!(
            within <= 10 + 2 + 1,
            "{within} calls in the second from {start:?}"
        );
    }
    // The killed engine's slots came back after its lease: the engines
    // left ran two calls at once again.
    let back = killed_at + Duration::from_secs(5);
    assert!(
        loads.lock().unwrap().iter().any(|(t, n)| *t > back && *n == 2),
        "two calls at once after the killed engine's lease ran out"
    );
    // The killed engine's slots came back, and the others gave theirs
    // back once idle.
    let mut held = json!(null);
    for _ in 0..50 {
        let (_, lanes) = call(&b, reqwest::Method::GET, "/engine/lanes", None).await;
        held = lanes["lanes"][0]["slots_held"].clone();
        if held == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(held, 0, "no slot is held once nothing runs");
}
