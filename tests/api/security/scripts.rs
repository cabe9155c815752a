//! What a step author's scripts can do to the engine (docs/security.md,
//! "What a step author can do"): the shapes that froze or exhausted it,
//! through the binary, watched from outside. `/health` keeps answering
//! while they run, each flow ends with its step failed at a named limit,
//! resident memory stays under a stated bound, and SIGTERM ends the
//! process within its grace.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use tartan_testkit::{both_backends, TestDb};

use crate::helpers::{
    call, json_reply, memory_kib, sigterm_within, spawn_binary_with, sync_step, Backend, Binary, StepServer,
};
use crate::model::{script, script_step};

both_backends!(
    hostile_scripts_fail_their_own_steps_and_leave_the_engine_answering,
    sigterm_ends_the_process_while_a_script_runs,
    a_cancelled_flows_script_gives_up_its_place,
);

/// Peak resident memory the engine may reach here. Each shape below took
/// it from about 40 MB to seconds or minutes of a busy thread, or past
/// 3 GB; the bound leaves room for a debug build and four evaluations'
/// 32 MiB allowances at once.
const MAX_PEAK_KIB: u64 = 600 * 1024;

/// `/health` answers within this while the scripts run.
const HEALTH_WITHIN: Duration = Duration::from_secs(3);

async fn hostile_scripts_fail_their_own_steps_and_leave_the_engine_answering(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "hostile-scripts", &[]).await;
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": 1}))).await;
    let long = "a".repeat(20_000);
    let mut steps: Vec<(&str, Value, Value)> = Vec::new();
    // A limit caught by a handler that loops in turn.
    let mut handler = sync_step("handler", &svc.url("/h"), &[], &["handler_out"]);
    handler["predicate"] = script(
        "lua",
        "xpcall(function() while true do end end, function(e) while true do end end) return true",
    );
    steps.push(("handler", handler, json!({})));
    // A limit caught, then an answer given anyway.
    let mut caught = sync_step("caught", &svc.url("/c"), &[], &["caught_out"]);
    caught["predicate"] = script("lua", "pcall(function() while true do end end) return true");
    steps.push(("caught", caught, json!({})));
    // Loops in C: a sparse move (it ran 6.8 s against a 1 s limit) and a
    // backtracking match on a starter's input (hours).
    steps.push((
        "mover",
        script_step(
            "mover",
            "lua",
            "return table.move({}, 1, 3e8, 2)",
            &[],
            &["mover_out"],
        ),
        json!({}),
    ));
    let mut matcher = sync_step("matcher", &svc.url("/m"), &["email"], &["matcher_out"]);
    matcher["attributes"]["email"]["required"] =
        json!({"match": script("lua", "return string.find(value, '^.-.-.-@.-%..-$') ~= nil")});
    steps.push(("matcher", matcher, json!({"email": [long]})));
    // A hundred bytes of script answering 10^8 leaves.
    steps.push((
        "leaves",
        script_step(
            "leaves",
            "lua",
            "local t = { 1 } for d = 1, 8 do local u = {} for i = 1, 10 do u[i] = t end t = u end return { leaves_out = t }",
            &[],
            &["leaves_out"],
        ),
        json!({}),
    ));
    for (id, step, init) in &steps {
        let (status, body) = call(&engine, Method::POST, "/engine/step", Some(step.clone())).await;
        assert_eq!(status, 201, "{id}: {body}");
        let start = json!({"id": id, "goals": [id], "init": init});
        let (status, body) = call(&engine, Method::POST, "/engine/flow", Some(start)).await;
        assert_eq!(status, 201, "{id}: {body}");
    }
    let pid = engine.child.id().expect("pid");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut open: Vec<&str> = steps.iter().map(|(id, _, _)| *id).collect();
    while !open.is_empty() {
        assert!(Instant::now() < deadline, "flows still running: {open:?}");
        health_answers(&engine).await;
        let mut still = Vec::new();
        for id in open {
            let (_, flow) = call(&engine, Method::GET, &format!("/engine/flow/{id}"), None).await;
            match flow["status"].as_str() {
                Some("failed") => check_failure(id, &flow),
                // The sparse move ends at once now: what counts is that it ends.
                Some("completed") if id == "mover" => {}
                // A match past its limit decides nothing: the step waits, as
                // in Argyll (docs/argyll.md, "Scripts that fail"); what
                // counts is that it was judged and left waiting.
                Some("active") if id == "matcher" => {
                    assert_eq!(flow["executions"]["matcher"]["status"], "pending", "{flow}")
                }
                Some("active") | Some("pending") => still.push(id),
                other => panic!("{id} ended {other:?}: {flow}"),
            }
        }
        open = still;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (peak, _) = memory_kib(pid);
    assert!(peak < MAX_PEAK_KIB, "peak resident memory {peak} KiB");
    assert!(
        svc.requests().is_empty(),
        "no step behind a failed script was called"
    );
    sigterm_within(engine, Duration::from_secs(15)).await;
}

/// The step failed at a limit the error names.
fn check_failure(id: &str, flow: &Value) {
    let error = flow["executions"][id]["error"]
        .as_str()
        .map(str::to_string)
        .or_else(|| {
            flow["executions"][id]["work_items"]
                .as_object()
                .and_then(|items| items.values().next())
                .and_then(|item| item["error"].as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| flow.to_string());
    assert!(
        error.contains("limit"),
        "{id}: the error names the limit: {error}"
    );
}

async fn health_answers(engine: &Binary) {
    let asked = Instant::now();
    let answered = tokio::time::timeout(HEALTH_WITHIN, call(engine, Method::GET, "/health", None)).await;
    assert!(
        matches!(answered, Ok((200, _))),
        "/health did not answer within {HEALTH_WITHIN:?} ({:?})",
        asked.elapsed()
    );
}

/// An engine whose scripts may run a minute (and all but endless
/// instructions), with `extra` settings, and a step `spin` that loops for
/// as long as it may (its attempt allowed 90 s).
async fn with_a_minute_of_script(db: &TestDb, node: &str, extra: (&str, &str)) -> Binary {
    let engine = spawn_binary_with(
        db,
        node,
        &[
            ("TARTAN_SCRIPT_TIMEOUT", "60s"),
            ("TARTAN_SCRIPT_MAX_INSTRUCTIONS", "100000000000"),
            extra,
        ],
    )
    .await;
    let mut spin = script_step("spin", "lua", "while true do end", &[], &["spun"]);
    spin["timeouts"] = json!({"attempt": "90s"});
    assert_eq!(
        call(&engine, Method::POST, "/engine/step", Some(spin)).await.0,
        201
    );
    engine
}

/// A script step allowed a minute runs when SIGTERM comes: the process
/// stops within its grace (2 s here) and a little, not the script's minute.
async fn sigterm_ends_the_process_while_a_script_runs(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = with_a_minute_of_script(&db, "script-sigterm", ("TARTAN_SHUTDOWN_GRACE", "2s")).await;
    let start = json!({"id": "spin", "goals": ["spin"]});
    assert_eq!(
        call(&engine, Method::POST, "/engine/flow", Some(start)).await.0,
        201
    );
    // The script is running once its work item has started.
    let mut started = false;
    for _ in 0..200 {
        let (_, flow) = call(&engine, Method::GET, "/engine/flow/spin", None).await;
        if flow["executions"]["spin"]["work_items"]
            .as_object()
            .is_some_and(|items| !items.is_empty())
        {
            started = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(started, "the script step started");
    tokio::time::sleep(Duration::from_millis(300)).await;
    health_answers(&engine).await;
    sigterm_within(engine, Duration::from_secs(12)).await;
}

/// Script evaluations take one of `TARTAN_SCRIPT_MAX_CONCURRENT` places
/// (one here). A flow cancelled while its script step runs (allowed a
/// minute) ends that evaluation: the next flow's script gets the place at
/// once rather than a minute later.
async fn a_cancelled_flows_script_gives_up_its_place(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = with_a_minute_of_script(&db, "script-cancel", ("TARTAN_SCRIPT_MAX_CONCURRENT", "1")).await;
    let quick = script_step("quick", "lua", "return { quick_out = 1 }", &[], &["quick_out"]);
    assert_eq!(
        call(&engine, Method::POST, "/engine/step", Some(quick)).await.0,
        201
    );
    let start = json!({"id": "spinning", "goals": ["spin"]});
    assert_eq!(
        call(&engine, Method::POST, "/engine/flow", Some(start)).await.0,
        201
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let start = json!({"id": "waiting", "goals": ["quick"]});
    assert_eq!(
        call(&engine, Method::POST, "/engine/flow", Some(start)).await.0,
        201
    );
    // Waiting for the one place, held by the spinning script.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, waiting) = call(&engine, Method::GET, "/engine/flow/waiting", None).await;
    assert_eq!(waiting["status"], "active", "{waiting}");
    let cancelled = Instant::now();
    let (status, body) = call(
        &engine,
        Method::POST,
        "/engine/flow/spinning/cancel",
        Some(json!({})),
    )
    .await;
    assert!(status < 300, "{status}: {body}");
    let (_, done) = call(&engine, Method::GET, "/engine/flow/waiting/status?wait=30s", None).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(
        cancelled.elapsed() < Duration::from_secs(20),
        "the place came back {:?} after the cancel",
        cancelled.elapsed()
    );
}
