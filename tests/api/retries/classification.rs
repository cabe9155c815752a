//! Outcome classification end to end (docs/retries.md, "Classification",
//! and docs/api.md, "Async steps and webhooks"): every case of the
//! conformance file `classification.json`, a response, a transport failure
//! or a webhook, through the real server, the real engine and real step
//! endpoints on 127.0.0.1. The cases run concurrently, each with its own
//! step, endpoint and flow, so the test lasts as long as its slowest case,
//! not as long as their sum.
//!
//! Every check of a case is collected, so that a failure names all the cases
//! that differ and how, not only the first. Run with `--nocapture` to see a
//! line per case.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::join_all;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::support::{check_calls, conclude, events_of, only_work, reply, Api, FLOW_BOUND};
use crate::helpers::{spawn_app, Backend, StepServer};
use tartan_testkit::both_backends;

const CLASSIFICATION: &str = include_str!("../../../crates/tartan-core/tests/data/classification.json");

/// Cases known to fail because of an engine bug, each reported precisely.
/// Their checks still run and are printed; they do not fail the test, and
/// the test fails once they pass, so that they are taken off the list.
/// None today.
const KNOWN_CLASSIFICATION_FAILURES: &[&str] = &[];

both_backends!(every_classification_case_is_classified_end_to_end);

// ---------------------------------------------------------------------------
// classification.json

/// What a raw TCP endpoint does with each connection.
#[derive(Debug, Clone, Copy)]
enum RawMode {
    /// Closes as soon as the request arrived, unread: the kernel answers
    /// with a reset, before any status line.
    Reset,
    /// Reads the request and never answers.
    Silent,
    /// Answers the status line, headers and the start of a 100-byte body,
    /// then nothing more.
    PartialBody,
}

/// A raw endpoint: connections accepted, and those the client closed (after
/// an attempt timeout the engine must close its connection).
struct RawServer {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    closed_by_client: Arc<AtomicUsize>,
}

async fn raw_server(mode: RawMode) -> RawServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let closed_by_client = Arc::new(AtomicUsize::new(0));
    let (acc, closed) = (accepted.clone(), closed_by_client.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            acc.fetch_add(1, Ordering::SeqCst);
            let closed = closed.clone();
            tokio::spawn(serve_raw(stream, mode, closed));
        }
    });
    RawServer {
        addr,
        accepted,
        closed_by_client,
    }
}

async fn serve_raw(mut stream: TcpStream, mode: RawMode, closed: Arc<AtomicUsize>) {
    if let RawMode::Reset = mode {
        let _ = stream.readable().await;
        drop(stream);
        return;
    }
    // Read the request head and its body (the engine sends a small JSON body).
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&request);
        if let Some(head_end) = text.find("\r\n\r\n") {
            let length = text[..head_end]
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if request.len() >= head_end + 4 + length {
                break;
            }
        }
    }
    if let RawMode::PartialBody = mode {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"a\":";
        if stream.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        let _ = stream.flush().await;
    }
    // Hold the connection (bounded) until the client closes it.
    let held = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    if held.is_ok() {
        closed.fetch_add(1, Ordering::SeqCst);
    }
}

/// An async step endpoint that accepts each call (202) and then delivers the
/// case's webhook itself, as a real async service would; it records the
/// webhook's answers.
async fn webhook_server(content_type: String, body: String) -> (StepServer, Arc<Mutex<Vec<u16>>>) {
    let answers: Arc<Mutex<Vec<u16>>> = Arc::default();
    let recorded = answers.clone();
    let client = reqwest::Client::new();
    let svc = StepServer::start_async(move |r, _| {
        let url = r
            .headers
            .get("argyll-webhook-url")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let (client, ct, body, recorded) = (
            client.clone(),
            content_type.clone(),
            body.clone(),
            recorded.clone(),
        );
        Box::pin(async move {
            if let Some(url) = url {
                tokio::spawn(async move {
                    let status = match client
                        .post(url)
                        .header("content-type", ct)
                        .body(body)
                        .send()
                        .await
                    {
                        Ok(resp) => resp.status().as_u16(),
                        Err(_) => 0,
                    };
                    recorded.lock().unwrap_or_else(|p| p.into_inner()).push(status);
                });
            }
            reply(202, None, "", &[])
        })
    })
    .await;
    (svc, answers)
}

/// Run one classification case end to end.
async fn run_classification_case(api: &Api, case: &Value) -> Result<String, String> {
    let id = case["id"].as_str().unwrap().to_string();
    let step_id = id.to_lowercase();
    let flow_id = format!("flow_{step_id}");
    let response = &case["response"];
    let class = case["class"].as_str().unwrap();
    let mut problems = Vec::new();

    let mut work_config = json!({"max_retries": 1, "init_backoff": 10, "backoff_type": "fixed"});
    if let Some(on) = response.get("retry_on") {
        work_config["retry_on"] = on.clone();
    }
    let mut attributes = Map::new();
    if let Some(outputs) = case["outputs"].as_object() {
        for key in outputs.keys() {
            attributes.insert(key.clone(), json!({"role": "output", "type": "any"}));
        }
    }
    let mut step = json!({
        "id": step_id, "name": id, "type": "sync",
        "attributes": attributes, "work_config": work_config,
    });

    // The endpoint the case describes.
    let mut svc: Option<StepServer> = None;
    let mut raw: Option<RawServer> = None;
    let mut webhook_answers: Option<Arc<Mutex<Vec<u16>>>> = None;
    let endpoint = if let Some(status) = response["status"].as_u64() {
        let status = u16::try_from(status).unwrap();
        let content_type = response["content_type"].as_str().map(str::to_string);
        let body = response["body"].as_str().unwrap_or("").to_string();
        let headers: Vec<(String, String)> = response["headers"]
            .as_object()
            .map(|h| {
                h.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let server =
            StepServer::start(move |_, _| reply(status, content_type.as_deref(), &body, &headers)).await;
        let url = server.url(&format!("/{step_id}"));
        svc = Some(server);
        url
    } else if let Some(transport) = response["transport"].as_str() {
        if transport.contains("refused") {
            // A port that was just free: nothing listens there.
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            drop(listener);
            format!("http://{addr}/{step_id}")
        } else {
            let mode = if transport.contains("reset") {
                RawMode::Reset
            } else if transport.contains("body") {
                RawMode::PartialBody
            } else {
                RawMode::Silent
            };
            if !matches!(mode, RawMode::Reset) {
                step["http"] = json!({"timeout": 200});
            }
            let server = raw_server(mode).await;
            let url = format!("http://{}/{step_id}", server.addr);
            raw = Some(server);
            url
        }
    } else if let Some(content_type) = response["webhook"].as_str() {
        step["type"] = json!("async");
        let body = response["body"].as_str().unwrap_or("").to_string();
        let (server, answers) = webhook_server(content_type.to_string(), body).await;
        let url = server.url(&format!("/{step_id}"));
        svc = Some(server);
        webhook_answers = Some(answers);
        url
    } else {
        return Ok("nothing to run end to end".into());
    };
    let timeout = step["http"]["timeout"].clone();
    step["http"] = json!({"endpoint": endpoint});
    if !timeout.is_null() {
        step["http"]["timeout"] = timeout;
    }

    let (status, body) = api.post("/engine/step", &step).await;
    if status != 201 {
        return Err(format!("registration {status}: {body}"));
    }
    let (status, body) = api
        .post("/engine/flow", &json!({"id": flow_id, "goals": [step_id]}))
        .await;
    if status != 201 {
        return Err(format!("flow start {status}: {body}"));
    }

    if class == "rejected" {
        // K32: the webhook is refused with a 400; the work item is unchanged.
        let answers = webhook_answers.unwrap_or_default();
        let until = Instant::now() + FLOW_BOUND;
        let answered = loop {
            let seen = answers.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if !seen.is_empty() || Instant::now() > until {
                break seen;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        if answered != [400] {
            problems.push(format!("the webhook was answered {answered:?}, expected [400]"));
        }
        let flow = api.flow(&flow_id).await;
        if let Some((_, work)) = only_work(&flow, &step_id, &mut problems) {
            let attempts = work["attempts"].as_array().cloned().unwrap_or_default();
            if work["status"] != "active" || attempts.len() != 1 || !attempts[0]["outcome"].is_null() {
                problems.push(format!("the work item changed: {work}"));
            }
        }
        if flow["status"] != "active" {
            problems.push(format!("flow {}, expected still active", flow["status"]));
        }
        return if problems.is_empty() {
            Ok("webhook refused with 400, work item unchanged".into())
        } else {
            Err(problems.join("; "))
        };
    }

    let Some(flow) = api.wait_for_flow(&flow_id).await else {
        return Err(format!("flow did not finish within {FLOW_BOUND:?}"));
    };
    let events = api.events(&flow_id).await;
    let attempts_expected: u64 = if class == "retryable" { 2 } else { 1 };
    if let Some(server) = &svc {
        let calls = server.requests().len() as u64;
        if calls != attempts_expected {
            problems.push(format!(
                "the step server saw {calls} calls, expected {attempts_expected}"
            ));
        }
        check_calls(server, &mut problems);
    }
    if let Some(server) = &raw {
        let accepted = server.accepted.load(Ordering::SeqCst) as u64;
        if accepted != attempts_expected {
            problems.push(format!(
                "the endpoint accepted {accepted} connections, expected {attempts_expected}"
            ));
        }
        if step["http"]["timeout"].is_number() {
            // The engine closed each timed-out connection (bounded: 10 s).
            let until = Instant::now() + Duration::from_secs(15);
            while (server.closed_by_client.load(Ordering::SeqCst) as u64) < accepted && Instant::now() < until
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let closed = server.closed_by_client.load(Ordering::SeqCst) as u64;
            if closed != accepted {
                problems.push(format!(
                    "{closed} of {accepted} timed-out connections were closed by the engine"
                ));
            }
        }
    }

    let exec = &flow["executions"][&step_id];
    if let Some((_, work)) = only_work(&flow, &step_id, &mut problems) {
        let attempts = work["attempts"].as_array().cloned().unwrap_or_default();
        if attempts.len() as u64 != attempts_expected {
            problems.push(format!(
                "{} attempts recorded, expected {attempts_expected}",
                attempts.len()
            ));
        }
        let wanted_status = response["status"]
            .as_u64()
            .filter(|_| response.get("webhook").is_none());
        for (i, a) in attempts.iter().enumerate() {
            if a["outcome"] != class {
                problems.push(format!(
                    "attempt {}: outcome {}, expected {class}",
                    i + 1,
                    a["outcome"]
                ));
            }
            if response.get("webhook").is_none() && a["http_status"].as_u64() != wanted_status {
                problems.push(format!(
                    "attempt {}: http_status {}, expected {wanted_status:?}",
                    i + 1,
                    a["http_status"]
                ));
            }
            if class != "success" {
                let error = a["error"].as_str().unwrap_or("");
                if error.is_empty() {
                    problems.push(format!("attempt {}: no error recorded", i + 1));
                }
                if let Some(wanted) = case["error_contains"].as_str() {
                    if !error.contains(wanted) {
                        problems.push(format!("attempt {}: error {error:?} lacks {wanted:?}", i + 1));
                    }
                }
                // Transport errors keep their cause; timeouts say so.
                let lower = error.to_lowercase();
                let transport = response["transport"].as_str().unwrap_or("");
                if transport.contains("refused") && !lower.contains("refused") {
                    problems.push(format!(
                        "attempt {}: error {error:?} does not name the refusal",
                        i + 1
                    ));
                }
                if let Some(outcome) = case["outcome"].as_str() {
                    if !lower.contains(&outcome.replace('_', " ")) {
                        problems.push(format!(
                            "attempt {}: error {error:?} does not name {outcome}",
                            i + 1
                        ));
                    }
                }
            }
            if let Some(wanted) = case.get("retry_after_ms") {
                if a["retry_after_ms"] != *wanted {
                    problems.push(format!(
                        "attempt {}: retry_after_ms {}, expected {wanted}",
                        i + 1,
                        a["retry_after_ms"]
                    ));
                }
            }
        }
        if class == "retryable" {
            // The retry waited the policy's 10 ms, or the Retry-After floor.
            let floor = case["retry_after_ms"].as_u64().unwrap_or(0);
            let wanted = floor.max(10);
            let delay = &attempts.first().cloned().unwrap_or_default()["delay"];
            if delay["delay_ms"].as_u64() != Some(wanted) {
                problems.push(format!("the retry waited {delay}, expected {wanted} ms"));
            }
        }
        let work_failed = events_of(&events, "work_failed");
        match class {
            "success" => {
                if flow["status"] != "completed" || exec["status"] != "completed" {
                    problems.push(format!(
                        "flow {}, step {}, expected completed",
                        flow["status"], exec["status"]
                    ));
                }
                let outputs = case["outputs"].clone();
                if exec["outputs"] != outputs {
                    problems.push(format!("outputs {}, expected {outputs}", exec["outputs"]));
                }
                for (key, value) in outputs.as_object().cloned().unwrap_or_default() {
                    if flow["attributes"][&key][0]["value"] != value {
                        problems.push(format!(
                            "attribute {key} is {}, expected {value}",
                            flow["attributes"][&key]
                        ));
                    }
                }
            }
            _ => {
                if flow["status"] != "failed" || exec["status"] != "failed" {
                    problems.push(format!(
                        "flow {}, step {}, expected failed",
                        flow["status"], exec["status"]
                    ));
                }
                let wanted = if class == "retryable" {
                    "max_attempts"
                } else {
                    "permanent"
                };
                let state = work_failed.first().map(|e| e["data"]["retry_state"].clone());
                if work_failed.len() != 1 || state != Some(json!(wanted)) {
                    problems.push(format!(
                        "{} work_failed events with retry_state {state:?}, expected one with {wanted}",
                        work_failed.len()
                    ));
                }
            }
        }
    }
    if let Some(answers) = &webhook_answers {
        let seen = answers.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if seen.len() as u64 != attempts_expected || seen.iter().any(|s| *s != 200) {
            problems.push(format!("webhooks answered {seen:?}, expected 200 per attempt"));
        }
    }

    if problems.is_empty() {
        let error = &exec["work_items"]
            .as_object()
            .and_then(|w| w.values().next())
            .map(|w| w["error"].clone())
            .unwrap_or_default();
        Ok(format!(
            "{class} in {attempts_expected} attempt(s), error {error}"
        ))
    } else {
        Err(problems.join("; "))
    }
}

async fn every_classification_case_is_classified_end_to_end(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let api = Api::of(&app);
    let started = Instant::now();
    let doc: Value = serde_json::from_str(CLASSIFICATION).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 32, "expected the full conformance file");
    let results = join_all(cases.iter().map(|case| {
        let api = api.clone();
        async move {
            let id = case["id"].as_str().unwrap().to_string();
            let result = run_classification_case(&api, case).await;
            (id, result)
        }
    }))
    .await;
    conclude(results, KNOWN_CLASSIFICATION_FAILURES, started);
}
