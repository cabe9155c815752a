//! What the timeout tests share (docs/timeouts.md): raw step endpoints
//! that hang or trickle, the timeout problem's checks, and the requests
//! every test makes.
//!
//! Endpoints that hang or trickle are raw TCP servers, so that a test sees
//! exactly when the engine closed a connection: each connection records the
//! receipt token and attempt it carried, when its request arrived, when the
//! engine closed it (EOF) and how many connections of the same token were
//! open at its arrival.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::helpers::{Reply, TestApp};

pub(super) const TIMEOUT_TYPE: &str = "https://serverlessworkflow.io/spec/1.0.0/errors/timeout";

/// How late a timeout may fire, or a timestamp lag behind what it records.
pub(super) const SLACK_MS: i64 = 3000;

/// How long a bounded wait for an endpoint's calls or closes lasts.
pub(super) const WAIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// Raw step endpoints that hang.

/// How a raw endpoint misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Misbehaviour {
    /// Reads the request and never answers.
    HangBeforeHeaders,
    /// Answers the status line and the headers of a 100-byte body, then one
    /// byte every 50 ms (the body never completes within the test).
    TrickleBody,
}

/// One connection a raw endpoint accepted.
#[derive(Debug, Clone)]
pub(super) struct Conn {
    pub(super) token: String,
    pub(super) attempt: String,
    /// When its request had been read.
    pub(super) arrived: Instant,
    /// When the client closed it (EOF); `None` while open.
    pub(super) closed: Option<Instant>,
    /// The same, on the wall clock (the engine's deadlines are on it).
    pub(super) closed_at: Option<DateTime<Utc>>,
    /// Connections of the same receipt token open at its arrival, itself included.
    pub(super) open_for_token: usize,
}

pub(crate) struct RawStep {
    addr: SocketAddr,
    conns: Arc<Mutex<Vec<Conn>>>,
}

impl RawStep {
    pub(crate) async fn start(mode: Misbehaviour) -> RawStep {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let conns: Arc<Mutex<Vec<Conn>>> = Arc::default();
        let shared = conns.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve_raw(stream, mode, shared.clone()));
            }
        });
        RawStep { addr, conns }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/step", self.addr)
    }

    pub(super) fn conns(&self) -> Vec<Conn> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Wait (bounded) until `n` requests have arrived.
    pub(crate) async fn wait_for_calls(&self, n: usize) {
        let until = Instant::now() + WAIT;
        while self.conns().len() < n {
            assert!(
                Instant::now() < until,
                "only {} of {n} calls arrived",
                self.conns().len()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Wait (bounded) until every connection was closed by the client.
    pub(crate) async fn wait_all_closed(&self) {
        let until = Instant::now() + WAIT;
        while self.conns().iter().any(|c| c.closed.is_none()) {
            assert!(
                Instant::now() < until,
                "the engine never closed a connection: {:?}",
                self.conns()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn serve_raw(stream: TcpStream, mode: Misbehaviour, conns: Arc<Mutex<Vec<Conn>>>) {
    let (mut rd, mut wr) = stream.into_split();
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    let head = loop {
        match rd.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&request).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let head = text[..end].to_string();
            let length = header_of(&head, "content-length")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if request.len() >= end + 4 + length {
                break head;
            }
        }
    };
    let token = header_of(&head, "argyll-receipt-token").unwrap_or_default();
    let index = {
        let mut all = conns.lock().unwrap_or_else(|p| p.into_inner());
        let open = all
            .iter()
            .filter(|c| c.token == token && c.closed.is_none())
            .count();
        all.push(Conn {
            token: token.clone(),
            attempt: header_of(&head, "tartan-attempt").unwrap_or_default(),
            arrived: Instant::now(),
            closed: None,
            closed_at: None,
            open_for_token: open + 1,
        });
        all.len() - 1
    };
    let answer = async move {
        if mode == Misbehaviour::TrickleBody {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{";
            if wr.write_all(head.as_bytes()).await.is_ok() {
                let _ = wr.flush().await;
                for _ in 0..98 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    if wr.write_all(b" ").await.is_err() || wr.flush().await.is_err() {
                        break;
                    }
                }
            }
        }
        // Keep the write half (and so the connection) open.
        std::future::pending::<()>().await;
        drop(wr);
    };
    let eof = async {
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::select! {
        _ = eof => {
            let mut all = conns.lock().unwrap_or_else(|p| p.into_inner());
            all[index].closed = Some(Instant::now());
            all[index].closed_at = Some(Utc::now());
        }
        _ = answer => {}
        _ = tokio::time::sleep(Duration::from_secs(20)) => {}
    }
}

fn header_of(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

// ---------------------------------------------------------------------------
// Helpers.

pub(super) fn at(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a time: {v}"))
}

/// `b - a` in ms.
pub(super) fn ms(a: &Value, b: &Value) -> i64 {
    (at(b) - at(a)).num_milliseconds()
}

/// The step's only work item: its token and state.
pub(super) fn only_work(flow: &Value, step: &str) -> (String, Value) {
    let items = flow["executions"][step]["work_items"]
        .as_object()
        .unwrap_or_else(|| panic!("no work items for {step}: {flow}"));
    assert_eq!(items.len(), 1, "{step}: {flow}");
    let (token, work) = items.iter().next().unwrap();
    (token.clone(), work.clone())
}

/// The timeout problem of docs/timeouts.md.
pub(super) fn assert_timeout_problem(problem: &Value, scope: &str, limit_ms: i64, instance: &str) {
    assert_eq!(problem["type"], TIMEOUT_TYPE, "{problem}");
    assert_eq!(problem["status"], 408, "{problem}");
    assert_eq!(problem["title"], "Timeout", "{problem}");
    assert_eq!(problem["timeout_scope"], scope, "{problem}");
    assert_eq!(problem["instance"], instance, "{problem}");
    let detail = problem["detail"].as_str().unwrap_or("");
    assert!(
        detail.contains(scope) && detail.contains(&format!("{limit_ms} ms")),
        "the detail names the scope and the duration: {problem}"
    );
    let elapsed = problem["elapsed_ms"]
        .as_i64()
        .unwrap_or_else(|| panic!("elapsed_ms: {problem}"));
    assert!(
        (limit_ms..limit_ms + SLACK_MS).contains(&elapsed),
        "elapsed_ms {elapsed} for a limit of {limit_ms} ms: {problem}"
    );
}

/// A problem+json answer with this status.
pub(super) fn assert_problem(reply: &Reply, status: u16) {
    assert_eq!(reply.status.as_u16(), status, "{:?}", reply.body);
    assert!(
        reply.content_type.starts_with("application/problem+json"),
        "{reply:?}"
    );
    assert_eq!(reply.body["status"], status, "{:?}", reply.body);
}

pub(super) async fn register(app: &TestApp, step: &Value) {
    let r = app.register(step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
}

pub(super) async fn start(app: &TestApp, body: Value) {
    let r = app.start_flow(&body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{body}: {:?}", r.body);
}

pub(super) async fn cancel(app: &TestApp, id: &str) -> Reply {
    app.send(Method::POST, &format!("/engine/flow/{id}/cancel"), None)
        .await
}
