//! Each bad schedule is a 400 naming its field (nothing is stored), a
//! taken id a 409, an unknown one a 404; a read token may look but not
//! change.

use axum::http::StatusCode;
use serde_json::json;
use tartan_testkit::both_backends;

use crate::helpers::{spawn_app, spawn_with_tokens, Backend, StepServer};

both_backends!(
    each_bad_schedule_is_refused_naming_its_field,
    a_read_token_may_list_schedules_but_not_make_them
);

async fn each_bad_schedule_is_refused_naming_its_field(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| crate::helpers::json_reply(200, json!({"done": true}))).await;
    assert_eq!(app.register(&super::tick(&svc)).await.status, StatusCode::CREATED);
    for (body, field) in [
        (json!({"cron": "0 24 * * *"}), "cron"),
        (
            json!({"cron": "0 0 * * *", "timezone": "Europe/Atlantis"}),
            "timezone",
        ),
        (json!({"every": "900ms"}), "every"),
        (json!({"at": "2020-01-01T00:00:00Z"}), "at"),
        (json!({"cron": "@daily", "every": "1h"}), "every"),
        (json!({}), "cron"),
        (json!({"every": "1h", "overlap": "queue"}), "overlap"),
        (json!({"every": "1h", "catchup": "some"}), "catchup"),
        (
            json!({"every": "1h", "flow": {"goals": ["no-such-step"]}}),
            "flow.goals",
        ),
        (json!({"every": "1h", "id": ".."}), "id"),
    ] {
        let mut full = json!({"id": "bad", "flow": {"goals": ["tick"]}});
        for (k, v) in body.as_object().unwrap() {
            full[k] = v.clone();
        }
        let r = app.post("/engine/schedule", &full).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {:?}", r.body);
        let detail = r.body["detail"].as_str().unwrap_or_default();
        assert!(detail.starts_with(&format!("{field}: ")), "{body}: {detail}");
    }
    let r = app.get("/engine/schedule").await;
    assert_eq!(r.body["count"], 0, "nothing was stored: {:?}", r.body);
    let r = app.get("/engine/schedule/nope").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = app.post("/engine/schedule/nope/trigger", &json!({})).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = app
        .send(
            reqwest::Method::PUT,
            "/engine/schedule/nope",
            Some(json!({"every": "1h", "flow": {"goals": ["tick"]}}).to_string()),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = app
        .send(reqwest::Method::DELETE, "/engine/schedule/nope", None)
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

async fn a_read_token_may_list_schedules_but_not_make_them(backend: Backend) {
    let Some(app) = spawn_with_tokens(backend, "full-token-0123456789", "read-token-0123456789").await else {
        return;
    };
    let send = |method: reqwest::Method, path: &str, token: &str| {
        let mut req = app.client.request(method, app.url(path)).bearer_auth(token);
        if path == "/engine/schedule" {
            req = req.json(&json!({"id": "s", "every": "1h", "flow": {"goals": ["g"]}}));
        }
        req.send()
    };
    let r = send(reqwest::Method::GET, "/engine/schedule", "read-token-0123456789")
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = send(reqwest::Method::POST, "/engine/schedule", "read-token-0123456789")
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = app.client.get(app.url("/engine/schedule")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
}
