//! Fault injection: the engine is killed with SIGKILL at random moments while
//! flows run, twenty times, and started again. Every flow must still reach
//! its terminal state, no work item may be recorded as succeeded twice, and
//! every call a step endpoint saw must be in the event log.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{call, check_flow, json_reply, spawn_binary, sync_step, Backend, StepServer, TestDb};
use tartan_testkit::both_backends;

both_backends!(every_flow_survives_twenty_sigkills_under_load);

const FLOWS: usize = 40;
const KILLS: usize = 20;

async fn every_flow_survives_twenty_sigkills_under_load(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    // Each call takes a little while, and one in four of b's calls fails
    // with 503 (retried), so that kills land mid-call and mid-wait.
    let svc = StepServer::start_async(|r, n| {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let key = r.path.trim_start_matches('/').to_string();
            if key == "b" && n % 4 == 1 {
                return json_reply(503, json!({"detail": "flaky"}));
            }
            json_reply(200, json!({ key: "done" }))
        })
    })
    .await;
    let mut engine = spawn_binary(&db, "chaos").await;
    for (id, input, output) in [("a", "seed", "a"), ("b", "a", "b"), ("c", "b", "c")] {
        let mut step = sync_step(id, &svc.url(&format!("/{output}")), &[input], &[output]);
        step["work_config"] = json!({"max_retries": -1, "init_backoff": 20, "backoff_type": "fixed"});
        assert_eq!(
            call(&engine, reqwest::Method::POST, "/engine/step", Some(step))
                .await
                .0,
            201
        );
    }
    let mut started = 0;
    for kill in 0..KILLS {
        // Start some flows, let things run a little, then kill.
        while started < FLOWS && started < (kill + 1) * FLOWS / KILLS * 2 {
            let body = json!({"id": format!("chaos-{started}"), "goals": ["c"], "init": {"seed": [started]}});
            let (status, reply) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(body)).await;
            assert_eq!(status, 201, "{reply}");
            started += 1;
        }
        let pause = 30 + (kill * 37) % 120;
        tokio::time::sleep(Duration::from_millis(pause as u64)).await;
        engine.child.kill().await.expect("SIGKILL");
        engine = spawn_binary(&db, "chaos").await;
    }
    while started < FLOWS {
        let body = json!({"id": format!("chaos-{started}"), "goals": ["c"], "init": {"seed": [started]}});
        assert_eq!(
            call(&engine, reqwest::Method::POST, "/engine/flow", Some(body))
                .await
                .0,
            201
        );
        started += 1;
    }

    // Every flow completes; no work item succeeds twice; every call the step
    // server saw was recorded before it was made.
    let mut cut_off = 0;
    for i in 0..FLOWS {
        cut_off += check_flow(&engine, &format!("chaos-{i}"), &svc, 3).await;
    }
    // The kills did land while calls were in flight.
    assert!(cut_off > 0, "no kill interrupted a call: the test proved nothing");
}
