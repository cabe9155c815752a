//! Extractors that answer bad requests with problem+json instead of axum's
//! plain-text rejections: JSON bodies (size- and depth-limited, errors naming
//! the field by its path), path and query parameters.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::{kind, ApiError};

/// Body size limits in bytes (docs/api.md).
pub const STEP_BODY_LIMIT: usize = 512 * 1024;
pub const FLOW_BODY_LIMIT: usize = 1024 * 1024;

/// When a request's body must have arrived (`TARTAN_BODY_TIMEOUT` after its
/// headers), set by the router.
#[derive(Debug, Clone, Copy)]
pub struct BodyDeadline(pub tokio::time::Instant);

/// Read a body of at most `limit` bytes; over it is 413, not all there by
/// the request's `BodyDeadline` is 408 (a client trickling its body would
/// otherwise hold a connection and a task for as long as it likes).
pub async fn read_body(req: Request, limit: usize) -> Result<Bytes, ApiError> {
    let deadline = req.extensions().get::<BodyDeadline>().copied();
    let read = axum::body::to_bytes(req.into_body(), limit);
    let read = match deadline {
        Some(BodyDeadline(at)) => match tokio::time::timeout_at(at, read).await {
            Ok(read) => read,
            Err(_) => return Err(body_timeout()),
        },
        None => read.await,
    };
    read.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            kind::TOO_LARGE,
            format!("request body exceeds the limit of {limit} bytes"),
        )
    })
}

/// The answer to a body that did not arrive by its `BodyDeadline`.
pub fn body_timeout() -> ApiError {
    ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        kind::BODY_TIMEOUT,
        "the request body did not arrive in time (TARTAN_BODY_TIMEOUT)",
    )
}

/// Parse JSON, naming the field at fault: `work_config.max_retries: invalid type...`.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            kind::INVALID_JSON,
            "request body required",
        ));
    }
    // Before parsing: what is accepted must be readable back from the store
    // (docs/api.md, "Limits").
    if tartan_core::nesting::is_too_deep(bytes) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            kind::INVALID_JSON,
            format!(
                "invalid JSON request: {}",
                tartan_core::nesting::too_deep_message()
            ),
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                kind::INVALID_JSON,
                format!("invalid JSON request: {inner}"),
            )
        } else if path == "." {
            ApiError::bad_request(format!("invalid request: {inner}"))
        } else {
            ApiError::bad_request(format!("{path}: {inner}"))
        }
    })?;
    de.end().map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            kind::INVALID_JSON,
            format!("invalid JSON request: {e}"),
        )
    })?;
    Ok(value)
}

/// An optional JSON object body of at most `limit` bytes: absent or blank
/// is `T::default()`. Only an object is one (serde would take `[true]`
/// for a struct).
pub async fn optional_object<T: DeserializeOwned + Default>(
    req: Request,
    limit: usize,
) -> Result<T, ApiError> {
    let bytes = read_body(req, limit).await?;
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        None => Ok(T::default()),
        Some(b'{') => parse_json::<T>(&bytes),
        Some(_) => Err(ApiError::bad_request(
            "the body must be a JSON object (or absent)",
        )),
    }
}

/// A JSON body of at most `LIMIT` bytes.
pub struct Json<T, const LIMIT: usize = FLOW_BODY_LIMIT>(pub T);

impl<S: Send + Sync, T: DeserializeOwned, const LIMIT: usize> FromRequest<S> for Json<T, LIMIT> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_body(req, LIMIT).await?;
        parse_json(&bytes).map(Json)
    }
}

/// Path parameters.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|e| ApiError::bad_request(format!("invalid path: {}", e.body_text())))
    }
}

/// Query parameters.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|e| ApiError::bad_request(format!("invalid query: {}", e.body_text())))
    }
}
