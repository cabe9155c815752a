//! The relay: the least any engine that takes flows over HTTP and calls
//! their steps over HTTP could cost (BENCHMARKS.md, "What bounds the
//! rest"). It answers the two requests `load api` makes of Tartan,
//! `POST /engine/flow` (201 at once, the chain run in a task of its own)
//! and `GET /engine/flow/{id}/status?wait=` (answered when the chain is
//! done), and makes the chain's three calls exactly as the floor's clients
//! do: five HTTP exchanges per flow where the floor makes three, and
//! nothing else. No plan, no state, no database, no retry.
//!
//! It runs on a runtime and threads of its own, as a separate server
//! process would, so that it competes for the machine's cores as Tartan
//! does.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Json;
use serde_json::{json, Value};
use tokio::sync::watch;

/// The relay's worker threads: as many as a `tartan serve` has on this
/// machine (tokio's default, one per core).
fn workers() -> usize {
    std::thread::available_parallelism().map_or(2, usize::from)
}

struct Relay {
    client: reqwest::Client,
    /// The step server, and the chain's step ids in order.
    steps: SocketAddr,
    keys: Vec<String>,
    /// Each flow not yet asked about: its chain's end, once it ended
    /// (`true`: every call answered 200).
    flows: Mutex<HashMap<String, watch::Receiver<Option<bool>>>>,
}

/// Start a relay for the chain `keys` on the step server `steps`; its
/// address. It lives as long as the process.
pub fn start(steps: SocketAddr, keys: Vec<String>, clients: usize) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers())
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("the relay's runtime: {e}"));
        runtime.block_on(async move {
            let client = reqwest::Client::builder()
                .pool_max_idle_per_host(clients * 2)
                .build()
                .unwrap_or_else(|e| panic!("the relay's client: {e}"));
            let relay = Arc::new(Relay {
                client,
                steps,
                keys,
                flows: Mutex::new(HashMap::new()),
            });
            let app = axum::Router::new()
                .route("/engine/flow", post(start_flow))
                .route("/engine/flow/{id}/status", get(status))
                .with_state(relay);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .unwrap_or_else(|e| panic!("the relay's bind: {e}"));
            let addr = listener
                .local_addr()
                .unwrap_or_else(|e| panic!("the relay's address: {e}"));
            let _ = tx.send(addr);
            let _ = axum::serve(listener, app).await;
        });
    });
    rx.recv()
        .unwrap_or_else(|e| panic!("the relay did not start: {e}"))
}

async fn start_flow(State(relay): State<Arc<Relay>>, Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    let Some(id) = body["id"].as_str().map(str::to_string) else {
        return (StatusCode::BAD_REQUEST, Json(json!({ "error": "no id" })));
    };
    let (done, watching) = watch::channel(None);
    relay
        .flows
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id.clone(), watching);
    // The chain's first input: the start's `init`, one value per key.
    let mut input = json!({});
    if let Some(init) = body["init"].as_object() {
        for (key, values) in init {
            input[key] = values.get(0).cloned().unwrap_or(Value::Null);
        }
    }
    let relay = Arc::clone(&relay);
    tokio::spawn(async move {
        let ended = call_chain(&relay.client, relay.steps, &relay.keys, input).await;
        if let Err(e) = &ended {
            eprintln!("relay: {e}");
        }
        let _ = done.send(Some(ended.is_ok()));
    });
    (StatusCode::CREATED, Json(json!({ "flow_id": id })))
}

async fn status(State(relay): State<Arc<Relay>>, Path(id): Path<String>) -> (StatusCode, Json<Value>) {
    let watching = relay.flows.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
    let Some(mut watching) = watching else {
        return (StatusCode::NOT_FOUND, Json(json!({ "error": "no such flow" })));
    };
    // A chain whose task went away without an end failed.
    let completed = matches!(
        watching.wait_for(Option::is_some).await.as_deref(),
        Ok(Some(true))
    );
    let status = if completed { "completed" } else { "failed" };
    (StatusCode::OK, Json(json!({ "status": status })))
}

/// The chain's calls made by a client itself, each step's output the next
/// one's input, as the floor's clients and the relay make them.
pub async fn call_chain(
    client: &reqwest::Client,
    steps: SocketAddr,
    keys: &[String],
    mut input: Value,
) -> Result<(), String> {
    for key in keys {
        let url = format!("http://{steps}/{key}");
        let r = client
            .post(&url)
            .json(&input)
            .send()
            .await
            .map_err(|e| format!("POST {url}: {e}"))?;
        let status = r.status().as_u16();
        input = r.json().await.unwrap_or(Value::Null);
        if status != 200 {
            return Err(format!("step {key}: {status} {input}"));
        }
    }
    Ok(())
}
