//! The step SDK (crates/tartan-step) against the real engine: steps
//! registered by the service at start, typed inputs and outputs, failures
//! classified as the SDK means them (permanent, retryable with
//! `Retry-After`), an async step that heartbeats and completes through its
//! signed webhook, a malformed input. The examples' services, written with
//! it, run against the engine in tests/api/docs.

mod asynchronous;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tartan_step::{Ctx, RegisterError, Registration, Service, Step, StepError, Type};
use tokio::net::TcpListener;

use crate::helpers::{only_item, spawn_app, Backend, TestApp};

/// Serve `service` on a free port with its steps registered with `app` by
/// the service itself, at start; its URL once every step is in the catalog.
pub(super) async fn start(app: &TestApp, service: Service) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let ids: Vec<String> = service.steps().iter().map(|s| s.id().to_string()).collect();
    let service = service.register_with(Registration::new(app.url(""), url.clone()));
    let serving = tokio::spawn(service.serve_on(listener));
    for id in ids {
        for tries in 0.. {
            if app.get(&format!("/engine/step/{id}")).await.status == 200 {
                break;
            }
            if serving.is_finished() || tries > 400 {
                panic!("step {id} not registered: {:?}", serving.await);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    url
}

pub(super) async fn run_flow(app: &TestApp, id: &str, goal: &str, init: Value) -> Value {
    let started = app
        .start_flow(&json!({"id": id, "goals": [goal], "init": init}))
        .await;
    assert_eq!(started.status, 201, "{:?}", started.body);
    app.wait_for_flow(id).await
}

/// What a handler saw of each call: flow, step, token, attempt.
type Seen = Arc<Mutex<Vec<(Option<String>, Option<String>, Option<String>, Option<u32>)>>>;

fn note(seen: &Seen, ctx: &Ctx) {
    let own = |v: Option<&str>| v.map(str::to_string);
    seen.lock().unwrap().push((
        own(ctx.flow_id()),
        own(ctx.step_id()),
        own(ctx.receipt_token()),
        ctx.attempt(),
    ));
}

#[derive(Deserialize)]
struct Name {
    name: String,
}

#[derive(Serialize)]
struct Greeting {
    greeting: String,
}

fn greeter(seen: Seen, name: &str) -> Service {
    let greet = Step::sync("greet", move |input: Name, ctx: Ctx| {
        let seen = seen.clone();
        async move {
            note(&seen, &ctx);
            Ok(Greeting {
                greeting: format!("Hello, {}!", input.name),
            })
        }
    });
    Service::new("greeter").step(
        greet
            .name(name)
            .required("name", Type::String)
            .output("greeting", Type::String)
            .timeout(Duration::from_secs(5)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_step_registered_at_start_runs_in_a_flow() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let seen = Seen::default();
    let url = start(&app, greeter(seen.clone(), "Greet")).await;

    let step = app.get("/engine/step/greet").await.body;
    assert_eq!(step["type"], "sync", "{step}");
    assert_eq!(step["http"]["endpoint"], format!("{url}/greet"), "{step}");
    assert_eq!(step["http"]["health_check"], format!("{url}/health"), "{step}");
    assert_eq!(step["http"]["timeout"], 5000, "{step}");
    assert_eq!(step["attributes"]["greeting"]["role"], "output", "{step}");

    let flow = run_flow(&app, "sdk-1", "greet", json!({"name": ["Ada"]})).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(
        flow["attributes"]["greeting"][0]["value"], "Hello, Ada!",
        "{flow}"
    );
    let calls = seen.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let (flow_id, step_id, token, attempt) = calls[0].clone();
    assert_eq!(
        (flow_id.as_deref(), step_id.as_deref(), attempt),
        (Some("sdk-1"), Some("greet"), Some(1))
    );
    assert!(token.is_some_and(|t| !t.is_empty()));

    // Started again with another definition: the id holds a different one
    // (409), so the service replaces it.
    let again = greeter(seen.clone(), "Greet, again");
    let registration = Registration::new(app.url(""), url.clone());
    again.register(&registration).await.unwrap();
    assert_eq!(app.get("/engine/step/greet").await.body["name"], "Greet, again");

    // A definition the engine refuses is an error naming why, not a retry.
    let bad = Service::new("bad")
        .step(Step::sync("bad", |_: Value, _: Ctx| async { Ok(()) }).set("type", json!("bogus")));
    match bad.register(&registration).await {
        Err(RegisterError::Refused { step, status, detail }) => {
            assert_eq!((step.as_str(), status), ("bad", 400), "{detail}");
            assert!(detail.contains("type"), "{detail}");
        }
        other => panic!("expected a refusal: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_failure_fails_the_flow_after_one_attempt() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let seen = Seen::default();
    let noted = seen.clone();
    let charge = Step::sync("charge", move |_: Value, ctx: Ctx| {
        let seen = noted.clone();
        async move {
            note(&seen, &ctx);
            Err::<(), _>(StepError::permanent("card declined"))
        }
    });
    let step = charge
        .optional("order_id", Type::String)
        .output("charge_id", Type::String)
        .max_attempts(3)
        .backoff(Duration::from_millis(10), Duration::from_millis(10));
    start(&app, Service::new("payments").step(step)).await;

    let flow = run_flow(&app, "sdk-2", "charge", json!({})).await;
    assert_eq!(flow["status"], "failed", "{flow}");
    assert!(
        flow["error"].as_str().unwrap().contains("card declined"),
        "{flow}"
    );
    let item = only_item(&flow, "charge");
    assert_eq!(item["retry_state"], "permanent", "{item}");
    assert_eq!(item["attempts"].as_array().unwrap().len(), 1, "{item}");
    assert_eq!(item["attempts"][0]["http_status"], 422, "{item}");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retryable_failure_is_retried_no_sooner_than_its_retry_after() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let seen = Seen::default();
    let noted = seen.clone();
    let warm = Step::sync("warm", move |_: Value, ctx: Ctx| {
        let seen = noted.clone();
        async move {
            note(&seen, &ctx);
            if ctx.attempt() == Some(1) {
                return Err(StepError::retryable("warming up").retry_after(Duration::from_secs(1)));
            }
            Ok(json!({"warm": true}))
        }
    });
    let step = warm
        .output("warm", Type::Boolean)
        .max_attempts(3)
        .backoff(Duration::from_millis(10), Duration::from_millis(10));
    start(&app, Service::new("oven").step(step)).await;

    let flow = run_flow(&app, "sdk-3", "warm", json!({})).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let item = only_item(&flow, "warm");
    let attempts = item["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{item}");
    assert_eq!(attempts[0]["error"], "warming up", "{item}");
    assert_eq!(attempts[0]["retry_after_ms"], 1000, "{item}");
    assert!(
        attempts[0]["delay"]["delay_ms"].as_u64().unwrap() >= 1000,
        "{item}"
    );
    let time = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    let waited = time(&attempts[1]["started_at"]) - time(&attempts[0]["ended_at"]);
    assert!(waited.num_milliseconds() >= 990, "waited {waited}: {item}");

    let calls = seen.lock().unwrap().clone();
    let attempts: Vec<_> = calls.iter().map(|c| c.3).collect();
    assert_eq!(attempts, [Some(1), Some(2)]);
    assert_eq!(calls[0].2, calls[1].2, "one receipt token for every attempt");
}

#[derive(Deserialize)]
struct Count {
    #[allow(dead_code)]
    n: u32,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_input_fails_the_item_for_good_naming_the_member() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let count = Step::sync("count", |_: Count, _: Ctx| async { Ok(json!({"counted": true})) })
        .required("n", Type::String)
        .output("counted", Type::Boolean)
        .max_attempts(3)
        .backoff(Duration::from_millis(10), Duration::from_millis(10));
    start(&app, Service::new("counter").step(count)).await;

    let flow = run_flow(&app, "sdk-4", "count", json!({"n": ["three"]})).await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let item = only_item(&flow, "count");
    assert_eq!(item["retry_state"], "permanent", "{item}");
    assert_eq!(item["attempts"][0]["http_status"], 400, "{item}");
    assert_eq!(
        item["attempts"][0]["error"], "invalid input n: invalid type: string \"three\", expected u32",
        "{item}"
    );
}
