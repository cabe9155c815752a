#![forbid(unsafe_code)]
//! # Tartan server
//!
//! The HTTP API (CONTRACT.md): axum routes over the engine.
//!
//! # Layout
//! - `error`: the one `ApiError`, mapped to problem+json.
//! - `extract`: body, path and query extractors that answer in problem+json.
//! - `routes/`: one module per resource (health, engine and catalog, steps,
//!   flows and work, webhooks).

pub mod error;
pub mod extract;
mod routes;

use std::future::Future;
use std::net::SocketAddr;

use axum::http::{Method, StatusCode};
use axum::Router;
use tartan_engine::Engine;
use tokio::net::TcpListener;
use tower_http::cors::{Any, CorsLayer};

use crate::error::{kind, ApiError};

/// Every route of the API.
pub fn router(engine: Engine) -> Router {
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::OPTIONS,
        ])
        .allow_headers(Any);
    routes::routes()
        .fallback(|| async { ApiError::not_found("no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                kind::METHOD,
                "method not allowed on this route",
            )
        })
        .layer(cors)
        .with_state(engine)
}

/// Serve on a bound listener until `shutdown` resolves, then stop taking
/// requests and let the engine's calls in flight finish (bounded).
pub async fn serve(
    listener: TcpListener,
    engine: Engine,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(engine.clone());
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(shutdown)
        .await?;
    engine.shutdown(std::time::Duration::from_secs(10)).await;
    Ok(())
}
