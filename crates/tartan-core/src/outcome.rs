//! Classification of one attempt's HTTP outcome (docs/retries.md): success,
//! retryable or permanent, with the error text a person reads.

use serde_json::Value;

use crate::machine::AttemptResult;
use crate::step::Args;

pub const SUCCESS: &str = "success";
pub const RETRYABLE: &str = "retryable";
pub const PERMANENT: &str = "permanent";

/// Statuses retried by default: any 5xx, 408, 425 and 429.
pub fn default_retryable(status: u16) -> bool {
    (500..600).contains(&status) || matches!(status, 408 | 425 | 429)
}

/// Classify a complete HTTP response.
pub fn classify_response(status: u16, content_type: Option<&str>, body: &[u8]) -> AttemptResult {
    if (200..300).contains(&status) {
        return classify_success_body(status, body);
    }
    let class = if default_retryable(status) {
        RETRYABLE
    } else {
        PERMANENT
    };
    AttemptResult::Failure {
        class: class.into(),
        error: error_text(status, content_type, body),
        http_status: Some(status),
        retry_after_ms: None,
    }
}

/// A transport failure (refused, reset, timeout, body cut off) is retryable.
pub fn classify_transport(error: String) -> AttemptResult {
    AttemptResult::Failure {
        class: RETRYABLE.into(),
        error,
        http_status: None,
        retry_after_ms: None,
    }
}

fn classify_success_body(status: u16, body: &[u8]) -> AttemptResult {
    let trimmed = body.trim_ascii();
    if trimmed.is_empty() {
        return AttemptResult::Success {
            outputs: Args::new(),
            http_status: Some(status),
        };
    }
    // Outputs become flow state: refuse what could not be read back.
    if crate::nesting::is_too_deep(trimmed) {
        return AttemptResult::Failure {
            class: PERMANENT.into(),
            error: format!("invalid step response: {}", crate::nesting::too_deep_message()),
            http_status: Some(status),
            retry_after_ms: None,
        };
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
        Ok(other) => AttemptResult::Failure {
            class: PERMANENT.into(),
            error: format!(
                "invalid step response: expected a JSON object, got {}",
                json_kind(&other)
            ),
            http_status: Some(status),
            retry_after_ms: None,
        },
        Err(e) => AttemptResult::Failure {
            class: PERMANENT.into(),
            error: format!("invalid step response: {e}"),
            http_status: Some(status),
            retry_after_ms: None,
        },
    }
}

/// "a string", "an array", ... for messages about a JSON value.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
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

    fn class(r: &AttemptResult) -> &str {
        match r {
            AttemptResult::Success { .. } => SUCCESS,
            AttemptResult::Failure { class, .. } => class,
            AttemptResult::TimedOut { .. } => RETRYABLE,
        }
    }

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
        match classify_response(200, None, deep.as_bytes()) {
            AttemptResult::Failure { class, error, .. } => {
                assert_eq!(class, PERMANENT);
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
}
