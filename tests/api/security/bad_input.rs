//! Generated bad input: thousands of random and mutated requests to every
//! route, bodies (deep JSON included), paths and query strings. None may get
//! a 5xx; every error is problem+json; nothing is stored by a request that
//! was refused. And hostile step responses (huge or garbage `Retry-After`,
//! deep or oversized bodies, odd statuses) end flows, never the engine.

use axum::http::{Method, StatusCode};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::Value;

use crate::helpers::{spawn_app, sync_step, Backend, Reply};

/// Any JSON value, a few levels deep, with keys that sometimes hit real
/// field names.
fn any_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("id".to_string()),
        Just("name".to_string()),
        Just("type".to_string()),
        Just("goals".to_string()),
        Just("init".to_string()),
        Just("http".to_string()),
        Just("endpoint".to_string()),
        Just("attributes".to_string()),
        Just("work_config".to_string()),
        Just("retry".to_string()),
        Just("timeouts".to_string()),
        Just("timeout".to_string()),
        Just("labels".to_string()),
        Just("role".to_string()),
        "[a-z_]{1,12}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
        prop_oneof![
            Just("1s"),
            Just("PT5M"),
            Just("-3"),
            Just("sync"),
            Just("http://127.0.0.1:9/x/{id}")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A valid step with one field replaced by anything.
fn mutated_step() -> impl Strategy<Value = Value> {
    let paths = prop_oneof![
        Just(vec!["id"]),
        Just(vec!["type"]),
        Just(vec!["http"]),
        Just(vec!["http", "endpoint"]),
        Just(vec!["http", "timeout"]),
        Just(vec!["http", "method"]),
        Just(vec!["attributes"]),
        Just(vec!["attributes", "x"]),
        Just(vec!["attributes", "x", "role"]),
        Just(vec!["work_config"]),
        Just(vec!["work_config", "max_retries"]),
        Just(vec!["work_config", "init_backoff"]),
        Just(vec!["work_config", "retry_on"]),
        Just(vec!["retry"]),
        Just(vec!["timeouts"]),
        Just(vec!["timeouts", "total"]),
    ];
    (paths, any_json()).prop_map(|(path, value)| {
        let mut step = sync_step("mut", "http://127.0.0.1:9/m/{x}", &["x"], &["y"]);
        let mut target = &mut step;
        for key in &path[..path.len() - 1] {
            target = &mut target[*key];
        }
        target[path[path.len() - 1]] = value;
        step
    })
}

fn sample<S: Strategy>(runner: &mut TestRunner, strategy: &S) -> S::Value {
    match strategy.new_tree(runner) {
        Ok(tree) => tree.current(),
        Err(e) => panic!("strategy: {e}"),
    }
}

fn assert_no_server_error(what: &str, body: &str, r: &Reply) {
    assert!(
        r.status.as_u16() < 500,
        "{what} {body} -> {} {:?}",
        r.status,
        r.body
    );
    if r.status.as_u16() >= 400 {
        assert_eq!(
            r.content_type, "application/problem+json",
            "{what} {body} -> {:?}",
            r.body
        );
        assert!(r.body["error"].is_string(), "{what} {body} -> {:?}", r.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_random_requests_get_no_server_error_and_store_nothing_refused() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let hook = app.webhook_path("f", "s", "t");
    let heartbeat = format!("{hook}/heartbeat");
    let routes: [(Method, &str); 9] = [
        (Method::POST, "/engine/step"),
        (Method::PUT, "/engine/step/mut"),
        (Method::POST, "/engine/flow"),
        (Method::POST, "/engine/plan"),
        (Method::POST, "/engine/flow/query"),
        (Method::POST, &hook),
        (Method::POST, &heartbeat),
        (Method::POST, "/engine/flow/f/cancel"),
        (Method::DELETE, "/engine/step/mut"),
    ];
    let mut runner = TestRunner::deterministic();
    let json = any_json();
    let mutated = mutated_step();
    let mut registered = std::collections::BTreeSet::new();
    let mut started = 0;
    let mut accepted = 0;
    for i in 0..3000 {
        let (method, path) = &routes[(i / 4) % routes.len()];
        let body = match i % 4 {
            0 => sample(&mut runner, &json).to_string(),
            // Nested past the 64-level limit, or right at it.
            3 => {
                let depth = [63, 64, 65, 100, 5000][(i / 4) % 5];
                format!("{}{}", "[".repeat(depth), "]".repeat(depth))
            }
            1 => sample(&mut runner, &mutated).to_string(),
            // Raw text: truncated or broken JSON.
            _ => {
                let text = sample(&mut runner, &json).to_string();
                text.chars().take(text.len() / 2).collect()
            }
        };
        let r = app.send(method.clone(), path, Some(body.clone())).await;
        assert_no_server_error(&format!("{method} {path}"), &body, &r);
        if r.status.is_success() {
            accepted += 1;
        }
        if r.status == StatusCode::CREATED && *path == "/engine/step" {
            registered.insert(r.body["step"]["id"].as_str().unwrap_or_default().to_string());
        }
        if r.status == StatusCode::CREATED && *path == "/engine/flow" {
            started += 1;
        }
        if *method == Method::DELETE && r.status == StatusCode::OK {
            registered.remove("mut");
        }
    }
    // Every reading route, with hostile path segments and query strings.
    let segments = [
        "x",
        "%00",
        "..",
        "%2e%2e",
        "a%2Fb",
        "😀",
        "%ZZ",
        &"y".repeat(5000),
    ];
    let queries = [
        "",
        "?limit=0",
        "?limit=-1",
        "?limit=99999999999999999999",
        "?status=nope",
        "?cursor=%%%",
        "?cursor=AAAA",
        "?step=&flow_id=&status=",
        "?labels=a%3D",
        "?prefix=%00",
    ];
    for (k, seg) in segments.iter().enumerate() {
        for (j, q) in queries.iter().enumerate() {
            let path = [
                format!("/engine/flow{q}"),
                format!("/engine/flow/{seg}{q}"),
                format!("/engine/flow/{seg}/status{q}"),
                format!("/engine/flow/{seg}/events{q}"),
                format!("/engine/flow/{seg}/work{q}"),
                format!("/engine/step/{seg}{q}"),
                format!("/engine/work{q}"),
                format!("/engine/catalog/events{q}"),
                format!("/engine{q}"),
                format!("/health{q}"),
            ][(k + j) % 10]
                .clone();
            let r = app.send(Method::GET, &path, None).await;
            assert_no_server_error("GET", &path, &r);
        }
    }
    // The mutations reach past the JSON parser: some requests are valid.
    assert!(
        accepted > 0,
        "every request was refused: the generator tests only the parser"
    );
    // What was refused left nothing behind.
    let steps = app.get("/engine/step").await.body;
    let ids: std::collections::BTreeSet<String> = steps["steps"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        ids.is_subset(&registered) || ids == registered,
        "{ids:?} vs {registered:?}"
    );
    let flows = app.get("/engine/flow").await.body;
    assert_eq!(flows.as_array().map(Vec::len), Some(started), "{flows}");
}

/// A step's answer: status, headers, body.
type Hostile = (u16, Vec<(&'static str, String)>, String);

/// Responses no well-behaved step sends, in turn: each flow ends (failed or
/// completed), none hangs, and the engine keeps answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_step_responses_end_flows_not_the_engine() {
    use axum::response::IntoResponse;
    let Some(db) = crate::helpers::TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let app = crate::helpers::start_on_with(db, "hostile", |c| {
        c.max_response_bytes = 64 * 1024;
        c.max_retry_after = std::time::Duration::from_millis(50);
    })
    .await;
    let deep = format!("{}{}", "{\"a\":".repeat(100), "1".to_string() + &"}".repeat(100));
    let responses: Vec<Hostile> = vec![
        (503, vec![("retry-after", "99999999999".into())], "{}".into()),
        (
            503,
            vec![("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT".into())],
            "{}".into(),
        ),
        (429, vec![("retry-after", "-5".into())], "{}".into()),
        (503, vec![("retry-after", "soon-ish".into())], "{}".into()),
        (503, vec![("retry-after", "1".repeat(400))], "{}".into()),
        (200, vec![("content-type", "application/json".into())], deep),
        (
            200,
            vec![("content-type", "application/json".into())],
            format!("{{\"y\":\"{}\"}}", "z".repeat(100_000)),
        ),
        (
            200,
            vec![("content-type", "application/json".into())],
            "[1,2,3]".into(),
        ),
        (
            200,
            vec![("content-type", "application/json".into())],
            "{\"y\":".into(),
        ),
        (299, vec![], "not json at all".into()),
        (
            302,
            vec![("location", "http://169.254.169.254/".into())],
            String::new(),
        ),
        (
            418,
            vec![("content-type", "application/problem+json".into())],
            "{\"status\":\"x\"}".into(),
        ),
    ];
    let count = responses.len();
    let svc = crate::helpers::StepServer::start(move |r, _| {
        let i: usize = r.path.trim_start_matches("/h/").parse().unwrap_or(0);
        let (status, headers, body) = &responses[i % responses.len()];
        let mut resp = (
            StatusCode::from_u16(*status).unwrap_or(StatusCode::OK),
            body.clone(),
        )
            .into_response();
        for (k, v) in headers {
            if let Ok(v) = axum::http::HeaderValue::from_str(v) {
                resp.headers_mut().insert(*k, v);
            }
        }
        resp
    })
    .await;
    let mut step = sync_step("hostile", &svc.url("/h/{i}"), &["i"], &["y"]);
    step["work_config"] = serde_json::json!({"max_attempts": 2, "init_backoff": 10, "max_backoff": 10});
    let r = app.register(&step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    for i in 0..count {
        let r = app
            .start_flow(&serde_json::json!({"id": format!("h{i}"), "goals": ["hostile"], "init": {"i": [i.to_string()]}}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    }
    for i in 0..count {
        let flow = app.wait_for_flow(&format!("h{i}")).await;
        let status = flow["status"].as_str().unwrap_or_default();
        assert!(status == "failed" || status == "completed", "h{i}: {flow}");
    }
    let health = app.get("/health").await;
    assert_eq!(health.status, StatusCode::OK);
}
