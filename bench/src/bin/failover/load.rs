//! The load as its client sees it: flow starts tried again through an
//! outage, the write probe, what the engines answered, and the reads that
//! go to any engine that answers.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{lock, REQUEST_TIMEOUT};

/// A start that gave up: tried for this long without an acknowledgement.
const START_GIVE_UP: Duration = Duration::from_secs(60);
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// What a start is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A load flow: `fo-sync`, `fo-async`, `fo-each`.
    Load,
    /// A load flow labelled `fo: bulk` whose goal `fo-once` fails it once:
    /// a bulk retry job must run it again for it to complete.
    Bulk,
    /// The write probe.
    Probe,
}

impl Kind {
    /// A flow of the load (bulk ones included), not a probe.
    pub fn is_load(self) -> bool {
        matches!(self, Kind::Load | Kind::Bulk)
    }
}

/// One flow start, as the client saw it.
pub struct Start {
    pub id: String,
    pub kind: Kind,
    /// Milliseconds from the load's start: first sent, acknowledged.
    pub sent_ms: u64,
    pub acked_ms: Option<u64>,
    pub tries: u32,
    /// Acknowledged through a `409` and a read of the flow, not a `201`.
    pub via_conflict: bool,
    /// A refusal that is no outage (400, 404, ...), with its body.
    pub refused: Option<String>,
}

/// Answers to start requests, by status (0: no answer).
#[derive(Default)]
pub struct Answers(Mutex<BTreeMap<u16, u64>>);

impl Answers {
    pub fn note(&self, status: u16) {
        *lock(&self.0).entry(status).or_default() += 1;
    }
    pub fn describe(&self) -> String {
        lock(&self.0)
            .iter()
            .map(|(s, n)| match s {
                0 => format!("no answer x{n}"),
                s => format!("{s} x{n}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The load's client: the engines, when the load began, and the answers
/// to its starts.
pub struct Load {
    pub client: reqwest::Client,
    pub engines: Vec<String>,
    pub started: Instant,
    pub answers: Answers,
}

impl Load {
    pub fn ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Start one flow, trying again on an outage with the same id and body.
    pub async fn start(&self, id: String, kind: Kind, body: Value, first_engine: usize) -> Start {
        let sent_ms = self.ms();
        let give_up = Instant::now() + START_GIVE_UP;
        let mut start = Start {
            id,
            kind,
            sent_ms,
            acked_ms: None,
            tries: 0,
            via_conflict: false,
            refused: None,
        };
        loop {
            let engine = &self.engines[(first_engine + start.tries as usize) % self.engines.len()];
            start.tries += 1;
            let (status, sent) = self
                .post_noted(engine, "/engine/flow", &body, &self.answers)
                .await;
            match status {
                201 => {
                    start.acked_ms = Some(self.ms());
                    return start;
                }
                409 if self.exists(engine, &start.id).await => {
                    start.acked_ms = Some(self.ms());
                    start.via_conflict = true;
                    return start;
                }
                0 | 409 | 500..=599 => {}
                _ => {
                    let text = match sent {
                        Ok(r) => r.text().await.unwrap_or_default(),
                        Err(e) => e.to_string(),
                    };
                    start.refused = Some(format!("{status}: {text}"));
                    return start;
                }
            }
            if Instant::now() > give_up {
                return start;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// POST `body` to `path` on `engine` once (bounded by
    /// [`REQUEST_TIMEOUT`]), its status noted in `answers`: the status (0:
    /// no answer) and what came back.
    pub async fn post_noted(
        &self,
        engine: &str,
        path: &str,
        body: &Value,
        answers: &Answers,
    ) -> (u16, reqwest::Result<reqwest::Response>) {
        let (status, sent) = self.post(engine, path, body).await;
        answers.note(status);
        (status, sent)
    }

    /// POST `body` to `path` on `engine` once: the status (0: no answer)
    /// and what came back.
    async fn post(
        &self,
        engine: &str,
        path: &str,
        body: &Value,
    ) -> (u16, reqwest::Result<reqwest::Response>) {
        let sent = self
            .client
            .post(format!("{engine}{path}"))
            .json(body)
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await;
        let status = sent.as_ref().map(|r| r.status().as_u16()).unwrap_or(0);
        (status, sent)
    }

    /// One try, no retry: the write probe.
    pub async fn probe(&self, id: String, body: Value, engine: usize) -> Start {
        let sent_ms = self.ms();
        let engine = &self.engines[engine % self.engines.len()];
        let status = self
            .client
            .post(format!("{engine}/engine/flow"))
            .json(&body)
            .timeout(PROBE_TIMEOUT)
            .send()
            .await
            .map(|r| r.status().as_u16())
            .unwrap_or(0);
        let acked_ms = (status == 201).then(|| self.ms());
        Start {
            id,
            kind: Kind::Probe,
            sent_ms,
            acked_ms,
            tries: 1,
            via_conflict: false,
            refused: None,
        }
    }

    async fn exists(&self, engine: &str, id: &str) -> bool {
        matches!(
            self.get(engine, &format!("/engine/flow/{id}/status")).await,
            Ok((200, _))
        )
    }

    async fn get(&self, engine: &str, path: &str) -> Result<(u16, Value), reqwest::Error> {
        let r = self
            .client
            .get(format!("{engine}{path}"))
            .timeout(Duration::from_secs(70))
            .send()
            .await?;
        let status = r.status().as_u16();
        let body = r.json::<Value>().await.unwrap_or(Value::Null);
        Ok((status, body))
    }

    /// POST `body` on any engine that answers, trying the others on an
    /// outage (`5xx` or no answer), for up to a minute.
    pub async fn post_any(&self, path: &str, body: &Value, n: usize) -> Option<(u16, Value)> {
        let give_up = Instant::now() + Duration::from_secs(60);
        let mut i = n;
        loop {
            let engine = &self.engines[i % self.engines.len()];
            i += 1;
            if let (status @ 1..=499, Ok(r)) = self.post(engine, path, body).await {
                return Some((status, r.json::<Value>().await.unwrap_or(Value::Null)));
            }
            if Instant::now() > give_up {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// GET on any engine that answers, trying the others on an outage, for
    /// up to a minute.
    pub async fn get_any(&self, path: &str, n: usize) -> Option<(u16, Value)> {
        let give_up = Instant::now() + Duration::from_secs(60);
        let mut i = n;
        loop {
            let engine = &self.engines[i % self.engines.len()];
            i += 1;
            match self.get(engine, path).await {
                Ok((status, body)) if status < 500 => return Some((status, body)),
                _ if Instant::now() > give_up => return None,
                _ => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }
}
