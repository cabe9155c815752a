//! The service as a caller meets it, without an engine: what each answer
//! says (status, problem, headers), the health route, and an async step's
//! heartbeats and result as a stand-in engine receives them. The engine's
//! own reading of these answers is tested in tests/api/sdk.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{Method, StatusCode};
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tartan_step::{Ctx, Service, Step, StepError, Type};

/// Serve `router` on 127.0.0.1:0; its base URL.
async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}")
}

struct Answer {
    status: u16,
    content_type: String,
    retry_after: Option<String>,
    tartan_retry: Option<String>,
    body: Value,
}

async fn call(method: Method, url: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut request = reqwest::Client::new().request(method, url).body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (content_type, retry_after, tartan_retry) = (
        header("content-type").unwrap_or_default(),
        header("retry-after"),
        header("tartan-retry"),
    );
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    Answer {
        status,
        content_type,
        retry_after,
        tartan_retry,
        body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
    }
}

#[derive(Deserialize)]
struct Order {
    id: String,
    qty: u32,
}

#[derive(Serialize)]
struct Placed {
    confirmation: String,
}

async fn place(order: Order, _: Ctx) -> Result<Placed, StepError> {
    match order.qty {
        0 => Err(StepError::permanent("nothing to order")),
        99 => Err(StepError::retryable("stock is being counted").retry_after(Duration::from_millis(1500))),
        98 => Err(StepError::status(StatusCode::CONFLICT, "already placed")),
        97 => panic!("the warehouse is on fire"),
        _ => Ok(Placed {
            confirmation: format!("conf-{}", order.id),
        }),
    }
}

fn shop() -> Service {
    Service::new("shop")
        .body_limit(1024)
        .step(
            Step::sync("place", place)
                .required("id", Type::String)
                .required("qty", Type::Number),
        )
        .step(
            Step::sync("lookup", |_: Value, ctx: Ctx| async move {
                let sku = ctx.param("sku").unwrap_or_default().to_string();
                Ok(json!({"sku": sku, "attempt": ctx.attempt(), "token": ctx.receipt_token()}))
            })
            .path("/items/{sku}")
            .method(Method::GET),
        )
}

#[tokio::test]
async fn a_call_is_answered_with_outputs_or_a_problem_the_engine_classifies() {
    let url = serve(shop().router()).await;
    let place = format!("{url}/place");

    let ok = call(
        Method::POST,
        &place,
        &[],
        r#"{"id": "o-1", "qty": 2, "extra": true}"#,
    )
    .await;
    assert_eq!((ok.status, ok.body), (200, json!({"confirmation": "conf-o-1"})));

    let permanent = call(Method::POST, &place, &[], r#"{"id": "o-1", "qty": 0}"#).await;
    assert_eq!(permanent.status, 422);
    assert_eq!(permanent.content_type, "application/problem+json");
    assert_eq!(permanent.tartan_retry.as_deref(), Some("no"));
    assert_eq!(
        permanent.body,
        json!({"type": "about:blank", "title": "Unprocessable Entity", "status": 422, "detail": "nothing to order"})
    );

    let busy = call(Method::POST, &place, &[], r#"{"id": "o-1", "qty": 99}"#).await;
    assert_eq!(
        (busy.status, busy.retry_after.as_deref()),
        (503, Some("2")),
        "1.5 s rounds up"
    );
    assert_eq!(busy.tartan_retry, None);
    assert_eq!(busy.body["detail"], "stock is being counted");

    let conflict = call(Method::POST, &place, &[], r#"{"id": "o-1", "qty": 98}"#).await;
    assert_eq!((conflict.status, conflict.tartan_retry), (409, None));

    let panicked = call(Method::POST, &place, &[], r#"{"id": "o-1", "qty": 97}"#).await;
    assert_eq!(
        panicked.status, 500,
        "a panic is a retryable failure, not a dropped call"
    );
    assert_eq!(
        panicked.body["detail"],
        "step handler panicked: the warehouse is on fire"
    );
}

#[tokio::test]
async fn a_body_that_is_not_the_input_is_a_400_naming_the_member() {
    let url = serve(shop().router()).await;
    let place = format!("{url}/place");
    for (body, says) in [
        (
            r#"{"id": "o-1", "qty": "two"}"#,
            "invalid input qty: invalid type: string \"two\", expected u32",
        ),
        (r#"{"qty": 1}"#, "invalid input: missing field `id`"),
        ("<order/>", "invalid input: expected value at line 1 column 1"),
        ("", "invalid input: missing field `id`"),
    ] {
        let refused = call(Method::POST, &place, &[], body).await;
        assert_eq!(refused.status, 400, "{body}");
        assert_eq!(refused.content_type, "application/problem+json");
        assert_eq!(refused.tartan_retry.as_deref(), Some("no"), "{body}");
        assert_eq!(refused.body["detail"].as_str(), Some(says), "{body}");
    }
    let huge = format!(r#"{{"id": "{}", "qty": 1}}"#, "x".repeat(2000));
    let over = call(Method::POST, &place, &[], &huge).await;
    assert_eq!(
        (over.status, over.content_type.as_str()),
        (413, "application/problem+json")
    );
}

#[tokio::test]
async fn path_parameters_headers_and_the_health_route() {
    let url = serve(shop().router()).await;
    let headers = [("argyll-receipt-token", "tok-1"), ("tartan-attempt", "3")];
    let got = call(Method::GET, &format!("{url}/items/a%20b"), &headers, "").await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, json!({"sku": "a b", "attempt": 3, "token": "tok-1"}));
    let wrong = call(Method::POST, &format!("{url}/items/x"), &[], "{}").await;
    assert_eq!(wrong.status, 405, "the step's method only");

    let health = call(Method::GET, &format!("{url}/health"), &[], "").await;
    assert_eq!(
        (health.status, health.body),
        (200, json!({"status": "healthy", "service": "shop"}))
    );
}

/// A stand-in for the engine's webhook routes: what each POST carried.
#[derive(Clone, Default)]
struct Hooks(Arc<Mutex<Vec<(String, String, Value)>>>);

impl Hooks {
    async fn engine(&self) -> String {
        let hooks = self.clone();
        let router = Router::new().fallback(
            move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: String| {
                let hooks = hooks.clone();
                async move {
                    let ct = headers
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default();
                    let body = serde_json::from_str(&body).unwrap_or(Value::Null);
                    hooks
                        .0
                        .lock()
                        .unwrap()
                        .push((uri.path().to_string(), ct.to_string(), body));
                    StatusCode::OK
                }
            },
        );
        serve(router).await
    }

    async fn wait_for(&self, path_end: &str) -> Vec<(String, String, Value)> {
        for _ in 0..400 {
            let seen = self.0.lock().unwrap().clone();
            if seen.iter().any(|(p, _, _)| p.ends_with(path_end)) {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("nothing posted to ...{path_end}: {:?}", self.0.lock().unwrap());
    }
}

#[tokio::test]
async fn an_async_step_answers_202_heartbeats_and_posts_its_result_to_the_url_it_was_given() {
    let hooks = Hooks::default();
    let engine = hooks.engine().await;
    let service = Service::new("renderer")
        .step(
            Step::asynchronous("render", |input: Value, _: Ctx| async move {
                tokio::time::sleep(Duration::from_millis(550)).await;
                match input["title"].as_str() {
                    Some(title) => Ok(json!({"url": format!("https://r/{title}.pdf")})),
                    None => Err(StepError::permanent("title is required")),
                }
            })
            .heartbeat_every(Duration::from_millis(100)),
        )
        .webhooks_under(engine.clone());
    let url = serve(service.router()).await;
    let render = format!("{url}/render");

    let hook = format!("{engine}/webhook/f/render/tok/1.sig");
    let accepted = call(
        Method::POST,
        &render,
        &[("argyll-webhook-url", &hook)],
        r#"{"title": "q3"}"#,
    )
    .await;
    assert_eq!((accepted.status, accepted.body), (202, json!({"accepted": true})));
    let seen = hooks.wait_for("/1.sig").await;
    let beats = seen
        .iter()
        .filter(|(p, _, _)| p == "/webhook/f/render/tok/1.sig/heartbeat")
        .count();
    assert!(beats >= 2, "heartbeats every 100 ms for 550 ms: {seen:?}");
    let (_, ct, body) = seen.last().unwrap();
    assert_eq!(
        (ct.as_str(), body),
        ("application/json", &json!({"url": "https://r/q3.pdf"}))
    );

    let failing = format!("{engine}/webhook/f/render/tok/2.sig");
    let accepted = call(Method::POST, &render, &[("argyll-webhook-url", &failing)], "{}").await;
    assert_eq!(accepted.status, 202);
    let seen = hooks.wait_for("/2.sig").await;
    let (_, ct, body) = seen.last().unwrap();
    assert_eq!(ct, "application/problem+json");
    assert_eq!(
        (body["status"].clone(), body["detail"].clone()),
        (json!(422), json!("title is required"))
    );

    // No webhook, or one outside the engine's: refused before any work.
    let without = call(Method::POST, &render, &[], "{}").await;
    assert_eq!(without.status, 400);
    assert!(without.body["detail"]
        .as_str()
        .unwrap()
        .contains("is the step registered async?"));
    let elsewhere = call(
        Method::POST,
        &render,
        &[("argyll-webhook-url", "http://10.9.9.9/x")],
        "{}",
    )
    .await;
    assert_eq!(elsewhere.status, 400);
}

/// Async calls beyond `max_async` are answered a retryable `503` with
/// `Retry-After: 1`, not queued: a place frees once a result is posted.
#[tokio::test]
async fn async_calls_beyond_the_bound_are_a_retryable_503() {
    let hooks = Hooks::default();
    let engine = hooks.engine().await;
    let gate = Arc::new(tokio::sync::Notify::new());
    let held = gate.clone();
    let service = Service::new("renderer")
        .max_async(1)
        .step(Step::asynchronous("render", move |_: Value, _: Ctx| {
            let held = held.clone();
            async move {
                held.notified().await;
                Ok::<_, StepError>(json!({"url": "https://r/done.pdf"}))
            }
        }))
        .webhooks_under(engine.clone());
    let render = format!("{}/render", serve(service.router()).await);
    let hook = |n: u32| format!("{engine}/webhook/f/render/tok/{n}.sig");
    let first = call(Method::POST, &render, &[("argyll-webhook-url", &hook(1))], "{}").await;
    assert_eq!(first.status, 202);
    let second = call(Method::POST, &render, &[("argyll-webhook-url", &hook(2))], "{}").await;
    assert_eq!(second.status, 503, "{:?}", second.body);
    assert_eq!(second.retry_after.as_deref(), Some("1"));
    assert_eq!(second.content_type, "application/problem+json");
    gate.notify_one();
    hooks.wait_for("/1.sig").await;
    // The place is given back just after the result is posted.
    let mut third = call(Method::POST, &render, &[("argyll-webhook-url", &hook(3))], "{}").await;
    for _ in 0..100 {
        if third.status == 202 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        third = call(Method::POST, &render, &[("argyll-webhook-url", &hook(3))], "{}").await;
    }
    assert_eq!(third.status, 202);
    gate.notify_one();
    hooks.wait_for("/3.sig").await;
}

#[test]
#[should_panic(expected = "POST /place is another step's route")]
fn two_steps_on_one_route_do_not_make_a_service() {
    let _ = shop().step(Step::sync("again", place).path("/place"));
}
