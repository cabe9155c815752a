//! One HTTP call of a work item (docs/api.md) and its classification.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;

use tartan_core::endpoint::Template;
use tartan_core::hosts::StepHosts;
use tartan_core::json::{json_len, JsonParts};
use tartan_core::machine::{AttemptResult, CallBody, CallMethod};
use tartan_core::outcome::{classify_response, classify_transport, declines_retry, FailureCause};

/// The header with which a step makes one failure permanent (`no`).
const TARTAN_RETRY: &str = "tartan-retry";
use tartan_core::retry::parse_retry_after;
use tartan_core::step::Args;

use crate::calls::budget::{ByteBudget, Held};
use crate::calls::outbound;
use crate::traces::{self, Tracer};

/// Everything needed to make one call.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// What to send, as the core built it.
    pub spec: tartan_core::machine::Call,
    /// An async step's signed webhook URL (`Argyll-Webhook-URL`).
    pub webhook_url: Option<String>,
    /// The flow's trace (docs/operating.md, "Traces"), under the decision
    /// that made the call.
    pub trace: Option<traces::FlowIds>,
    /// The caller's `tracestate`, kept with the flow, sent on.
    pub tracestate: Option<std::sync::Arc<str>>,
}

/// Fill the template's placeholders, each value encoded for where it
/// stands (`tartan_core::endpoint`), and check the host against the policy.
/// An error is the reason the call is refused; nothing was sent.
pub(crate) fn expand_endpoint(
    template: &str,
    inputs: &Args,
    hosts: &StepHosts,
) -> Result<reqwest::Url, String> {
    let url = Template::parse(template)
        .and_then(|t| t.expand(inputs))
        .map_err(|e| format!("endpoint refused: {e}"))?;
    if let Some(host) = url.host() {
        hosts.check_host(&host).map_err(|e| e.to_string())?;
    }
    Ok(url)
}

/// A failure no retry can mend: the call was refused before or during the
/// exchange by the rules on where steps may call.
fn refused(error: String) -> AttemptResult {
    AttemptResult::Failure {
        cause: FailureCause::Refused,
        error,
        retry_after_ms: None,
    }
}

/// What bounds one call besides its timeout, from the engine's settings.
#[derive(Clone, Copy)]
pub(crate) struct Limits<'a> {
    /// `TARTAN_MAX_RESPONSE_BYTES`.
    pub max_response_bytes: usize,
    /// `TARTAN_MAX_INFLIGHT_BYTES`, shared by every call's request and
    /// response bodies.
    pub budget: &'a ByteBudget,
    /// `TARTAN_MAX_RETRY_AFTER`, in milliseconds.
    pub max_retry_after_ms: u64,
    /// Bounds the call, dates `Retry-After` and measures the scope's time.
    pub clock: &'a crate::clock::Clock,
    /// What a script step's script may spend, and its place to run.
    pub scripts: &'a crate::calls::scripts::Scripts,
}

/// A response read in full, or the reason it was not.
enum Body {
    Read(Vec<u8>),
    /// Longer than the limit: announced by Content-Length (`Some`) or found
    /// while reading; the rest was never read.
    TooLarge(Option<u64>),
}

/// The failure of a response over `TARTAN_MAX_RESPONSE_BYTES`: permanent,
/// since the same step would send the same body again (docs/errors.md).
fn too_large(status: u16, limit: usize, announced: Option<u64>) -> AttemptResult {
    let size = match announced {
        Some(n) => format!("({n} bytes announced by Content-Length)"),
        None => "(cut off after the limit)".to_string(),
    };
    refused(format!(
        "response body of HTTP {status} exceeds the limit of {limit} bytes {size}; \
         the limit is TARTAN_MAX_RESPONSE_BYTES"
    ))
}

/// Read the body with a running count, stopping at `limit`: a step that
/// streams without end costs at most `limit` bytes of memory. The body's
/// bytes are taken from the process's budget first (`budget`): its
/// announced size, or `limit` until it is read. Dropping the response
/// closes its connection.
async fn read_bounded(
    mut resp: reqwest::Response,
    limit: usize,
    budget: &ByteBudget,
    held: &mut Option<Held>,
) -> Result<Body, reqwest::Error> {
    let announced = resp.content_length();
    if let Some(n) = announced.filter(|n| usize::try_from(*n).map_or(true, |n| n > limit)) {
        return Ok(Body::TooLarge(Some(n)));
    }
    let reserve = announced.and_then(|n| usize::try_from(n).ok()).unwrap_or(limit);
    *held = budget.take(reserve).await;
    // The chunks are kept as they came and joined once at the end: no
    // buffer doubling while the body grows towards the limit.
    let mut chunks = Vec::new();
    let mut total = 0usize;
    while let Some(chunk) = resp.chunk().await? {
        total = total.saturating_add(chunk.len());
        if total > limit {
            return Ok(Body::TooLarge(None));
        }
        chunks.push(chunk);
    }
    if let Some(held) = held {
        held.shrink_to(total);
    }
    let mut body = Vec::with_capacity(total);
    for chunk in &chunks {
        body.extend_from_slice(chunk);
    }
    Ok(Body::Read(body))
}

/// Make the call and classify its outcome, in a span of its own when the
/// engine has a tracer (docs/operating.md, "Traces"). With the outcome, the
/// share of the response budget its body holds: kept until the outcome is
/// recorded.
pub(crate) async fn perform(
    http: &reqwest::Client,
    hosts: &StepHosts,
    limits: Limits<'_>,
    tracer: Option<&Tracer>,
    call: &Call,
) -> (AttemptResult, Option<Held>) {
    let span = match (tracer, call.trace) {
        (Some(tracer), Some(flow)) => Some(traces::call_span(
            tracer,
            flow,
            &traces::CallAbout {
                flow_id: &call.spec.flow_id,
                step_id: &call.spec.step.id,
                token: &call.spec.token,
                attempt: call.spec.attempt,
                kind: call.spec.kind,
                method: call.spec.method.as_str(),
                template: &call.spec.endpoint,
            },
        )),
        _ => None,
    };
    let traceparent = traces::call_traceparent(call.trace, span.as_ref());
    let mut held = None;
    let result = exchange(http, hosts, limits, call, traceparent, &mut held).await;
    if let Some(mut span) = span {
        traces::end_call_span(&mut span, &result);
    }
    (result, held)
}

/// The exchange of `perform`. The whole exchange, body included, is
/// bounded by the attempt timeout; on expiry the request future is dropped,
/// which closes its connection. The body is bounded by
/// `limits.max_response_bytes`.
async fn exchange(
    http: &reqwest::Client,
    hosts: &StepHosts,
    limits: Limits<'_>,
    call: &Call,
    traceparent: String,
    held: &mut Option<Held>,
) -> AttemptResult {
    let spec = &call.spec;
    if spec.step.is_script() {
        return limits.scripts.run(&call.spec).await;
    }
    let url = match expand_endpoint(&spec.endpoint, &spec.placeholders, hosts) {
        Ok(url) => url,
        Err(e) => return refused(e),
    };
    let method = match spec.method {
        CallMethod::Get => reqwest::Method::GET,
        CallMethod::Post => reqwest::Method::POST,
        CallMethod::Put => reqwest::Method::PUT,
        CallMethod::Delete => reqwest::Method::DELETE,
    };
    let mut req = http
        .request(method, url)
        .header("Accept", "application/json")
        .header("Argyll-Flow-ID", &spec.flow_id)
        .header("Argyll-Step-ID", &spec.step.id)
        .header("Argyll-Receipt-Token", &spec.token)
        .header("Tartan-Attempt", spec.attempt.to_string())
        .header("traceparent", traceparent);
    if let Some(state) = &call.tracestate {
        req = req.header("tracestate", &**state);
    }
    if let Some(hook) = &call.webhook_url {
        req = req.header("Argyll-Webhook-URL", hook);
    }
    // The body's share of the bytes in flight is taken before the body is
    // built; the wait is not part of the attempt, which has not started
    // (docs/durability.md, "Bytes in flight").
    let size = match &spec.body {
        Some(CallBody::Inputs(inputs)) => match inputs.json_len() {
            Ok(size) => Some(size),
            Err(e) => return refused(format!("the inputs could not be encoded: {e}")),
        },
        Some(CallBody::Json(body)) => Some(usize::try_from(json_len(body)).unwrap_or(usize::MAX)),
        None => None,
    };
    let sending = match size {
        Some(size) => limits.budget.send(size).await,
        None => None,
    };
    let body = match &spec.body {
        Some(CallBody::Inputs(inputs)) => match inputs.to_json_parts() {
            Ok(parts) => Some(request_body(parts)),
            Err(e) => return refused(format!("the inputs could not be encoded: {e}")),
        },
        Some(CallBody::Json(body)) => match serde_json::to_vec(body) {
            Ok(body) => Some(reqwest::Body::from(body)),
            Err(e) => return refused(format!("the body could not be encoded: {e}")),
        },
        None => None,
    };
    if let Some(body) = body {
        req = req
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
    }
    let exchange = async {
        let resp = req.send().await;
        // The request's share goes back before the response takes its own:
        // a call never waits for bytes while holding some.
        drop(sending);
        let resp = resp?;
        let status = resp.status().as_u16();
        let header = |name| {
            resp.headers()
                .get(name)
                .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
                .map(str::to_string)
        };
        let content_type = header(reqwest::header::CONTENT_TYPE);
        let retry_after = header(reqwest::header::RETRY_AFTER);
        let no_retry = resp
            .headers()
            .get(TARTAN_RETRY)
            .and_then(|v| v.to_str().ok())
            .is_some_and(declines_retry);
        let body = read_bounded(resp, limits.max_response_bytes, limits.budget, held).await?;
        Ok::<_, reqwest::Error>((status, content_type, (retry_after, no_retry), body))
    };
    match limits
        .clock
        .timeout(Duration::from_millis(spec.bound.timeout_ms), exchange)
        .await
    {
        Ok(Ok((status, _, _, Body::TooLarge(announced)))) => {
            too_large(status, limits.max_response_bytes, announced)
        }
        Ok(Ok((status, content_type, (retry_after, no_retry), Body::Read(body)))) => {
            let mut result = classify_response(status, content_type.as_deref(), &body);
            if let AttemptResult::Failure {
                retry_after_ms,
                cause,
                ..
            } = &mut result
            {
                // The step said this failure is for good (docs/retries.md,
                // "A step's own classes").
                if let (true, FailureCause::Status(s)) = (no_retry, *cause) {
                    *cause = FailureCause::NoRetry(s);
                }
                // Any size or date is cut to the operator's cap; the step's
                // retry budget is applied where the retry is scheduled.
                *retry_after_ms = retry_after
                    .as_deref()
                    .and_then(|v| parse_retry_after(v, limits.clock.now()))
                    .map(|ms| ms.min(limits.max_retry_after_ms));
            }
            result
        }
        Ok(Err(e)) => match outbound::refusal(&e) {
            Some(reason) => refused(reason),
            None => classify_transport(transport_text(&e)),
        },
        Err(_) => AttemptResult::TimedOut {
            scope: spec.bound.scope,
            limit_ms: spec.bound.limit_ms,
            elapsed_ms: u64::try_from((limits.clock.now() - spec.bound.scope_start).num_milliseconds())
                .unwrap_or(0),
        },
    }
}

/// A body at most this long is sent as one buffer, copied from its
/// pieces: cheap at this size, and a body in one buffer can be sent again
/// when a 307 or 308 redirect asks for it.
const JOIN_AT_MOST: usize = 64 * 1024;

/// A longer body goes to the connection in pieces of at most this: the
/// client may copy what it is given into its write buffer, and a shared
/// input copied whole for each call in flight would undo the sharing.
const PIECE: usize = 64 * 1024;

/// The request body of `parts`: one buffer when small, else the pieces as
/// they are, the inputs a step's items share referred to, not copied.
fn request_body(parts: JsonParts) -> reqwest::Body {
    if parts.len() <= JOIN_AT_MOST {
        return reqwest::Body::from(parts.to_vec());
    }
    let left = parts.len() as u64;
    reqwest::Body::wrap(Pieces {
        pieces: parts.into_pieces().into(),
        left,
    })
}

/// A body sent in pieces, its length announced (`Content-Length`).
struct Pieces {
    pieces: std::collections::VecDeque<Bytes>,
    left: u64,
}

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        while let Some(front) = this.pieces.front_mut() {
            if front.is_empty() {
                this.pieces.pop_front();
                continue;
            }
            let piece = front.split_to(front.len().min(PIECE));
            this.left = this.left.saturating_sub(piece.len() as u64);
            return Poll::Ready(Some(Ok(http_body::Frame::data(piece))));
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.left)
    }
}

/// The cause chain of a transport error, e.g. "connection refused".
pub(crate) fn transport_text(e: &reqwest::Error) -> String {
    let mut text = if e.is_connect() {
        "connection failed".to_string()
    } else if e.is_body() || e.is_decode() {
        "response body cut off".to_string()
    } else {
        "request failed".to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn placeholders_are_encoded_and_the_host_checked() {
        let mut inputs = Args::new();
        inputs.insert("id".into(), Value::String("a b/c?d".into()));
        inputs.insert("n".into(), Value::from(7));
        inputs.insert("ip".into(), Value::String("2852039166".into()));
        let open = StepHosts::unrestricted();
        assert_eq!(
            expand_endpoint("http://x/items/{id}/{n}", &inputs, &open).map(String::from),
            Ok("http://x/items/a%20b%2Fc%3Fd/7".to_string())
        );
        let e = expand_endpoint("http://{ip}/", &inputs, &open).unwrap_err();
        assert!(e.starts_with("address 169.254.169.254 is not allowed"), "{e}");
        let e = expand_endpoint("http://x/{id", &inputs, &open).map(String::from);
        assert_eq!(e, Ok("http://x/%7Bid".to_string()));
        let e = expand_endpoint("http://x y/", &inputs, &open).unwrap_err();
        assert!(e.starts_with("endpoint refused: "), "{e}");
    }

    #[tokio::test]
    async fn a_large_body_goes_in_pieces_that_refer_to_the_shared_input() {
        use http_body::Body as _;
        let shared = Bytes::from(vec![b'x'; 200_000]);
        let mut body = Pieces {
            pieces: vec![Bytes::from_static(b"{"), shared.clone(), Bytes::from_static(b"}")].into(),
            left: 200_002,
        };
        assert_eq!(body.size_hint().exact(), Some(200_002));
        let mut whole = Vec::new();
        let mut sizes = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            let data = frame.unwrap().into_data().unwrap();
            // A piece of the shared input is that input's bytes, not a copy.
            if data.len() > 1 {
                let at = data.as_ptr() as usize - shared.as_ptr() as usize;
                assert!(at < shared.len());
            }
            sizes.push(data.len());
            whole.extend_from_slice(&data);
        }
        assert!(body.is_end_stream());
        assert_eq!(whole.len(), 200_002);
        assert_eq!(sizes, [1, PIECE, PIECE, PIECE, 200_000 - 3 * PIECE, 1]);
    }
}
