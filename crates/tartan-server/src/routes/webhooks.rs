//! `POST /webhook/{flow}/{step}/{token}/{signature}`: an async step's result.
//! 200 with an empty body, also for duplicates and late deliveries of the
//! current attempt (recorded, no state change); 403 when the signature is not
//! the one the engine handed out (docs/security.md); 400 for an unknown flow,
//! step or token or a non-object body; 409 when no accepted call of that
//! attempt waits for it (docs/api.md, "Async steps and webhooks"); 413 for a
//! body over `TARTAN_MAX_RESPONSE_BYTES`, which also fails the attempt for
//! good, as an over-long response of a sync step does (docs/errors.md).

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use futures::StreamExt;
use serde_json::Value;
use tartan_engine::metrics::{WebhookKind, WebhookOutcome};
use tartan_engine::{Engine, WebhookError, WebhookRefusal, WebhookResult};

use crate::error::{kind, ApiError, Problem};
use crate::extract::{body_timeout, parse_json, BodyDeadline, Path};
use crate::security::is_media_type;

/// An async step's result: a JSON object of outputs, or a problem.
///
/// Posted by an async step to the exact `Argyll-Webhook-URL` its call was
/// given, once it accepted the call with a `2xx`: a JSON object of outputs
/// succeeds the attempt, `application/problem+json` fails it. Duplicates
/// and late results for the current attempt get `200` and change nothing.
/// No bearer token: the URL's signature is the credential, checked before
/// anything is looked up. The body is bounded by
/// `TARTAN_MAX_RESPONSE_BYTES` (8 MiB by default).
#[utoipa::path(post, path = "/webhook/{flow}/{step}/{token}/{signature}", tag = "webhooks", operation_id = "deliverWebhook", security(()),
    params(
        ("flow" = String, Path, description = "Flow id"),
        ("step" = String, Path, description = "Step id"),
        ("token" = String, Path, description = "The work item's receipt token"),
        ("signature" = String, Path, description = "The signature the engine handed out: `{attempt}.{mac}`"),
    ),
    request_body(content = Object, description = "The step's outputs; a failure as `application/problem+json`", content_type = "application/json",
        example = json!({"greeting": "Hello, Ada!"})),
    responses(
        (status = 200, description = "Recorded (duplicates and late results too); empty body"),
        (status = 400, description = "Unknown flow, step or token, or a body that is not a JSON object", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The signature is not the one handed out", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "No accepted call of that attempt waits for a result", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over the response limit; the attempt fails for good", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn deliver(
    State(engine): State<Engine>,
    Path((flow, step, token, signature)): Path<(String, String, String, String)>,
    req: Request,
) -> Result<StatusCode, ApiError> {
    let answer = deliver_to(&engine, &flow, &step, &token, &signature, req).await;
    counted(&engine, WebhookKind::Result, answer)
}

/// Count a webhook's answer (docs/operating.md, "Metrics") and give it back.
fn counted(
    engine: &Engine,
    kind: WebhookKind,
    answer: Result<StatusCode, ApiError>,
) -> Result<StatusCode, ApiError> {
    let status = match &answer {
        Ok(status) => *status,
        Err(e) => e.status,
    };
    engine
        .metrics()
        .webhook(kind, WebhookOutcome::of_status(status.as_u16()));
    answer
}

async fn deliver_to(
    engine: &Engine,
    flow: &str,
    step: &str,
    token: &str,
    signature: &str,
    req: Request,
) -> Result<StatusCode, ApiError> {
    let attempt = check_signature(engine, flow, step, token, signature)?;
    let is_problem = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| is_media_type(ct, "application/problem+json"));
    let limit = engine.config().max_response_bytes;
    // Over the limit: the attempt fails with what the step was told, and
    // the step hears 413.
    let (result, over) = match read_bounded(req, limit).await? {
        None => {
            let error = format!(
                "webhook body exceeds the limit of {limit} bytes; the limit is TARTAN_MAX_RESPONSE_BYTES"
            );
            let result = WebhookResult::Problem {
                status: None,
                error: error.clone(),
            };
            (result, Some(error))
        }
        Some(bytes) => (webhook_result(&bytes, is_problem)?, None),
    };
    taken(
        engine
            .flows()
            .deliver_webhook(flow, step, token, attempt, result)
            .await,
        flow,
        step,
        token,
    )?;
    match over {
        Some(error) => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            kind::TOO_LARGE,
            error,
        )),
        None => Ok(StatusCode::OK),
    }
}

/// What a webhook's body says: the step's outputs, or the problem it
/// reports (`application/problem+json`).
fn webhook_result(bytes: &[u8], is_problem: bool) -> Result<WebhookResult, ApiError> {
    let body: Value = parse_json(bytes)?;
    let Value::Object(obj) = body else {
        return Err(ApiError::bad_request("body: must be a JSON object"));
    };
    Ok(if is_problem {
        let status = obj
            .get("status")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok());
        let error = ["detail", "title"]
            .iter()
            .find_map(|k| obj.get(*k).and_then(Value::as_str).filter(|s| !s.is_empty()))
            .map(str::to_string)
            .unwrap_or_else(|| "step reported a problem".into());
        WebhookResult::Problem { status, error }
    } else {
        WebhookResult::Outputs(obj)
    })
}

/// The body with a running count: `None` once it is longer than `limit`
/// (announced by Content-Length or found while reading; the rest is not
/// read); a 408 when it is not all there by the request's `BodyDeadline`.
async fn read_bounded(req: Request, limit: usize) -> Result<Option<Vec<u8>>, ApiError> {
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|n| usize::try_from(n).map_or(true, |n| n > limit)) {
        return Ok(None);
    }
    let deadline = req.extensions().get::<BodyDeadline>().copied();
    let read = async {
        let mut body = Vec::new();
        let mut stream = req.into_body().into_data_stream();
        while let Some(chunk) = stream.next().await {
            let chunk =
                chunk.map_err(|e| ApiError::bad_request(format!("request body could not be read: {e}")))?;
            if chunk.len() > limit - body.len() {
                return Ok(None);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Some(body))
    };
    // A step service trickling its result holds a connection and a task
    // no longer than any other client's body may (TARTAN_BODY_TIMEOUT).
    match deadline {
        Some(BodyDeadline(at)) => tokio::time::timeout_at(at, read)
            .await
            .unwrap_or_else(|_| Err(body_timeout())),
        None => read.await,
    }
}

/// An async step is still working: its inactivity window starts again.
///
/// Posted by an async step that accepted its call, to its webhook URL and
/// `/heartbeat`; answers `200` with an empty body (for a step without an
/// inactivity timeout nothing changes). The body is ignored, but the
/// `Content-Type` must be JSON, as on every `POST`. No bearer token: the
/// URL's signature is the credential.
#[utoipa::path(post, path = "/webhook/{flow}/{step}/{token}/{signature}/heartbeat", tag = "webhooks", operation_id = "webhookHeartbeat", security(()),
    params(
        ("flow" = String, Path, description = "Flow id"),
        ("step" = String, Path, description = "Step id"),
        ("token" = String, Path, description = "The work item's receipt token"),
        ("signature" = String, Path, description = "The signature the engine handed out: `{attempt}.{mac}`"),
    ),
    responses(
        (status = 200, description = "The inactivity window starts again; empty body"),
        (status = 400, description = "Unknown flow, step or token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The signature is not the one handed out", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "No accepted call of that attempt is waiting", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn heartbeat(
    State(engine): State<Engine>,
    Path((flow, step, token, signature)): Path<(String, String, String, String)>,
) -> Result<StatusCode, ApiError> {
    let answer = async {
        let attempt = check_signature(&engine, &flow, &step, &token, &signature)?;
        taken(
            engine.flows().heartbeat(&flow, &step, &token, attempt).await,
            &flow,
            &step,
            &token,
        )?;
        Ok(StatusCode::OK)
    };
    let answer = answer.await;
    counted(&engine, WebhookKind::Heartbeat, answer)
}

/// Argyll's unsigned webhook URL: always refused.
///
/// A URL put together from flow state rather than the one the engine handed
/// out; it is answered `403`, so that nobody who can read a flow can post
/// its results. Post to the exact `Argyll-Webhook-URL` instead.
#[utoipa::path(post, path = "/webhook/{flow}/{step}/{token}", tag = "webhooks", operation_id = "refuseUnsignedWebhook", security(()),
    params(
        ("flow" = String, Path, description = "Flow id"),
        ("step" = String, Path, description = "Step id"),
        ("token" = String, Path, description = "The work item's receipt token"),
    ),
    responses((status = 403, description = "Always: a webhook URL must carry the signature the engine handed out", body = Problem, content_type = "application/problem+json")))]
pub(crate) async fn unsigned(State(engine): State<Engine>) -> Result<StatusCode, ApiError> {
    counted(&engine, WebhookKind::Result, Err(forbidden()))
}

/// The signature is checked before anything is looked up, so a forger
/// learns nothing, not even whether the flow exists. Gives the attempt the
/// URL was handed out for.
fn check_signature(
    engine: &Engine,
    flow: &str,
    step: &str,
    token: &str,
    signature: &str,
) -> Result<Option<u32>, ApiError> {
    engine
        .flows()
        .verify_webhook(flow, step, token, signature)
        .ok_or_else(forbidden)
}

fn forbidden() -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        kind::FORBIDDEN,
        "webhook URL not valid: use the exact URL given in the Argyll-Webhook-URL header",
    )
}

/// What the engine made of a webhook or heartbeat, as the API answers it.
fn taken(answer: Result<(), WebhookError>, flow: &str, step: &str, token: &str) -> Result<(), ApiError> {
    match answer {
        Ok(()) => Ok(()),
        Err(WebhookError::Refused(refusal)) => Err(refused(refusal, flow, step, token)),
        Err(WebhookError::Engine(e)) => Err(e.into()),
    }
}

fn refused(refusal: WebhookRefusal, flow: &str, step: &str, token: &str) -> ApiError {
    match refusal {
        WebhookRefusal::UnknownFlow => ApiError::bad_request(format!("unknown flow: {flow}")),
        WebhookRefusal::UnknownStep => ApiError::bad_request(format!("unknown step: {step}")),
        WebhookRefusal::UnknownToken => ApiError::bad_request(format!("unknown token: {token}")),
        WebhookRefusal::Synchronous => ApiError::conflict(format!(
            "step {step} is synchronous: its result is the response to its call, not a webhook"
        )),
        WebhookRefusal::NotAccepted { attempt } => ApiError::conflict(format!(
            "attempt {attempt} of work item {token} has not been accepted: an async step answers its call with 202 before its webhook counts"
        )),
        WebhookRefusal::OlderAttempt { given, current } => ApiError::conflict(format!(
            "this URL belongs to attempt {given} of work item {token}, which attempt {current} replaced; nothing changed"
        )),
        WebhookRefusal::NotWaiting { status } => ApiError::conflict(format!(
            "work item {token} is {status}: no call of it is waiting for a heartbeat"
        )),
    }
}
