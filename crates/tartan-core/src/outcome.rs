//! Classification of one attempt's HTTP outcome (docs/retries.md): success,
//! retryable or permanent, with the error text a person reads.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::classes::DeclaredClass;
use crate::json::{json_kind, Args};
use crate::step::StepPolicies;
use crate::timeouts::TimeoutScope;

/// How one attempt ended, as the dispatcher saw it; the step's policy
/// classifies a failure ([`classify`]).
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptResult {
    /// 2xx with an object (or nothing): the response's keys.
    Success { outputs: Args, http_status: Option<u16> },
    /// No call: a memoizable step's answer to the same call, stored
    /// (docs/steps.md, "Memoization").
    Memoized { outputs: Args },
    /// The call was aborted by a timeout of this scope.
    TimedOut {
        scope: TimeoutScope,
        limit_ms: u64,
        elapsed_ms: u64,
    },
    /// Anything else.
    Failure {
        cause: FailureCause,
        error: String,
        retry_after_ms: Option<u64>,
    },
}

/// What made an attempt fail, before any policy is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureCause {
    /// The step answered with this status; a 2xx here had a body that
    /// could not be taken as outputs.
    Status(u16),
    /// The step answered with this status and `Tartan-Retry: no`: this
    /// failure is permanent, whatever the status.
    NoRetry(u16),
    /// No answer: refused, reset, cut off.
    Transport,
    /// Not sent: the rules on where steps may call refused it.
    Refused,
    /// An async step reported a failure without a status.
    Reported,
    /// A script step's script failed or hit a limit of its sandbox: it
    /// would fail the same way again.
    Script,
    /// A flow step's child flow failed: worth running again, as the
    /// step's retry policy says.
    ChildFailed,
    /// A flow step's child flow could not start (its required inputs are
    /// missing), was cancelled, or completed without an output the step
    /// maps: running it again would end the same way.
    ChildRefused,
}

impl FailureCause {
    pub fn http_status(self) -> Option<u16> {
        match self {
            FailureCause::Status(s) | FailureCause::NoRetry(s) => Some(s),
            FailureCause::Transport
            | FailureCause::Refused
            | FailureCause::Reported
            | FailureCause::Script
            | FailureCause::ChildFailed
            | FailureCause::ChildRefused => None,
        }
    }
}

/// Whether a failed attempt may be retried (docs/retries.md,
/// "Classification"). The wire strings are `retryable` and `permanent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
// `as_str` (and `parse`, where there is one) uses serde's names, by the
// same rule; tests/names.rs holds the two equal.
#[derive(strum::IntoStaticStr, strum::EnumIter)]
#[strum(serialize_all = "lowercase")]
pub enum FailureClass {
    Retryable,
    Permanent,
}

impl FailureClass {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// How one attempt ended, as its record shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
// `as_str` (and `parse`, where there is one) uses serde's names, by the
// same rule; tests/names.rs holds the two equal.
#[derive(strum::IntoStaticStr, strum::EnumIter)]
#[strum(serialize_all = "lowercase")]
pub enum AttemptOutcome {
    Success,
    Retryable,
    Permanent,
    /// Ended by the step's total timeout.
    Timeout,
    /// Its flow was cancelled or timed out while it ran.
    Cancelled,
    /// Cut off by a restart or a lease takeover.
    Abandoned,
}

impl AttemptOutcome {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl From<FailureClass> for AttemptOutcome {
    fn from(class: FailureClass) -> Self {
        match class {
            FailureClass::Retryable => AttemptOutcome::Retryable,
            FailureClass::Permanent => AttemptOutcome::Permanent,
        }
    }
}

/// The one place a failure is classified: a status by the step's own
/// classes (`http.classify`), else by its `retry_on` (a 2xx that failed had
/// an unreadable body: permanent); a `Tartan-Retry: no` answer is
/// permanent; no answer and timeouts are retryable; a refused call, a
/// reported failure without a status and a failed script are permanent.
pub fn classify(cause: FailureCause, policies: &StepPolicies) -> FailureClass {
    let retryable = match cause {
        FailureCause::Status(s) if (200..300).contains(&s) => false,
        FailureCause::Status(s) => match policies.classes.class_of(s) {
            Some(DeclaredClass::Permanent) => false,
            Some(DeclaredClass::Retryable | DeclaredClass::RateLimited) => true,
            None => policies.retry.retries_status(s),
        },
        FailureCause::Transport | FailureCause::ChildFailed => true,
        FailureCause::NoRetry(_)
        | FailureCause::Refused
        | FailureCause::Reported
        | FailureCause::Script
        | FailureCause::ChildRefused => false,
    };
    if retryable {
        FailureClass::Retryable
    } else {
        FailureClass::Permanent
    }
}

/// Whether the step declared this failure `rate_limited`: its wait honours
/// `Retry-After` whatever the policy's `honor_retry_after` says.
pub fn is_rate_limited(cause: FailureCause, policies: &StepPolicies) -> bool {
    matches!(cause, FailureCause::Status(s) if policies.classes.class_of(s) == Some(DeclaredClass::RateLimited))
}

/// The `Tartan-Retry` header's value that makes a failure permanent.
pub fn declines_retry(header: &str) -> bool {
    header.trim().eq_ignore_ascii_case("no")
}

/// Read a complete HTTP response: outputs, or a failure with the error text
/// a person reads.
pub fn classify_response(status: u16, content_type: Option<&str>, body: &[u8]) -> AttemptResult {
    if (200..300).contains(&status) {
        return read_success_body(status, body);
    }
    AttemptResult::Failure {
        cause: FailureCause::Status(status),
        error: error_text(status, content_type, body),
        retry_after_ms: None,
    }
}

/// A transport failure (refused, reset, timeout, body cut off).
pub fn classify_transport(error: String) -> AttemptResult {
    AttemptResult::Failure {
        cause: FailureCause::Transport,
        error,
        retry_after_ms: None,
    }
}

fn unreadable(status: u16, error: String) -> AttemptResult {
    AttemptResult::Failure {
        cause: FailureCause::Status(status),
        error,
        retry_after_ms: None,
    }
}

fn read_success_body(status: u16, body: &[u8]) -> AttemptResult {
    let trimmed = body.trim_ascii();
    if trimmed.is_empty() {
        return AttemptResult::Success {
            outputs: Args::new(),
            http_status: Some(status),
        };
    }
    // Outputs become flow state: refuse what could not be read back.
    if crate::nesting::is_too_deep(trimmed) {
        return unreadable(
            status,
            format!("invalid step response: {}", crate::nesting::too_deep_message()),
        );
    }
    match serde_json::from_slice::<Value>(trimmed) {
        Ok(Value::Object(outputs)) => AttemptResult::Success {
            outputs,
            http_status: Some(status),
        },
        Ok(Value::Null) => AttemptResult::Success {
            outputs: Args::new(),
            http_status: Some(status),
        },
        Ok(other) => unreadable(
            status,
            format!(
                "invalid step response: expected a JSON object, got {}",
                json_kind(&other)
            ),
        ),
        Err(e) => unreadable(status, format!("invalid step response: {e}")),
    }
}

/// A problem body's `detail`, else its `title`, else `HTTP <status> <reason>`.
pub fn error_text(status: u16, content_type: Option<&str>, body: &[u8]) -> String {
    let is_json = content_type.is_some_and(|ct| ct.contains("json"));
    if is_json {
        if let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(body) {
            for key in ["detail", "title", "error"] {
                if let Some(Value::String(text)) = obj.get(key) {
                    if !text.is_empty() {
                        return text.clone();
                    }
                }
            }
        }
    }
    format!("HTTP {status} {}", reason_phrase(status))
        .trim_end()
        .to_string()
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        425 => "Too Early",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_policy() -> StepPolicies {
        match crate::retry::RetryDefaults::default().policy() {
            Ok(retry) => StepPolicies {
                retry,
                timeouts: crate::timeouts::TimeoutPolicy::default(),
                classes: crate::classes::StatusClasses::default(),
                lane: None,
                on_exhausted: Default::default(),
            },
            Err(e) => panic!("the default policy is invalid: {e}"),
        }
    }

    /// The class under the default policy, or `success`.
    fn class(r: &AttemptResult) -> &'static str {
        match r {
            AttemptResult::Success { .. } | AttemptResult::Memoized { .. } => "success",
            AttemptResult::Failure { cause, .. } => classify(*cause, &default_policy()).as_str(),
            AttemptResult::TimedOut { .. } => "retryable",
        }
    }

    const SUCCESS: &str = "success";
    const RETRYABLE: &str = "retryable";
    const PERMANENT: &str = "permanent";

    #[test]
    fn two_hundreds_with_objects_empty_or_null_succeed() {
        assert_eq!(class(&classify_response(200, None, b"")), SUCCESS);
        assert_eq!(class(&classify_response(204, None, b"")), SUCCESS);
        assert_eq!(class(&classify_response(200, None, b"null")), SUCCESS);
        assert_eq!(class(&classify_response(201, None, br#"{"a":1}"#)), SUCCESS);
    }

    #[test]
    fn two_hundreds_with_other_json_are_permanent() {
        assert_eq!(class(&classify_response(200, None, b"[1,2]")), PERMANENT);
        assert_eq!(class(&classify_response(200, None, b"{not json")), PERMANENT);
    }

    #[test]
    fn outputs_nested_too_deeply_are_permanent_and_say_so() {
        let deep = format!(r#"{{"out":{}1{}}}"#, "[".repeat(64), "]".repeat(64));
        let r = classify_response(200, None, deep.as_bytes());
        assert_eq!(class(&r), PERMANENT);
        match r {
            AttemptResult::Failure { error, .. } => {
                assert!(error.contains("nested deeper than 64 levels"), "{error}");
            }
            other => panic!("accepted: {other:?}"),
        }
        let ok = format!(r#"{{"out":{}1{}}}"#, "[".repeat(63), "]".repeat(63));
        assert_eq!(class(&classify_response(200, None, ok.as_bytes())), SUCCESS);
    }

    #[test]
    fn problem_detail_becomes_the_error() {
        let r = classify_response(
            404,
            Some("application/problem+json"),
            br#"{"title":"Not Found","detail":"no such order"}"#,
        );
        assert!(matches!(r, AttemptResult::Failure { ref error, .. } if error == "no such order"));
        assert_eq!(class(&classify_response(503, None, b"")), RETRYABLE);
        assert_eq!(class(&classify_response(429, None, b"")), RETRYABLE);
        assert_eq!(class(&classify_response(418, None, b"")), PERMANENT);
    }

    #[test]
    fn no_answer_is_retryable_and_a_refused_call_is_not() {
        let policy = default_policy();
        assert_eq!(
            classify(FailureCause::Transport, &policy),
            FailureClass::Retryable
        );
        assert_eq!(classify(FailureCause::Refused, &policy), FailureClass::Permanent);
        assert_eq!(classify(FailureCause::Reported, &policy), FailureClass::Permanent);
    }
}
