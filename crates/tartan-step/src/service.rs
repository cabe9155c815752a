//! A step service: its steps' routes, the health route, and serving them
//! with the steps registered once the port is open.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, RawPathParams};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, on, MethodFilter};
use axum::{Json, Router};
use futures::FutureExt;
use serde_json::{json, Value};
use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::sync::Semaphore;

use crate::ctx::{Ctx, Webhook, WebhookError};
use crate::error::StepError;
use crate::register::{RegisterError, Registration};
use crate::step::{Kind, Run, Step};

/// The largest call body read by default: the engine's own bound on one
/// step's answer (`TARTAN_MAX_RESPONSE_BYTES`, 8 MiB), so that what one
/// step answered fits the next step's call. Larger is a `413`.
pub const DEFAULT_BODY_LIMIT: usize = 8 * 1024 * 1024;

/// How many async calls run at once by default: one more is answered
/// `503` with `Retry-After: 1`, which the engine retries, rather than
/// queued without bound.
pub const DEFAULT_MAX_ASYNC: usize = 1024;

/// How long one webhook or heartbeat request may take: the engine answers
/// them at once, so a slow one is a stuck connection.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why serving stopped or never began.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Register(#[from] RegisterError),
}

/// A service of steps: one route per step (and per compensation), and
/// `GET /health` answering `200` as the engines' health checks expect.
pub struct Service {
    name: String,
    steps: Vec<Step>,
    body_limit: usize,
    max_async: usize,
    webhooks_under: Option<String>,
    registration: Option<Registration>,
}

impl Service {
    /// A service named `name` (what `/health` answers as `service`).
    pub fn new(name: impl Into<String>) -> Service {
        Service {
            name: name.into(),
            steps: Vec::new(),
            body_limit: DEFAULT_BODY_LIMIT,
            max_async: DEFAULT_MAX_ASYNC,
            webhooks_under: None,
            registration: None,
        }
    }

    /// Add a step.
    ///
    /// # Panics
    ///
    /// When its route (or its compensation's) is taken by another step with
    /// the same method, or is not a path: two handlers cannot answer one
    /// call, and a service with a mistake of that kind should not start.
    pub fn step(mut self, step: Step) -> Service {
        let mut routes = vec![(step.path.as_str(), &step.method)];
        if let Some((path, _)) = &step.compensate {
            routes.push((path.as_str(), &Method::POST));
        }
        for (path, method) in &routes {
            assert!(
                path.starts_with('/'),
                "step {}: the path {path:?} must start with /",
                step.id
            );
            assert!(
                [Method::GET, Method::POST, Method::PUT, Method::DELETE].contains(method),
                "step {}: the engine calls with GET, POST, PUT or DELETE, not {method}",
                step.id
            );
            assert!(
                *path != "/health",
                "step {}: /health is the service's health route",
                step.id
            );
            let taken = self.routes().any(|(p, m)| p == *path && m == *method);
            assert!(
                !taken,
                "step {}: {method} {path} is another step's route",
                step.id
            );
        }
        assert!(
            !self.steps.iter().any(|s| s.id == step.id),
            "step {}: two steps with one id",
            step.id
        );
        self.steps.push(step);
        self
    }

    fn routes(&self) -> impl Iterator<Item = (&str, &Method)> {
        self.steps.iter().flat_map(|s| {
            let call = std::iter::once((s.path.as_str(), &s.method));
            let undo = s.compensate.iter().map(|(p, _)| (p.as_str(), &Method::POST));
            call.chain(undo)
        })
    }

    /// The largest call body read, in bytes ([`DEFAULT_BODY_LIMIT`]).
    pub fn body_limit(mut self, bytes: usize) -> Service {
        self.body_limit = bytes;
        self
    }

    /// How many accepted async calls may run at once, the service's steps
    /// together ([`DEFAULT_MAX_ASYNC`]); one more is answered `503` with
    /// `Retry-After: 1`, a retryable failure.
    pub fn max_async(mut self, calls: usize) -> Service {
        self.max_async = calls;
        self
    }

    /// Post results and heartbeats only to webhook URLs under `base` (the
    /// engine's `TARTAN_WEBHOOK_BASE_URL`: the same scheme, host and port,
    /// and below its path); a call naming another is refused `400`. Without it any `http(s)` URL a caller
    /// hands over is posted to, as Argyll's SDKs do: whoever may call the
    /// service could make it post elsewhere.
    pub fn webhooks_under(mut self, base: impl Into<String>) -> Service {
        self.webhooks_under = Some(base.into());
        self
    }

    /// Register every step with the engine once [`Service::serve`] has its
    /// port open.
    pub fn register_with(mut self, registration: Registration) -> Service {
        self.registration = Some(registration);
        self
    }

    /// The steps, in the order added.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The routes: each step's, each compensation's and `GET /health`.
    /// Merge it with other routes as any axum router.
    pub fn router(&self) -> Router {
        let client = reqwest::Client::builder()
            .timeout(WEBHOOK_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .unwrap_or_else(|e| {
                tracing::warn!("webhook client without timeouts: {e}");
                reqwest::Client::new()
            });
        let name = self.name.clone();
        let running = Arc::new(Semaphore::new(self.max_async));
        let mut router = Router::new().route(
            "/health",
            get(move || async move { Json(json!({"status": "healthy", "service": name})) }),
        );
        for step in &self.steps {
            let call = Arc::new(Route {
                step: step.id.clone(),
                kind: step.kind,
                beat: step.beat(),
                run: step.run.clone(),
                client: client.clone(),
                webhooks_under: self.webhooks_under.clone(),
                running: running.clone(),
            });
            router = add(router, &step.path, &step.method, call);
            if let Some((path, run)) = &step.compensate {
                let undo = Arc::new(Route {
                    step: step.id.clone(),
                    kind: Kind::Sync,
                    beat: None,
                    run: run.clone(),
                    client: client.clone(),
                    webhooks_under: None,
                    running: running.clone(),
                });
                router = add(router, path, &Method::POST, undo);
            }
        }
        router.layer(DefaultBodyLimit::max(self.body_limit))
    }

    /// Register every step with the engine (see [`Registration`]).
    pub async fn register(&self, registration: &Registration) -> Result<(), RegisterError> {
        registration.register(&self.steps).await
    }

    /// Serve on `addr` until the process stops, registering the steps first
    /// when [`Service::register_with`] was given.
    pub async fn serve(self, addr: impl ToSocketAddrs) -> Result<(), Error> {
        let listener = TcpListener::bind(addr).await?;
        self.serve_on(listener).await
    }

    /// The same, on a listener already bound.
    pub async fn serve_on(self, listener: TcpListener) -> Result<(), Error> {
        tracing::info!(service = %self.name, addr = %listener.local_addr()?, "step service listening");
        let serving = axum::serve(listener, self.router());
        let server = tokio::spawn(async move { serving.await });
        if let Some(registration) = &self.registration {
            // The port is open first: the engine may call a step the moment
            // it is registered.
            if let Err(e) = self.register(registration).await {
                server.abort();
                return Err(e.into());
            }
        }
        match server.await {
            Ok(served) => Ok(served?),
            Err(e) => Err(std::io::Error::other(e).into()),
        }
    }
}

/// What one route needs to answer a call.
struct Route {
    step: String,
    kind: Kind,
    beat: Option<Duration>,
    run: Run,
    client: reqwest::Client,
    webhooks_under: Option<String>,
    /// The places of the service's async calls running at once.
    running: Arc<Semaphore>,
}

fn add(router: Router, path: &str, method: &Method, route: Arc<Route>) -> Router {
    let filter = MethodFilter::try_from(method.clone()).unwrap_or(MethodFilter::POST);
    let handler = move |headers: HeaderMap,
                        params: Result<RawPathParams, axum::extract::rejection::RawPathParamsRejection>,
                        body: Result<Bytes, BytesRejection>| {
        let route = route.clone();
        async move {
            let params = params
                .map(|p| p.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
                .unwrap_or_default();
            answer(&route, headers, params, body).await
        }
    };
    router.route(path, on(filter, handler))
}

async fn answer(
    route: &Route,
    headers: HeaderMap,
    params: Vec<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(e) => return StepError::status(e.status(), e.body_text()).into_response(),
    };
    let webhook = webhook_of(route, &headers);
    if route.kind == Kind::Async && webhook.is_none() {
        let why =
            "no Argyll-Webhook-URL (or one this service does not post to): is the step registered async?";
        return StepError::status(StatusCode::BAD_REQUEST, why).into_response();
    }
    let place = match route.kind {
        Kind::Async => match route.running.clone().try_acquire_owned() {
            Ok(place) => Some(place),
            Err(_) => {
                let why = "busy: as many async calls run as this service takes; retry";
                return StepError::retryable(why)
                    .retry_after(Duration::from_secs(1))
                    .into_response();
            }
        },
        Kind::Sync => None,
    };
    let ctx = Ctx::new(headers, params, webhook.clone());
    let work = match (route.run)(&body, ctx) {
        Ok(work) => work,
        Err(refused) => return refused.into_response(),
    };
    match (route.kind, webhook, place) {
        (Kind::Async, Some(webhook), Some(place)) => {
            let (step, beat) = (route.step.clone(), route.beat);
            tokio::spawn(async move {
                run_async(step, work, webhook, beat).await;
                drop(place);
            });
            (StatusCode::ACCEPTED, Json(json!({"accepted": true}))).into_response()
        }
        _ => match caught(&route.step, work).await {
            Ok(outputs) => Json(outputs).into_response(),
            Err(failed) => failed.into_response(),
        },
    }
}

/// The call's webhook, when it names one this service posts to.
fn webhook_of(route: &Route, headers: &HeaderMap) -> Option<Webhook> {
    let url = headers.get("argyll-webhook-url")?.to_str().ok()?;
    let parsed = reqwest::Url::parse(url).ok()?;
    let web = matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some();
    let allowed = route
        .webhooks_under
        .as_deref()
        .is_none_or(|base| is_under(&parsed, base));
    (web && allowed).then(|| Webhook::new(url.to_string(), route.client.clone()))
}

/// Whether `url` is on `base`'s origin (scheme, host, port) and below its
/// path: a bare prefix of the text would let `http://engine.evil` pass for
/// `http://engine`.
fn is_under(url: &reqwest::Url, base: &str) -> bool {
    let Ok(base) = reqwest::Url::parse(base) else {
        return false;
    };
    let dir = base.path().trim_end_matches('/');
    let below = url
        .path()
        .strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
    url.scheme() == base.scheme()
        && url.host_str() == base.host_str()
        && url.port_or_known_default() == base.port_or_known_default()
        && below
}

/// The handler's result, a panic answered as a retryable `500` (the next
/// attempt may not meet what made it panic) instead of a dropped call.
async fn caught(step: &str, work: crate::step::Work) -> Result<Value, StepError> {
    match AssertUnwindSafe(work).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            tracing::error!(step, "step handler panicked: {why}");
            Err(StepError::status(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("step handler panicked: {why}"),
            ))
        }
    }
}

/// An accepted async call: heartbeats while the handler runs, then its
/// outputs or failure posted to the webhook.
async fn run_async(step: String, work: crate::step::Work, webhook: Webhook, beat: Option<Duration>) {
    let beats = beat.map(|every| tokio::spawn(heartbeats(webhook.clone(), every)));
    let result = caught(&step, work).await;
    if let Some(beats) = beats {
        beats.abort();
    }
    let delivered = match &result {
        Ok(outputs) => webhook.complete(outputs).await,
        Err(failure) => webhook.fail(failure).await,
    };
    if let Err(e) = delivered {
        tracing::warn!(step, "the result of an async step did not reach the engine: {e}");
    }
}

async fn heartbeats(webhook: Webhook, every: Duration) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match webhook.heartbeat().await {
            Ok(()) => {}
            // The call no longer waits (timed out, retried, cancelled):
            // nothing more will be heard.
            Err(WebhookError::Refused { status, detail }) if status < 500 => {
                tracing::debug!("heartbeats stop: HTTP {status}: {detail}");
                return;
            }
            Err(e) => tracing::debug!("heartbeat: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_is_under_the_engines_base_by_origin_and_path() {
        let under = |url: &str, base: &str| reqwest::Url::parse(url).is_ok_and(|u| is_under(&u, base));
        assert!(under(
            "http://engine:8080/webhook/f/s/t/1.x",
            "http://engine:8080"
        ));
        assert!(under("http://engine/webhook/f", "http://engine:80/"));
        assert!(under(
            "https://e.example/tartan/webhook/f",
            "https://e.example/tartan/"
        ));
        assert!(!under("http://engine.evil/webhook/f", "http://engine"));
        assert!(!under("http://engine:8081/webhook/f", "http://engine:8080"));
        assert!(!under("https://engine/webhook/f", "http://engine"));
        assert!(!under(
            "https://e.example/tartanx/webhook",
            "https://e.example/tartan"
        ));
        assert!(!under("http://engine/webhook", "not a url"));
    }
}
