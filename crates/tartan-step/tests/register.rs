//! Registration at start against a stand-in engine: it waits for an engine
//! that is not ready yet, replaces a definition the id already holds, and
//! gives up, saying why, on an engine it never reaches. The real engine's
//! answers are tested in tests/api/sdk.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::Router;
use serde_json::Value;
use tartan_step::{Ctx, RegisterError, Registration, Service, Step};

/// What the stand-in engine received: method, path, bearer token, step id.
type Received = Arc<Mutex<Vec<(Method, String, Option<String>, Value)>>>;

/// An engine that answers each request with the next of `answers` (the
/// last one over and over).
async fn engine(answers: Vec<u16>) -> (String, Received) {
    let received = Received::default();
    let seen = received.clone();
    let router = Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, body: String| {
            let seen = seen.clone();
            let answers = answers.clone();
            async move {
                let token = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                let id = serde_json::from_str::<Value>(&body).unwrap_or_default()["id"].clone();
                let mut seen = seen.lock().unwrap();
                seen.push((method, uri.path().to_string(), token, id));
                let status = answers[(seen.len() - 1).min(answers.len() - 1)];
                (
                    StatusCode::from_u16(status).unwrap(),
                    r#"{"detail": "as scripted"}"#,
                )
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, received)
}

fn service() -> Service {
    Service::new("s").step(Step::sync("a", |_: Value, _: Ctx| async { Ok(()) }))
}

#[tokio::test]
async fn an_engine_not_ready_yet_is_waited_for_and_a_taken_id_is_updated() {
    let (url, received) = engine(vec![503, 503, 409, 200]).await;
    let registration = Registration::new(format!("{url}/"), "http://svc:8081").token("sekret");
    service().register(&registration).await.unwrap();
    let seen = received.lock().unwrap().clone();
    let calls: Vec<(String, String)> = seen
        .iter()
        .map(|(m, p, _, _)| (m.to_string(), p.clone()))
        .collect();
    assert_eq!(
        calls,
        [
            ("POST".into(), "/engine/step".into()),
            ("POST".into(), "/engine/step".into()),
            ("POST".into(), "/engine/step".into()),
            ("PUT".into(), "/engine/step/a".into())
        ]
    );
    assert!(seen
        .iter()
        .all(|(_, _, token, id)| token.as_deref() == Some("Bearer sekret") && id == "a"));
}

#[tokio::test]
async fn a_refusal_is_not_retried() {
    let (url, received) = engine(vec![401]).await;
    let refused = service()
        .register(&Registration::new(url, "http://svc:8081"))
        .await;
    assert!(
        matches!(&refused, Err(RegisterError::Refused { status: 401, detail, .. }) if detail == "as scripted"),
        "{refused:?}"
    );
    assert_eq!(received.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn an_engine_never_reached_is_given_up_within_the_patience() {
    // A port just freed: nothing listens there.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let started = Instant::now();
    let registration =
        Registration::new(format!("http://127.0.0.1:{port}"), "http://svc").patience(Duration::from_secs(1));
    let failed = service().register(&registration).await;
    assert!(
        matches!(failed, Err(RegisterError::Unreachable { .. })),
        "{failed:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let bad = service()
        .register(&Registration::new("localhost:8080", "http://svc"))
        .await;
    assert!(matches!(bad, Err(RegisterError::EngineUrl { .. })), "{bad:?}");
}
