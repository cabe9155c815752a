//! Webhook URLs are signed (docs/security.md, "Webhooks"), tried as an
//! attacker would: a webhook forged from a token read through the API is
//! refused and changes nothing; a `webhook_url` meta input is signed for
//! the step only; the signing key survives a restart and is shared by the
//! engines on one database.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use super::support::{
    as_full, assert_problem, header, request, secured, silent_async_step, wait_for_call, wait_until_terminal,
    FULL, READER,
};
use crate::helpers::{call, json_reply, spawn_binary_with, sync_step, Backend, Binary, StepServer, TestDb};
use tartan_testkit::both_backends;

both_backends!(
    a_webhook_forged_from_a_token_read_through_the_api_is_refused_and_changes_nothing,
    the_webhook_key_survives_a_restart_and_is_shared_by_engines_on_one_database,
);

// ---------------------------------------------------------------------------
// Webhooks cannot be forged by readers.

async fn a_webhook_forged_from_a_token_read_through_the_api_is_refused_and_changes_nothing(backend: Backend) {
    let Some(app) = secured(backend, &[]).await else {
        return;
    };
    let (svc, _) = silent_async_step(&app).await;
    let reg = |body: Value| {
        let app = &app;
        async move { as_full(app, Method::POST, "/engine/flow", Some(&body)).await }
    };
    assert_eq!(reg(json!({"id": "victim", "goals": ["job"]})).await.status, 201);
    let call = wait_for_call(&svc).await;
    let real_hook = header(&call, "argyll-webhook-url");
    assert_eq!(reg(json!({"id": "attacker", "goals": ["job"]})).await.status, 201);
    // Let both calls be accepted, so the state is quiet.
    for _ in 0..100 {
        if svc.requests().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let attacker_hook = svc
        .requests()
        .iter()
        .map(|r| header(r, "argyll-webhook-url"))
        .find(|h| h.contains("/webhook/attacker/"))
        .expect("the attacker's own flow was called");

    // What a reader sees: the token, but not the signature.
    let before = request(&app, Method::GET, "/engine/flow/victim", Some(READER), None, None)
        .await
        .0;
    let token = before.body["executions"]["job"]["work_items"]
        .as_object()
        .and_then(|items| items.keys().next().cloned())
        .expect("the victim's work item is in flow state");
    let signature = real_hook.rsplit('/').next().unwrap_or_default().to_string();
    assert!(signature.len() >= 20, "{real_hook}");
    for path in [
        "/engine/flow/victim".to_string(),
        "/engine/flow/victim/events".to_string(),
        "/engine/flow/victim/work".to_string(),
        "/engine/work".to_string(),
        "/engine/flow".to_string(),
    ] {
        let body = as_full(&app, Method::GET, &path, None).await.body.to_string();
        assert!(
            body.contains(&token) || path == "/engine/flow",
            "{path} shows the token"
        );
        assert!(
            !body.contains(&signature),
            "{path} shows the webhook signature: {body}"
        );
    }

    // Forgeries: Argyll's unsigned form, a made-up signature, the signature
    // of the attacker's own work item, and each as a heartbeat.
    let attacker_sig = attacker_hook.rsplit('/').next().unwrap_or_default().to_string();
    let base = format!("/webhook/victim/job/{token}");
    let forged = [
        base.clone(),
        format!("{base}/heartbeat"),
        format!("{base}/AAAAAAAAAAAAAAAAAAAAAA"),
        format!("{base}/AAAAAAAAAAAAAAAAAAAAAA/heartbeat"),
        format!("{base}/{attacker_sig}"),
        format!("{base}/{attacker_sig}/heartbeat"),
        format!("/webhook/victim/job/{token}x/{signature}"),
        format!("{base}/{signature}x"),
    ];
    for path in &forged {
        for token in [None, Some(READER), Some(FULL)] {
            let (r, _) = request(
                &app,
                Method::POST,
                path,
                token,
                Some("application/json"),
                Some(&json!({"out": "forged"})),
            )
            .await;
            assert_problem(&r, 403, "webhook URL");
        }
    }
    let after = as_full(&app, Method::GET, "/engine/flow/victim", None).await;
    assert_eq!(after.body, before.body, "forgeries changed the flow");
    let events = as_full(&app, Method::GET, "/engine/flow/victim/events", None).await;
    let kinds: Vec<&str> = events.body["events"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["type"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        !kinds
            .iter()
            .any(|k| k.contains("heartbeat") || k.contains("late") || k.contains("succeeded")),
        "{kinds:?}"
    );

    // The URL the engine handed out, used verbatim as Argyll's SDKs do, works.
    let resp = app
        .client
        .post(format!("{real_hook}/heartbeat"))
        .header("Content-Type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = app
        .client
        .post(&real_hook)
        .json(&json!({"out": "real"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let flow = wait_until_terminal(&app, "victim").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["attributes"]["out"][0]["value"], "real", "{flow}");
}

/// A `webhook_url` meta input carries the signed URL to the step, while
/// flow state keeps the unsigned one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_url_meta_input_is_signed_for_the_step_only() {
    let Some(app) = secured(Backend::Sqlite, &[]).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(202, json!({}))).await;
    let step = json!({
        "id": "meta", "name": "meta", "type": "async",
        "http": {"endpoint": svc.url("/meta")},
        "attributes": {
            "callback": {"role": "meta", "meta": {"key": "webhook_url"}},
            "out": {"role": "output"}
        }
    });
    assert_eq!(
        as_full(&app, Method::POST, "/engine/step", Some(&step))
            .await
            .status,
        201
    );
    let r = as_full(
        &app,
        Method::POST,
        "/engine/flow",
        Some(&json!({"id": "m", "goals": ["meta"]})),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let call = wait_for_call(&svc).await;
    let hook = header(&call, "argyll-webhook-url");
    assert_eq!(
        call.body["callback"],
        hook.as_str(),
        "the body's meta input is the signed URL"
    );
    let signature = hook.rsplit('/').next().unwrap_or_default();
    let flow = as_full(&app, Method::GET, "/engine/flow/m", None).await.body;
    assert!(
        !flow.to_string().contains(signature),
        "flow state shows the signature: {flow}"
    );
    let resp = app
        .client
        .post(&hook)
        .json(&json!({"out": "ok"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(wait_until_terminal(&app, "m").await["status"], "completed");
}

async fn the_webhook_key_survives_a_restart_and_is_shared_by_engines_on_one_database(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let hooks: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = hooks.clone();
    let svc = StepServer::start(move |r, _| {
        if let Some(h) = r.headers.get("argyll-webhook-url").and_then(|v| v.to_str().ok()) {
            seen.lock().unwrap_or_else(|p| p.into_inner()).push(h.to_string());
        }
        json_reply(202, json!({}))
    })
    .await;
    let mut first = spawn_binary_with(&db, "node-a", &[]).await;
    let mut step = sync_step("job", &svc.url("/job"), &[], &["out"]);
    step["type"] = json!("async");
    let (status, body) = call(&first, reqwest::Method::POST, "/engine/step", Some(step)).await;
    assert_eq!(status, 201, "{body}");
    for id in ["before", "other"] {
        let (status, body) = call(
            &first,
            reqwest::Method::POST,
            "/engine/flow",
            Some(json!({"id": id, "goals": ["job"]})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let handed_out = crate::helpers::noted(&hooks, 2).await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    // Postgres: a second engine beside the first; SQLite: the engine
    // restarted (SIGKILL) as another node.
    let second = match backend {
        Backend::Postgres => spawn_binary_with(&db, "node-b", &[]).await,
        Backend::Sqlite => {
            first.child.kill().await.ok();
            spawn_binary_with(&db, "node-b", &[]).await
        }
    };
    for hook in &handed_out {
        let flow = if hook.contains("/webhook/before/") {
            "before"
        } else {
            "other"
        };
        let on_second = move_to(hook, &second);
        let resp = reqwest::Client::new()
            .post(&on_second)
            .json(&json!({"out": flow}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{on_second} refused by the other engine");
    }
    for flow in ["before", "other"] {
        let state = crate::helpers::wait_for_terminal(&second, flow).await;
        assert_eq!(state["status"], "completed", "{state}");
    }
    // A URL signed for one flow does not fit another's token.
    let before = handed_out
        .iter()
        .find(|h| h.contains("/webhook/before/"))
        .expect("the flow `before` was handed a URL");
    let swapped = before.replace("/webhook/before/", "/webhook/other/");
    let resp = reqwest::Client::new()
        .post(move_to(&swapped, &second))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    drop(first);
}

/// The same URL path on another engine's address.
fn move_to(hook: &str, engine: &Binary) -> String {
    let path = hook
        .splitn(4, '/')
        .nth(3)
        .unwrap_or_else(|| panic!("not a URL: {hook}"));
    format!("http://{}/{path}", engine.addr)
}
