//! examples/model/ run as its README says, against a stand-in for the
//! greeter: the example cannot go stale.

use serde_json::{json, Value};
use tartan_testkit::both_backends;

use crate::helpers::{json_reply, spawn_app, Backend, StepServer};

both_backends!(the_step_model_example_runs_as_its_readme_says);

fn example(path: &str, greeter: &str) -> Value {
    let file = format!("{}/examples/model/{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
    serde_json::from_str(&text.replace("http://127.0.0.1:8081", greeter))
        .unwrap_or_else(|e| panic!("{file}: {e}"))
}

async fn the_step_model_example_runs_as_its_readme_says(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // The greeter's two routes (examples/greeter.rs).
    let greeter = StepServer::start(|r, _| match r.path.as_str() {
        "/greet" => json_reply(
            200,
            json!({"greeting": format!("Hello, {}!", r.body["name"].as_str().unwrap_or(""))}),
        ),
        _ => json_reply(
            200,
            json!({"shout": r.body["greeting"].as_str().unwrap_or("").to_uppercase()}),
        ),
    })
    .await;
    let base = greeter.url("");
    for step in ["tidy-name", "welcome", "announce", "welcome-party"] {
        let r = app.register(&example(&format!("steps/{step}.json"), &base)).await;
        assert_eq!(r.status, axum::http::StatusCode::CREATED, "{step}: {:?}", r.body);
    }
    for flow in ["vip", "guest", "party"] {
        let r = app
            .start_flow(&example(&format!("flows/{flow}.json"), &base))
            .await;
        assert_eq!(r.status, axum::http::StatusCode::CREATED, "{flow}: {:?}", r.body);
    }
    let vip = app.wait_for_flow("vip-1").await;
    assert_eq!(vip["status"], "completed", "{vip}");
    assert_eq!(
        vip["attributes"]["announcement"][0]["value"],
        "HELLO, ADA LOVELACE! (VIP)"
    );
    assert_eq!(vip["attributes"]["welcome"][0]["value"], "Hello, Ada lovelace!");
    let guest = app.wait_for_flow("guest-1").await;
    assert_eq!(guest["status"], "completed", "{guest}");
    assert_eq!(
        guest["executions"]["announce"]["reason"],
        "predicate returned false"
    );
    let party = app.wait_for_flow("party-1").await;
    assert_eq!(party["status"], "completed", "{party}");
    let welcomes: Vec<&Value> = party["attributes"]["welcomes"][0]["value"]
        .as_array()
        .map(|a| a.iter().map(|w| &w["welcomes"]).collect())
        .unwrap_or_default();
    assert_eq!(
        welcomes,
        [&json!("Hello, ada!"), &json!("Hello, grace!")],
        "{party}"
    );
}
