//! Webhooks and heartbeats act only on the call that waits for them: an
//! accepted (`202`) call of an async step's current attempt
//! (docs/api.md, "Async steps and webhooks"). Anything else is a `409`
//! saying why, and changes nothing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{json_reply, noted, spawn_app, sync_step, Backend, Received, StepServer, TestApp};
use tartan_testkit::both_backends;

both_backends!(
    a_webhook_for_a_synchronous_step_is_refused,
    a_webhook_or_heartbeat_before_the_call_is_accepted_is_refused_and_starts_nothing,
    an_older_attempts_webhook_and_heartbeat_are_refused,
    a_step_that_calls_back_the_moment_it_accepts_is_heard,
    a_late_webhook_delivered_a_hundred_times_is_recorded_once,
);

fn async_step(id: &str, endpoint: &str) -> Value {
    let mut step = sync_step(id, endpoint, &[], &["out"]);
    step["type"] = json!("async");
    step
}

async fn register(app: &TestApp, step: &Value) {
    let r = app.register(step).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
}

async fn start(app: &TestApp, id: &str, goal: &str) {
    let r = app.start_flow(&json!({"id": id, "goals": [goal]})).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
}

fn hook(r: &Received) -> String {
    r.headers
        .get("argyll-webhook-url")
        .and_then(|v| v.to_str().ok())
        .map(String::from)
        .unwrap_or_else(|| panic!("no webhook URL in {r:?}"))
}

/// POST `body` to an absolute URL: status and problem body.
async fn post(url: &str, body: &Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn assert_conflict(status: u16, body: &Value, says: &str) {
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["type"], "urn:tartan:problem:conflict", "{body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(says), "{detail:?} should say {says:?}");
}

/// A step endpoint that answers `status` and `body` once released.
async fn gated(status: u16, body: Value) -> (StepServer, Arc<tokio::sync::Notify>) {
    let release = Arc::new(tokio::sync::Notify::new());
    let gate = release.clone();
    let svc = StepServer::start_async(move |_, _| {
        let (gate, body) = (gate.clone(), body.clone());
        Box::pin(async move {
            gate.notified().await;
            json_reply(status, body)
        })
    })
    .await;
    (svc, release)
}

async fn event_count(app: &TestApp, id: &str) -> usize {
    app.event_types(id).await.len()
}

async fn a_webhook_for_a_synchronous_step_is_refused(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // The sync call hangs until released, so the item stays active.
    let (svc, release) = gated(200, json!({"out": "from the call"})).await;
    register(&app, &sync_step("plain", &svc.url("/plain"), &[], &["out"])).await;
    start(&app, "f", "plain").await;
    let calls = noted(&svc.received, 1).await;
    let token = calls[0].headers["argyll-receipt-token"]
        .to_str()
        .unwrap()
        .to_string();
    // A sync call is never handed a webhook URL; one made with the engine's
    // key stands for any that could be obtained.
    let url = app.url(&app.webhook_path("f", "plain", &token));
    let before = (app.flow("f").await, event_count(&app, "f").await);
    let (status, body) = post(&url, &json!({"out": "forged"})).await;
    assert_conflict(status, &body, "synchronous");
    let (status, body) = post(&format!("{url}/heartbeat"), &json!({})).await;
    assert_conflict(status, &body, "synchronous");
    assert_eq!(
        (app.flow("f").await, event_count(&app, "f").await),
        before,
        "nothing changed"
    );

    release.notify_one();
    let flow = app.wait_for_flow("f").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["attributes"]["out"][0]["value"], "from the call", "{flow}");
}

async fn a_webhook_or_heartbeat_before_the_call_is_accepted_is_refused_and_starts_nothing(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // The async endpoint takes its time to accept; meanwhile its webhook URL
    // is already known (it came with the call).
    let (svc, release) = gated(202, json!({})).await;
    let mut step = async_step("slow", &svc.url("/slow"));
    step["timeouts"] = json!({"attempt": "30s", "inactivity": 200});
    step["work_config"] = json!({"max_attempts": 3, "init_backoff": 10, "backoff_type": "fixed"});
    register(&app, &step).await;
    start(&app, "f", "slow").await;
    let calls = noted(&svc.received, 1).await;
    let url = hook(&calls[0]);
    let before = (app.flow("f").await, event_count(&app, "f").await);

    let (status, body) = post(&format!("{url}/heartbeat"), &json!({})).await;
    assert_conflict(status, &body, "not been accepted");
    let (status, body) = post(&url, &json!({"out": "too early"})).await;
    assert_conflict(status, &body, "not been accepted");
    // Heartbeats on a call in flight arm no inactivity timer: nothing times
    // it out and no second call of the token starts beside it.
    for _ in 0..3 {
        let _ = post(&format!("{url}/heartbeat"), &json!({})).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(svc.requests().len(), 1, "one call of the token at a time");
    assert_eq!(
        (app.flow("f").await, event_count(&app, "f").await),
        before,
        "nothing changed"
    );

    // Accepted now: the same URL is heard.
    release.notify_one();
    let mut accepted = false;
    for _ in 0..200 {
        let flow = app.flow("f").await;
        let work = flow["executions"]["slow"]["work_items"]
            .as_object()
            .and_then(|w| w.values().next().cloned())
            .unwrap_or(Value::Null);
        if work["accepted_at"].is_string() {
            accepted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(accepted, "the call was accepted");
    let (status, body) = post(&format!("{url}/heartbeat"), &json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = post(&url, &json!({"out": "done"})).await;
    assert_eq!(status, 200, "{body}");
    let flow = app.wait_for_flow("f").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(svc.requests().len(), 1, "called once");
}

async fn an_older_attempts_webhook_and_heartbeat_are_refused(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // Accepts every call; the test calls back for it. Attempt 1 reports a
    // retryable failure (no timer, so a loaded machine cannot decide what
    // the test sees), and attempt 2 waits.
    let svc = StepServer::start(|_, _| json_reply(202, json!({}))).await;
    let mut step = async_step("quiet", &svc.url("/quiet"));
    step["work_config"] = json!({"max_attempts": 2, "init_backoff": 10, "backoff_type": "fixed"});
    register(&app, &step).await;
    start(&app, "f", "quiet").await;
    let first_call = noted(&svc.received, 1).await;
    let failed = reqwest::Client::new()
        .post(hook(&first_call[0]))
        .header("Content-Type", "application/problem+json")
        .body(json!({"title": "Unavailable", "status": 503, "detail": "try again"}).to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("failing attempt 1: {e}"));
    assert_eq!(failed.status().as_u16(), 200);
    let calls = noted(&svc.received, 2).await;
    let (first, second) = (hook(&calls[0]), hook(&calls[1]));
    assert_ne!(first, second, "each attempt has its own URL");
    // Wait until the second attempt is accepted.
    for _ in 0..200 {
        let flow = app.flow("f").await;
        let accepted = flow["executions"]["quiet"]["work_items"]
            .as_object()
            .and_then(|w| w.values().next())
            .is_some_and(|w| {
                w["attempts"].as_array().map(Vec::len) == Some(2) && w["accepted_at"].is_string()
            });
        if accepted {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let before = (app.flow("f").await, event_count(&app, "f").await);
    let (status, body) = post(&first, &json!({"out": "stale"})).await;
    assert_conflict(status, &body, "attempt 1");
    let (status, body) = post(&format!("{first}/heartbeat"), &json!({})).await;
    assert_conflict(status, &body, "attempt 2 replaced");
    assert_eq!(
        (app.flow("f").await, event_count(&app, "f").await),
        before,
        "nothing changed"
    );

    let (status, body) = post(&second, &json!({"out": "fresh"})).await;
    assert_eq!(status, 200, "{body}");
    let flow = app.wait_for_flow("f").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["attributes"]["out"][0]["value"], "fresh", "{flow}");
}

async fn a_step_that_calls_back_the_moment_it_accepts_is_heard(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // The step posts its result while its 202 is still on the way: the
    // webhook waits for the engine to record the acceptance.
    let results: Arc<Mutex<Vec<u16>>> = Arc::default();
    let seen = results.clone();
    let svc = StepServer::start(move |r, _| {
        let url = hook(r);
        let seen = seen.clone();
        tokio::spawn(async move {
            let (status, _) = post(&url, &json!({"out": "quick"})).await;
            seen.lock().unwrap().push(status);
        });
        json_reply(202, json!({}))
    })
    .await;
    register(&app, &async_step("eager", &svc.url("/eager"))).await;
    for i in 0..10 {
        start(&app, &format!("f{i}"), "eager").await;
    }
    for i in 0..10 {
        let flow = app.wait_for_flow(&format!("f{i}")).await;
        assert_eq!(flow["status"], "completed", "{flow}");
    }
    assert_eq!(noted(&results, 10).await, vec![200; 10]);
}

async fn a_late_webhook_delivered_a_hundred_times_is_recorded_once(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let urls: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = urls.clone();
    let svc = StepServer::start(move |r, _| {
        seen.lock().unwrap().push(hook(r));
        json_reply(202, json!({}))
    })
    .await;
    register(&app, &async_step("slow", &svc.url("/slow"))).await;
    start(&app, "late", "slow").await;
    let url = noted(&urls, 1).await.remove(0);
    let (status, body) = post(&url, &json!({"out": "first"})).await;
    assert_eq!(status, 200, "{body}");
    let flow = app.wait_for_flow("late").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let before = event_count(&app, "late").await;

    // The step retries its POST: every delivery is answered 200, and the
    // late result is recorded once.
    for n in 0..100 {
        let (status, body) = post(&url, &json!({"out": "again"})).await;
        assert_eq!(status, 200, "delivery {n}: {body}");
    }
    let types = app.event_types("late").await;
    assert_eq!(types.len(), before + 1, "{types:?}");
    let late = types.iter().filter(|t| *t == "work_late_result").count();
    assert_eq!(late, 1, "{types:?}");
    let after = app.flow("late").await;
    assert_eq!(after["status"], "completed", "{after}");
    assert_eq!(after["executions"]["slow"]["outputs"], json!({"out": "first"}));
}
