//! Caps hold against what a step sends back (docs/errors.md,
//! docs/retries.md, docs/durability.md): response bodies are bounded by
//! `TARTAN_MAX_RESPONSE_BYTES`, `Retry-After` by `TARTAN_MAX_RETRY_AFTER` and
//! the step's retry budget, a call re-sent after a crash counts as an
//! attempt, and a start cannot raise `TARTAN_MAX_STEP_ATTEMPTS`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::helpers::{
    call, events, json_reply, memory_kib, of_type, register, spawn_binary_with, start_on_with, sync_step,
    wait_for_terminal, Backend, StepServer, TestApp, TestDb,
};
use tartan_testkit::both_backends;

both_backends!(
    a_response_over_the_limit_fails_at_once_and_one_under_it_succeeds,
    an_endless_body_is_cut_at_the_limit_and_memory_stays_flat,
    a_webhook_body_over_the_limit_is_refused_and_fails_the_attempt,
    a_step_that_kills_the_engine_on_every_call_ends_as_a_failure,
    retry_after_of_any_size_or_date_waits_at_most_the_cap,
    retry_after_past_the_retry_budget_fails_instead_of_waiting,
    max_step_attempts_above_the_operator_cap_is_refused,
);

/// The only work item of a step in a flow's JSON.
fn only_work(flow: &Value, step: &str) -> Value {
    let items = flow["executions"][step]["work_items"]
        .as_object()
        .unwrap_or_else(|| panic!("no work items for {step}: {flow}"));
    assert_eq!(items.len(), 1, "{flow}");
    items.values().next().cloned().unwrap()
}

async fn app_with(
    backend: Backend,
    adjust: impl FnOnce(&mut tartan_engine::EngineConfig),
) -> Option<TestApp> {
    let db = TestDb::create(backend).await?;
    Some(start_on_with(db, "caps", adjust).await)
}

/// A step with room for retries, so that "one attempt" means "no retry".
fn retrying_step(id: &str, endpoint: &str) -> Value {
    let mut step = sync_step(id, endpoint, &[], &["out"]);
    step["work_config"] = json!({"max_retries": 3, "init_backoff": 50, "backoff_type": "fixed"});
    step
}

async fn a_response_over_the_limit_fails_at_once_and_one_under_it_succeeds(backend: Backend) {
    let Some(app) = app_with(backend, |c| c.max_response_bytes = 1024).await else {
        return;
    };
    // {"out":"xxx…"} is 10 bytes plus the string.
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/big" => json_reply(200, json!({"out": "x".repeat(1024 - 10 + 1)})),
        "/big503" => json_reply(503, json!({"detail": "y".repeat(4096)})),
        _ => json_reply(200, json!({"out": "x".repeat(1024 - 10)})),
    })
    .await;
    for (id, path) in [("big", "/big"), ("big503", "/big503"), ("fits", "/fits")] {
        let r = app.register(&retrying_step(id, &svc.url(path))).await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
        let r = app.start_flow(&json!({"id": id, "goals": [id]})).await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    }

    let fits = app.wait_for_flow("fits").await;
    assert_eq!(
        fits["status"], "completed",
        "a body of exactly the limit is read: {fits}"
    );

    for id in ["big", "big503"] {
        let flow = app.wait_for_flow(id).await;
        assert_eq!(flow["status"], "failed", "{flow}");
        let work = only_work(&flow, id);
        let error = work["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("1024 bytes") && error.contains("TARTAN_MAX_RESPONSE_BYTES"),
            "{id}: the error names the limit: {error}"
        );
        assert_eq!(work["attempts"].as_array().map(Vec::len), Some(1), "{id}: {work}");
        let calls = svc
            .requests()
            .iter()
            .filter(|r| r.path == format!("/{id}"))
            .count();
        assert_eq!(calls, 1, "{id} was called {calls} times");
    }
}

/// A 200 that streams 64 KiB chunks (no Content-Length) and never ends.
fn endless() -> Response {
    let chunk = axum::body::Bytes::from(vec![b' '; 64 * 1024]);
    let stream = futures::stream::unfold(chunk, |chunk| async move {
        // About 32 MB/s: the default limit is reached in a quarter second,
        // while an unbounded read would grow by hundreds of MB in seconds.
        tokio::time::sleep(Duration::from_millis(2)).await;
        Some((Ok::<_, std::io::Error>(chunk.clone()), chunk))
    });
    ([("content-type", "application/json")], Body::from_stream(stream)).into_response()
}

async fn an_endless_body_is_cut_at_the_limit_and_memory_stays_flat(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    // The default limit (8 MiB); the attempt timeout is far away.
    let engine = spawn_binary_with(&db, "caps", &[("TARTAN_STEP_TIMEOUT", "8s")]).await;
    let pid = engine.child.id().unwrap();
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/endless" => endless(),
        _ => json_reply(200, json!({"out": "ok"})),
    })
    .await;
    register(
        &engine,
        vec![
            retrying_step("endless", &svc.url("/endless")),
            retrying_step("quick", &svc.url("/quick")),
        ],
    )
    .await;
    let run = |id: String, goal: &'static str| {
        let engine = &engine;
        async move {
            let body = json!({"id": id, "goals": [goal]});
            let (status, reply) = call(engine, reqwest::Method::POST, "/engine/flow", Some(body)).await;
            assert_eq!(status, 201, "{reply}");
            wait_for_terminal(engine, &id).await
        }
    };
    // Warm up the engine's pools and caches with an ordinary flow.
    assert_eq!(run("warm".into(), "quick").await["status"], "completed");
    let (_, before) = memory_kib(pid);

    let mut peaks = Vec::new();
    for i in 0..3 {
        let id = format!("endless-{i}");
        let started = Instant::now();
        let flow = run(id.clone(), "endless").await;
        let took = started.elapsed();
        assert_eq!(flow["status"], "failed", "{flow}");
        let work = only_work(&flow, "endless");
        let error = work["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(&format!("{} bytes", 8 * 1024 * 1024))
                && error.contains("TARTAN_MAX_RESPONSE_BYTES"),
            "{error}"
        );
        assert_eq!(work["attempts"].as_array().map(Vec::len), Some(1), "{work}");
        assert!(
            took < Duration::from_secs(6),
            "cut at the limit, not at the timeout: {took:?}"
        );
        peaks.push(memory_kib(pid).0);
    }
    println!("engine RSS: {before} KiB after warm-up; peak after each endless body: {peaks:?} KiB");
    // 8 MiB of body and the connection's buffers, three times over: well
    // under 64 MiB more than before (unbounded, the body alone would pass
    // that within two seconds).
    let peak = peaks.iter().copied().max().unwrap_or(0);
    assert!(
        peak < before + 64 * 1024,
        "peak RSS grew from {before} KiB to {peaks:?} KiB"
    );
}

async fn a_webhook_body_over_the_limit_is_refused_and_fails_the_attempt(backend: Backend) {
    let Some(app) = app_with(backend, |c| c.max_response_bytes = 2048).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(202, json!({}))).await;
    let mut step = retrying_step("later", &svc.url("/later"));
    step["type"] = json!("async");
    assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    for id in ["hook-big", "hook-fits"] {
        let r = app.start_flow(&json!({"id": id, "goals": ["later"]})).await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    }
    let mut tokens = Vec::new();
    for _ in 0..200 {
        tokens = svc.requests().iter().map(crate::helpers::token_of).collect();
        if tokens.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(tokens.len(), 2, "both flows called the step");
    let requests = svc.requests();
    for r in &requests {
        let flow = r.headers["argyll-flow-id"].to_str().unwrap().to_string();
        let path = app.webhook_path(&flow, "later", &crate::helpers::token_of(r));
        let filler = if flow == "hook-big" { 2048 } else { 100 };
        let reply = app.post(&path, &json!({"out": "z".repeat(filler)})).await;
        if flow == "hook-big" {
            assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{:?}", reply.body);
            assert_eq!(reply.content_type, "application/problem+json");
            let detail = reply.body["detail"].as_str().unwrap_or_default();
            assert!(
                detail.contains("2048 bytes") && detail.contains("TARTAN_MAX_RESPONSE_BYTES"),
                "{detail}"
            );
        } else {
            assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
        }
    }
    let big = app.wait_for_flow("hook-big").await;
    assert_eq!(big["status"], "failed", "{big}");
    let work = only_work(&big, "later");
    assert!(
        work["error"]
            .as_str()
            .is_some_and(|e| e.contains("TARTAN_MAX_RESPONSE_BYTES")),
        "{work}"
    );
    assert_eq!(work["attempts"].as_array().map(Vec::len), Some(1), "{work}");
    assert_eq!(app.wait_for_flow("hook-fits").await["status"], "completed");
}

async fn a_step_that_kills_the_engine_on_every_call_ends_as_a_failure(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    // The step SIGKILLs whichever engine calls it, a moment after the call
    // arrives (a restarted engine has logged its address by then).
    let engine_pid = Arc::new(AtomicU32::new(0));
    let target = engine_pid.clone();
    let svc = StepServer::start_async(move |_, _| {
        let target = target.clone();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let pid = target.load(Ordering::SeqCst);
            // Never `kill -9 0`: that is the whole process group.
            if pid != 0 {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status();
            }
            json_reply(200, json!({"out": "never seen"}))
        })
    })
    .await;
    let mut step = sync_step("deadly", &svc.url("/deadly"), &[], &["out"]);
    step["work_config"] = json!({"max_retries": 2, "init_backoff": 10, "backoff_type": "fixed"});

    let mut engine = spawn_binary_with(&db, "caps", &[]).await;
    engine_pid.store(engine.child.id().unwrap(), Ordering::SeqCst);
    register(&engine, vec![step]).await;
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(json!({"id": "deadly", "goals": ["deadly"]})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // Each restart re-sends the cut-off call, which kills the engine again,
    // until the step's 3 attempts are used up. More restarts than that
    // would mean the call is re-sent forever.
    let mut restarts = 0;
    let flow = loop {
        let addr = engine.addr.clone();
        tokio::select! {
            _ = engine.child.wait() => {}
            flow = settled(&addr, "deadly") => break flow,
        }
        assert!(restarts < 5, "the engine was killed {} times", restarts + 1);
        restarts += 1;
        engine = spawn_binary_with(&db, "caps", &[]).await;
        engine_pid.store(engine.child.id().unwrap(), Ordering::SeqCst);
    };
    assert_eq!(restarts, 3, "killed once per attempt");
    assert_eq!(svc.requests().len(), 3, "called once per attempt");
    assert_eq!(flow["status"], "failed", "{flow}");
    let work = only_work(&flow, "deadly");
    assert_eq!(work["status"], "failed", "{work}");
    let error = work["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("attempt 3 cut off by a restart") && error.contains("attempts used up"),
        "{error}"
    );
    assert_eq!(work["attempts"].as_array().map(Vec::len), Some(3), "{work}");
}

/// The flow once it is no longer active; connection errors (the engine
/// being killed) are waited out.
async fn settled(addr: &str, id: &str) -> Value {
    let client = reqwest::Client::new();
    loop {
        let flow = match client.get(format!("http://{addr}/engine/flow/{id}")).send().await {
            Ok(resp) => resp.json::<Value>().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        };
        if flow["status"].as_str().is_some_and(|s| s != "active") {
            return flow;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn retry_after_of_any_size_or_date_waits_at_most_the_cap(backend: Backend) {
    let Some(app) = app_with(backend, |c| c.max_retry_after = Duration::from_millis(300)).await else {
        return;
    };
    // Each path answers 503 with its Retry-After once, then 200.
    let cases = [
        ("seconds", "99999999999", Some(300)),
        ("year9999", "Fri, 31 Dec 9999 23:59:59 GMT", Some(300)),
        ("garbage", "soon, maybe", None),
        ("past", "Wed, 21 Oct 2015 07:28:00 GMT", None),
        ("overflow", "999999999999999999999999999", Some(300)),
    ];
    let svc = StepServer::start(move |r, n| {
        if n > 0 {
            return json_reply(200, json!({"out": "ok"}));
        }
        let header = cases
            .iter()
            .find(|(name, _, _)| r.path == format!("/{name}"))
            .map_or("", |(_, h, _)| *h);
        let mut resp = json_reply(503, json!({}));
        resp.headers_mut().insert("retry-after", header.parse().unwrap());
        resp
    })
    .await;
    let started = Instant::now();
    for (name, _, _) in cases {
        let r = app
            .register(&retrying_step(name, &svc.url(&format!("/{name}"))))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
        let r = app.start_flow(&json!({"id": name, "goals": [name]})).await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    }
    for (name, header, capped) in cases {
        let flow = app.wait_for_flow(name).await;
        assert_eq!(flow["status"], "completed", "{name}: {flow}");
        let evs = events(&app, name).await;
        let scheduled = of_type(&evs, "work_retry_scheduled");
        assert_eq!(scheduled.len(), 1, "{name}");
        let data = &scheduled[0]["data"];
        match capped {
            // Cut to TARTAN_MAX_RETRY_AFTER.
            Some(cap) => {
                assert_eq!(data["delay_ms"], cap, "{name} ({header}): {data}");
                assert_eq!(data["delay"]["retry_after_ms"], cap, "{name}: {data}");
            }
            // Ignored: the step's own backoff (50 ms).
            None => {
                assert_eq!(data["delay_ms"], 50, "{name} ({header}): {data}");
                assert!(data["delay"]["retry_after_ms"].is_null(), "{name}: {data}");
            }
        }
        let at = chrono::DateTime::parse_from_rfc3339(data["next_retry_at"].as_str().unwrap()).unwrap();
        let recorded =
            chrono::DateTime::parse_from_rfc3339(scheduled[0]["timestamp"].as_str().unwrap()).unwrap();
        assert!(
            at - recorded <= chrono::Duration::milliseconds(300),
            "{name}: next retry at {at}, scheduled at {recorded}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

async fn retry_after_past_the_retry_budget_fails_instead_of_waiting(backend: Backend) {
    let Some(app) = app_with(backend, |_| {}).await else {
        return;
    };
    let svc = StepServer::start(|_, _| {
        let mut resp = json_reply(503, json!({}));
        resp.headers_mut()
            .insert("retry-after", "99999999999".parse().unwrap());
        resp
    })
    .await;
    let mut step = retrying_step("budget", &svc.url("/budget"));
    step["work_config"]["max_retry_duration"] = json!("2s");
    assert_eq!(app.register(&step).await.status, StatusCode::CREATED);
    let started = Instant::now();
    let r = app
        .start_flow(&json!({"id": "budget", "goals": ["budget"]}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let flow = app.wait_for_flow("budget").await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(flow["status"], "failed", "{flow}");
    let evs = events(&app, "budget").await;
    let failed = of_type(&evs, "work_failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["data"]["retry_state"], "deadline", "{}", failed[0]);
    assert_eq!(svc.requests().len(), 1);
}

async fn max_step_attempts_above_the_operator_cap_is_refused(backend: Backend) {
    let Some(app) = app_with(backend, |c| c.max_step_attempts = 5).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": "ok"}))).await;
    assert_eq!(
        app.register(&sync_step("quick", &svc.url("/quick"), &[], &["out"]))
            .await
            .status,
        StatusCode::CREATED
    );
    for asked in [6, u64::from(u32::MAX)] {
        let r = app
            .start_flow(
                &json!({"id": format!("over-{asked}"), "goals": ["quick"], "max_step_attempts": asked}),
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{asked}: {:?}", r.body);
        assert_eq!(r.content_type, "application/problem+json");
        let detail = r.body["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains("max_step_attempts")
                && detail.contains(&asked.to_string())
                && detail.contains("cap of 5"),
            "{detail}"
        );
        assert_eq!(
            app.get(&format!("/engine/flow/over-{asked}")).await.status,
            StatusCode::NOT_FOUND
        );
    }
    for (id, asked) in [
        ("at-cap", json!(5)),
        ("below", json!(1)),
        ("default", Value::Null),
    ] {
        let r = app
            .start_flow(&json!({"id": id, "goals": ["quick"], "max_step_attempts": asked}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{id}: {:?}", r.body);
        assert_eq!(app.wait_for_flow(id).await["status"], "completed");
    }
}
