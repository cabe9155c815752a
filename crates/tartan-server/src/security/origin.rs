//! Cross-site WebSocket hijacking: a browser opens a WebSocket to any site
//! with that site's cookies and no preflight, so the handshake of
//! `GET /engine/ws` from a page of another origin is refused (403) unless
//! that origin is listed in `TARTAN_CORS_ORIGINS` (docs/security.md,
//! docs/api.md "WebSocket"). A handshake without `Origin` is not a
//! browser's, and is let through to the token check like any request.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiSecurity;
use crate::error::{kind, ApiError};

/// The route whose handshake is checked.
const WEBSOCKET: &str = "/engine/ws";

pub(crate) async fn websocket_origin(
    State(security): State<ApiSecurity>,
    req: Request,
    next: Next,
) -> Response {
    if req.uri().path() != WEBSOCKET {
        return next.run(req).await;
    }
    let Some(origin) = req.headers().get(header::ORIGIN) else {
        return next.run(req).await;
    };
    let origin = origin.to_str().unwrap_or_default();
    // HTTP/1.1 names the server in `Host`, HTTP/2 in the URI's authority.
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
        .unwrap_or_default();
    if same_origin(origin, host) || listed(&security, origin) {
        return next.run(req).await;
    }
    tracing::debug!("refused a WebSocket handshake from another origin");
    ApiError::new(
        StatusCode::FORBIDDEN,
        kind::FORBIDDEN,
        format!(
            "Origin {origin:?} is not this server's origin and is not listed in TARTAN_CORS_ORIGINS; \
             a page of another site may not open this WebSocket"
        ),
    )
    .into_response()
}

fn listed(security: &ApiSecurity, origin: &str) -> bool {
    security
        .cors_origins()
        .iter()
        .any(|o| o == "*" || o.eq_ignore_ascii_case(origin))
}

/// Whether `origin` (`scheme://host[:port]`) names the server the request
/// was sent to (`host[:port]`), default ports included.
fn same_origin(origin: &str, host: &str) -> bool {
    let (rest, default_port) = if let Some(rest) = origin.strip_prefix("http://") {
        (rest, 80)
    } else if let Some(rest) = origin.strip_prefix("https://") {
        (rest, 443)
    } else {
        // `null` (a sandboxed page, a file) and other schemes.
        return false;
    };
    match (authority(rest, default_port), authority(host, default_port)) {
        (Some((a, p)), Some((b, q))) => p == q && a.eq_ignore_ascii_case(b),
        _ => false,
    }
}

/// The host and port of `host[:port]` (an IPv6 host in brackets).
fn authority(text: &str, default_port: u16) -> Option<(&str, u16)> {
    if text.is_empty() || text.contains(['/', '?', '#', '@', ' ']) {
        return None;
    }
    let (host, port) = if text.starts_with('[') {
        let end = text.find(']')?;
        let (host, rest) = text.split_at(end + 1);
        match rest.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if rest.is_empty() => (host, None),
            None => return None,
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default_port,
    };
    (!host.is_empty()).then_some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_is_the_same_when_host_and_port_are() {
        assert!(same_origin("http://127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(same_origin("http://Example.com", "example.com:80"));
        assert!(same_origin("https://example.com", "example.com"));
        assert!(same_origin("http://[::1]:8080", "[::1]:8080"));
        assert!(!same_origin("http://evil.example", "example.com"));
        assert!(!same_origin("http://127.0.0.1:3000", "127.0.0.1:8080"));
        assert!(!same_origin("https://example.com", "example.com:80"));
        assert!(!same_origin("null", "example.com"));
        assert!(!same_origin("http://example.com/x", "example.com"));
        assert!(!same_origin("http://example.com", ""));
    }
}
