//! An async step with webhooks and heartbeats
//! (examples/async-webhooks/README.md): a report renderer that accepts the
//! call at once (`202`), sends a heartbeat every 300 ms while it works, and
//! posts the result to the webhook URL it was given after 1.5 s, longer
//! than the step's inactivity window of 1 s: the heartbeats keep it open.
//!
//! `cargo run --example async-webhooks` serves `POST /render` on
//! 127.0.0.1:8081 (or `STEPS_ADDR`).

#[path = "../kit/mod.rs"]
mod kit;

use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

const HEARTBEAT_EVERY: Duration = Duration::from_millis(300);
const WORK_TAKES: Duration = Duration::from_millis(1500);

pub fn app() -> Router {
    Router::new().route("/render", post(render))
}

async fn render(headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let webhook = kit::header(&headers, "argyll-webhook-url").to_string();
    if !webhook.starts_with("http") {
        return kit::problem(
            StatusCode::BAD_REQUEST,
            "no Argyll-Webhook-URL: is the step async?",
        );
    }
    let title = body["title"].as_str().unwrap_or("untitled").to_string();
    let token = kit::receipt_token(&headers);
    tokio::spawn(async move {
        let client = reqwest::Client::new();
        let started = tokio::time::Instant::now();
        while started.elapsed() < WORK_TAKES {
            tokio::time::sleep(HEARTBEAT_EVERY).await;
            let beat = client
                .post(format!("{webhook}/heartbeat"))
                .header("Content-Type", "application/json")
                .body("{}")
                .send()
                .await;
            println!("render {token}: heartbeat {:?}", beat.map(|r| r.status()));
        }
        let result =
            json!({"report_url": format!("https://reports.example/{}.pdf", title.replace(' ', "-"))});
        let sent = client.post(&webhook).json(&result).send().await;
        println!("render {token}: result {:?}", sent.map(|r| r.status()));
    });
    (StatusCode::ACCEPTED, Json(json!({"accepted": true}))).into_response()
}

#[allow(dead_code)] // the docs' tests take `app` alone
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve("async-webhooks", app()).await
}
