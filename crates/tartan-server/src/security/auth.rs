//! Bearer tokens: full (`TARTAN_API_TOKEN`) and read-only
//! (`TARTAN_READ_TOKEN`). `/health`, `/ready`, `/webhook/...` and the
//! dashboard's files (`/ui`) are open: probes carry no token, webhooks
//! prove themselves by their signed URL, and the dashboard's files hold no
//! data (they ask for a token and read the API with it, docs/ui.md).

use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::{digest, ApiSecurity};
use crate::error::{kind, ApiError};

#[derive(Clone, Default)]
pub(super) struct Tokens {
    pub(super) api: Vec<[u8; 32]>,
    pub(super) read: Vec<[u8; 32]>,
}

/// What the request's token may do, for the routes that say so
/// (`GET /engine/session`): put on every request the tokens let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No tokens are configured: anyone may do anything.
    Open,
    /// A full token (`TARTAN_API_TOKEN`).
    Full,
    /// A read token (`TARTAN_READ_TOKEN`): reads only.
    Read,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Open => "open",
            Access::Full => "full",
            Access::Read => "read",
        }
    }
}

#[derive(PartialEq, Eq)]
enum Grant {
    None,
    Read,
    All,
}

impl Tokens {
    /// Every configured token is compared, whatever matched first, so the
    /// time taken does not tell which list (or which entry) a token is in.
    fn grant(&self, presented: &str) -> Grant {
        let given = digest(presented);
        let any = |list: &[[u8; 32]]| {
            list.iter()
                .fold(subtle::Choice::from(0), |found, t| found | t.ct_eq(&given))
        };
        let all = any(&self.api);
        let read = any(&self.read);
        if bool::from(all) {
            Grant::All
        } else if bool::from(read) {
            Grant::Read
        } else {
            Grant::None
        }
    }
}

/// Routes open to everyone.
fn is_open(path: &str) -> bool {
    path == "/health"
        || path == "/ready"
        || path.starts_with("/webhook/")
        || path == "/ui"
        || path.starts_with("/ui/")
}

/// What a read token may do: `GET` (and `HEAD`), and the two `POST` routes
/// that only read (a plan preview, a flow query).
pub(crate) fn is_read(method: &Method, path: &str) -> bool {
    method == Method::GET
        || method == Method::HEAD
        || (method == Method::POST && (path == "/engine/plan" || path == "/engine/flow/query"))
}

pub(crate) async fn require_token(
    State(security): State<ApiSecurity>,
    mut req: Request,
    next: Next,
) -> Response {
    if !security.requires_token() {
        req.extensions_mut().insert(Access::Open);
        return next.run(req).await;
    }
    if is_open(req.uri().path()) {
        return next.run(req).await;
    }
    let from_query;
    let presented = match req.headers().get(header::AUTHORIZATION) {
        Some(v) => v.to_str().ok().and_then(bearer),
        None if is_stream(req.uri().path()) => {
            from_query = req.uri().query().and_then(query_token);
            from_query.as_deref()
        }
        None => None,
    };
    let Some(presented) = presented else {
        return unauthorized("this route needs Authorization: Bearer <token>", false);
    };
    match security.tokens.grant(presented) {
        Grant::All => {
            req.extensions_mut().insert(Access::Full);
            next.run(req).await
        }
        Grant::Read if is_read(req.method(), req.uri().path()) => {
            req.extensions_mut().insert(Access::Read);
            next.run(req).await
        }
        Grant::Read => ApiError::new(
            StatusCode::FORBIDDEN,
            kind::FORBIDDEN,
            format!(
                "a read token may not {} {}; it grants reads only: GET routes, plan previews and flow queries",
                req.method(),
                req.uri().path()
            ),
        )
        .into_response(),
        Grant::None => unauthorized("the bearer token is not valid", true),
    }
}

/// The streams, which browsers open without headers (`EventSource`, and
/// `WebSocket` for `/engine/ws`): they may carry the token as
/// `?access_token=` (RFC 6750 §2.3). The request log names the route,
/// never the query, so it is not logged.
fn is_stream(path: &str) -> bool {
    path == "/engine/events/stream"
        || path == "/engine/ws"
        || path
            .strip_prefix("/engine/flow/")
            .and_then(|rest| rest.strip_suffix("/stream"))
            .is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

/// The `access_token` of a query string.
fn query_token(query: &str) -> Option<String> {
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "access_token")
        .map(|(_, v)| v.into_owned())
        .filter(|t| !t.is_empty())
}

/// The token of `Bearer <token>` (the scheme is case-insensitive).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

fn unauthorized(detail: &str, invalid: bool) -> Response {
    tracing::debug!("refused a request without a valid bearer token");
    let challenge = if invalid {
        "Bearer realm=\"tartan\", error=\"invalid_token\""
    } else {
        "Bearer realm=\"tartan\""
    };
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, kind::UNAUTHORIZED, detail).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static(challenge),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_takes_the_token_after_a_case_insensitive_scheme() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("abc"), None);
    }

    #[test]
    fn only_streams_take_the_token_from_the_query() {
        assert!(is_stream("/engine/flow/f-1/stream"));
        assert!(is_stream("/engine/events/stream"));
        assert!(!is_stream("/engine/events/stream/x"));
        assert!(!is_stream("/engine/flow/f-1/events"));
        assert!(!is_stream("/engine/flow//stream"));
        assert!(!is_stream("/engine/flow/a/b/stream"));
        assert!(is_stream("/engine/ws"));
        assert!(!is_stream("/engine/ws/x"));
        assert_eq!(query_token("after=3&access_token=a%2Bb"), Some("a+b".into()));
        assert_eq!(query_token("access_token="), None);
    }

    #[test]
    fn tokens_grant_by_list() {
        let Ok(s) = ApiSecurity::new(
            &["full-token-0123456789".into(), "full-token-0123456789-2".into()],
            &["reader-token-0123456789".into()],
            &[],
        ) else {
            panic!("valid tokens");
        };
        assert!(s.tokens.grant("full-token-0123456789") == Grant::All);
        assert!(s.tokens.grant("full-token-0123456789-2") == Grant::All);
        assert!(s.tokens.grant("reader-token-0123456789") == Grant::Read);
        assert!(s.tokens.grant("full-token-012345678") == Grant::None);
        assert!(s.tokens.grant("") == Grant::None);
    }
}
