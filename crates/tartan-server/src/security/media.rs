//! Routes that change state take JSON only. A browser may send a
//! cross-origin `text/plain` or form POST without asking first (no CORS
//! preflight); requiring `application/json` forces the preflight, which an
//! origin not listed in `TARTAN_CORS_ORIGINS` fails.

use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{kind, ApiError};

/// Whether a `Content-Type` value is `wanted` (`type/subtype`), compared
/// case-insensitively and ignoring parameters such as `charset`.
pub fn is_media_type(content_type: &str, wanted: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case(wanted)
}

pub(crate) async fn require_json(req: Request, next: Next) -> Response {
    let method = req.method();
    let content_type = req.headers().get(header::CONTENT_TYPE);
    // DELETE carries no body; browsers cannot send it cross-origin without a
    // preflight, so only a declared non-JSON body is refused there.
    let checked = method == Method::POST
        || method == Method::PUT
        || method == Method::PATCH
        || (method == Method::DELETE && content_type.is_some());
    if !checked {
        return next.run(req).await;
    }
    let webhook = req.uri().path().starts_with("/webhook/");
    let given = content_type.and_then(|v| v.to_str().ok()).unwrap_or("");
    let accepted = is_media_type(given, "application/json")
        || (webhook && is_media_type(given, "application/problem+json"));
    if accepted {
        return next.run(req).await;
    }
    let wanted = if webhook {
        "application/json or application/problem+json"
    } else {
        "application/json"
    };
    let detail = if given.is_empty() {
        format!("Content-Type: {wanted} required")
    } else {
        format!("Content-Type {given:?} not supported; send {wanted}")
    };
    ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, kind::MEDIA_TYPE, detail).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_match_case_insensitively_without_parameters() {
        assert!(is_media_type("application/json", "application/json"));
        assert!(is_media_type(
            "Application/JSON; charset=utf-8",
            "application/json"
        ));
        assert!(is_media_type(
            " application/json ;charset=UTF-8",
            "application/json"
        ));
        assert!(!is_media_type("text/plain", "application/json"));
        assert!(!is_media_type("application/jsonx", "application/json"));
        assert!(!is_media_type("application/json-patch+json", "application/json"));
        assert!(!is_media_type("", "application/json"));
    }
}
