//! A delayed start (`start_at`, `start_in`) as a start request gives it:
//! checked, bounded, and the flow's timeout counted from it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tartan_core::request::StartFlow;

#[test]
fn a_delayed_start_is_checked_and_its_timeout_counts_from_it() {
    let now = chrono::DateTime::parse_from_rfc3339("2027-03-01T12:00:00Z")
        .map(|t| t.with_timezone(&chrono::Utc))
        .unwrap();
    let at = |s: &str| {
        chrono::DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&chrono::Utc))
            .unwrap()
    };
    let parse = |extra: serde_json::Value| {
        let mut body = serde_json::json!({"id": "f", "goals": ["g"]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let request: StartFlow = serde_json::from_value(body).unwrap();
        request.parse(now, 1000)
    };
    let start = parse(serde_json::json!({"start_in": "PT10M", "timeout": "1m"})).unwrap();
    assert_eq!(start.options.starts_at, Some(at("2027-03-01T12:10:00Z")));
    assert_eq!(start.options.deadline_at, Some(at("2027-03-01T12:11:00Z")));
    let start = parse(serde_json::json!({"start_at": "2027-03-02T00:00:00+01:00"})).unwrap();
    assert_eq!(start.options.starts_at, Some(at("2027-03-01T23:00:00Z")));
    // A time already past starts the flow now.
    let start = parse(serde_json::json!({"start_at": "2027-03-01T11:59:00Z"})).unwrap();
    assert_eq!(start.options.starts_at, None);
    for (extra, field, says) in [
        (
            serde_json::json!({"start_at": "2027-03-02T00:00:00Z", "start_in": "1m"}),
            "start_in",
            "not both",
        ),
        (
            serde_json::json!({"start_at": "tomorrow"}),
            "start_at",
            "RFC 3339",
        ),
        (serde_json::json!({"start_at": 5}), "start_at", "RFC 3339"),
        (
            serde_json::json!({"start_in": "ten minutes"}),
            "start_in",
            "invalid duration",
        ),
        (serde_json::json!({"start_in": "-5m"}), "start_in", "negative"),
        (serde_json::json!({"start_in": "367d"}), "start_in", "366 days"),
        (
            serde_json::json!({"start_at": "2028-04-01T00:00:00Z"}),
            "start_at",
            "366 days",
        ),
        (
            serde_json::json!({"start_in": "1h", "deadline_at": "2027-03-01T12:30:00Z"}),
            "deadline_at",
            "not after the flow's start",
        ),
    ] {
        match parse(extra.clone()) {
            Ok(_) => panic!("{extra} was accepted"),
            Err(e) => {
                assert_eq!(e.field, field, "{extra}");
                assert!(e.message.contains(says), "{extra}: {}", e.message);
            }
        }
    }
}
