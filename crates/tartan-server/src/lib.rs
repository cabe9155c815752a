#![forbid(unsafe_code)]
//! # Tartan server
//!
//! The HTTP API (docs/api.md): axum routes over the engine.
//!
//! # Layout
//! - `error`: the one `ApiError`, mapped to problem+json.
//! - `extract`: body, path and query extractors that answer in problem+json.
//! - `security/`: bearer tokens, JSON-only writes and CORS, in front of
//!   every route (docs/security.md).
//! - `routes/`: one module per resource (health, engine and catalog, steps,
//!   flows and work, webhooks).

pub mod error;
pub mod extract;
mod routes;
pub mod security;

use std::future::Future;
use std::net::SocketAddr;

use axum::http::StatusCode;
use axum::Router;
use tartan_engine::Engine;
use tokio::net::TcpListener;

use crate::error::{kind, ApiError};
pub use crate::security::ApiSecurity;

/// Every route of the API, behind `security`.
pub fn router(engine: Engine, security: ApiSecurity) -> Router {
    let cors = security::cors_layer(security.cors_origins());
    let app = routes::routes()
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
            security,
            security::require_token,
        ))
        .with_state(engine);
    match cors {
        Some(cors) => app.layer(cors),
        None => app,
    }
}

/// Serve on a bound listener until `shutdown` resolves, then stop taking
/// requests and let the engine's calls in flight finish (bounded).
pub async fn serve(
    listener: TcpListener,
    engine: Engine,
    security: ApiSecurity,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(engine.clone(), security);
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(shutdown)
        .await?;
    engine.shutdown(std::time::Duration::from_secs(10)).await;
    Ok(())
}
