//! The `tartan` command-line client's commands end to end (docs/cli.md,
//! "Steps", "Plans", "Flows", "Work items" and "Bulk jobs"): `step apply`
//! from a directory, then `ls`, `get` and `rm`; `plan`; `flow start
//! --watch`, `ls`, `get`, `events` and `retry`; `work ls`; `bulk retry
//! --wait`, `get`, `ls` and `stop`.
//! The real binary against a real server on 127.0.0.1:0, asserting on what
//! a user sees: stdout, stderr and the exit code.

use serde_json::{json, Value};

use super::cli_support::{against, flaky_greeter, quick_retries, row, temp_dir, write};
use crate::helpers::{json_reply, spawn_app, sync_step, Backend, StepServer};

tartan_testkit::both_backends!(
    steps_apply_from_a_directory_then_list_show_and_remove,
    a_watched_flow_shows_each_attempt_the_retry_and_the_result,
    bulk_retry_waits_for_its_job_and_lists_it,
);

async fn steps_apply_from_a_directory_then_list_show_and_remove(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let dir = temp_dir();
    write(
        &dir,
        "a.json",
        &sync_step("alpha", "http://127.0.0.1:9/alpha", &["name"], &["greeting"]).to_string(),
    );
    let yaml = "- id: beta\n  name: Beta\n  type: sync\n  http:\n    endpoint: http://127.0.0.1:9/beta\n  attributes:\n    greeting: {role: required, type: string}\n    shout: {role: output, type: string}\n";
    write(&dir, "b.yaml", yaml);
    write(&dir, "notes.txt", "not a step");
    let d = dir.to_string_lossy().to_string();

    let r = against(&app, &["step", "apply", "-f", &d]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        row(&r.stdout, "alpha").is_some_and(|l| l.contains("created") && l.contains("a.json")),
        "{r:?}"
    );
    assert!(
        row(&r.stdout, "beta").is_some_and(|l| l.contains("created") && l.contains("b.yaml")),
        "{r:?}"
    );

    let r = against(&app, &["step", "apply", "-f", &d]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        row(&r.stdout, "alpha").is_some_and(|l| l.contains("unchanged")),
        "{r:?}"
    );
    assert!(
        row(&r.stdout, "beta").is_some_and(|l| l.contains("unchanged")),
        "{r:?}"
    );

    let r = against(&app, &["step", "apply", "-f", &d, "-o", "json"]).await;
    let body: Value = serde_json::from_str(&r.stdout).expect("step apply -o json is JSON");
    assert_eq!(body["count"], 2, "{body}");
    assert!(
        body["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["result"] == "unchanged"),
        "{body}"
    );

    write(&dir, "b.yaml", &yaml.replace("name: Beta", "name: Beta Two"));
    let r = against(&app, &["step", "apply", "-f", &d]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        row(&r.stdout, "alpha").is_some_and(|l| l.contains("unchanged")),
        "{r:?}"
    );
    assert!(
        row(&r.stdout, "beta").is_some_and(|l| l.contains("updated")),
        "{r:?}"
    );
    assert_eq!(app.get("/engine/step/beta").await.body["name"], "Beta Two");

    // A file that is not YAML: named, exit 1, and nothing of the others is sent.
    write(&dir, "c.yml", "id: [unclosed");
    write(&dir, "b.yaml", &yaml.replace("name: Beta", "name: Beta Three"));
    let r = against(&app, &["step", "apply", "-f", &d]).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("c.yml") && r.stderr.contains("not valid YAML"),
        "{r:?}"
    );
    assert_eq!(app.get("/engine/step/beta").await.body["name"], "Beta Two");
    std::fs::remove_file(dir.join("c.yml")).unwrap();

    // A step the server refuses: its detail, exit 1.
    write(
        &dir,
        "d.json",
        r#"{"id": "gamma", "name": "Gamma", "type": "script", "http": {"endpoint": "http://127.0.0.1:9/"}}"#,
    );
    let r = against(
        &app,
        &["step", "apply", "-f", &dir.join("d.json").to_string_lossy()],
    )
    .await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("script required"), "{r:?}");
    std::fs::remove_file(dir.join("d.json")).unwrap();

    let r = against(&app, &["step", "ls"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("ID"), "{r:?}");
    assert!(
        row(&r.stdout, "alpha").is_some_and(|l| l.contains("name") && l.contains("greeting")),
        "{r:?}"
    );
    assert!(row(&r.stdout, "beta").is_some(), "{r:?}");

    let r = against(&app, &["step", "ls", "-o", "json"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let body: Value = serde_json::from_str(&r.stdout).expect("step ls -o json is JSON");
    assert_eq!(body["count"], 2, "{body}");

    let r = against(&app, &["step", "get", "beta", "--output", "json"]).await;
    let body: Value = serde_json::from_str(&r.stdout).expect("step get -o json is JSON");
    assert_eq!(body["name"], "Beta Two");
    let r = against(&app, &["step", "get", "beta"]).await;
    assert!(
        row(&r.stdout, "endpoint").is_some_and(|l| l.contains("127.0.0.1:9/beta")),
        "{r:?}"
    );
    // The retry policy in words (docs/retries.md, "In words").
    assert!(
        row(&r.stdout, "retry").is_some_and(|l| l.contains("up to 11 attempts, waiting 1s, 2s, 4s, 8s, 16s")),
        "{r:?}"
    );

    let r = against(&app, &["step", "rm", "alpha"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("removed alpha"), "{r:?}");
    let r = against(&app, &["step", "get", "alpha"]).await;
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("error: step not found: alpha"), "{r:?}");
    assert!(r.stderr.contains("404"), "{r:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

async fn a_watched_flow_shows_each_attempt_the_retry_and_the_result(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = flaky_greeter().await;
    let refuses = StepServer::start(|_, _| json_reply(400, json!({"error": "no such person"}))).await;
    let greet = quick_retries(sync_step("greet", &svc.url("/greet"), &["name"], &["greeting"]));
    assert_eq!(app.register(&greet).await.status, 201);
    let bad = sync_step("lookup", &refuses.url("/lookup"), &["name"], &["record"]);
    assert_eq!(app.register(&bad).await.status, 201);

    let r = against(&app, &["plan", "greet", "--init", "name=Ada"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with('#'), "{r:?}");
    assert!(
        r.stdout
            .lines()
            .any(|l| l.contains("greet (goal)") && l.contains("name") && l.contains("greeting")),
        "{r:?}"
    );

    let r = against(
        &app,
        &[
            "flow",
            "start",
            "greet",
            "--init",
            "name=Ada",
            "--id",
            "watched-1",
            "--label",
            "team=web",
            "--watch",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let out = &r.stdout;
    assert!(out.contains("started flow watched-1"), "{r:?}");
    assert!(out.contains("step greet attempt 1 failed (retryable:"), "{r:?}");
    assert!(out.contains("step greet retry in 0.3s"), "{r:?}");
    assert!(out.contains("step greet attempt 2 succeeded (HTTP 200)"), "{r:?}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("result:") && l.contains("hello Ada")),
        "{r:?}"
    );
    // In that order.
    let at = |s: &str| out.find(s).unwrap_or(usize::MAX);
    assert!(
        at("attempt 1 failed") < at("retry in") && at("retry in") < at("attempt 2 succeeded"),
        "{r:?}"
    );
    // Each line starts with the event's time.
    assert!(
        out.lines()
            .filter(|l| l.contains("step greet"))
            .all(|l| l.as_bytes().get(2) == Some(&b':')),
        "{r:?}"
    );

    // For programs: the start's answer, then each event, one JSON object a line.
    let r = against(
        &app,
        &[
            "flow",
            "start",
            "greet",
            "--init",
            "name=Bo",
            "--id",
            "watched-2",
            "--watch",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines[0]["flow_id"], "watched-2", "{r:?}");
    assert_eq!(
        lines.last().map(|e| e["type"].clone()),
        Some(json!("flow_deactivated")),
        "{r:?}"
    );

    let r = against(
        &app,
        &[
            "flow", "start", "lookup", "--init", "name=Ada", "--id", "doomed-1", "--watch",
        ],
    )
    .await;
    assert_eq!(r.code, 4, "a failed flow exits 4: {r:?}");
    assert!(
        r.stdout.contains("step lookup attempt 1 failed (permanent:"),
        "{r:?}"
    );
    assert!(r.stdout.contains("flow doomed-1 failed"), "{r:?}");
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("error:") && l.contains("lookup")),
        "{r:?}"
    );

    // An id is generated and printed when none is given.
    let r = against(&app, &["flow", "start", "lookup", "--init", "name=Bob"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let generated = r
        .stdout
        .trim()
        .strip_prefix("started flow ")
        .expect("the id is printed")
        .to_string();
    app.wait_for_flow(&generated).await;

    let r = against(&app, &["flow", "ls", "--status", "completed"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        row(&r.stdout, "watched-1").is_some_and(|l| l.contains("team=web")),
        "{r:?}"
    );
    assert!(row(&r.stdout, "doomed-1").is_none(), "{r:?}");
    let r = against(&app, &["flow", "ls", "--prefix", "doomed", "-o", "json"]).await;
    let body: Value = serde_json::from_str(&r.stdout).expect("flow ls -o json is JSON");
    assert_eq!(body["count"], 1, "{body}");
    assert_eq!(body["flows"][0]["id"], "doomed-1");
    let r = against(&app, &["flow", "ls", "--label", "team=web"]).await;
    assert_eq!(r.stdout.lines().count(), 2, "{r:?}");
    assert!(row(&r.stdout, "watched-1").is_some(), "{r:?}");
    let r = against(&app, &["flow", "ls", "--limit", "2"]).await;
    assert_eq!(r.stdout.lines().count(), 3, "the header and two flows: {r:?}");

    // UPDATED is the flow's last change: for one waiting for a retry, its
    // first attempt's failure, not its start.
    let busy = StepServer::start(|_, _| json_reply(503, json!({"error": "busy"}))).await;
    let mut waits = sync_step("waits", &busy.url("/waits"), &["name"], &["record"]);
    waits["work_config"] = json!({"max_retries": 3, "init_backoff": "1m", "backoff_type": "fixed"});
    assert_eq!(app.register(&waits).await.status, 201);
    let r = against(
        &app,
        &["flow", "start", "waits", "--init", "name=Al", "--id", "waiting-1"],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let mut summary = Value::Null;
    for _ in 0..200 {
        let r = against(&app, &["flow", "ls", "--prefix", "waiting-1", "-o", "json"]).await;
        summary = serde_json::from_str::<Value>(&r.stdout).expect("JSON")["flows"][0].clone();
        if summary["created_at"] != summary["last_updated"] && busy.requests().len() == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let updated = summary["last_updated"].as_str().unwrap_or_default().to_string();
    assert_ne!(summary["created_at"], summary["last_updated"], "{summary}");
    let r = against(&app, &["flow", "ls", "--prefix", "waiting-1"]).await;
    assert!(
        row(&r.stdout, "waiting-1").is_some_and(|l| l.contains("active") && l.contains(&updated)),
        "UPDATED should be {updated}: {r:?}"
    );

    let r = against(&app, &["flow", "get", "watched-1"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        row(&r.stdout, "status").is_some_and(|l| l.contains("completed")),
        "{r:?}"
    );
    assert!(
        row(&r.stdout, "greet").is_some_and(|l| l.contains("completed")),
        "{r:?}"
    );
    assert!(r.stdout.contains("result: {\"greeting\":\"hello Ada\"}"), "{r:?}");

    let r = against(&app, &["work", "ls", "--flow", "watched-1"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        row(&r.stdout, "watched-1").is_some_and(|l| l.contains("greet") && l.contains("succeeded")),
        "{r:?}"
    );
    let r = against(&app, &["work", "ls", "--status", "failed", "-o", "json"]).await;
    let body: Value = serde_json::from_str(&r.stdout).expect("work ls -o json is JSON");
    // doomed-1 and the flow with the generated id.
    assert_eq!(body["count"], 2, "{body}");
    let flows: Vec<&str> = body["work_items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["flow_id"].as_str())
        .collect();
    assert!(
        flows.contains(&"doomed-1") && flows.contains(&generated.as_str()),
        "{body}"
    );

    let r = against(&app, &["flow", "events", "watched-1"]).await;
    assert!(r.stdout.contains("flow watched-1 completed"), "{r:?}");
    // Following a flow that is over prints its history and ends with its outcome.
    let r = against(&app, &["flow", "events", "doomed-1", "--follow"]).await;
    assert_eq!(r.code, 4, "{r:?}");
    assert!(r.stdout.contains("flow doomed-1 deactivated"), "{r:?}");
    let r = against(&app, &["flow", "events", "watched-1", "--follow", "-o", "json"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(
        lines.last().map(|e| e["type"].clone()),
        Some(json!("flow_deactivated")),
        "{r:?}"
    );
}

/// The lines of a `for_each`'s items name each item's element.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_lines_name_the_element_of_each_for_each_item() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    // The element "b" fails once, retryably.
    let svc = StepServer::start(|r, _| {
        static FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if r.body["items"] == "b" && !FAILED.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return json_reply(503, json!({"error": "busy"}));
        }
        json_reply(200, json!({"done": true}))
    })
    .await;
    let mut each = quick_retries(sync_step("each", &svc.url("/each"), &[], &["done"]));
    each["attributes"]["items"] =
        json!({"role": "required", "type": "array", "required": {"for_each": true}});
    assert_eq!(app.register(&each).await.status, 201);
    let r = against(
        &app,
        &[
            "flow",
            "start",
            "each",
            "--init",
            r#"items=["a","b","c"]"#,
            "--id",
            "each-1",
            "--watch",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let out = &r.stdout;
    assert!(out.contains("step each started (3 work items)"), "{r:?}");
    for i in 0..3 {
        assert!(
            out.contains(&format!("step each[{i}] attempt 1 started")),
            "{r:?}"
        );
    }
    assert!(out.contains("step each[1] attempt 1 failed (retryable"), "{r:?}");
    assert!(out.contains("step each[1] retry in"), "{r:?}");
    assert!(out.contains("step each[1] attempt 2 succeeded"), "{r:?}");
    assert!(!out.contains("step each[0] attempt 2"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_runs_a_failed_flow_again() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    // Refuses the first call for good, then answers.
    let svc = StepServer::start(|_, n| {
        if n == 0 {
            json_reply(400, json!({"error": "not yet"}))
        } else {
            json_reply(200, json!({"greeting": "hello again"}))
        }
    })
    .await;
    let step = sync_step("greet", &svc.url("/greet"), &["name"], &["greeting"]);
    assert_eq!(app.register(&step).await.status, 201);
    let r = against(
        &app,
        &[
            "flow", "start", "greet", "--init", "name=Ada", "--id", "again-1", "--watch",
        ],
    )
    .await;
    assert_eq!(r.code, 4, "{r:?}");
    let r = against(&app, &["flow", "retry", "again-1", "--watch"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("retrying flow again-1"), "{r:?}");
    assert!(
        r.stdout
            .contains("flow again-1 retried (steps: greet; attempts reset)"),
        "{r:?}"
    );
    // Only what happened since the retry.
    assert!(!r.stdout.contains("flow again-1 started"), "{r:?}");
    assert!(r.stdout.contains("hello again"), "{r:?}");
    let r = against(&app, &["flow", "retry", "again-1"]).await;
    assert_eq!(r.code, 1, "a completed flow is not retried: {r:?}");
    assert!(r.stderr.contains("409"), "{r:?}");
}

/// `tartan work retry FLOW TOKEN`: an item waiting an hour for its retry
/// runs again at once; once nothing waits, a 409 and exit code 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_retry_starts_a_waiting_retry_now() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let svc = StepServer::start(|_, n| match n {
        0 => json_reply(503, json!({"detail": "down"})),
        _ => json_reply(200, json!({"greeting": "hello, finally"})),
    })
    .await;
    let mut step = sync_step("greet", &svc.url("/greet"), &["name"], &["greeting"]);
    step["work_config"] = json!({"init_backoff": "1h", "max_backoff": "1h", "backoff_type": "fixed"});
    assert_eq!(app.register(&step).await.status, 201);
    let r = against(
        &app,
        &["flow", "start", "greet", "--init", "name=Ada", "--id", "hour-1"],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let mut token = String::new();
    for _ in 0..400 {
        let work = app.get("/engine/flow/hour-1/work").await.body;
        if let Some(t) = work["work_items"][0]["token"]
            .as_str()
            .filter(|_| !work["work_items"][0]["next_retry_at"].is_null())
        {
            token = t.to_string();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(!token.is_empty(), "the retry was never scheduled");
    let r = against(&app, &["work", "retry", "hour-1", &token]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.starts_with("flow hour-1: step greet retried now ("),
        "{r:?}"
    );
    assert!(r.stdout.contains("it was due "), "{r:?}");
    let flow = app.wait_for_flow("hour-1").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let r = against(&app, &["work", "retry", "hour-1", &token]).await;
    assert_eq!(r.code, 1, "nothing waits any more: {r:?}");
    assert!(
        r.stderr.contains("409") && r.stderr.contains("flow hour-1 is completed"),
        "{r:?}"
    );
}

async fn bulk_retry_waits_for_its_job_and_lists_it(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| {
        if r.body["name"] == "fixed" {
            json_reply(200, json!({"greeting": "ok"}))
        } else {
            json_reply(400, json!({"error": "refused"}))
        }
    })
    .await;
    let step = sync_step("greet", &svc.url("/greet"), &["name"], &["greeting"]);
    assert_eq!(app.register(&step).await.status, 201);
    for i in 0..3 {
        let id = format!("bulk-{i}");
        let r = app
            .start_flow(
                &json!({"id": id, "goals": ["greet"], "init": {"name": ["x"]}, "labels": {"batch": "b1"}}),
            )
            .await;
        assert_eq!(r.status, 201);
        app.wait_for_flow(&id).await;
    }
    let r = against(&app, &["bulk", "retry"]).await;
    assert_eq!(r.code, 1, "no filter is refused locally: {r:?}");
    assert!(r.stderr.contains("at least one filter"), "{r:?}");
    let r = against(
        &app,
        &[
            "bulk",
            "retry",
            "--label",
            "batch=b1",
            "--status",
            "failed",
            "--dry-run",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let counted: Value = serde_json::from_str(&r.stdout).expect("the count as JSON");
    assert_eq!(counted["matched"], 3, "{r:?}");
    let r = against(&app, &["bulk", "retry", "--status", "completed"]).await;
    assert_eq!(r.code, 1, "the server refuses: {r:?}");
    assert!(r.stderr.contains("statuses"), "{r:?}");

    let r = against(
        &app,
        &["bulk", "retry", "--prefix", "bulk-", "--rate", "50", "--wait"],
    )
    .await;
    // The flows fail again (the step still refuses "x"), but each was retried.
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("(retry) started"), "{r:?}");
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains("completed"))
        .unwrap_or_else(|| panic!("a completed job: {r:?}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        cells[1..8],
        ["retry", "completed", "3", "3", "0", "0", "0"],
        "{r:?}"
    );
    let id = cells[0].to_string();
    for i in 0..3 {
        let evs = app.event_types(&format!("bulk-{i}")).await;
        assert_eq!(evs.iter().filter(|t| *t == "flow_retried").count(), 1, "{evs:?}");
    }

    let r = against(&app, &["bulk", "get", &id, "--wait"]).await;
    assert_eq!(r.code, 2, "get takes no --wait: {r:?}");
    let r = against(&app, &["bulk", "get", &id, "-o", "json"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let job: Value = serde_json::from_str(&r.stdout).expect("a job as JSON");
    assert_eq!(job["done"], 3, "{r:?}");
    let r = against(&app, &["bulk", "ls"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(row(&r.stdout, &id).is_some(), "the job is listed: {r:?}");
    let r = against(&app, &["bulk", "stop", &id]).await;
    assert_eq!(r.code, 1, "a completed job cannot be stopped: {r:?}");
    assert!(r.stderr.contains("completed"), "{r:?}");
}
