//! A step's failure, answered as the engine reads one: an RFC 9457 problem
//! whose status decides the class (docs/retries.md, "Classification"),
//! `Retry-After` as a floor on the wait before the retry, and
//! `Tartan-Retry: no` where the failure must not be retried whatever the
//! step's policy says.

use std::fmt;
use std::time::Duration;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// The media type of a problem: the engine takes the `detail` of a body so
/// marked as the attempt's error.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Why a step failed, and whether the engine should call it again.
///
/// - [`StepError::permanent`]: `422`, with `Tartan-Retry: no`, so that the
///   item fails at once even when the step's `retry_on` or `http.classify`
///   would retry a `422` (Argyll's engine ignores the header; a `422` is
///   permanent there too).
/// - [`StepError::retryable`]: `503`, retried by the step's policy (the
///   default `retry_on` holds every 5xx); [`StepError::retry_after`] asks
///   the engine to wait at least that long first.
/// - [`StepError::status`]: any other status, classified by the engine as
///   that status is (`409` permanent, `429` retryable, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepError {
    status: StatusCode,
    detail: String,
    retry_after: Option<Duration>,
    no_retry: bool,
}

impl StepError {
    /// A failure that calling again would not change: bad input, a refusal.
    pub fn permanent(detail: impl fmt::Display) -> StepError {
        StepError {
            no_retry: true,
            ..StepError::status(StatusCode::UNPROCESSABLE_ENTITY, detail)
        }
    }

    /// A failure that may pass: the step is busy, a dependency is down.
    pub fn retryable(detail: impl fmt::Display) -> StepError {
        StepError::status(StatusCode::SERVICE_UNAVAILABLE, detail)
    }

    /// A failure answered with `status`, classified by the engine as it
    /// classifies that status for the step. A success status is answered
    /// as `500`: a failure must not read as a success.
    pub fn status(status: StatusCode, detail: impl fmt::Display) -> StepError {
        let status = if status.is_client_error() || status.is_server_error() {
            status
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
        StepError {
            status,
            detail: detail.to_string(),
            retry_after: None,
            no_retry: false,
        }
    }

    /// A body that is not the step's input: answered `400` and never
    /// retried, since the same body would fail the same way.
    pub(crate) fn bad_input(detail: impl fmt::Display) -> StepError {
        StepError {
            no_retry: true,
            ..StepError::status(StatusCode::BAD_REQUEST, detail)
        }
    }

    /// Ask the engine to wait at least `wait` before the retry
    /// (`Retry-After`, in whole seconds, rounded up). The engine honours it
    /// on a retryable failure of a sync call, up to its
    /// `TARTAN_MAX_RETRY_AFTER`; it is not read from an async step's
    /// webhook, where the step's own backoff applies.
    pub fn retry_after(mut self, wait: Duration) -> StepError {
        self.retry_after = Some(wait);
        self
    }

    /// The HTTP status this failure is answered with.
    pub fn http_status(&self) -> StatusCode {
        self.status
    }

    /// What the engine records as the attempt's error.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// Whether the answer says `Tartan-Retry: no`.
    pub fn is_final(&self) -> bool {
        self.no_retry
    }

    /// `Retry-After`'s delay-seconds, when one was asked for.
    pub fn retry_after_seconds(&self) -> Option<u64> {
        self.retry_after.map(|wait| {
            let whole = wait.as_secs();
            if wait.subsec_nanos() > 0 {
                whole.saturating_add(1)
            } else {
                whole
            }
        })
    }

    /// The problem's body: `type`, `title`, `status`, `detail`.
    pub fn problem(&self) -> Value {
        json!({
            "type": "about:blank",
            "title": self.status.canonical_reason().unwrap_or("Error"),
            "status": self.status.as_u16(),
            "detail": self.detail,
        })
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP {}: {}", self.status.as_u16(), self.detail)
    }
}

impl std::error::Error for StepError {}

impl IntoResponse for StepError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            [(axum::http::header::CONTENT_TYPE, PROBLEM_JSON)],
            self.problem().to_string(),
        )
            .into_response();
        let headers = response.headers_mut();
        if let Some(seconds) = self.retry_after_seconds() {
            headers.insert(axum::http::header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.no_retry {
            headers.insert("tartan-retry", HeaderValue::from_static("no"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        let e = StepError::retryable("busy");
        assert_eq!(e.retry_after_seconds(), None);
        let secs = |ms| {
            StepError::retryable("busy")
                .retry_after(Duration::from_millis(ms))
                .retry_after_seconds()
        };
        assert_eq!(secs(0), Some(0));
        assert_eq!(secs(1000), Some(1));
        assert_eq!(secs(1001), Some(2));
        assert_eq!(secs(250), Some(1));
    }

    #[test]
    fn a_failure_is_never_answered_with_a_success_status() {
        assert_eq!(StepError::status(StatusCode::OK, "x").http_status(), 500);
        assert_eq!(StepError::status(StatusCode::CONFLICT, "x").http_status(), 409);
        assert!(!StepError::status(StatusCode::CONFLICT, "x").is_final());
        assert!(StepError::permanent("x").is_final());
    }
}
