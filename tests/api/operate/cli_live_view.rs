//! The `tartan` command-line client's live view end to end (docs/cli.md,
//! "The live view"): on a terminal, a table redrawn in place; Ctrl-C ends
//! a watch with 130, and `flow cancel` stops the flow; the view follows the
//! server's event stream and resumes after a drop. The real binary against
//! a real server (or a stand-in for its stream) on 127.0.0.1:0, asserting
//! on what a user sees: stdout, stderr and the exit code.

use std::time::Duration;

use axum::response::IntoResponse;
use serde_json::{json, Value};

use super::cli_support::{against, flaky_greeter, in_terminal, quick_retries, tartan};
use crate::helpers::{json_reply, spawn_app, sync_step, Backend, StepServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_the_view_is_a_table_redrawn_in_place() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: util-linux `script` is not installed");
        return;
    }
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let svc = flaky_greeter().await;
    let refuses = StepServer::start(|_, _| json_reply(400, json!({"error": "no such person"}))).await;
    let greet = quick_retries(sync_step("greet", &svc.url("/greet"), &["name"], &["greeting"]));
    assert_eq!(app.register(&greet).await.status, 201);
    let bad = sync_step("lookup", &refuses.url("/lookup"), &["name"], &["record"]);
    assert_eq!(app.register(&bad).await.status, 201);

    let r = in_terminal(
        &app,
        &[
            "flow", "start", "greet", "--init", "name=Ada", "--id", "tty-1", "--watch",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let screen = &r.stdout;
    assert!(
        screen.contains("\x1b[?25l"),
        "the cursor is hidden while drawing: {r:?}"
    );
    assert!(screen.contains("\x1b[J"), "the table is drawn over: {r:?}");
    assert!(screen.contains("STEP") && screen.contains("ATTEMPT"), "{r:?}");
    assert!(screen.contains("flow tty-1 completed"), "{r:?}");
    assert!(screen.contains("result: {\"greeting\":\"hello Ada\"}"), "{r:?}");
    assert!(
        screen.rfind("\x1b[?25h") > screen.rfind("\x1b[?25l"),
        "the cursor is given back: {r:?}"
    );
    // Not the plain lines: those are for pipes and --plain.
    assert!(!screen.contains("attempt 2 succeeded"), "{r:?}");

    let r = in_terminal(
        &app,
        &[
            "flow", "start", "lookup", "--init", "name=Ada", "--id", "tty-2", "--watch",
        ],
    )
    .await;
    assert_eq!(r.code, 4, "{r:?}");
    assert!(r.stdout.contains("flow tty-2 failed"), "{r:?}");

    let r = in_terminal(&app, &["flow", "watch", "tty-1", "--plain"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("attempt 2 succeeded"),
        "--plain prints lines on a terminal too: {r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_ends_a_watch_with_130_and_cancel_stops_the_flow() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let slow = StepServer::start_async(|_, _| {
        Box::pin(async {
            // Longer than any pause of a loaded machine: the watch is
            // interrupted, never ended by the flow (the cancel below aborts
            // the call).
            tokio::time::sleep(Duration::from_secs(120)).await;
            json_reply(200, json!({"out": "late"}))
        })
    })
    .await;
    let step = sync_step("slow", &slow.url("/slow"), &[], &["out"]);
    assert_eq!(app.register(&step).await.status, 201);
    assert_eq!(
        app.start_flow(&json!({"id": "slow-1", "goals": ["slow"]}))
            .await
            .status,
        201
    );

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_tartan"))
        .args(["flow", "watch", "slow-1"])
        .env_clear()
        .env("TARTAN_SERVER", app.url(""))
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // Once it printed the attempt, it is watching.
    let mut seen = String::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 4096];
        while !seen.contains("attempt 1 started") {
            let n = stdout.read(&mut buf).await.unwrap();
            assert!(n > 0, "the watch ended early: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    })
    .await
    .expect("the watch prints the attempt");
    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(130), "{seen}");

    let r = against(&app, &["flow", "cancel", "slow-1", "--no-compensate"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("cancelled flow slow-1"), "{r:?}");
    assert_eq!(app.wait_for_flow("slow-1").await["status"], "cancelled");
    let r = against(&app, &["flow", "watch", "slow-1"]).await;
    assert_eq!(r.code, 5, "a cancelled flow exits 5: {r:?}");
    let r = against(&app, &["flow", "cancel", "slow-1"]).await;
    assert_eq!(r.code, 1, "a flow that is over cannot be cancelled: {r:?}");
    assert!(r.stderr.contains("409"), "{r:?}");
}

/// A stand-in for the server's event stream (`GET /engine/flow/{id}/stream`,
/// the `streams` branch's contract): the history route answers the first
/// two events, then the stream sends three and `dropped`, and on the
/// reconnection (which must resume after the fifth) the rest and the state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_view_follows_the_stream_and_resumes_after_a_drop() {
    use std::sync::{Arc, Mutex};

    use axum::extract::{Path as UrlPath, Query};
    use axum::http::HeaderMap;

    let at = |i: u64| format!("2026-11-23T12:00:{i:02}.000Z");
    let ev = |seq: u64, kind: &str, data: Value| json!({"type": kind, "aggregate_id": ["flow", "s-1"], "sequence": seq, "timestamp": at(seq), "data": data});
    let plan = json!({"goals": ["greet"], "required": ["name"], "steps": {"greet": sync_step("greet", "http://127.0.0.1:9/", &["name"], &["greeting"])}, "attributes": {}, "excluded": {}});
    let item = |extra: Value| {
        let mut d = json!({"flow_id": "s-1", "step_id": "greet", "token": "t1"});
        for (k, v) in extra.as_object().unwrap() {
            d[k] = v.clone();
        }
        d
    };
    let events = vec![
        ev(
            1,
            "flow_started",
            json!({"flow_id": "s-1", "plan": plan, "init": {"name": ["Ada"]}}),
        ),
        ev(
            2,
            "step_started",
            json!({"flow_id": "s-1", "step_id": "greet", "inputs": {}, "work_items": {"t1": {}}}),
        ),
        ev(3, "work_started", item(json!({"attempt": 1, "inputs": {}}))),
        ev(
            4,
            "work_not_completed",
            item(
                json!({"attempt": 1, "error": "HTTP 503: warming up", "class": "retryable", "http_status": 503}),
            ),
        ),
        ev(
            5,
            "work_retry_scheduled",
            item(
                json!({"retry_count": 1, "error": "HTTP 503", "next_retry_at": at(7), "delay_ms": 1500, "class": "retryable",
                    "delay": {"computed_ms": 1500, "capped_ms": 1500, "cap_applied": false, "jitter_ms": 0,
                              "retry_after_applied": false, "delay_ms": 1500}}),
            ),
        ),
        ev(6, "work_started", item(json!({"attempt": 2, "inputs": {}}))),
        ev(
            7,
            "work_succeeded",
            item(json!({"attempt": 2, "outputs": {"greeting": "hi"}, "http_status": 200})),
        ),
        ev(
            8,
            "step_completed",
            json!({"flow_id": "s-1", "step_id": "greet", "outputs": {"greeting": "hi"}, "duration": 1600}),
        ),
        ev(
            9,
            "flow_completed",
            json!({"flow_id": "s-1", "result": {"greeting": "hi"}}),
        ),
        ev(
            10,
            "flow_deactivated",
            json!({"flow_id": "s-1", "status": "completed"}),
        ),
    ];
    // A whole `FlowState`: the CLI reads the state as the API's type.
    let state = json!({"id": "s-1", "status": "completed", "created_at": at(1), "completed_at": at(9),
        "last_updated": at(10), "deactivated_at": at(10), "max_step_attempts": 10, "plan": plan,
        "attributes": {}, "executions": {}});
    let sse = |list: &[Value]| {
        list.iter()
            .map(|e| {
                format!(
                    "id: {}\nevent: {}\ndata: {}\n\n",
                    e["sequence"],
                    e["type"].as_str().unwrap(),
                    e
                )
            })
            .collect::<String>()
    };
    let first = format!(
        ": keep-alive\n\n{}event: dropped\ndata: {{\"last_event_id\": 5}}\n\n",
        sse(&events[2..5])
    );
    let second = format!("{}event: state\ndata: {}\n\n", sse(&events[5..]), state);

    let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let history_calls = Arc::new(Mutex::new(0usize));
    let head = events[..2].to_vec();
    let (seen2, calls2) = (seen.clone(), history_calls.clone());
    let app = axum::Router::new()
        .route(
            "/engine/flow/{id}/events",
            axum::routing::get(
                move |Query(q): Query<std::collections::HashMap<String, String>>| {
                    let calls = calls2.clone();
                    let head = head.clone();
                    async move {
                        let mut n = calls.lock().unwrap();
                        *n += 1;
                        let list = if *n == 1 && q.get("after").map(String::as_str) == Some("0") {
                            head
                        } else {
                            vec![]
                        };
                        axum::Json(json!({"count": list.len(), "events": list, "next": null}))
                    }
                },
            ),
        )
        .route(
            "/engine/flow/{id}/stream",
            axum::routing::get(move |UrlPath(id): UrlPath<String>, headers: HeaderMap| {
                let seen = seen2.clone();
                let (first, second) = (first.clone(), second.clone());
                async move {
                    let last = headers
                        .get("last-event-id")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    let auth = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    let mut seen = seen.lock().unwrap();
                    seen.push((last, auth));
                    let body = if seen.len() == 1 { first } else { second };
                    assert_eq!(id, "s-1");
                    ([("content-type", "text/event-stream")], body).into_response()
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let server = format!("http://{addr}");
    let r = tartan(
        &["flow", "watch", "s-1", "--token", "sekrit"],
        &[("TARTAN_SERVER", &server)],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            ("2".to_string(), "Bearer sekrit".to_string()),
            ("5".to_string(), "Bearer sekrit".to_string())
        ],
        "{r:?}"
    );
    let lines: Vec<&str> = r.stdout.lines().collect();
    for want in [
        "12:00:01.000 flow s-1 started (goals: greet)",
        "12:00:02.000 step greet started",
        "12:00:03.000 step greet attempt 1 started",
        "12:00:04.000 step greet attempt 1 failed (retryable: HTTP 503: warming up)",
        "12:00:05.000 step greet retry in 1.5s (at 12:00:07.000)",
        "12:00:06.000 step greet attempt 2 started",
        "12:00:07.000 step greet attempt 2 succeeded (HTTP 200)",
        "12:00:08.000 step greet completed in 1600ms",
        "12:00:09.000 flow s-1 completed, result: {\"greeting\":\"hi\"}",
        "12:00:10.000 flow s-1 deactivated (completed)",
    ] {
        assert!(lines.contains(&want), "missing {want:?}: {r:?}");
    }
    assert_eq!(lines.last(), Some(&"result: {\"greeting\":\"hi\"}"), "{r:?}");
}
