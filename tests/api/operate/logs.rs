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
    let bin = spawn_binary_with(
        &db,
        "warn-node",
        &[("TARTAN_LOG_FORMAT", "json"), ("RUST_LOG", "info")],
    )
    .await;
    let mut step = sync_step("ledger", &svc.url("/l"), &["x"], &["y"]);
    step["work_config"] = json!({"max_attempts": 2, "backoff_type": "fixed", "init_backoff": 10});
    register(&bin, vec![step]).await;
    let start = json!({"id": "pay-7", "goals": ["ledger"], "init": {"x": ["1"]}});
    let resp = reqwest::Client::new()
        .post(format!("http://{}/engine/flow", bin.addr))
        .header("Content-Type", "application/json")
        .header("traceparent", format!("00-{TRACE}-00f067aa0ba902b7-01"))
        .body(start.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    // A probe: not at INFO.
    let (status, _) = call(&bin, reqwest::Method::GET, "/ready", None).await;
    assert_eq!(status, 200);
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
    assert_eq!(first["token"].as_str().map(str::len), Some(36), "{first}");
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
    // Each names the flow's trace: the caller's.
    for line in [first, second, flow] {
        assert_eq!(line["trace_id"], TRACE, "{line}");
    }
    // The request's line and the lines within it name the caller's trace;
    // the start's lines name the flow's start span too.
    let log: Vec<Value> = bin
        .log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    let request = log
        .iter()
        .find(|l| l["message"] == "request" && l["route"] == "/engine/flow")
        .unwrap_or_else(|| panic!("no request line: {log:#?}"));
    assert_eq!(request["trace_id"], TRACE, "{request}");
    assert!(
        !log.iter()
            .any(|l| l["message"] == "request" && l["route"] == "/ready"),
        "probes are logged at DEBUG: {log:#?}"
    );
    // Its span: the flow's trace and start span.
    let flow = wait_for_terminal(&bin, "pay-7").await;
    assert_eq!(request["span"]["trace_id"], TRACE, "{request}");
    assert_eq!(request["span"]["span_id"], flow["trace"]["span_id"], "{request}");
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
