//! Generated bad input: thousands of random and mutated requests to every
//! route that takes a body. None may get a 5xx; every error is problem+json;
//! nothing is stored by a request that was refused.

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
        let (method, path) = &routes[i % routes.len()];
        let body = match i % 3 {
            0 => sample(&mut runner, &json).to_string(),
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
