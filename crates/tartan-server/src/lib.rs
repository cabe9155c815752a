#![forbid(unsafe_code)]
//! # Tartan server
//!
//! The HTTP API (docs/api.md): axum routes over the engine.
//!
//! # Layout
//! - `error`: the one `ApiError`, mapped to problem+json.
//! - `extract`: body, path and query extractors that answer in problem+json.
//! - `observe/`: the request log and metrics: `GET /metrics` and the
//!   request metrics layer (docs/operating.md, "Metrics" and "Logs").
//! - `security/`: the Host check, bearer tokens, JSON-only writes, CORS and
//!   the WebSocket's origin check, in front of every route (docs/security.md).
//! - `connections`: the cap on open connections and the timeouts that close
//!   idle ones (docs/durability.md, "Connections").
//! - `routes/`: one module per resource (health, engine and catalog, steps,
//!   flows and work, bulk jobs, webhooks, the event streams, the WebSocket
//!   `ws`); `api` holds the bodies' types, shared with the CLI.
//! - `ui`: the dashboard's pages and scripts, embedded in the binary and
//!   served at `/ui` (docs/ui.md); they read the API like any client.
//! - `openapi`: the OpenAPI document built from the routes' annotations,
//!   `GET /openapi.json`.

pub mod api;
mod connections;
pub mod error;
pub mod extract;
mod observe;
pub mod openapi;
mod routes;
pub mod security;
mod ui;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::http::StatusCode;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tartan_engine::Engine;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::connections::{Limited, Requests, Stops, Tracked};
use crate::error::{kind, ApiError};
pub use crate::security::{token_problem, AllowedHosts, ApiSecurity, MIN_TOKEN_LEN};

/// Connections open at once at most, unless configured
/// (`TARTAN_MAX_CONNECTIONS`; the binary also keeps it within half its
/// open-file limit).
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// HTTP/2 pings: a peer that does not answer one within the timeout is
/// gone (a cable pulled, a NAT that forgot it), and its connection is
/// closed even while a stream is open on it.
const H2_PING_INTERVAL: Duration = Duration::from_secs(20);
const H2_PING_TIMEOUT: Duration = Duration::from_secs(20);

/// Settings of the HTTP server: its time limits (docs/durability.md,
/// "Shutting down" and "Slow clients") and whether it serves the dashboard.
#[derive(Debug, Clone, Copy)]
pub struct ServerOptions {
    /// A request's headers must arrive within this (`TARTAN_HEADER_TIMEOUT`)
    /// of the connection's opening or of its last response; an idle
    /// connection is closed after it.
    pub header_timeout: Duration,
    /// A request's body must arrive within this of its headers
    /// (`TARTAN_BODY_TIMEOUT`).
    pub body_timeout: Duration,
    /// How long calls in flight may finish after a stop is asked for
    /// (`TARTAN_SHUTDOWN_GRACE`).
    pub shutdown_grace: Duration,
    /// Connections open at once at most (`TARTAN_MAX_CONNECTIONS`); more
    /// wait in the listen backlog.
    pub max_connections: usize,
    /// Serve the dashboard at `/ui` (`TARTAN_UI`; docs/ui.md).
    pub ui: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            ui: true,
        }
    }
}

/// Every route of the API, behind `security`, with the default options.
pub fn router(engine: Engine, security: ApiSecurity) -> Router {
    router_with(engine, security, &ServerOptions::default())
}

/// Every route of the API, behind `security`; a request body must arrive
/// within the options' `body_timeout` of its headers.
pub fn router_with(engine: Engine, security: ApiSecurity, options: &ServerOptions) -> Router {
    let body_timeout = options.body_timeout;
    let cors = security::cors_layer(security.cors_origins());
    let requests = Arc::new(observe::metrics::RequestMetrics::new());
    let app = routes::routes(options.ui)
        .fallback(|| async { ApiError::not_found("no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                kind::METHOD,
                "method not allowed on this route",
            )
        })
        .layer(axum::middleware::from_fn(security::require_json))
        .layer(axum::middleware::from_fn_with_state(
            security.clone(),
            security::require_token,
        ))
        .layer(axum::middleware::from_fn_with_state(
            security.clone(),
            security::websocket_origin,
        ))
        .layer(axum::middleware::from_fn(
            move |mut req: axum::extract::Request, next: axum::middleware::Next| {
                req.extensions_mut()
                    .insert(extract::BodyDeadline(tokio::time::Instant::now() + body_timeout));
                next.run(req)
            },
        ))
        // Before anything else looks at the request: a page that rebound
        // its name here learns nothing, not even which routes exist.
        .layer(axum::middleware::from_fn_with_state(
            security.clone(),
            security::check_host,
        ))
        // Outermost of the route layers, so that refused requests are
        // counted and logged too.
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&requests),
            observe::observe_request,
        ))
        .layer(axum::Extension(requests))
        .with_state(engine);
    match cors {
        Some(cors) => app.layer(cors),
        None => app,
    }
}

/// Serve on a bound listener with the default limits (see `serve_with`).
pub async fn serve(
    listener: TcpListener,
    engine: Engine,
    security: ApiSecurity,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, engine, security, ServerOptions::default(), shutdown).await
}

/// Serve on a bound listener until `shutdown` resolves. Then: stop
/// accepting, and at once both let open requests finish and shut the
/// engine down (it hands back the work it has not started, lets running
/// calls finish within the grace, hands back the rest); connections still
/// open after the grace are closed.
pub async fn serve_with(
    listener: TcpListener,
    engine: Engine,
    security: ApiSecurity,
    limits: ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let security = security.serving(listener.local_addr()?, &engine.config().webhook_base_url);
    let app = router_with(engine.clone(), security, &limits);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // Slowloris: a client trickling its headers is cut off (hyper needs a
    // timer for the header timeout to apply at all).
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(H2_PING_INTERVAL)
        .keep_alive_timeout(H2_PING_TIMEOUT);
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let stops = Stops {
        graceful: CancellationToken::new(),
        now: CancellationToken::new(),
    };
    let tasks = TaskTracker::new();
    let mut full_since: Option<tokio::time::Instant> = None;
    tokio::pin!(shutdown);
    loop {
        // At the cap, wait for a connection to close before accepting
        // another: the ones beyond wait in the kernel's backlog.
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if full_since.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
                    tracing::warn!(
                        "{} connections are open, the most allowed (TARTAN_MAX_CONNECTIONS): new ones wait \
                         until one closes",
                        limits.max_connections
                    );
                    full_since = Some(tokio::time::Instant::now());
                }
                tokio::select! {
                    permit = permits.clone().acquire_owned() => match permit {
                        Ok(permit) => permit,
                        // The semaphore is never closed.
                        Err(_) => break,
                    },
                    _ = &mut shutdown => break,
                }
            }
        };
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: pass, then go on.
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let (requests, activity) = Requests::new();
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(ConnectInfo(remote));
            let open = requests.begin();
            let answer = tower::ServiceExt::oneshot(app.clone(), req);
            async move {
                let response = answer.await?;
                Ok::<_, std::convert::Infallible>(response.map(|body| Tracked::new(body, open)))
            }
        });
        let io = TokioIo::new(Limited::new(stream, permit));
        let conn = builder.serve_connection_with_upgrades(io, service).into_owned();
        tasks.spawn(connections::drive(
            conn,
            activity,
            limits.header_timeout,
            stops.clone(),
        ));
    }
    drop(listener);
    stops.graceful.cancel();
    tasks.close();
    let connections = async {
        if tokio::time::timeout(limits.shutdown_grace, tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "requests still open after {:?}; closing them",
                limits.shutdown_grace
            );
            stops.now.cancel();
        }
    };
    tokio::join!(connections, engine.shutdown(limits.shutdown_grace));
    Ok(())
}
