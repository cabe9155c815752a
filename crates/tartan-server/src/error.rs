//! The one error type of the API, mapped once to RFC 9457 problem+json with
//! Argyll's `error` member. A 5xx logs its cause and shows the client only
//! that something failed on our side.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tartan_core::error::{PlanError, ValidationError};
use tartan_engine::EngineError;

/// Problem `type` URIs, one per kind of error (docs/errors.md).
pub mod kind {
    pub const INVALID_JSON: &str = "urn:tartan:problem:invalid-json";
    pub const VALIDATION: &str = "urn:tartan:problem:validation";
    pub const MISSING_INPUTS: &str = "urn:tartan:problem:missing-inputs";
    pub const NOT_FOUND: &str = "urn:tartan:problem:not-found";
    pub const CONFLICT: &str = "urn:tartan:problem:conflict";
    pub const TOO_LARGE: &str = "urn:tartan:problem:payload-too-large";
    pub const BODY_TIMEOUT: &str = "urn:tartan:problem:body-timeout";
    pub const METHOD: &str = "urn:tartan:problem:method-not-allowed";
    pub const UNAVAILABLE: &str = "urn:tartan:problem:unavailable";
    pub const OVERLOADED: &str = "urn:tartan:problem:overloaded";
    pub const UNAUTHORIZED: &str = "urn:tartan:problem:unauthorized";
    pub const FORBIDDEN: &str = "urn:tartan:problem:forbidden";
    pub const MEDIA_TYPE: &str = "urn:tartan:problem:unsupported-media-type";
    pub const INTERNAL: &str = "urn:tartan:problem:internal";
}

/// Every error's body: RFC 9457 problem details (docs/errors.md). `error`
/// repeats `detail` for Argyll's clients.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Problem<'a> {
    #[serde(rename = "type")]
    #[schema(example = "urn:tartan:problem:validation")]
    pub kind: &'a str,
    #[schema(example = "Bad Request")]
    pub title: &'a str,
    #[schema(example = 400)]
    pub status: u16,
    pub detail: &'a str,
    pub error: &'a str,
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub detail: String,
    /// Seconds a client should wait before trying again (`Retry-After`).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, detail: impl Into<String>) -> Self {
        Self {
            status,
            kind,
            detail: detail.into(),
            retry_after: None,
        }
    }
    pub(crate) fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, kind::VALIDATION, detail)
    }
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, kind::NOT_FOUND, detail)
    }
    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, kind::CONFLICT, detail)
    }
    fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!("internal error: {cause}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            kind::INTERNAL,
            "internal error; the server log has the cause",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let title = self.status.canonical_reason().unwrap_or("Error");
        let body = Problem {
            kind: self.kind,
            title,
            status: self.status.as_u16(),
            error: &self.detail,
            detail: &self.detail,
        };
        // Serialising a struct of strings and a number cannot fail.
        let body = serde_json::to_string(&body).unwrap_or_default();
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, "application/problem+json")],
            body,
        )
            .into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(seconds));
        }
        response
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        if let Some(cause) = e.database_unavailable() {
            // An outage is marked once, as it begins and ends (the engine's
            // `database outage` lines); each request it refuses is not news.
            if e.database_unreachable().is_some() {
                tracing::debug!("database unavailable: {cause}");
            } else {
                tracing::error!("database error: {cause}");
            }
            return ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                kind::UNAVAILABLE,
                "the database is unavailable; retry later",
            )
            .retry_after(5);
        }
        match e {
            EngineError::Invalid(v) => ApiError::bad_request(v.to_string()),
            EngineError::Plan(p) => match p {
                PlanError::UnknownGoals(_) => ApiError::not_found(p.to_string()),
                PlanError::MissingInputs(_) | PlanError::SubflowInputs { .. } => {
                    ApiError::new(StatusCode::BAD_REQUEST, kind::MISSING_INPUTS, p.to_string())
                }
                PlanError::NoGoals | PlanError::Cycle(_) | PlanError::TooDeep { .. } => {
                    ApiError::bad_request(p.to_string())
                }
            },
            EngineError::StepExists(_)
            | EngineError::ScheduleExists(_)
            | EngineError::TooManySchedules(_)
            | EngineError::FlowExists(_)
            | EngineError::FlowTerminal(..)
            | EngineError::NotRetryable(..)
            | EngineError::NotResumable(..)
            | EngineError::NotWaitingForRetry(..) => ApiError::conflict(e.to_string()),
            EngineError::StepNotFound(_)
            | EngineError::WorkNotFound(..)
            | EngineError::FlowNotFound(_)
            | EngineError::LaneNotFound(_)
            | EngineError::ScheduleNotFound(_) => ApiError::not_found(e.to_string()),
            EngineError::ShuttingDown => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, kind::UNAVAILABLE, e.to_string())
                    .retry_after(5)
            }
            EngineError::Overloaded(_) | EngineError::TooManyWaiters(_) | EngineError::TooManyStreams(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, kind::OVERLOADED, e.to_string()).retry_after(1)
            }
            // Others kept changing the same flow or catalog: a moment later
            // the request goes through.
            EngineError::Contended(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, kind::UNAVAILABLE, e.to_string())
                    .retry_after(1)
            }
            other => ApiError::internal(other),
        }
    }
}

/// A request the core refused: 400, naming the field.
impl From<ValidationError> for ApiError {
    fn from(e: ValidationError) -> Self {
        ApiError::bad_request(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(e: EngineError) -> Response {
        ApiError::from(e).into_response()
    }

    #[test]
    fn contention_is_a_503_to_retry_and_a_state_machine_refusal_a_500() {
        let contended = answer(EngineError::Contended("flow f".into()));
        assert_eq!(contended.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            contended
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()),
            Some("1")
        );
        let refused = answer(EngineError::StateMachine(
            tartan_core::flow::ApplyError::UnknownStep("s".into()),
        ));
        assert_eq!(refused.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
