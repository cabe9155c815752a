//! Timeout policies (docs/timeouts.md): a step's `timeouts` in every form, the
//! agreement rules between the attempt-timeout sources, the flow start
//! `timeout`, scope precedence and the timeout problem object.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};
use tartan_core::error::ValidationError;
use tartan_core::retry::{RetryDefaults, RetryPolicy};
use tartan_core::timeouts::{
    escape_pointer_segment, parse_flow_timeout, pointer_for_step, pointer_for_work, timeout_detail,
    timeout_problem, OnTimeout, TimeoutPolicy, TimeoutScope, FLOW_POINTER,
};

fn policy(timeouts: Value) -> TimeoutPolicy {
    match TimeoutPolicy::from_step(Some(&timeouts), 0, None) {
        Ok(p) => p,
        Err(e) => panic!("{timeouts} was rejected: {e}"),
    }
}

fn rejected(timeouts: Value) -> ValidationError {
    rejected_with(timeouts, 0, None)
}

fn rejected_with(timeouts: Value, http_ms: u64, sw_ms: Option<u64>) -> ValidationError {
    match TimeoutPolicy::from_step(Some(&timeouts), http_ms, sw_ms) {
        Ok(p) => panic!("{timeouts} (http {http_ms}, sw {sw_ms:?}) was accepted: {p:?}"),
        Err(e) => e,
    }
}

fn attempt_of(timeouts: Option<Value>, http_ms: u64, sw_ms: Option<u64>) -> Option<u64> {
    TimeoutPolicy::from_step(timeouts.as_ref(), http_ms, sw_ms)
        .unwrap()
        .attempt_ms
}

// ---------------------------------------------------------------------------
// forms

#[test]
fn no_timeouts_gives_an_empty_policy_that_fails_on_timeout() {
    for input in [None, Some(Value::Null), Some(json!({}))] {
        let p = TimeoutPolicy::from_step(input.as_ref(), 0, None).unwrap();
        assert_eq!(
            p,
            TimeoutPolicy {
                attempt_ms: None,
                inactivity_ms: None,
                total_ms: None,
                on_timeout: OnTimeout::Error,
            }
        );
    }
}

#[test]
fn native_keys_accept_ms_integers_iso_and_unit_strings() {
    let p = policy(json!({"attempt": 1500, "inactivity": "PT2M", "total": "1h30m"}));
    assert_eq!(p.attempt_ms, Some(1500));
    assert_eq!(p.inactivity_ms, Some(120_000));
    assert_eq!(p.total_ms, Some(5_400_000));
    assert_eq!(p.on_timeout, OnTimeout::Error);
}

#[test]
fn native_keys_accept_bare_number_strings_and_duration_objects() {
    let p = policy(json!({"attempt": "2500", "total": {"minutes": 1, "seconds": 30}}));
    assert_eq!(p.attempt_ms, Some(2500));
    assert_eq!(p.total_ms, Some(90_000));
}

#[test]
fn steep_plain_durations_map_to_the_three_scopes() {
    let p = policy(json!({"maxRuntime": "10 minutes", "maxInactivity": "PT30S", "deadline": 3_600_000}));
    assert_eq!(p.attempt_ms, Some(600_000));
    assert_eq!(p.inactivity_ms, Some(30_000));
    assert_eq!(p.total_ms, Some(3_600_000));
    assert_eq!(p.on_timeout, OnTimeout::Error);
}

#[test]
fn steep_objects_give_the_duration_and_error_on_timeout() {
    let p = policy(json!({"deadline": {"timeout": "1d 5h", "errorOnTimeout": true}}));
    assert_eq!(p.total_ms, Some(104_400_000));
    assert_eq!(p.on_timeout, OnTimeout::Error);

    let p = policy(json!({"maxRuntime": {"timeout": "5m", "errorOnTimeout": false}}));
    assert_eq!(p.attempt_ms, Some(300_000));
    assert_eq!(p.on_timeout, OnTimeout::Cancel);
}

#[test]
fn a_steep_object_without_error_on_timeout_keeps_the_default_error() {
    let p = policy(json!({"maxInactivity": {"timeout": 5000}}));
    assert_eq!(p.inactivity_ms, Some(5000));
    assert_eq!(p.on_timeout, OnTimeout::Error);
}

#[test]
fn a_steep_key_accepts_a_duration_object_too() {
    let p = policy(json!({"deadline": {"hours": 2}}));
    assert_eq!(p.total_ms, Some(7_200_000));
}

#[test]
fn on_timeout_accepts_error_and_cancel() {
    assert_eq!(
        policy(json!({"on_timeout": "cancel"})).on_timeout,
        OnTimeout::Cancel
    );
    assert_eq!(
        policy(json!({"on_timeout": "error"})).on_timeout,
        OnTimeout::Error
    );
    let p = policy(json!({"total": "5s", "on_timeout": "cancel"}));
    assert_eq!(p.total_ms, Some(5000));
    assert_eq!(p.on_timeout, OnTimeout::Cancel);
}

#[test]
fn on_timeout_agreeing_with_error_on_timeout_is_accepted() {
    let p = policy(json!({
        "on_timeout": "cancel",
        "deadline": {"timeout": "1m", "errorOnTimeout": false},
        "maxRuntime": {"timeout": "10s", "errorOnTimeout": false},
    }));
    assert_eq!(p.on_timeout, OnTimeout::Cancel);
}

#[test]
fn null_values_stand_for_absent() {
    let p = policy(json!({"attempt": null, "inactivity": null, "total": "3s", "on_timeout": null}));
    assert_eq!(p.attempt_ms, None);
    assert_eq!(p.inactivity_ms, None);
    assert_eq!(p.total_ms, Some(3000));
    assert_eq!(p.on_timeout, OnTimeout::Error);
}

#[test]
fn a_native_and_a_steep_name_for_the_same_scope_are_accepted_when_equal() {
    let p = policy(json!({"total": "PT1M", "deadline": 60_000, "inactivity": "5s", "maxInactivity": "5000"}));
    assert_eq!(p.total_ms, Some(60_000));
    assert_eq!(p.inactivity_ms, Some(5000));
}

// ---------------------------------------------------------------------------
// the attempt sources

#[test]
fn http_timeout_alone_is_the_attempt_timeout() {
    assert_eq!(attempt_of(None, 5000, None), Some(5000));
}

#[test]
fn http_timeout_zero_means_not_given() {
    assert_eq!(attempt_of(None, 0, None), None);
    assert_eq!(attempt_of(Some(json!({"attempt": "7s"})), 0, None), Some(7000));
}

#[test]
fn the_serverless_workflow_attempt_duration_alone_is_the_attempt_timeout() {
    assert_eq!(attempt_of(None, 0, Some(4000)), Some(4000));
}

#[test]
fn every_attempt_source_agreeing_gives_that_value() {
    let timeouts = json!({"attempt": "3s", "maxRuntime": "PT3S"});
    assert_eq!(attempt_of(Some(timeouts), 3000, Some(3000)), Some(3000));
}

#[test]
fn http_timeout_disagreeing_with_timeouts_attempt_is_rejected_naming_both() {
    let e = rejected_with(json!({"attempt": "3s"}), 5000, None);
    assert_eq!(e.field, "timeouts.attempt");
    assert!(e.message.contains("http.timeout = 5000 ms"), "{e}");
    assert!(e.message.contains("timeouts.attempt = 3000 ms"), "{e}");
}

#[test]
fn http_timeout_disagreeing_with_max_runtime_is_rejected_naming_both() {
    let e = rejected_with(json!({"maxRuntime": {"timeout": "4s"}}), 5000, None);
    assert_eq!(e.field, "timeouts.maxRuntime");
    assert!(e.message.contains("http.timeout = 5000 ms"), "{e}");
    assert!(e.message.contains("timeouts.maxRuntime = 4000 ms"), "{e}");
}

#[test]
fn timeouts_attempt_disagreeing_with_max_runtime_is_rejected() {
    let e = rejected(json!({"attempt": "3s", "maxRuntime": "4s"}));
    assert_eq!(e.field, "timeouts.maxRuntime");
    assert!(e.message.contains("timeouts.attempt = 3000 ms"), "{e}");
    assert!(e.message.contains("timeouts.maxRuntime = 4000 ms"), "{e}");
}

#[test]
fn the_serverless_workflow_attempt_duration_disagreeing_is_rejected() {
    let e = rejected_with(json!({"attempt": "3s"}), 0, Some(2000));
    assert_eq!(e.field, "retry.limit.attempt.duration");
    assert!(e.message.contains("timeouts.attempt = 3000 ms"), "{e}");
    assert!(
        e.message.contains("retry.limit.attempt.duration = 2000 ms"),
        "{e}"
    );

    let e = TimeoutPolicy::from_step(None, 5000, Some(2000)).unwrap_err();
    assert_eq!(e.field, "retry.limit.attempt.duration");
    assert!(e.message.contains("http.timeout = 5000 ms"), "{e}");
}

#[test]
fn the_attempt_duration_of_a_serverless_workflow_retry_feeds_the_attempt_timeout() {
    let retry = json!({"delay": "PT1S", "limit": {"attempt": {"count": 2, "duration": "PT10S"}}});
    let sw = RetryPolicy::from_step(None, Some(&retry), &RetryDefaults::default()).unwrap();
    assert_eq!(attempt_of(None, 0, sw.attempt_timeout_ms), Some(10_000));
    assert_eq!(
        attempt_of(Some(json!({"attempt": "10s"})), 10_000, sw.attempt_timeout_ms),
        Some(10_000)
    );
    assert!(TimeoutPolicy::from_step(None, 9_000, sw.attempt_timeout_ms).is_err());
}

#[test]
fn a_native_and_a_steep_name_that_disagree_are_rejected() {
    let e = rejected(json!({"total": "1m", "deadline": "2m"}));
    assert_eq!(e.field, "timeouts.deadline");
    assert!(e.message.contains("timeouts.total = 60000 ms"), "{e}");
    assert!(e.message.contains("timeouts.deadline = 120000 ms"), "{e}");

    let e = rejected(json!({"inactivity": "1s", "maxInactivity": "2s"}));
    assert_eq!(e.field, "timeouts.maxInactivity");
}

#[test]
fn disagreeing_on_timeout_values_are_rejected() {
    let e = rejected(json!({"on_timeout": "error", "deadline": {"timeout": "1m", "errorOnTimeout": false}}));
    assert_eq!(e.field, "timeouts.deadline.errorOnTimeout");
    assert!(e.message.contains("timeouts.on_timeout = error"), "{e}");

    let e = rejected(json!({
        "maxRuntime": {"timeout": "1s", "errorOnTimeout": true},
        "deadline": {"timeout": "1m", "errorOnTimeout": false},
    }));
    assert_eq!(e.field, "timeouts.deadline.errorOnTimeout");
}

// ---------------------------------------------------------------------------
// rejected values

#[test]
fn zero_is_rejected_naming_the_field_and_echoing_the_text() {
    for (timeouts, field, echoed) in [
        (json!({"attempt": 0}), "timeouts.attempt", "0"),
        (json!({"inactivity": "0s"}), "timeouts.inactivity", "\"0s\""),
        (json!({"total": "PT0S"}), "timeouts.total", "\"PT0S\""),
        (json!({"maxRuntime": "0"}), "timeouts.maxRuntime", "\"0\""),
        (
            json!({"deadline": {"timeout": 0}}),
            "timeouts.deadline.timeout",
            "0",
        ),
    ] {
        let e = rejected(timeouts.clone());
        assert_eq!(e.field, field, "{timeouts}");
        assert!(e.message.contains(echoed), "{timeouts}: {e}");
        assert!(e.message.contains("zero"), "{timeouts}: {e}");
    }
}

#[test]
fn negative_values_are_rejected_naming_the_field_and_echoing_the_text() {
    for (timeouts, field, echoed) in [
        (json!({"attempt": -1}), "timeouts.attempt", "-1"),
        (json!({"total": "-5s"}), "timeouts.total", "\"-5s\""),
        (
            json!({"maxInactivity": {"timeout": -100}}),
            "timeouts.maxInactivity.timeout",
            "-100",
        ),
    ] {
        let e = rejected(timeouts.clone());
        assert_eq!(e.field, field, "{timeouts}");
        assert!(e.message.contains(echoed), "{timeouts}: {e}");
        assert!(e.message.contains("negative"), "{timeouts}: {e}");
    }
}

#[test]
fn garbage_is_rejected_naming_the_field_and_echoing_the_text() {
    for (timeouts, field, echoed) in [
        (json!({"total": "5M"}), "timeouts.total", "\"5M\""),
        (json!({"attempt": "1 Elvis"}), "timeouts.attempt", "\"1 Elvis\""),
        (json!({"inactivity": ""}), "timeouts.inactivity", "\"\""),
        (json!({"total": "100 days 1"}), "timeouts.total", "\"100 days 1\""),
        (json!({"attempt": true}), "timeouts.attempt", "true"),
        (json!({"attempt": 1.5}), "timeouts.attempt", "1.5"),
        (json!({"total": "P1Y"}), "timeouts.total", "\"P1Y\""),
        (json!({"deadline": "soon"}), "timeouts.deadline", "\"soon\""),
        (
            json!({"maxRuntime": {"timeout": "x"}}),
            "timeouts.maxRuntime.timeout",
            "\"x\"",
        ),
        (json!({"on_timeout": "abort"}), "timeouts.on_timeout", "\"abort\""),
        (json!({"on_timeout": 1}), "timeouts.on_timeout", "1"),
        (
            json!({"maxRuntime": {"timeout": "1s", "errorOnTimeout": "no"}}),
            "timeouts.maxRuntime.errorOnTimeout",
            "\"no\"",
        ),
    ] {
        let e = rejected(timeouts.clone());
        assert_eq!(e.field, field, "{timeouts}");
        assert!(e.message.contains(echoed), "{timeouts}: {e}");
    }
}

#[test]
fn an_empty_duration_object_is_rejected() {
    let e = rejected(json!({"total": {}}));
    assert_eq!(e.field, "timeouts.total");
    assert!(e.message.contains("{}"), "{e}");
}

#[test]
fn a_steep_object_without_timeout_is_rejected() {
    let e = rejected(json!({"deadline": {"errorOnTimeout": false}}));
    assert_eq!(e.field, "timeouts.deadline.timeout");
    assert!(e.message.contains("missing"), "{e}");
}

#[test]
fn the_steep_object_under_a_native_key_is_rejected_with_a_hint() {
    let e = rejected(json!({"total": {"timeout": "5s", "errorOnTimeout": false}}));
    assert_eq!(e.field, "timeouts.total");
    assert!(e.message.contains("deadline"), "{e}");
    assert!(e.message.contains("on_timeout"), "{e}");
}

#[test]
fn timeouts_that_are_not_an_object_are_rejected() {
    for timeouts in [json!("5s"), json!(5000), json!([1]), json!(true)] {
        let e = rejected(timeouts.clone());
        assert_eq!(e.field, "timeouts", "{timeouts}");
        assert!(e.message.contains(&timeouts.to_string()), "{timeouts}: {e}");
    }
}

// ---------------------------------------------------------------------------
// unknown keys

#[test]
fn unknown_keys_are_rejected_naming_the_key() {
    let e = rejected(json!({"attempts": "5s"}));
    assert_eq!(e.field, "timeouts.attempts");
    assert!(
        e.message.contains("attempt, inactivity, total, on_timeout"),
        "{e}"
    );

    let e = rejected(json!({"total": "5s", "MaxRuntime": "5s"}));
    assert_eq!(e.field, "timeouts.MaxRuntime");
}

#[test]
fn unknown_keys_inside_a_steep_object_are_rejected_naming_the_path() {
    let e = rejected(json!({"maxRuntime": {"timeout": "5s", "errorOnTimeOut": false}}));
    assert_eq!(e.field, "timeouts.maxRuntime.errorOnTimeOut");

    let e = rejected(json!({"deadline": {"timeout": "5s", "hours": 1}}));
    assert_eq!(e.field, "timeouts.deadline.hours");

    let e = rejected(json!({"deadline": {"timout": "5s"}}));
    assert_eq!(e.field, "timeouts.deadline.timout");
}

#[test]
fn an_unknown_key_in_a_duration_object_is_rejected() {
    let e = rejected(json!({"total": {"weeks": 1}}));
    assert_eq!(e.field, "timeouts.total");
    assert!(e.message.contains("weeks"), "{e}");
}

// ---------------------------------------------------------------------------
// effective_timeouts

#[test]
fn the_policy_serializes_as_effective_timeouts_with_every_value_explicit() {
    let p = policy(json!({"maxRuntime": "30s", "deadline": {"timeout": "5m", "errorOnTimeout": false}}));
    assert_eq!(
        serde_json::to_value(&p).unwrap(),
        json!({"attempt": 30_000, "inactivity": null, "total": 300_000, "on_timeout": "cancel"})
    );
    assert_eq!(
        serde_json::to_value(TimeoutPolicy::default()).unwrap(),
        json!({"attempt": null, "inactivity": null, "total": null, "on_timeout": "error"})
    );
}

#[test]
fn effective_timeouts_posted_back_as_timeouts_give_the_same_policy() {
    let p = policy(json!({"maxRuntime": "30s", "maxInactivity": "PT10S", "on_timeout": "cancel"}));
    let effective = serde_json::to_value(&p).unwrap();
    assert_eq!(policy(effective.clone()), p);
    assert_eq!(serde_json::from_value::<TimeoutPolicy>(effective).unwrap(), p);
}

#[test]
fn attempt_or_falls_back_to_the_default_only_when_no_attempt_timeout_is_given() {
    assert_eq!(TimeoutPolicy::default().attempt_or(30_000), 30_000);
    assert_eq!(policy(json!({"attempt": "2s"})).attempt_or(30_000), 2000);
}

#[test]
fn limit_gives_each_scope_of_the_step() {
    let p = policy(json!({"attempt": 1, "inactivity": 2, "total": 3}));
    assert_eq!(p.limit(TimeoutScope::Attempt), Some(1));
    assert_eq!(p.limit(TimeoutScope::Inactivity), Some(2));
    assert_eq!(p.limit(TimeoutScope::Total), Some(3));
    assert_eq!(p.limit(TimeoutScope::Flow), None);
}

// ---------------------------------------------------------------------------
// scopes

#[test]
fn the_outer_scope_wins_flow_over_total_over_attempt_over_inactivity() {
    use TimeoutScope::{Attempt, Flow, Inactivity, Total};
    assert!(Flow > Total && Total > Attempt && Attempt > Inactivity);
    assert_eq!(TimeoutScope::outer(Attempt, Total), Total);
    assert_eq!(Total.outer(Attempt), Total);
    assert_eq!(Inactivity.outer(Attempt), Attempt);
    assert_eq!(Flow.outer(Inactivity), Flow);
    assert_eq!(Total.outer(Flow), Flow);
    assert_eq!(Attempt.outer(Attempt), Attempt);
    let fired = [Inactivity, Total, Attempt];
    assert_eq!(fired.into_iter().max(), Some(Total));
    let mut all = [Flow, Inactivity, Total, Attempt];
    all.sort();
    assert_eq!(all, TimeoutScope::ALL);
}

#[test]
fn scopes_and_on_timeout_use_lowercase_wire_names() {
    for (scope, name) in [
        (TimeoutScope::Attempt, "attempt"),
        (TimeoutScope::Inactivity, "inactivity"),
        (TimeoutScope::Total, "total"),
        (TimeoutScope::Flow, "flow"),
    ] {
        assert_eq!(serde_json::to_value(scope).unwrap(), json!(name));
        assert_eq!(scope.to_string(), name);
        assert_eq!(
            serde_json::from_value::<TimeoutScope>(json!(name)).unwrap(),
            scope
        );
    }
    assert_eq!(serde_json::to_value(OnTimeout::Cancel).unwrap(), json!("cancel"));
    assert_eq!(serde_json::to_value(OnTimeout::Error).unwrap(), json!("error"));
    assert_eq!(OnTimeout::default(), OnTimeout::Error);
}

// ---------------------------------------------------------------------------
// the problem object

#[test]
fn the_timeout_problem_has_the_serverless_workflow_shape() {
    let instance = pointer_for_step("charge");
    let problem = timeout_problem(TimeoutScope::Total, 5000, 5012, &instance);
    assert_eq!(
        problem,
        json!({
            "type": "https://serverlessworkflow.io/spec/1.0.0/errors/timeout",
            "title": "Timeout",
            "status": 408,
            "detail": "step total timeout of 5000 ms exceeded",
            "instance": "/executions/charge",
            "timeout_scope": "total",
            "elapsed_ms": 5012,
        })
    );
}

#[test]
fn the_problem_detail_names_each_scope_and_its_duration() {
    for (scope, detail) in [
        (TimeoutScope::Attempt, "step attempt timeout of 30000 ms exceeded"),
        (
            TimeoutScope::Inactivity,
            "step inactivity timeout of 30000 ms exceeded",
        ),
        (TimeoutScope::Total, "step total timeout of 30000 ms exceeded"),
        (TimeoutScope::Flow, "flow timeout of 30000 ms exceeded"),
    ] {
        assert_eq!(timeout_detail(scope, 30_000), detail);
        let problem = timeout_problem(scope, 30_000, 30_001, FLOW_POINTER);
        assert_eq!(problem["detail"], detail);
        assert_eq!(problem["timeout_scope"], scope.as_str());
        assert_eq!(problem["elapsed_ms"], 30_001);
    }
}

#[test]
fn a_flow_timeout_points_at_the_root() {
    let problem = timeout_problem(TimeoutScope::Flow, 60_000, 60_000, FLOW_POINTER);
    assert_eq!(problem["instance"], "/");
}

#[test]
fn pointers_name_the_step_and_the_work_item() {
    assert_eq!(pointer_for_step("charge"), "/executions/charge");
    assert_eq!(
        pointer_for_work("charge", "tok-1"),
        "/executions/charge/work_items/tok-1"
    );
}

#[test]
fn pointer_segments_escape_tilde_and_slash_per_rfc_6901() {
    assert_eq!(escape_pointer_segment("a/b"), "a~1b");
    assert_eq!(escape_pointer_segment("a~b"), "a~0b");
    // `~` first, so "~1" as written stays distinguishable from an escaped "/".
    assert_eq!(escape_pointer_segment("~1"), "~01");
    assert_eq!(escape_pointer_segment("/~"), "~1~0");
    assert_eq!(pointer_for_step("a/b~c"), "/executions/a~1b~0c");
    assert_eq!(
        pointer_for_work("s/1", "t~/2"),
        "/executions/s~11/work_items/t~0~12"
    );
}

#[test]
fn escaped_pointers_resolve_to_the_thing_that_timed_out() {
    let state = json!({"executions": {"a/b~c": {"work_items": {"t/~1": {"status": "failed"}}}}});
    let step = state.pointer(&pointer_for_step("a/b~c")).unwrap();
    assert!(step.get("work_items").is_some());
    let work = state.pointer(&pointer_for_work("a/b~c", "t/~1")).unwrap();
    assert_eq!(work["status"], "failed");
}

// ---------------------------------------------------------------------------
// the flow timeout

#[test]
fn a_flow_timeout_accepts_every_duration_form() {
    for (value, ms) in [
        (json!(60_000), 60_000),
        (json!("PT1M"), 60_000),
        (json!("1m"), 60_000),
        (json!("10 days 1hrs 30m 15 secs"), 869_415_000),
        (json!("1000"), 1000),
        (json!({"minutes": 2}), 120_000),
    ] {
        assert_eq!(
            parse_flow_timeout(&value).unwrap(),
            (ms, OnTimeout::Error),
            "{value}"
        );
    }
}

#[test]
fn a_flow_timeout_object_gives_after_and_on_timeout() {
    assert_eq!(
        parse_flow_timeout(&json!({"after": "10m", "on_timeout": "cancel"})).unwrap(),
        (600_000, OnTimeout::Cancel)
    );
    assert_eq!(
        parse_flow_timeout(&json!({"after": 1500, "on_timeout": "error"})).unwrap(),
        (1500, OnTimeout::Error)
    );
    assert_eq!(
        parse_flow_timeout(&json!({"after": {"seconds": 3}})).unwrap(),
        (3000, OnTimeout::Error)
    );
}

#[test]
fn a_bad_flow_timeout_is_rejected_naming_timeout() {
    for (value, echoed) in [
        (json!(0), "0"),
        (json!(-5), "-5"),
        (json!("5M"), "\"5M\""),
        (json!(""), "\"\""),
        (json!(null), "null"),
        (json!(true), "true"),
        (json!([1000]), "[1000]"),
        (json!({}), "{}"),
    ] {
        let e = parse_flow_timeout(&value).unwrap_err();
        assert_eq!(e.field, "timeout", "{value}");
        assert!(e.message.contains(echoed), "{value}: {e}");
    }
}

#[test]
fn a_bad_flow_timeout_object_is_rejected_naming_the_key() {
    let e = parse_flow_timeout(&json!({"after": "0s"})).unwrap_err();
    assert_eq!(e.field, "timeout.after");
    assert!(e.message.contains("\"0s\""), "{e}");

    let e = parse_flow_timeout(&json!({"on_timeout": "cancel"})).unwrap_err();
    assert_eq!(e.field, "timeout.after");
    assert!(e.message.contains("missing"), "{e}");

    let e = parse_flow_timeout(&json!({"after": "1m", "on_timeout": "explode"})).unwrap_err();
    assert_eq!(e.field, "timeout.on_timeout");
    assert!(e.message.contains("\"explode\""), "{e}");

    let e = parse_flow_timeout(&json!({"after": "1m", "then": "cancel"})).unwrap_err();
    assert_eq!(e.field, "timeout.then");

    let e = parse_flow_timeout(&json!({"aftr": "1m"})).unwrap_err();
    assert_eq!(e.field, "timeout.aftr");
}
