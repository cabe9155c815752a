//! The classification of a failed attempt, case by case
//! (`tests/data/classes.json`; docs/retries.md, "Classification" and "A
//! step's own classes"): every entry of the default table, a step's
//! `http.classify` and the `Tartan-Retry` header.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};
use tartan_core::outcome::{classify, declines_retry, is_rate_limited, FailureCause, FailureClass};
use tartan_core::retry::RetryDefaults;
use tartan_core::step::Step;

const CASES: &str = include_str!("data/classes.json");

fn cause_of(case: &Value) -> FailureCause {
    let status = case["cause"]["status"]
        .as_u64()
        .map(|s| u16::try_from(s).unwrap());
    let no_retry = case["tartan_retry"].as_str().is_some_and(declines_retry);
    match (status, case["cause"].as_str()) {
        (Some(s), _) if no_retry => FailureCause::NoRetry(s),
        (Some(s), _) => FailureCause::Status(s),
        // A timeout is recorded as a retryable failure with no answer.
        (None, Some("transport" | "timeout")) => FailureCause::Transport,
        (None, Some("refused")) => FailureCause::Refused,
        (None, Some("reported")) => FailureCause::Reported,
        (None, Some("script")) => FailureCause::Script,
        (None, Some("child_failed")) => FailureCause::ChildFailed,
        (None, Some("child_refused")) => FailureCause::ChildRefused,
        other => panic!("{}: unknown cause {other:?}", case["id"]),
    }
}

#[test]
fn every_case_is_classified_as_written() {
    let doc: Value = serde_json::from_str(CASES).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 40, "{} cases", cases.len());
    for case in cases {
        let id = case["id"].as_str().unwrap();
        let mut http = json!({"endpoint": "http://127.0.0.1:9/x"});
        if let Some(classify) = case.get("classify") {
            http["classify"] = classify.clone();
        }
        let mut step = json!({"id": "s", "name": "S", "type": "sync", "http": http});
        if let Some(retry_on) = case.get("retry_on") {
            step["work_config"] = json!({"retry_on": retry_on});
        }
        let step: Step = serde_json::from_value(step).unwrap_or_else(|e| panic!("{id}: {e}"));
        let step = step.with_effective_retry(&RetryDefaults::default()).unwrap();
        let policies = step.policies().unwrap();
        let cause = cause_of(case);
        let want = match case["class"].as_str() {
            Some("retryable") => FailureClass::Retryable,
            Some("permanent") => FailureClass::Permanent,
            other => panic!("{id}: class {other:?}"),
        };
        assert_eq!(classify(cause, policies), want, "{id}: {}", case["about"]);
        assert_eq!(
            is_rate_limited(cause, policies),
            case["rate_limited"].as_bool().unwrap_or(false),
            "{id}: rate_limited"
        );
    }
}

#[test]
fn a_bad_table_is_refused_naming_the_entry() {
    for (classify, says) in [
        (json!({"abc": "retryable"}), "abc: not a status"),
        (json!({"404": "flaky"}), "unknown class \"flaky\""),
        (json!({"200": "retryable"}), "success"),
        (json!({"404": 3}), "invalid type"),
    ] {
        let step = json!({"id": "s", "name": "S", "type": "sync",
            "http": {"endpoint": "http://127.0.0.1:9/x", "classify": classify}});
        let e = serde_json::from_value::<Step>(step).unwrap_err().to_string();
        assert!(e.contains(says), "{classify}: {e}");
    }
}
