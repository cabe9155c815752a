//! An async step written with the SDK: accepted at once, kept open past
//! its inactivity window by the SDK's heartbeats, its result (or its
//! failure) posted to the signed webhook URL the engine handed out.

use std::time::Duration;

use serde_json::{json, Value};
use tartan_step::{Ctx, Service, Step, StepError, Type};

use super::{run_flow, start};
use crate::helpers::{only_item, spawn_app, Backend};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_step_heartbeats_then_completes_through_its_webhook() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    // Works twice as long as its inactivity window: only the heartbeats
    // (every 400 ms, a third of the window) keep the attempt open.
    let render = Step::asynchronous("render", |input: Value, ctx: Ctx| async move {
        assert!(ctx.webhook().is_some_and(|w| w.url().contains("/webhook/")));
        tokio::time::sleep(Duration::from_millis(2400)).await;
        let title = input["title"].as_str().unwrap_or("untitled").replace(' ', "-");
        Ok(json!({"report_url": format!("https://reports.example/{title}.pdf")}))
    })
    .required("title", Type::String)
    .output("report_url", Type::String)
    .inactivity(Duration::from_millis(1200))
    .max_attempts(1);
    let proof = Step::asynchronous("proof", |_: Value, _: Ctx| async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        Err::<(), _>(StepError::permanent("the proof has a typo"))
    })
    .output("proofed", Type::Boolean)
    .max_attempts(3);
    start(&app, Service::new("reports").step(render).step(proof)).await;

    let flow = run_flow(&app, "sdk-5", "render", json!({"title": ["Q3 sales"]})).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(
        flow["attributes"]["report_url"][0]["value"], "https://reports.example/Q3-sales.pdf",
        "{flow}"
    );
    let item = only_item(&flow, "render");
    assert_eq!(item["attempts"].as_array().unwrap().len(), 1, "{item}");
    let types = app.event_types("sdk-5").await;
    let work: Vec<&str> = types
        .iter()
        .map(String::as_str)
        .filter(|t| t.starts_with("work_"))
        .collect();
    assert_eq!(work.first(), Some(&"work_started"), "{work:?}");
    assert!(work.contains(&"work_accepted"), "{work:?}");
    assert!(work.contains(&"work_heartbeat"), "{work:?}");
    assert_eq!(work.last(), Some(&"work_succeeded"), "{work:?}");

    // A failure delivered by webhook as problem+json: its 422 is not in
    // retry_on, so the item fails after one attempt.
    let flow = run_flow(&app, "sdk-6", "proof", json!({})).await;
    assert_eq!(flow["status"], "failed", "{flow}");
    let item = only_item(&flow, "proof");
    assert_eq!(item["retry_state"], "permanent", "{item}");
    assert_eq!(item["attempts"].as_array().unwrap().len(), 1, "{item}");
    assert!(
        flow["error"].as_str().unwrap().contains("the proof has a typo"),
        "{flow}"
    );
}
