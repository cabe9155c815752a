//! An async step with webhooks and heartbeats
//! (examples/async-webhooks/README.md): a report renderer that accepts the
//! call at once (`202`), sends a heartbeat every 300 ms while it works, and
//! posts the result to the webhook URL it was given after 1.5 s, longer
//! than the step's inactivity window of 1 s: the heartbeats keep it open.
//! tartan-step does the accepting, the heartbeats and the posting; the
//! handler only works.
//!
//! `cargo run --example async-webhooks` serves `POST /render` on
//! 127.0.0.1:8081 (or `STEPS_ADDR`).

#[path = "../kit/mod.rs"]
mod kit;

use std::time::Duration;

use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};
use tartan_step::{Ctx, Service, Step, StepError, Type};

const HEARTBEAT_EVERY: Duration = Duration::from_millis(300);
const WORK_TAKES: Duration = Duration::from_millis(1500);

#[derive(Deserialize)]
struct Report {
    title: Option<String>,
}

pub fn app() -> Router {
    let render = Step::asynchronous("render", render)
        .name("Render a report")
        .required("title", Type::String)
        .output("report_url", Type::String)
        .heartbeat_every(HEARTBEAT_EVERY);
    Service::new("async-webhooks").step(render).router()
}

async fn render(report: Report, ctx: Ctx) -> Result<Value, StepError> {
    let token = ctx.receipt_token().unwrap_or("-").to_string();
    println!("render {token}: accepted, heartbeats every {HEARTBEAT_EVERY:?}");
    tokio::time::sleep(WORK_TAKES).await;
    let title = report.title.unwrap_or_else(|| "untitled".into());
    println!("render {token}: done, posting the result");
    Ok(json!({"report_url": format!("https://reports.example/{}.pdf", title.replace(' ', "-"))}))
}

#[allow(dead_code)] // the docs' tests take `app` alone
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve("async-webhooks", app()).await
}
