//! CORS: nothing unless `TARTAN_CORS_ORIGINS` lists origins. Without it a
//! browser page on another origin can neither read a response nor send a
//! JSON write (its preflight gets no `Access-Control-Allow-Origin`).

use axum::http::{header, HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// An origin is `*` or `scheme://host[:port]`, with nothing after it.
pub(super) fn check_origin(origin: &str) -> Result<(), String> {
    if origin == "*" {
        return Ok(());
    }
    let rest = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
        .ok_or_else(|| format!("{origin:?} is not an origin: expected http(s)://host[:port] or *"))?;
    if rest.is_empty() || rest.contains(['/', '?', '#', '@', ' ']) || HeaderValue::from_str(origin).is_err() {
        return Err(format!(
            "{origin:?} is not an origin: expected http(s)://host[:port] without a path"
        ));
    }
    Ok(())
}

/// The layer for the listed origins; `None` when none are listed.
pub(crate) fn cors_layer(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::ACCEPT,
                HeaderName::from_static("last-event-id"),
                HeaderName::from_static("x-request-id"),
            ])
            .expose_headers([header::RETRY_AFTER, header::WWW_AUTHENTICATE])
            .max_age(std::time::Duration::from_secs(600)),
    )
}
