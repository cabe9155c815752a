//! What a call tells a step beside its inputs (docs/api.md, "Calling a
//! step"), and the handle of an async step's webhook.

use std::time::Duration;

use axum::http::HeaderMap;
use serde::Serialize;
use serde_json::Value;

use crate::error::{StepError, PROBLEM_JSON};

/// The call's headers and path parameters: who is calling and for which
/// work item.
#[derive(Clone, Debug)]
pub struct Ctx {
    headers: HeaderMap,
    params: Vec<(String, String)>,
    webhook: Option<Webhook>,
}

impl Ctx {
    pub(crate) fn new(headers: HeaderMap, params: Vec<(String, String)>, webhook: Option<Webhook>) -> Ctx {
        Ctx {
            headers,
            params,
            webhook,
        }
    }

    /// A request header as text; `None` when absent or not visible ASCII.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Every header of the call.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// `Argyll-Flow-ID`: the flow this call is for.
    pub fn flow_id(&self) -> Option<&str> {
        self.header("argyll-flow-id")
    }

    /// `Argyll-Step-ID`: the step as the engine stores it.
    pub fn step_id(&self) -> Option<&str> {
        self.header("argyll-step-id")
    }

    /// `Argyll-Receipt-Token`: the work item. Every attempt of one item
    /// carries the same token, so a step keys what must happen once (a
    /// charge, a booking) by it.
    pub fn receipt_token(&self) -> Option<&str> {
        self.header("argyll-receipt-token")
    }

    /// `Tartan-Attempt`: 1 for the first call of the item, counting up on
    /// each retry. Argyll's engine does not send it.
    pub fn attempt(&self) -> Option<u32> {
        self.header("tartan-attempt").and_then(|v| v.parse().ok())
    }

    /// `traceparent`: the W3C trace context of the call, to continue the
    /// flow's trace.
    pub fn traceparent(&self) -> Option<&str> {
        self.header("traceparent")
    }

    /// A parameter of the step's path (`/users/{user_id}`), decoded.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The webhook of an async step's attempt (`Argyll-Webhook-URL`); `None`
    /// for a sync call.
    pub fn webhook(&self) -> Option<&Webhook> {
        self.webhook.as_ref()
    }

    /// Tell the engine an async step is still working: its inactivity
    /// window starts again (docs/timeouts.md, "Heartbeats").
    pub async fn heartbeat(&self) -> Result<(), WebhookError> {
        match &self.webhook {
            Some(webhook) => webhook.heartbeat().await,
            None => Err(WebhookError::NoWebhook),
        }
    }
}

/// Why a webhook or heartbeat did not reach the engine.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("the call has no Argyll-Webhook-URL: is the step registered async?")]
    NoWebhook,
    #[error("the outputs are not JSON: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("could not reach the engine: {0}")]
    Transport(#[from] reqwest::Error),
    /// The engine answered, and not with `200`: `409` when no accepted
    /// call of this attempt waits any more (it timed out, was retried or
    /// cancelled), `403` for a URL not handed out by the engine.
    #[error("the engine answered HTTP {status}: {detail}")]
    Refused { status: u16, detail: String },
}

/// How often a result is posted before it is given up: the engine answers
/// a repeat of a delivered result `200` and changes nothing, so trying
/// again after a lost answer is safe.
const DELIVERIES: u32 = 5;
const FIRST_PAUSE: Duration = Duration::from_millis(250);

/// An async step attempt's webhook: the URL exactly as the engine handed
/// it out (its signature binds the flow, step, token and attempt;
/// docs/security.md, "Webhooks"), never one built here.
#[derive(Clone)]
pub struct Webhook {
    url: String,
    client: reqwest::Client,
}

/// Without the signature: whoever reads a log must not be able to complete
/// the work item.
impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = self.url.rsplit_once('/').map_or("", |(start, _)| start);
        f.debug_struct("Webhook")
            .field("url", &format_args!("{shown}/…"))
            .finish()
    }
}

impl Webhook {
    pub(crate) fn new(url: String, client: reqwest::Client) -> Webhook {
        Webhook { url, client }
    }

    /// The signed URL. It completes this work item for whoever holds it:
    /// keep it out of logs.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `POST {url}/heartbeat`, once.
    pub async fn heartbeat(&self) -> Result<(), WebhookError> {
        let url = format!("{}/heartbeat", self.url);
        let response = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body("{}")
            .send()
            .await?;
        refused(response).await
    }

    /// Deliver the outputs: the attempt succeeds. Retried a few times over
    /// a few seconds while the engine cannot be reached or answers 5xx.
    pub async fn complete(&self, outputs: &impl Serialize) -> Result<(), WebhookError> {
        let body = serde_json::to_vec(outputs)?;
        self.deliver("application/json", body).await
    }

    /// Deliver a failure as problem+json: the engine retries the item when
    /// the problem's status is in the step's `retry_on` (so
    /// [`StepError::retryable`] is retried and [`StepError::permanent`] is
    /// not); `Retry-After` does not apply to webhooks.
    pub async fn fail(&self, error: &StepError) -> Result<(), WebhookError> {
        let body = serde_json::to_vec(&error.problem())?;
        self.deliver(PROBLEM_JSON, body).await
    }

    async fn deliver(&self, content_type: &'static str, body: Vec<u8>) -> Result<(), WebhookError> {
        let mut pause = FIRST_PAUSE;
        let mut tries = 1;
        loop {
            let sent = self
                .client
                .post(&self.url)
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(body.clone())
                .send()
                .await;
            let result = match sent {
                Ok(response) => refused(response).await,
                Err(e) => Err(WebhookError::Transport(e)),
            };
            let again = match &result {
                Err(WebhookError::Transport(_)) => true,
                Err(WebhookError::Refused { status, .. }) => *status >= 500 || *status == 429,
                _ => false,
            };
            if !again || tries >= DELIVERIES {
                return result;
            }
            tracing::debug!(tries, "webhook delivery failed, trying again");
            tokio::time::sleep(pause).await;
            pause = pause.saturating_mul(2);
            tries += 1;
        }
    }
}

/// `Ok` for the engine's `200`, else what it said.
async fn refused(response: reqwest::Response) -> Result<(), WebhookError> {
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    Err(WebhookError::Refused {
        status: status.as_u16(),
        detail: detail(response).await,
    })
}

/// How much of a refusal is read: a problem is far smaller.
const ANSWER_READ: usize = 16 * 1024;

/// A problem's `detail`, else the start of the body: enough to say why,
/// and no more read from whatever the URL named.
pub(crate) async fn detail(response: reqwest::Response) -> String {
    let text = read_start(response, ANSWER_READ).await;
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v.get("detail").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| text.chars().take(200).collect())
}

/// The first `limit` bytes of a body (fewer when it ends or breaks off).
async fn read_start(mut response: reqwest::Response, limit: usize) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    bytes.truncate(limit);
    String::from_utf8_lossy(&bytes).into_owned()
}
