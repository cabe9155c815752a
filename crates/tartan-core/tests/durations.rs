//! Duration parser: every case of the conformance file
//! (`tests/data/durations.json`, the cases of docs/durations.md), plus
//! property tests.

use std::time::Duration;

use proptest::prelude::*;
use serde_json::{json, Value};
use tartan_core::duration::{
    as_millis_u64, format_duration, parse_duration, parse_duration_str, DurationError, DurationKind,
};

const CONFORMANCE: &str = include_str!("data/durations.json");

/// Expected result of one conformance case.
enum Expected {
    Nanos(u128),
    Error(String),
}

/// Exact nanoseconds from a JSON millisecond count such as `5000` or `1.5`
/// (read from the number's text, so no float rounding is involved).
fn ms_to_nanos(ms: &Value) -> u128 {
    let text = ms.to_string();
    let (int, frac) = text.split_once('.').unwrap_or((text.as_str(), ""));
    assert!(frac.len() <= 6, "\"ms\" {text} is finer than a nanosecond");
    let Ok(int) = int.parse::<u128>() else {
        panic!("\"ms\" {text} is not a non-negative decimal");
    };
    let frac_nanos = if frac.is_empty() {
        0
    } else {
        let Ok(f) = format!("{frac:0<6}").parse::<u128>() else {
            panic!("\"ms\" {text} has a bad fraction");
        };
        f
    };
    int * 1_000_000 + frac_nanos
}

fn nanos(d: Duration) -> u128 {
    d.as_nanos()
}

fn kind_name(kind: DurationKind) -> &'static str {
    match kind {
        DurationKind::Delay => "delay",
        DurationKind::Timeout => "timeout",
    }
}

#[test]
fn conformance_cases() {
    let Ok(doc) = serde_json::from_str::<Value>(CONFORMANCE) else {
        panic!("tests/data/durations.json is not valid JSON");
    };
    let Some(cases) = doc.get("cases").and_then(Value::as_array) else {
        panic!("tests/data/durations.json has no \"cases\" array");
    };
    assert!(!cases.is_empty(), "no conformance cases");

    let mut checks = 0;
    for (i, case) in cases.iter().enumerate() {
        let Some(fields) = case.as_object() else {
            panic!("case {i} is not an object: {case}");
        };
        for key in fields.keys() {
            assert!(
                ["input", "ms", "error", "as"].contains(&key.as_str()),
                "case {i} has an unknown field {key:?}; update this test: {case}"
            );
        }
        let Some(input) = case.get("input") else {
            panic!("case {i} has no \"input\": {case}");
        };
        let expected = match (case.get("ms"), case.get("error").and_then(Value::as_str)) {
            (Some(ms), None) => Expected::Nanos(ms_to_nanos(ms)),
            (None, Some(error)) => Expected::Error(error.to_owned()),
            _ => panic!("case {i} needs exactly one of \"ms\" and \"error\": {case}"),
        };
        // "as" absent means the case holds for either kind; the one exception
        // the spec itself implies is zero, which is a valid delay but never a
        // valid timeout.
        let kinds: Vec<(DurationKind, Expected)> = match case.get("as").and_then(Value::as_str) {
            Some("delay") => vec![(DurationKind::Delay, expected)],
            Some("timeout") => vec![(DurationKind::Timeout, expected)],
            None => match expected {
                Expected::Nanos(0) => vec![
                    (DurationKind::Delay, Expected::Nanos(0)),
                    (
                        DurationKind::Timeout,
                        Expected::Error("zero is not a valid timeout".to_owned()),
                    ),
                ],
                Expected::Nanos(n) => vec![
                    (DurationKind::Delay, Expected::Nanos(n)),
                    (DurationKind::Timeout, Expected::Nanos(n)),
                ],
                Expected::Error(e) => vec![
                    (DurationKind::Delay, Expected::Error(e.clone())),
                    (DurationKind::Timeout, Expected::Error(e)),
                ],
            },
            Some(other) => panic!("case {i} has an unknown \"as\" {other:?}: {case}"),
        };

        for (kind, expected) in kinds {
            let got = parse_duration(input, kind);
            // The string-only entry point must agree on string inputs.
            if let Value::String(text) = input {
                assert_eq!(
                    parse_duration_str(text, kind),
                    got,
                    "case {i} ({}): parse_duration_str disagrees for {input}",
                    kind_name(kind)
                );
            }
            match (expected, got) {
                (Expected::Nanos(want), Ok(d)) => {
                    assert_eq!(
                        nanos(d),
                        want,
                        "case {i} ({}): {input} parsed to {d:?}",
                        kind_name(kind)
                    );
                }
                (Expected::Nanos(want), Err(e)) => panic!(
                    "case {i} ({}): {input} should be {want} ns, got error: {e}",
                    kind_name(kind)
                ),
                (Expected::Error(want), Ok(d)) => panic!(
                    "case {i} ({}): {input} should fail with {want:?}, got {d:?}",
                    kind_name(kind)
                ),
                (Expected::Error(want), Err(e)) => {
                    let message = e.to_string();
                    assert!(
                        message.contains(&want),
                        "case {i} ({}): {input}: message {message:?} lacks {want:?}",
                        kind_name(kind)
                    );
                    // The message names the offending input (as JSON text).
                    assert!(
                        message.contains(&input.to_string()),
                        "case {i}: message {message:?} does not show the input {input}"
                    );
                }
            }
            checks += 1;
        }
    }
    println!("{} conformance cases, {checks} checks passed", cases.len());
}

#[test]
fn conformance_copy_is_the_shared_file_shape() {
    // Guard against accidental edits of the copy: it keeps its "about" text.
    let Ok(doc) = serde_json::from_str::<Value>(CONFORMANCE) else {
        panic!("tests/data/durations.json is not valid JSON");
    };
    assert!(doc.get("about").and_then(Value::as_str).is_some());
}

#[test]
fn error_text_names_input_not_field() {
    let Err(e) = parse_duration_str("5M", DurationKind::Delay) else {
        panic!("5M must be rejected");
    };
    assert_eq!(
        e.to_string(),
        "invalid duration \"5M\": unknown unit \"M\" (units are lowercase: did you mean \"m\" \
         (minutes)?)"
    );
    assert!(matches!(e, DurationError::UnknownUnit { ref unit, .. } if unit == "M"));
}

#[test]
fn canonical_format_examples() {
    let cases = [
        (Duration::ZERO, "0s"),
        (Duration::from_secs(5400), "1h30m"),
        (Duration::from_millis(1500), "1.5s"),
        (Duration::from_millis(250), "250ms"),
        (Duration::from_micros(1500), "1500us"),
        (Duration::from_nanos(7), "7ns"),
        (Duration::from_secs(3600), "1h"),
        (Duration::from_secs(60), "1m"),
        (Duration::new(3600, 500_000_000), "1h0.5s"),
        (Duration::new(61, 1), "1m1.000000001s"),
        (Duration::from_secs(90_000), "25h"),
    ];
    for (d, text) in cases {
        assert_eq!(format_duration(d), text);
        assert_eq!(parse_duration_str(text, DurationKind::Delay), Ok(d));
    }
    assert_eq!(
        parse_duration_str(&format_duration(Duration::MAX), DurationKind::Delay),
        Ok(Duration::MAX)
    );
}

#[test]
fn more_accepted_forms() {
    let ok = |text: &str| parse_duration_str(text, DurationKind::Delay);
    assert_eq!(ok("1.5"), Ok(Duration::from_micros(1500)));
    assert_eq!(ok("1.5ns").ok(), None, "half a nanosecond is not exact");
    assert_eq!(ok("1.000000001s"), Ok(Duration::new(1, 1)));
    assert_eq!(ok("1.500000000000000000000000s"), Ok(Duration::from_millis(1500)));
    assert_eq!(ok("2μs"), Ok(Duration::from_micros(2)));
    assert_eq!(ok("1h1h"), Ok(Duration::from_secs(7200)));
    assert_eq!(
        ok("P1W1DT1H1M1.5S"),
        Ok(Duration::new(8 * 86400 + 3661, 500_000_000))
    );
    assert_eq!(ok("PT0S"), Ok(Duration::ZERO));
    assert_eq!(
        parse_duration(&json!({"days": 0}), DurationKind::Delay),
        Ok(Duration::ZERO)
    );
    assert_eq!(
        parse_duration(&json!(u64::MAX), DurationKind::Delay),
        Ok(Duration::from_millis(u64::MAX))
    );
}

#[test]
fn more_rejected_forms() {
    let err = |value: Value| match parse_duration(&value, DurationKind::Delay) {
        Ok(d) => panic!("{value} should be rejected, got {d:?}"),
        Err(e) => e,
    };
    assert!(matches!(err(json!(1.5)), DurationError::NumberNotInteger { .. }));
    assert!(matches!(err(json!(1.0)), DurationError::NumberNotInteger { .. }));
    assert!(matches!(err(json!(-1.5)), DurationError::Negative { .. }));
    assert!(matches!(err(json!(1e30)), DurationError::Overflow { .. }));
    assert!(matches!(err(json!(true)), DurationError::WrongType { .. }));
    assert!(matches!(err(json!(null)), DurationError::WrongType { .. }));
    assert!(matches!(err(json!([1])), DurationError::WrongType { .. }));
    assert!(matches!(err(json!("   ")), DurationError::Empty { .. }));
    assert!(matches!(err(json!("1h -30m")), DurationError::Negative { .. }));
    assert!(matches!(err(json!("1h30")), DurationError::MissingUnit { .. }));
    assert!(matches!(err(json!("1 000")), DurationError::MissingUnit { .. }));
    assert!(matches!(err(json!("5%")), DurationError::NotADuration { .. }));
    assert!(matches!(err(json!("+5s")), DurationError::NotADuration { .. }));
    assert!(matches!(err(json!(".")), DurationError::NotADuration { .. }));
    assert!(matches!(
        err(json!("PT5")),
        DurationError::MissingDesignator { .. }
    ));
    assert!(matches!(
        err(json!("PT1M1H")),
        DurationError::ComponentOrder { .. }
    ));
    assert!(matches!(
        err(json!("P1D1W")),
        DurationError::ComponentOrder { .. }
    ));
    assert!(matches!(
        err(json!("PT1HT1M")),
        DurationError::RepeatedComponent { .. }
    ));
    assert!(matches!(
        err(json!("P1H")),
        DurationError::MisplacedComponent { .. }
    ));
    assert!(matches!(
        err(json!("PT1D")),
        DurationError::MisplacedComponent { .. }
    ));
    assert!(matches!(
        err(json!("PT1.5H30M")),
        DurationError::FractionNotLast { .. }
    ));
    assert!(matches!(
        err(json!("PT1h")),
        DurationError::LowercaseIso { found: 'h', .. }
    ));
    assert!(matches!(
        err(json!("PT1H 30M")),
        DurationError::NotADuration { .. }
    ));
    assert!(matches!(
        err(json!("0.0000000001s")),
        DurationError::TooPrecise { .. }
    ));
    assert!(matches!(
        err(json!({"seconds": "5"})),
        DurationError::ObjectValueNotInteger { .. }
    ));
    assert!(matches!(
        err(json!({"weeks": 1})),
        DurationError::UnknownKey { .. }
    ));
    assert!(matches!(
        err(json!({"days": u64::MAX})),
        DurationError::Overflow { .. }
    ));
    // One nanosecond past Duration::MAX.
    let past_max = format!("{}s 1000000000ns", u64::MAX);
    assert!(matches!(err(json!(past_max)), DurationError::Overflow { .. }));
    assert!(matches!(
        parse_duration(&json!({"seconds": 0}), DurationKind::Timeout),
        Err(DurationError::ZeroTimeout { .. })
    ));
    // Very long inputs are shortened in the message.
    let long = "x".repeat(10_000);
    assert!(err(json!(long)).to_string().len() < 1_000);
}

#[test]
fn millis_saturate() {
    assert_eq!(as_millis_u64(Duration::from_micros(1500)), 1);
    assert_eq!(as_millis_u64(Duration::from_millis(u64::MAX)), u64::MAX);
    assert_eq!(as_millis_u64(Duration::MAX), u64::MAX);
}

/// Durations spread over the whole range, with extra weight on small ones.
fn any_duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        (0u64..100_000, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        (0u64..1_000_000).prop_map(Duration::from_millis),
        (0u64..1_000_000).prop_map(Duration::from_micros),
        (0u64..1_000_000_000).prop_map(Duration::from_nanos),
    ]
}

proptest! {
    #[test]
    fn format_then_parse_round_trips(d in any_duration()) {
        let text = format_duration(d);
        prop_assert_eq!(parse_duration_str(&text, DurationKind::Delay), Ok(d));
        prop_assert_eq!(parse_duration(&Value::String(text), DurationKind::Delay), Ok(d));
    }

    #[test]
    fn parse_never_panics_on_arbitrary_strings(text in any::<String>()) {
        let _ = parse_duration_str(&text, DurationKind::Delay);
        let _ = parse_duration_str(&text, DurationKind::Timeout);
    }

    #[test]
    fn parse_never_panics_on_near_duration_strings(
        text in "[ 0-9.,PTWDHMSYpthmsdwyµμnuiecor+-]{0,24}"
    ) {
        let _ = parse_duration_str(&text, DurationKind::Delay);
        let _ = parse_duration(&Value::String(text), DurationKind::Timeout);
    }

    #[test]
    fn parse_never_panics_on_objects(
        entries in proptest::collection::vec(
            (
                prop_oneof![
                    Just("days".to_owned()),
                    Just("hours".to_owned()),
                    Just("minutes".to_owned()),
                    Just("seconds".to_owned()),
                    Just("milliseconds".to_owned()),
                    ".{0,8}",
                ],
                prop_oneof![
                    any::<u64>().prop_map(Value::from),
                    any::<i64>().prop_map(Value::from),
                    any::<f64>().prop_map(Value::from),
                    ".{0,8}".prop_map(Value::from),
                ],
            ),
            0..6,
        )
    ) {
        let object: serde_json::Map<String, Value> = entries.into_iter().collect();
        let _ = parse_duration(&Value::Object(object), DurationKind::Delay);
    }

    #[test]
    fn unit_strings_sum_their_parts(
        h in 0u64..1000, m in 0u64..1000, s in 0u64..1000, ms in 0u64..1000,
        spaced in any::<bool>(),
    ) {
        let sep = if spaced { " " } else { "" };
        let text = format!("{h}{sep}h{sep}{m}{sep}minutes {s}{sep}secs{sep}{ms}{sep}ms");
        let want = Duration::from_secs(h * 3600 + m * 60 + s) + Duration::from_millis(ms);
        prop_assert_eq!(parse_duration_str(&text, DurationKind::Delay), Ok(want));
    }

    #[test]
    fn integer_millis_are_exact(ms in any::<u64>()) {
        let d = parse_duration(&Value::from(ms), DurationKind::Delay);
        prop_assert_eq!(d, Ok(Duration::from_millis(ms)));
        prop_assert_eq!(as_millis_u64(Duration::from_millis(ms)), ms);
    }
}
