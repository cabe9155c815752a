//! The WARN lines an operator's log search finds (docs/operating.md,
//! "Logs"): each failed step attempt and each failed flow, with its ids,
//! attempt and class as fields of the JSON line.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{
    call, json_reply, register, spawn_binary_with, sync_step, wait_for_terminal, StepServer,
};
use tartan_testkit::{Backend, TestDb};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_attempts_and_flows_are_warned_of_with_their_ids() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(500, json!({"error": "the ledger is down"}))).await;
    let bin = spawn_binary_with(&db, "warn-node", &[("TARTAN_LOG_FORMAT", "json")]).await;
    let mut step = sync_step("ledger", &svc.url("/l"), &["x"], &["y"]);
    step["work_config"] = json!({"max_attempts": 2, "backoff_type": "fixed", "init_backoff": 10});
    register(&bin, vec![step]).await;
    let start = json!({"id": "pay-7", "goals": ["ledger"], "init": {"x": ["1"]}});
    let (status, body) = call(&bin, reqwest::Method::POST, "/engine/flow", Some(start)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(wait_for_terminal(&bin, "pay-7").await["status"], "failed");

    let warnings = || -> Vec<Value> {
        bin.log
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["level"] == "WARN" && l["flow_id"] == "pay-7")
            .collect()
    };
    let mut lines = Vec::new();
    for _ in 0..200 {
        lines = warnings();
        if lines.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let (first, second, flow) = (&lines[0], &lines[1], &lines[2]);
    assert_eq!(first["step_id"], "ledger", "{first}");
    assert_eq!(first["attempt"], 1);
    assert_eq!(first["class"], "retryable");
    assert_eq!(first["http_status"], 500);
    assert!(
        first["message"]
            .as_str()
            .unwrap()
            .starts_with("step attempt failed, retry follows"),
        "{first}"
    );
    assert_eq!(first["token"].as_str().map(str::len), Some(32), "{first}");
    assert_eq!(second["attempt"], 2);
    assert_eq!(second["retry_state"], "max_attempts", "{second}");
    assert!(
        second["message"]
            .as_str()
            .unwrap()
            .starts_with("step attempt failed, no retry"),
        "{second}"
    );
    assert!(
        flow["message"].as_str().unwrap().starts_with("flow failed: "),
        "{flow}"
    );
}
