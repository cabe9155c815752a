//! Retry policies and delay math: every case of the conformance files
//! (`tests/data/backoff.json` and `tests/data/classification.json`; docs/retries.md,
//! "The cases"), plus property tests.
//!
//! The engine's retry loop is simulated here, purely: attempts are instant,
//! the clock moves only by the scheduled waits, the random source is fixed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use serde_json::{json, Value};
use tartan_core::duration::{as_millis_u64, parse_duration, DurationKind};
use tartan_core::retry::{
    delay, parse_retry_after, BackoffType, Jitter, RetryDefaults, RetryOn, RetryPolicy, NO_CAP,
};

const BACKOFF: &str = include_str!("data/backoff.json");
const CLASSIFICATION: &str = include_str!("data/classification.json");

/// The flow's cap on attempts over all work items (`max_step_attempts`).
const FLOW_ATTEMPT_CAP: u32 = 1000;

/// The random source of the conformance cases.
const U: f64 = 0.5;

fn cases(text: &str) -> Vec<Value> {
    let doc: Value = serde_json::from_str(text).unwrap();
    doc["cases"].as_array().unwrap().clone()
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 6, 1, 12, 0, 0).unwrap()
}

fn policy_of(step: &Value) -> Result<RetryPolicy, String> {
    RetryPolicy::from_step(
        step.get("work_config"),
        step.get("retry"),
        &RetryDefaults::default(),
    )
    .map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------
// the simulated retry loop

/// One response of the step endpoint.
#[derive(Debug, Clone)]
struct Response {
    status: u16,
    retry_after: Option<String>,
}

/// What the endpoint answers: `first` in order, then `rest` forever.
#[derive(Debug, Clone)]
struct Script {
    first: Vec<Response>,
    rest: Response,
}

impl Script {
    fn get(&self, attempt_index: usize) -> &Response {
        self.first.get(attempt_index).unwrap_or(&self.rest)
    }

    fn always(status: u16) -> Script {
        Script {
            first: vec![],
            rest: Response {
                status,
                retry_after: None,
            },
        }
    }
}

/// One phrase part: `always 503`, `503`, `429 with Retry-After: 120`,
/// `always 404 problem+json`.
fn parse_response(part: &str) -> (bool, Response) {
    let part = part.trim();
    let (always, part) = match part.strip_prefix("always ") {
        Some(rest) => (true, rest),
        None => (false, part),
    };
    let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
    let status: u16 = digits.parse().unwrap_or_else(|_| panic!("no status in {part:?}"));
    let retry_after = part.split_once("Retry-After:").map(|(_, v)| v.trim().to_owned());
    (always, Response { status, retry_after })
}

fn parse_script(responses: &Value) -> Script {
    match responses {
        Value::Array(items) => {
            let statuses: Vec<Response> = items
                .iter()
                .map(|s| Response {
                    status: u16::try_from(s.as_u64().unwrap()).unwrap(),
                    retry_after: None,
                })
                .collect();
            let (last, first) = statuses.split_last().unwrap();
            Script {
                first: first.to_vec(),
                rest: last.clone(),
            }
        }
        Value::String(phrase) => {
            let mut first = Vec::new();
            let parts: Vec<&str> = phrase.split(", then ").collect();
            for (i, part) in parts.iter().enumerate() {
                let (always, response) = parse_response(part);
                if always || i + 1 == parts.len() {
                    return Script {
                        first,
                        rest: response,
                    };
                }
                first.push(response);
            }
            unreachable!()
        }
        other => panic!("unexpected responses {other}"),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    attempts: u32,
    waits: Vec<u64>,
    /// `succeeded`, `failed` or `skipped`.
    final_state: &'static str,
    /// Why no retry followed a retryable failure, when not the count:
    /// `deadline` or `step_limit`.
    retry_state: Option<&'static str>,
    last_error: Option<String>,
    /// Fake-clock time of the terminal outcome (first attempt at 0).
    end_ms: u64,
}

/// The engine's loop for one work item, on a fake clock. `total_deadline_ms`
/// is the step's total timeout (prechecked like the retry budget).
fn simulate(
    policy: &RetryPolicy,
    script: &Script,
    total_deadline_ms: Option<u64>,
    unit_random: &mut dyn FnMut() -> f64,
) -> Run {
    let mut run = Run {
        attempts: 0,
        waits: vec![],
        final_state: "skipped",
        retry_state: None,
        last_error: None,
        end_ms: 0,
    };
    if !policy.allows_attempt(1) {
        return run;
    }
    let first_start: u64 = 0;
    let mut clock: u64 = first_start;
    loop {
        run.attempts += 1;
        let response = script.get(run.attempts as usize - 1);
        // The attempt is instant: it ends when it starts.
        run.end_ms = clock;
        if (200..300).contains(&response.status) {
            run.final_state = "succeeded";
            run.last_error = None;
            return run;
        }
        run.final_state = "failed";
        run.last_error = Some(format!("HTTP {}", response.status));
        if !policy.retries_status(response.status) || !policy.allows_attempt(run.attempts + 1) {
            return run;
        }
        if run.attempts >= FLOW_ATTEMPT_CAP {
            run.retry_state = Some("step_limit");
            return run;
        }
        let retry_after = response
            .retry_after
            .as_deref()
            .and_then(|v| parse_retry_after(v, now()));
        let parts = delay(policy, run.attempts - 1, retry_after, unit_random);
        let next_start = clock.saturating_add(parts.delay_ms);
        let budget_end = policy
            .max_retry_duration_ms
            .map(|b| first_start.saturating_add(b));
        let past = |end: Option<u64>| end.is_some_and(|end| next_start >= end);
        if past(budget_end) || past(total_deadline_ms) {
            run.retry_state = Some("deadline");
            return run;
        }
        run.waits.push(parts.delay_ms);
        // Sleep on the fake clock.
        clock = next_start;
    }
}

/// `waits_ms` as a list, or a phrase such as `"999 waits of 1"`.
fn expected_waits(value: &Value) -> Vec<u64> {
    match value {
        Value::Array(items) => items.iter().map(|w| w.as_u64().unwrap()).collect(),
        Value::String(phrase) => {
            let words: Vec<&str> = phrase.split_whitespace().collect();
            match words.as_slice() {
                [n, "waits", "of", ms] => vec![ms.parse().unwrap(); n.parse().unwrap()],
                _ => panic!("unknown waits phrase {phrase:?}"),
            }
        }
        other => panic!("unexpected waits_ms {other}"),
    }
}

/// Check one backoff case; `Err` says what differs.
fn check_backoff_case(case: &Value) -> Result<(), String> {
    let step = &case["step"];
    let expect = &case["expect"];
    let policy = policy_of(step);
    let final_expected = expect["final"].as_str().unwrap();
    if final_expected == "rejected" {
        let wanted = expect["error_contains"].as_str().unwrap();
        return match policy {
            Ok(p) => Err(format!(
                "accepted, expected an error containing {wanted:?}: {p:?}"
            )),
            Err(text) if text.contains(wanted) => Ok(()),
            Err(text) => Err(format!("error {text:?} does not contain {wanted:?}")),
        };
    }
    let policy = policy.map_err(|e| format!("rejected: {e}"))?;
    if let Some(wanted) = expect.get("wait_for_r70_ms") {
        let parts = delay(&policy, 70, None, &mut || U);
        return if Some(parts.delay_ms) == wanted.as_u64() {
            Ok(())
        } else {
            Err(format!("delay at r=70 is {parts:?}, expected {wanted}"))
        };
    }
    let total_deadline_ms = step
        .get("timeouts")
        .and_then(|t| t.get("total"))
        .map(|t| as_millis_u64(parse_duration(t, DurationKind::Timeout).unwrap()));
    let script = parse_script(&case["responses"]);
    let run = simulate(&policy, &script, total_deadline_ms, &mut || U);
    let attempts = u32::try_from(expect["attempts"].as_u64().unwrap()).unwrap();
    let waits = expected_waits(&expect["waits_ms"]);
    let retry_state = expect.get("retry_state").and_then(Value::as_str);
    let mut problems = vec![];
    if run.attempts != attempts {
        problems.push(format!("attempts {} != {attempts}", run.attempts));
    }
    if run.waits != waits {
        problems.push(format!("waits {:?} != {waits:?}", run.waits));
    }
    if run.final_state != final_expected {
        problems.push(format!("final {} != {final_expected}", run.final_state));
    }
    if run.retry_state != retry_state {
        problems.push(format!("retry_state {:?} != {retry_state:?}", run.retry_state));
    }
    if let Some(wanted) = expect.get("error_contains").and_then(Value::as_str) {
        if !run.last_error.as_deref().is_some_and(|e| e.contains(wanted)) {
            problems.push(format!("error {:?} lacks {wanted:?}", run.last_error));
        }
    }
    if run.end_ms != run.waits.iter().sum::<u64>() {
        problems.push(format!("ended at {} ms, waits sum to another time", run.end_ms));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[test]
fn every_backoff_case_passes() {
    let cases = cases(BACKOFF);
    assert!(cases.len() >= 41, "expected the full conformance file");
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            check_backoff_case(case)
                .err()
                .map(|e| format!("{}: {e}", case["id"].as_str().unwrap_or("?")))
        })
        .collect();
    assert!(failures.is_empty(), "failing cases:\n{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------
// classification: statuses and Retry-After

/// The status whose retryability a classification case decides: a plain
/// non-2xx response, or the `status` of a webhook's problem+json body.
fn case_status(response: &Value) -> Option<u16> {
    let status = match (response.get("status"), response.get("webhook")) {
        (Some(s), _) => s.as_u64(),
        (None, Some(ct)) if ct.as_str() == Some("application/problem+json") => {
            let body: Value = serde_json::from_str(response["body"].as_str()?).ok()?;
            body["status"].as_u64()
        }
        _ => None,
    }?;
    let status = u16::try_from(status).ok()?;
    (!(200..300).contains(&status)).then_some(status)
}

#[test]
fn classification_statuses_follow_retry_on() {
    let mut checked = vec![];
    for case in cases(CLASSIFICATION) {
        let response = &case["response"];
        let Some(status) = case_status(response) else {
            continue;
        };
        let work_config = response
            .get("retry_on")
            .map(|r| json!({ "retry_on": r }))
            .unwrap_or_else(|| json!({}));
        let policy = RetryPolicy::from_step(Some(&work_config), None, &RetryDefaults::default()).unwrap();
        let id = case["id"].as_str().unwrap();
        let retryable = case["class"] == "retryable";
        assert_eq!(policy.retries_status(status), retryable, "{id}: status {status}");
        checked.push(id.to_owned());
    }
    for id in [
        "K13", "K14", "K15", "K16", "K17", "K18", "K19", "K20", "K26", "K27", "K28",
    ] {
        assert!(checked.iter().any(|c| c == id), "{id} not checked");
    }
}

#[test]
fn classification_retry_after_headers() {
    let mut checked = 0;
    for case in cases(CLASSIFICATION) {
        let Some(value) = case["response"]
            .get("headers")
            .and_then(|h| h.get("Retry-After"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let expected = case["retry_after_ms"].as_u64();
        assert_eq!(parse_retry_after(value, now()), expected, "{}", case["id"]);
        checked += 1;
    }
    assert_eq!(checked, 4);
}

#[test]
fn retry_after_forms() {
    let now = now(); // Sat, 01 Jun 2024 12:00:00 GMT
    assert_eq!(parse_retry_after("0", now), Some(0));
    assert_eq!(parse_retry_after(" 120 ", now), Some(120_000));
    assert_eq!(parse_retry_after("99999999999999999999999", now), Some(u64::MAX));
    assert_eq!(
        parse_retry_after("Sat, 01 Jun 2024 12:00:30 GMT", now),
        Some(30_000)
    );
    assert_eq!(
        parse_retry_after("Saturday, 01-Jun-24 12:01:00 GMT", now),
        Some(60_000)
    );
    assert_eq!(parse_retry_after("Sat Jun  1 12:00:05 2024", now), Some(5_000));
    for ignored in [
        "",
        "-5",
        "1.5",
        "5s",
        "soon",
        "Sat, 01 Jun 2024 12:00:00 GMT",
        "Sat, 01 Jun 2024 11:59:59 GMT",
        "Mon, 01 Jun 2024 12:00:30 GMT",
        "Sat, 01 Jun 2024 12:00:30 +0200",
    ] {
        assert_eq!(parse_retry_after(ignored, now), None, "{ignored:?}");
    }
}

// ---------------------------------------------------------------------------
// normalisation details

fn from(work_config: Option<Value>, retry: Option<Value>) -> Result<RetryPolicy, String> {
    RetryPolicy::from_step(work_config.as_ref(), retry.as_ref(), &RetryDefaults::default())
        .map_err(|e| e.to_string())
}

fn ok(work_config: Option<Value>, retry: Option<Value>) -> RetryPolicy {
    from(work_config, retry).unwrap()
}

fn err(work_config: Option<Value>, retry: Option<Value>) -> String {
    match from(work_config, retry) {
        Ok(p) => panic!("accepted: {p:?}"),
        Err(e) => e,
    }
}

#[test]
fn effective_retry_of_the_defaults() {
    let p = ok(None, None);
    assert_eq!(
        serde_json::to_value(&p).unwrap(),
        json!({
            "max_attempts": 11, "max_retries": 10, "init_backoff": 1000, "max_backoff": 60000,
            "backoff_type": "exponential", "backoff_coefficient": 2.0, "jitter": "none",
            "retry_on": ["5xx", 408, 425, 429], "honor_retry_after": true, "max_retry_duration": null
        })
    );
}

#[test]
fn effective_retry_of_dialects() {
    let steep = ok(
        None,
        Some(json!({"maxAttempts": -1, "delay": "1s", "exponentialBackoff": 2})),
    );
    assert_eq!(
        serde_json::to_value(&steep).unwrap(),
        json!({
            "max_attempts": -1, "max_retries": -1, "init_backoff": 1000, "max_backoff": null,
            "backoff_type": "exponential", "backoff_coefficient": 2.0, "jitter": "none",
            "retry_on": ["5xx", 408, 425, 429], "honor_retry_after": true, "max_retry_duration": null
        })
    );
    let sw = ok(
        None,
        Some(json!({
            "delay": {"seconds": 1}, "backoff": {"constant": {}},
            "limit": {"attempt": {"count": 3, "duration": "PT10S"}, "duration": {"minutes": 1}},
            "jitter": {"from": {"milliseconds": 100}, "to": {"milliseconds": 500}}
        })),
    );
    assert_eq!(
        serde_json::to_value(&sw).unwrap(),
        json!({
            "max_attempts": 4, "max_retries": 3, "init_backoff": 1000, "max_backoff": null,
            "backoff_type": "fixed", "backoff_coefficient": 2.0, "jitter": "none",
            "retry_on": ["5xx", 408, 425, 429], "honor_retry_after": true, "max_retry_duration": 60000,
            "jitter_range": {"from": 100, "to": 500}, "attempt_timeout": 10000
        })
    );
    let skipped = ok(None, Some(json!({"maxAttempts": 0})));
    assert!(skipped.is_skipped());
    assert_eq!(serde_json::to_value(&skipped).unwrap()["max_attempts"], 0);
}

#[test]
fn effective_retry_reads_back() {
    for (wc, retry) in [
        (None, None),
        (
            Some(json!({"max_retries": -1, "jitter": "equal", "retry_on": [503, "4xx"]})),
            None,
        ),
        (
            Some(json!({"max_retry_duration": "1h", "honor_retry_after": false})),
            None,
        ),
        (
            None,
            Some(json!({"delay": "PT1S", "jitter": {"from": 0, "to": 10}})),
        ),
        (None, Some(json!({"maxAttempts": 0}))),
    ] {
        let p = ok(wc, retry);
        let back: RetryPolicy = serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }
}

#[test]
fn work_config_zero_values_take_the_defaults() {
    let zeros = ok(
        Some(json!({
            "max_retries": 0, "max_attempts": 0, "init_backoff": 0, "max_backoff": 0,
            "backoff_type": "", "backoff_coefficient": 0, "jitter": "", "max_retry_duration": 0,
            "parallelism": 4, "some_future_field": true
        })),
        None,
    );
    assert_eq!(zeros, ok(None, None));
    assert_eq!(ok(Some(json!(null)), Some(json!(null))), ok(None, None));
}

#[test]
fn work_config_durations_and_counts() {
    let p = ok(
        Some(json!({"init_backoff": "1.5s", "max_backoff": "PT2M", "max_retry_duration": {"hours": 1}})),
        None,
    );
    assert_eq!(
        (p.init_backoff_ms, p.max_backoff_ms, p.max_retry_duration_ms),
        (1500, 120_000, Some(3_600_000))
    );
    assert_eq!(ok(Some(json!({"max_attempts": 1})), None).max_attempts, Some(1));
    assert_eq!(
        ok(Some(json!({"max_attempts": 4, "max_retries": 3})), None).max_attempts,
        Some(4)
    );
    assert_eq!(
        ok(Some(json!({"max_attempts": -1, "max_retries": -1})), None).max_attempts,
        None
    );
    assert_eq!(ok(Some(json!({"max_attempts": -1})), None).max_attempts, None);
    // A larger init with a larger max is fine (validation after defaults).
    assert_eq!(
        ok(Some(json!({"init_backoff": 120000, "max_backoff": 120000})), None).max_backoff_ms,
        120_000
    );
    assert!(!ok(Some(json!({"retry_on": []})), None).retries_status(503));
    let p = ok(Some(json!({"retry_on": [503, "4xx", 503]})), None);
    assert_eq!(p.retry_on, vec![RetryOn::Status(503), RetryOn::Class(4)]);
    assert!(p.retries_status(404) && p.retries_status(503) && !p.retries_status(502));
}

#[test]
fn work_config_errors_name_the_field() {
    let cases = [
        (json!({"max_retries": -2}), "work_config.max_retries"),
        (json!({"max_retries": 1.5}), "work_config.max_retries"),
        (json!({"max_retries": "3"}), "work_config.max_retries"),
        (
            json!({"max_retries": 5_000_000_000_i64}),
            "work_config.max_retries",
        ),
        (json!({"max_attempts": -2}), "work_config.max_attempts"),
        (
            json!({"max_attempts": 3, "max_retries": -1}),
            "work_config.max_attempts",
        ),
        (
            json!({"max_attempts": -1, "max_retries": 3}),
            "work_config.max_attempts",
        ),
        (json!({"init_backoff": "5M"}), "work_config.init_backoff"),
        (json!({"max_backoff": -5}), "work_config.max_backoff"),
        (
            json!({"max_retry_duration": "soon"}),
            "work_config.max_retry_duration",
        ),
        (json!({"backoff_type": "Exponential"}), "work_config.backoff_type"),
        (json!({"backoff_type": 1}), "work_config.backoff_type"),
        (
            json!({"backoff_coefficient": -1}),
            "work_config.backoff_coefficient",
        ),
        (
            json!({"backoff_coefficient": "2"}),
            "work_config.backoff_coefficient",
        ),
        (json!({"jitter": "random"}), "work_config.jitter"),
        (json!({"jitter": {"from": 1, "to": 2}}), "work_config.jitter"),
        (json!({"retry_on": "5xx"}), "work_config.retry_on"),
        (json!({"retry_on": ["6xx"]}), "work_config.retry_on"),
        (json!({"retry_on": ["5XX"]}), "work_config.retry_on"),
        (json!({"retry_on": [200]}), "work_config.retry_on"),
        (json!({"retry_on": ["2xx"]}), "work_config.retry_on"),
        (json!({"retry_on": ["503"]}), "work_config.retry_on"),
        (json!({"retry_on": [99]}), "work_config.retry_on"),
        (json!({"retry_on": [null]}), "work_config.retry_on"),
        (
            json!({"honor_retry_after": "yes"}),
            "work_config.honor_retry_after",
        ),
        (
            json!({"init_backoff": 1000, "max_backoff": 999}),
            "work_config.max_backoff",
        ),
        (json!([1]), "work_config:"),
    ];
    for (wc, field) in cases {
        let e = err(Some(wc.clone()), None);
        assert!(e.starts_with(field), "{wc}: {e}");
    }
    let e = err(Some(json!({"init_backoff": 120000})), None);
    assert!(e.contains("global default"), "{e}");
    let e = err(Some(json!({"max_retries": 2, "max_attempts": 5})), None);
    assert!(e.contains("must be 3"), "{e}");
}

#[test]
fn dialect_recognition() {
    // Only `delay`: Serverless Workflow for objects and ISO 8601, Steep otherwise.
    let steep = ok(None, Some(json!({"delay": "1s"})));
    assert_eq!(
        (steep.max_attempts, steep.backoff_type),
        (Some(1), BackoffType::Exponential)
    );
    let steep = ok(None, Some(json!({"delay": 250})));
    assert_eq!((steep.max_attempts, steep.init_backoff_ms), (Some(1), 250));
    for sw in [json!({"delay": "PT1S"}), json!({"delay": {"seconds": 1}})] {
        let p = ok(None, Some(sw));
        assert_eq!(
            (p.max_attempts, p.backoff_type, p.init_backoff_ms),
            (None, BackoffType::Fixed, 1000)
        );
    }
    let temporal = ok(
        None,
        Some(json!({"maximumAttempts": 0, "initialInterval": "200s"})),
    );
    assert_eq!(
        (
            temporal.max_attempts,
            temporal.init_backoff_ms,
            temporal.max_backoff_ms
        ),
        (None, 200_000, 200_000)
    );
    let temporal = ok(None, Some(json!({"backoffCoefficient": 0})));
    assert_eq!(
        (
            temporal.max_attempts,
            temporal.backoff_coefficient,
            temporal.max_backoff_ms
        ),
        (Some(10), 2.0, 100_000)
    );
    let linear = ok(
        None,
        Some(json!({"backoff": {"linear": {}}, "limit": {"attempt": {"count": 0}}})),
    );
    assert_eq!((linear.max_attempts, linear.init_backoff_ms), (Some(1), 0));
    // Zero-valued work_config retry fields and parallelism may stand beside.
    let beside = ok(
        Some(json!({"parallelism": 3, "max_retries": 0, "backoff_type": ""})),
        Some(json!({"maxAttempts": 2})),
    );
    assert_eq!(beside.max_attempts, Some(2));
}

#[test]
fn dialect_errors_name_the_field() {
    let cases = [
        (json!({}), "retry:"),
        (json!("exponential"), "retry:"),
        (
            json!({"maxAttempts": 3, "backoff": {"constant": {}}}),
            "retry: the retry policy mixes",
        ),
        (
            json!({"maxAttempts": 3, "initialInterval": "1s"}),
            "retry: the retry policy mixes",
        ),
        (json!({"retries": 3}), "retry.retries"),
        (json!({"maxAttempts": -2}), "retry.maxAttempts"),
        (json!({"maxAttempts": 2.5}), "retry.maxAttempts"),
        (json!({"delay": "-1s"}), "retry.delay"),
        (json!({"delay": 1000, "maxDelay": 500}), "retry.maxDelay"),
        (
            json!({"delay": 1000, "exponentialBackoff": 0.5}),
            "retry.exponentialBackoff",
        ),
        (json!({"exponentialBackoff": 0}), "retry.exponentialBackoff"),
        (json!({"maximumAttempts": -1}), "retry.maximumAttempts"),
        (
            json!({"initialInterval": "10s", "maximumInterval": "1s"}),
            "retry.maximumInterval",
        ),
        (json!({"backoffCoefficient": 0.9}), "retry.backoffCoefficient"),
        (
            json!({"nonRetryableErrorTypes": ["x"]}),
            "retry.nonRetryableErrorTypes",
        ),
        (
            json!({"backoff": {"constant": {}, "linear": {}}}),
            "retry.backoff",
        ),
        (json!({"backoff": {"random": {}}}), "retry.backoff.random"),
        (
            json!({"backoff": {"linear": {"increment": 5}}}),
            "retry.backoff.linear",
        ),
        (json!({"backoff": "linear"}), "retry.backoff"),
        (json!({"backoff": {}}), "retry.backoff"),
        (
            json!({"limit": {"attempt": {"count": -1}}}),
            "retry.limit.attempt.count",
        ),
        (
            json!({"limit": {"attempt": {"duration": 0}}}),
            "retry.limit.attempt.duration",
        ),
        (json!({"limit": {"attempts": 3}}), "retry.limit.attempts"),
        (json!({"limit": {"duration": "PT0S"}}), "retry.limit.duration"),
        (json!({"jitter": {"from": 500, "to": 100}}), "retry.jitter.to"),
        (json!({"jitter": {"to": 100}}), "retry.jitter.from"),
        (json!({"when": "${ .x }"}), "retry.when"),
    ];
    for (retry, field) in cases {
        let e = err(None, Some(retry.clone()));
        assert!(e.starts_with(field), "{retry}: {e}");
    }
    let e = err(Some(json!({"jitter": "full"})), Some(json!({"maxAttempts": 2})));
    assert!(e.starts_with("retry:") && e.contains("jitter"), "{e}");
    let e = err(
        Some(json!({"honor_retry_after": false})),
        Some(json!({"maxAttempts": 2})),
    );
    assert!(e.contains("honor_retry_after"), "{e}");
}

#[test]
fn delay_parts_explain_the_wait() {
    let p = ok(
        Some(json!({"init_backoff": 1000, "max_backoff": 10000, "jitter": "full", "max_retries": -1})),
        None,
    );
    let parts = delay(&p, 4, Some(9000), &mut || 0.5);
    assert_eq!(
        serde_json::to_value(parts).unwrap(),
        json!({
            "computed_ms": 16000, "capped_ms": 10000, "cap_applied": true, "jitter_ms": -5000,
            "retry_after_ms": 9000, "retry_after_applied": true, "delay_ms": 9000
        })
    );
    let ignoring = RetryPolicy {
        honor_retry_after: false,
        ..p.clone()
    };
    let parts = delay(&ignoring, 4, Some(9000), &mut || 0.5);
    assert_eq!((parts.delay_ms, parts.retry_after_applied), (5000, false));
    // The random source is not consulted without jitter.
    let plain = ok(None, None);
    let parts = delay(&plain, 0, None, &mut || panic!("no jitter, no draw"));
    assert_eq!(
        (parts.delay_ms, parts.jitter_ms, parts.cap_applied),
        (1000, 0, false)
    );
    let sw = ok(
        None,
        Some(json!({"delay": "PT1S", "jitter": {"from": 100, "to": 500}})),
    );
    assert_eq!(delay(&sw, 0, None, &mut || 0.5).jitter_ms, 300);
}

// ---------------------------------------------------------------------------
// properties

fn any_backoff_type() -> impl Strategy<Value = BackoffType> {
    prop_oneof![
        Just(BackoffType::Fixed),
        Just(BackoffType::Linear),
        Just(BackoffType::Exponential)
    ]
}

fn any_jitter() -> impl Strategy<Value = Jitter> {
    prop_oneof![Just(Jitter::None), Just(Jitter::Full), Just(Jitter::Equal)]
}

fn any_u64() -> impl Strategy<Value = u64> {
    prop_oneof![0..100_000u64, any::<u64>(), Just(u64::MAX), Just(NO_CAP - 1)]
}

fn any_r() -> impl Strategy<Value = u32> {
    prop_oneof![0..200u32, any::<u32>(), Just(u32::MAX), Just(10_000u32)]
}

fn any_coefficient() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(1.0),
        Just(2.0),
        1.0..10.0f64,
        1.0..1e300f64,
        (1u32..1000).prop_map(f64::from)
    ]
}

/// Any policy, valid or not (the delay math must not panic even then).
fn any_policy() -> impl Strategy<Value = RetryPolicy> {
    (
        (
            proptest::option::of(0..50u32),
            any_u64(),
            any_u64(),
            any_backoff_type(),
            prop_oneof![any_coefficient(), any::<f64>()],
        ),
        (
            any_jitter(),
            proptest::option::of((any_u64(), any_u64())),
            any::<bool>(),
            proptest::option::of(any_u64()),
        ),
    )
        .prop_map(
            |((max_attempts, init, max, backoff_type, coefficient), (jitter, extra, honor, budget))| {
                RetryPolicy {
                    max_attempts,
                    init_backoff_ms: init,
                    max_backoff_ms: max,
                    backoff_type,
                    backoff_coefficient: coefficient,
                    jitter,
                    extra_jitter_ms: extra,
                    retry_on: vec![RetryOn::Class(5)],
                    honor_retry_after: honor,
                    max_retry_duration_ms: budget,
                    attempt_timeout_ms: None,
                }
            },
        )
}

/// A policy as from_step builds it (max ≥ init, coefficient ≥ 1).
fn valid_policy(jitter: impl Strategy<Value = Jitter>) -> impl Strategy<Value = RetryPolicy> {
    (
        proptest::option::of(0..60u32),
        any_u64(),
        any_u64(),
        any_backoff_type(),
        any_coefficient(),
        jitter,
        proptest::option::of(0..100_000u64),
    )
        .prop_map(
            |(max_attempts, a, b, backoff_type, coefficient, jitter, budget)| RetryPolicy {
                max_attempts,
                init_backoff_ms: a.min(b),
                max_backoff_ms: a.max(b),
                backoff_type,
                backoff_coefficient: coefficient,
                jitter,
                extra_jitter_ms: None,
                retry_on: vec![RetryOn::Class(5)],
                honor_retry_after: true,
                max_retry_duration_ms: budget,
                attempt_timeout_ms: None,
            },
        )
}

fn any_unit() -> impl Strategy<Value = f64> {
    prop_oneof![0.0..1.0f64, Just(0.0), Just(0.999_999_999_999)]
}

proptest! {
    #[test]
    fn delays_never_decrease_without_jitter(
        p in valid_policy(Just(Jitter::None)),
        r1 in any_r(),
        r2 in any_r(),
    ) {
        let (lo, hi) = (r1.min(r2), r1.max(r2));
        let a = delay(&p, lo, None, &mut || 0.5);
        let b = delay(&p, hi, None, &mut || 0.5);
        prop_assert!(a.delay_ms <= b.delay_ms, "r={lo}: {a:?} > r={hi}: {b:?}");
        prop_assert!(b.delay_ms <= p.max_backoff_ms);
        prop_assert_eq!(a.delay_ms, a.capped_ms);
    }

    #[test]
    fn consecutive_delays_never_decrease_until_the_cap(p in valid_policy(Just(Jitter::None))) {
        let mut last = 0;
        for r in 0..100 {
            let d = delay(&p, r, None, &mut || 0.5).delay_ms;
            prop_assert!(d >= last, "r={r}: {d} < {last}");
            last = d;
        }
    }

    #[test]
    fn jitter_never_exceeds_the_capped_delay(
        p in valid_policy(prop_oneof![Just(Jitter::Full), Just(Jitter::Equal)]),
        r in any_r(),
        u in any_unit(),
    ) {
        let parts = delay(&p, r, None, &mut || u);
        prop_assert!(parts.delay_ms <= parts.capped_ms, "{parts:?}");
        prop_assert!(parts.jitter_ms <= 0);
        // jitter_ms is the exact change unless it saturates at i64::MIN (delays beyond i64::MAX ms).
        let change = i128::from(parts.delay_ms) - i128::from(parts.capped_ms);
        prop_assert_eq!(i128::from(parts.jitter_ms), change.max(i128::from(i64::MIN)));
        if p.jitter == Jitter::Equal {
            prop_assert!(parts.delay_ms >= parts.capped_ms / 2, "{parts:?}");
        }
    }

    #[test]
    fn delay_never_panics(
        p in any_policy(),
        r in any_r(),
        retry_after in proptest::option::of(any_u64()),
        u in prop_oneof![any_unit(), any::<f64>()],
    ) {
        let parts = delay(&p, r, retry_after, &mut || u);
        prop_assert!(parts.capped_ms <= parts.computed_ms);
        prop_assert!(parts.capped_ms <= p.max_backoff_ms);
        prop_assert_eq!(parts.cap_applied, parts.computed_ms > parts.capped_ms);
        if parts.retry_after_applied {
            prop_assert_eq!(Some(parts.delay_ms), retry_after);
        }
        if p.honor_retry_after {
            prop_assert!(parts.delay_ms >= retry_after.unwrap_or(0));
        }
    }

    #[test]
    fn attempts_never_exceed_max_attempts(
        p in valid_policy(any_jitter()),
        statuses in proptest::collection::vec(prop_oneof![Just(503u16), Just(429), Just(200)], 0..20),
        u in any_unit(),
    ) {
        let script = Script { first: statuses.into_iter().map(|status| Response { status, retry_after: None }).collect(), ..Script::always(503) };
        let run = simulate(&p, &script, None, &mut || u);
        if let Some(n) = p.max_attempts {
            prop_assert!(run.attempts <= n, "{run:?}");
        }
        prop_assert!(run.attempts <= FLOW_ATTEMPT_CAP);
        prop_assert_eq!(run.final_state == "skipped", p.max_attempts == Some(0));
    }

    #[test]
    fn waits_sum_to_the_time_until_terminal_failure(
        p in valid_policy(any_jitter()),
        u in any_unit(),
        retry_after in proptest::option::of(0..100u64),
    ) {
        let rest = Response { status: 503, retry_after: retry_after.map(|s| s.to_string()) };
        let run = simulate(&p, &Script { first: vec![], rest }, Some(10_000_000), &mut || u);
        prop_assert!(run.final_state != "succeeded");
        let total = run.waits.iter().fold(0u64, |a, w| a.saturating_add(*w));
        prop_assert_eq!(run.end_ms, total, "{:?}", run);
        if let Some(budget) = p.max_retry_duration_ms {
            // No retry starts at or after the budget's end.
            prop_assert!(run.waits.is_empty() || run.end_ms < budget, "{:?}", run);
        }
        if run.attempts > 0 {
            prop_assert_eq!(run.waits.len(), run.attempts as usize - 1);
        }
    }
}

// ---------------------------------------------------------------------------
// the policy in words (docs/retries.md, "In words")

#[test]
fn a_policy_reads_in_words_as_it_behaves() {
    let words = |work_config: Value| {
        policy_of(&json!({ "work_config": work_config }))
            .unwrap()
            .in_words()
    };
    assert_eq!(
        words(
            json!({"max_attempts": 5, "init_backoff": "1s", "max_backoff": "30s", "backoff_type": "exponential",
                     "jitter": "full", "max_retry_duration": "10m"})
        ),
        "up to 5 attempts, waiting 1s, 2s, 4s, 8s; jittered (full: each wait random, up to it); \
         retried on 5xx, 408, 425, 429, timeouts and transport errors, honouring Retry-After; \
         gives up 10m after the first attempt"
    );
    // The cap is named when a wait reaches it, and the waits go on at it.
    assert_eq!(
        words(
            json!({"max_retries": 10, "init_backoff": "1s", "max_backoff": "5s", "backoff_type": "exponential",
                     "retry_on": ["5xx"], "honor_retry_after": false})
        ),
        "up to 11 attempts, waiting 1s, 2s, 4s, 5s, 5s, then 5s each; capped at 5s; \
         retried on 5xx, timeouts and transport errors"
    );
    assert_eq!(
        words(json!({"max_retries": 8, "init_backoff": "250ms", "backoff_type": "linear"})),
        "up to 9 attempts, waiting 250ms, 500ms, 750ms, 1s, 1.25s, and so on; \
         retried on 5xx, 408, 425, 429, timeouts and transport errors, honouring Retry-After"
    );
    assert_eq!(words(json!({"max_attempts": 1})), "one attempt, no retry");
    let never = RetryPolicy {
        max_attempts: Some(0),
        ..policy_of(&json!({})).unwrap()
    };
    assert_eq!(
        never.in_words(),
        "never called (max_attempts is 0): the step is skipped"
    );
    // Unlimited: what bounds it is said.
    assert!(
        words(json!({"max_retries": -1, "init_backoff": "2s", "backoff_type": "fixed"})).starts_with(
            "attempts until it succeeds (the flow's max_step_attempts bounds them), waiting 2s, 2s, 2s, 2s, 2s, then 2s each"
        )
    );
}
