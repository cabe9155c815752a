//! Retry of a failed, cancelled or timed-out flow, and kill (cancel without
//! compensation): docs/api.md, "Retry and kill".

use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::helpers::{
    attempt_of, call, events, json_reply, of_type, read_reply, register, spawn_app, spawn_binary,
    spawn_with_tokens, sync_step, wait_for_terminal, Backend, StepServer, TestApp, TestDb,
};
use tartan_testkit::both_backends;

both_backends!(
    a_retry_runs_only_what_failed_with_fresh_attempts,
    a_retry_may_keep_the_attempt_count,
    a_retry_of_an_active_completed_or_unknown_flow_is_refused,
    a_cancelled_flow_can_be_retried,
    a_flow_timeout_counts_again_from_the_retry,
    a_kill_skips_compensation,
    a_flow_whose_engine_died_can_be_cancelled_and_retried,
    a_read_token_may_not_retry_or_kill,
);

fn problem(status: u16, detail: &str) -> axum::response::Response {
    json_reply(
        status,
        json!({"type": "about:blank", "status": status, "detail": detail}),
    )
}

/// `make` (output `x`) feeds `use` (output `y`), which declines its first
/// `fail_first` calls with a permanent 400.
async fn two_steps(app: &TestApp, fail_first: usize) -> StepServer {
    let svc = StepServer::start(move |r, n| match r.path.as_str() {
        "/make" => json_reply(200, json!({"x": "made"})),
        _ if n < fail_first => problem(400, "declined"),
        _ => json_reply(200, json!({"y": "used"})),
    })
    .await;
    for step in [
        sync_step("make", &svc.url("/make"), &[], &["x"]),
        sync_step("use", &svc.url("/use"), &["x"], &["y"]),
    ] {
        let r = app.register(&step).await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    }
    svc
}

fn calls_to(svc: &StepServer, path: &str) -> Vec<u64> {
    svc.requests()
        .iter()
        .filter(|r| r.path == path)
        .map(attempt_of)
        .collect()
}

async fn retry(app: &TestApp, id: &str, body: Option<&str>) -> crate::helpers::Reply {
    app.send(
        Method::POST,
        &format!("/engine/flow/{id}/retry"),
        body.map(str::to_string),
    )
    .await
}

async fn a_retry_runs_only_what_failed_with_fresh_attempts(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = two_steps(&app, 1).await;
    let r = app.start_flow(&json!({"id": "f", "goals": ["use"]})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let failed = app.wait_for_flow("f").await;
    assert_eq!(failed["status"], "failed", "{failed}");

    let r = retry(&app, "f", None).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    assert_eq!(r.body["message"], "Flow retried");
    assert_eq!(r.body["flow_id"], "f");
    let flow = app.wait_for_flow("f").await;

    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["id"], "f");
    assert_eq!(calls_to(&svc, "/make"), [1], "what succeeded is not called again");
    assert_eq!(calls_to(&svc, "/use"), [1, 1], "a fresh attempt count");
    let evs = events(&app, "f").await;
    let retried = of_type(&evs, "flow_retried");
    assert_eq!(retried.len(), 1, "{evs:?}");
    let token = flow["executions"]["use"]["work_items"]
        .as_object()
        .and_then(|w| w.keys().next().cloned())
        .unwrap_or_default();
    assert_eq!(retried[0]["data"]["reset_attempts"], true);
    assert_eq!(
        retried[0]["data"]["work"],
        json!([{"step_id": "use", "token": token}]),
        "{}",
        retried[0]
    );
    // The flow failed, then ran again and completed.
    assert_eq!(of_type(&evs, "flow_failed").len(), 1);
    assert_eq!(of_type(&evs, "flow_completed").len(), 1);
    assert_eq!(of_type(&evs, "flow_deactivated").len(), 2);
    let work = &flow["executions"]["use"]["work_items"][&token];
    assert_eq!(work["status"], "succeeded", "{work}");
    assert_eq!(work["attempts"].as_array().map(Vec::len), Some(1), "{work}");

    // Completed now: a second retry is refused.
    let again = retry(&app, "f", Some("{}")).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{:?}", again.body);
}

async fn a_retry_may_keep_the_attempt_count(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = two_steps(&app, 1).await;
    app.start_flow(&json!({"id": "f", "goals": ["use"]})).await;
    assert_eq!(app.wait_for_flow("f").await["status"], "failed");

    let r = retry(&app, "f", Some(r#"{"reset_attempts": false}"#)).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    let flow = app.wait_for_flow("f").await;

    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(calls_to(&svc, "/use"), [1, 2], "attempts go on counting");
    let evs = events(&app, "f").await;
    assert_eq!(of_type(&evs, "flow_retried")[0]["data"]["reset_attempts"], false);
}

async fn a_retry_of_an_active_completed_or_unknown_flow_is_refused(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let hang = StepServer::start_async(|_, _| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            json_reply(200, json!({}))
        })
    })
    .await;
    app.register(&sync_step("hang", &hang.url("/hang"), &[], &["h"]))
        .await;
    let svc = two_steps(&app, 0).await;
    app.start_flow(&json!({"id": "busy", "goals": ["hang"]})).await;
    app.start_flow(&json!({"id": "done", "goals": ["use"]})).await;
    assert_eq!(app.wait_for_flow("done").await["status"], "completed");

    let busy = retry(&app, "busy", None).await;
    assert_eq!(busy.status, StatusCode::CONFLICT, "{:?}", busy.body);
    assert_eq!(busy.content_type, "application/problem+json");
    assert!(
        busy.body["detail"].as_str().unwrap_or("").contains("active"),
        "{:?}",
        busy.body
    );
    let done = retry(&app, "done", None).await;
    assert_eq!(done.status, StatusCode::CONFLICT, "{:?}", done.body);
    assert!(
        done.body["detail"].as_str().unwrap_or("").contains("completed"),
        "{:?}",
        done.body
    );
    let unknown = retry(&app, "nope", None).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{:?}", unknown.body);

    // Bodies: JSON only, known fields only, small.
    for bad in ["{", r#"{"reset_attempts": "yes"}"#, r#"{"reset": true}"#, "[]"] {
        let r = retry(&app, "done", Some(bad)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}: {:?}", r.body);
        assert_eq!(r.content_type, "application/problem+json");
    }
    let huge = format!(r#"{{"reset_attempts": true, "x": "{}"}}"#, "a".repeat(10_000));
    let r = retry(&app, "done", Some(&huge)).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{:?}", r.body);
    assert_eq!(calls_to(&svc, "/use").len(), 1, "nothing ran again");
    let bad = app
        .send(Method::POST, "/engine/flow/busy/cancel?compensate=maybe", None)
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{:?}", bad.body);
    assert!(
        bad.body["detail"].as_str().unwrap_or("").contains("compensate"),
        "{:?}",
        bad.body
    );
}

async fn a_cancelled_flow_can_be_retried(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // The first call hangs (the flow is cancelled meanwhile); later ones answer.
    let svc = StepServer::start_async(|_, n| {
        Box::pin(async move {
            if n == 0 {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            json_reply(200, json!({"s": "ok"}))
        })
    })
    .await;
    app.register(&sync_step("slow", &svc.url("/slow"), &[], &["s"]))
        .await;
    app.start_flow(&json!({"id": "c", "goals": ["slow"]})).await;
    wait_for_calls(&svc, 1).await;
    let r = app.send(Method::POST, "/engine/flow/c/cancel", None).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    assert_eq!(app.wait_for_flow("c").await["status"], "cancelled");

    let r = retry(&app, "c", None).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    let flow = app.wait_for_flow("c").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["error"], Value::Null, "{flow}");
    assert_eq!(svc.requests().len(), 2);
}

async fn a_flow_timeout_counts_again_from_the_retry(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start_async(|_, n| {
        Box::pin(async move {
            if n == 0 {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            json_reply(200, json!({"s": "ok"}))
        })
    })
    .await;
    app.register(&sync_step("slow", &svc.url("/slow"), &[], &["s"]))
        .await;
    app.start_flow(&json!({"id": "t", "goals": ["slow"], "timeout": "400ms"}))
        .await;
    let timed_out = app.wait_for_flow("t").await;
    assert_eq!(timed_out["status"], "failed", "{timed_out}");
    // Well past the first deadline: were the clock not restarted, the
    // retried flow would time out again at once.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let r = retry(&app, "t", None).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    let flow = app.wait_for_flow("t").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert!(
        flow["deadline_at"].as_str() > timed_out["deadline_at"].as_str(),
        "the deadline moved: {flow}"
    );
    let evs = events(&app, "t").await;
    assert!(
        of_type(&evs, "flow_retried")[0]["data"]["deadline_at"].is_string(),
        "{evs:?}"
    );

    // A flow that times out again, after a retry, is given the same
    // timeout, counted from the retry.
    let hang = StepServer::start_async(|_, _| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            json_reply(200, json!({}))
        })
    })
    .await;
    app.register(&sync_step("hang", &hang.url("/hang"), &[], &["h"]))
        .await;
    app.start_flow(&json!({"id": "t2", "goals": ["hang"], "timeout": "300ms"}))
        .await;
    assert_eq!(app.wait_for_flow("t2").await["status"], "failed");
    for round in 0..2 {
        let r = retry(&app, "t2", None).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{round}: {:?}", r.body);
        let flow = app.wait_for_flow("t2").await;
        assert_eq!(flow["status"], "failed", "{flow}");
        assert_eq!(
            flow["error"], "flow timeout of 300 ms exceeded",
            "{round}: {flow}"
        );
    }
    assert_eq!(hang.requests().len(), 3, "one call per run");
}

async fn wait_for_calls(svc: &StepServer, n: usize) {
    for _ in 0..400 {
        if svc.requests().len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the step server never got {n} calls");
}

/// A for_each step: element 1 answers at once, element 2 hangs; its
/// compensation is counted.
async fn charge_step(app: &TestApp) -> StepServer {
    let svc = StepServer::start_async(|r, _| {
        Box::pin(async move {
            if r.path == "/charge" && r.body["items"] == 2 {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            json_reply(200, json!({"charge": "ch"}))
        })
    })
    .await;
    let step = json!({
        "id": "charge",
        "name": "charge",
        "type": "sync",
        "http": {"endpoint": svc.url("/charge"), "compensate": svc.url("/refund")},
        "attributes": {
            "items": {"role": "required", "type": "array", "required": {"for_each": true}},
            "charge": {"role": "output"},
        },
        "work_config": {"parallelism": 2, "max_retries": 0},
    });
    let r = app.register(&step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    svc
}

async fn a_kill_skips_compensation(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = charge_step(&app).await;
    for (id, query) in [("killed", "?compensate=false"), ("cancelled", "")] {
        let r = app
            .start_flow(&json!({"id": id, "goals": ["charge"], "init": {"items": [[1, 2]]}}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
        // Element 1 succeeded, element 2 is in flight.
        for _ in 0..400 {
            let f = app.flow(id).await;
            let items = f["executions"]["charge"]["work_items"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            if items.values().any(|w| w["status"] == "succeeded") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let before = refunds(&svc);
        let r = app
            .send(Method::POST, &format!("/engine/flow/{id}/cancel{query}"), None)
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
        let flow = app.wait_for_flow(id).await;
        assert_eq!(flow["status"], "cancelled", "{flow}");
        let evs = events(&app, id).await;
        let cancelled = of_type(&evs, "flow_cancelled");
        if id == "killed" {
            assert_eq!(cancelled[0]["data"]["compensate"], false, "{evs:?}");
            assert_eq!(refunds(&svc), before, "a kill compensates nothing");
            assert!(of_type(&evs, "comp_started").is_empty(), "{evs:?}");
        } else {
            assert_eq!(refunds(&svc), before + 1, "a cancel compensates element 1");
        }
    }
}

fn refunds(svc: &StepServer) -> usize {
    svc.requests().iter().filter(|r| r.path == "/refund").count()
}

async fn a_flow_whose_engine_died_can_be_cancelled_and_retried(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    // The first call hangs; the process running it is killed meanwhile.
    let svc = StepServer::start_async(|_, n| {
        Box::pin(async move {
            if n == 0 {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            json_reply(200, json!({"s": "ok"}))
        })
    })
    .await;
    let mut first = spawn_binary(&db, "node-a").await;
    register(&first, vec![sync_step("slow", &svc.url("/slow"), &[], &["s"])]).await;
    let (status, body) = call(
        &first,
        Method::POST,
        "/engine/flow",
        Some(json!({"id": "orphan", "goals": ["slow"]})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    wait_for_calls(&svc, 1).await;
    first.child.start_kill().expect("SIGKILL");
    let _ = first.child.wait().await;

    let second = spawn_binary(&db, "node-b").await;
    let (status, body) = call(&second, Method::POST, "/engine/flow/orphan/cancel", None).await;
    assert_eq!(status, 202, "{body}");
    let flow = wait_for_terminal(&second, "orphan").await;
    assert_eq!(flow["status"], "cancelled", "{flow}");
    // Deactivated once the cut-off call is accounted for.
    let mut retried = (0, Value::Null);
    for _ in 0..400 {
        retried = call(&second, Method::POST, "/engine/flow/orphan/retry", None).await;
        if retried.0 != 409 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(retried.0, 202, "{}", retried.1);
    let flow = wait_for_terminal(&second, "orphan").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(svc.requests().len(), 2, "the retry called the step once more");
}

async fn a_read_token_may_not_retry_or_kill(backend: Backend) {
    let Some(app) = spawn_with_tokens(backend, "full-token-0123456789", "reader-token-abcdefghij").await
    else {
        return;
    };
    let send = |path: &str, token: &str| {
        app.client
            .post(app.url(path))
            .header("Authorization", format!("Bearer {token}"))
            .header("Content-Type", "application/json")
            .send()
    };
    for path in ["/engine/flow/f/retry", "/engine/flow/f/cancel?compensate=false"] {
        let resp = send(path, "reader-token-abcdefghij").await.expect("request");
        let reply = read_reply(resp).await.0;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}: {:?}", reply.body);
        // The full token gets as far as the flow (there is none).
        let resp = send(path, "full-token-0123456789").await.expect("request");
        let reply = read_reply(resp).await.0;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{path}: {:?}", reply.body);
    }
}
