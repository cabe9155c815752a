//! Schedules (docs/schedules.md): cron, every and at; fire times across
//! daylight-saving changes; missed fires; the flow each fire starts; and
//! every refusal naming its field.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use tartan_core::schedule::{Catchup, Schedule, ScheduleRequest, MAX_CATCHUP};

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn parse_at(body: Value, now: &str) -> Result<Schedule, (String, String)> {
    let mut full = json!({"id": "nightly", "flow": {"goals": ["report"]}});
    for (k, v) in body.as_object().unwrap() {
        full[k] = v.clone();
    }
    let request: ScheduleRequest = serde_json::from_value(full).unwrap();
    request
        .parse(t(now), true)
        .map(|(_, s)| s)
        .map_err(|e| (e.field, e.message))
}

fn schedule(body: Value) -> Schedule {
    parse_at(body, "2027-01-01T00:00:00Z").unwrap()
}

fn fires(s: &Schedule, after: &str, n: usize) -> Vec<String> {
    s.upcoming(t(after), n)
        .iter()
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .collect()
}

#[test]
fn cron_takes_five_fields_six_with_seconds_and_names() {
    let s = schedule(json!({"cron": "0 3 * * MON-FRI"}));
    assert_eq!(
        fires(&s, "2027-01-01T00:00:00Z", 3),
        [
            "2027-01-01T03:00:00Z",
            "2027-01-04T03:00:00Z",
            "2027-01-05T03:00:00Z"
        ]
    );
    let s = schedule(json!({"cron": "*/20 * * * * *"}));
    assert_eq!(
        fires(&s, "2027-01-01T00:00:00Z", 2),
        ["2027-01-01T00:00:20Z", "2027-01-01T00:00:40Z"]
    );
    // Fire times are whole seconds, whatever the time asked from.
    let s = schedule(json!({"cron": "0 3 * * *"}));
    assert_eq!(
        s.next_after(t("2027-01-01T00:00:00.7Z")),
        Some(t("2027-01-01T03:00:00Z"))
    );
    assert_eq!(
        s.next_after(t("2027-01-01T03:00:00.2Z")),
        Some(t("2027-01-02T03:00:00Z"))
    );
    let s = schedule(json!({"cron": "@hourly"}));
    assert_eq!(fires(&s, "2027-01-01T00:30:00Z", 1), ["2027-01-01T01:00:00Z"]);
}

#[test]
fn a_bad_cron_expression_names_the_field() {
    for (cron, says) in [
        ("61 * * * *", "minute field \"61\""),
        ("0 25 * * *", "hour field \"25\""),
        ("0 0 32 * *", "day of month field \"32\""),
        ("0 0 * 13 *", "month field \"13\""),
        ("0 0 * * 9", "day of week field \"9\""),
        ("99 0 0 * * *", "second field \"99\""),
        ("* * * *", "4 fields"),
        ("@fortnightly", "unknown name"),
        ("0 0 31 2 *", "never fires"),
    ] {
        let (field, message) = parse_at(json!({ "cron": cron }), "2027-01-01T00:00:00Z").unwrap_err();
        assert_eq!(field, "cron", "{cron}");
        assert!(message.contains(says), "{cron}: {message}");
    }
}

#[test]
fn a_cron_time_in_a_dst_gap_or_overlap_fires_once() {
    // Berlin: 2027-03-28 02:00 CET becomes 03:00 CEST (01:00 UTC);
    // 2027-10-31 03:00 CEST becomes 02:00 CET (01:00 UTC).
    let berlin = |cron: &str| schedule(json!({"cron": cron, "timezone": "Europe/Berlin"}));
    // 02:30 does not occur on the 28th: it fires at 03:00 CEST, once.
    assert_eq!(
        fires(&berlin("30 2 * * *"), "2027-03-27T12:00:00Z", 3),
        [
            "2027-03-28T01:00:00Z",
            "2027-03-29T00:30:00Z",
            "2027-03-30T00:30:00Z"
        ]
    );
    // 01:30 occurs once: once (not again at the change).
    assert_eq!(
        fires(&berlin("30 1 * * *"), "2027-03-27T12:00:00Z", 2),
        ["2027-03-28T00:30:00Z", "2027-03-28T23:30:00Z"]
    );
    // Every quarter hour: the gap's times are one fire at 03:00.
    assert_eq!(
        fires(&berlin("*/15 * * * *"), "2027-03-28T00:40:00Z", 3),
        [
            "2027-03-28T00:45:00Z",
            "2027-03-28T01:00:00Z",
            "2027-03-28T01:15:00Z"
        ]
    );
    // 02:30 occurs twice on the 31st: it fires at the first.
    assert_eq!(
        fires(&berlin("30 2 * * *"), "2027-10-30T12:00:00Z", 2),
        ["2027-10-31T00:30:00Z", "2027-11-01T01:30:00Z"]
    );
    // Hourly: each wall-clock hour once, the repeated 02:00 at its first.
    assert_eq!(
        fires(&berlin("0 * * * *"), "2027-10-30T23:30:00Z", 3),
        [
            "2027-10-31T00:00:00Z",
            "2027-10-31T02:00:00Z",
            "2027-10-31T03:00:00Z"
        ]
    );
    // Asked from inside the repeated hour's second pass: the next time
    // after it, not one already passed.
    assert_eq!(
        fires(&berlin("*/15 * * * *"), "2027-10-31T01:10:00Z", 1),
        ["2027-10-31T02:00:00Z"]
    );
}

#[test]
fn every_counts_from_the_epoch_and_at_fires_once() {
    let s = schedule(json!({"every": "PT90S"}));
    assert_eq!(
        fires(&s, "2026-12-31T23:59:00Z", 2),
        ["2027-01-01T00:00:00Z", "2027-01-01T00:01:30Z"]
    );
    assert_eq!(fires(&s, "2027-01-01T00:02:00Z", 1), ["2027-01-01T00:03:00Z"]);
    let s = schedule(json!({"every": "15m"}));
    assert_eq!(fires(&s, "2027-01-01T10:07:12.5Z", 1), ["2027-01-01T10:15:00Z"]);
    let s = schedule(json!({"at": "2027-02-01T09:00:00+01:00"}));
    assert_eq!(fires(&s, "2027-01-01T00:00:00Z", 3), ["2027-02-01T08:00:00Z"]);
    let s = schedule(json!({"every": "1h", "end_at": "2027-01-01T02:00:00Z"}));
    assert_eq!(
        fires(&s, "2027-01-01T00:00:00Z", 5),
        ["2027-01-01T01:00:00Z", "2027-01-01T02:00:00Z"]
    );
}

#[test]
fn missed_fires_are_made_as_catchup_says() {
    let with = |catchup: &str| schedule(json!({"every": "1m", "catchup": catchup}));
    // Down from 00:10 to 00:20:30: eleven times passed.
    let due = t("2027-01-01T00:10:00Z");
    let now = t("2027-01-01T00:20:30Z");
    let (made, next) = with("latest").catch_up(due, now);
    assert_eq!(made, [t("2027-01-01T00:20:00Z")]);
    assert_eq!(next, Some(t("2027-01-01T00:21:00Z")));
    let (made, _) = with("all").catch_up(due, now);
    assert_eq!(made.len(), 11);
    assert_eq!(made[0], due);
    // The last one is 30 s old: late, not missed.
    let (made, _) = with("none").catch_up(due, now);
    assert_eq!(made, [t("2027-01-01T00:20:00Z")]);
    let hourly = schedule(json!({"every": "1h", "catchup": "none"}));
    let (made, next) = hourly.catch_up(t("2027-01-01T01:00:00Z"), t("2027-01-01T01:30:00Z"));
    assert!(made.is_empty(), "{made:?}");
    assert_eq!(next, Some(t("2027-01-01T02:00:00Z")));
    // On time, every policy makes the one fire.
    for catchup in ["latest", "none", "all"] {
        let (made, _) = with(catchup).catch_up(due, t("2027-01-01T00:10:00.050Z"));
        assert_eq!(made, [due], "{catchup}");
    }
    // All of a day down: the most recent MAX_CATCHUP.
    let (made, _) = with("all").catch_up(due, t("2027-01-02T00:10:00Z"));
    assert_eq!(made.len(), MAX_CATCHUP);
    assert_eq!(made.last(), Some(&t("2027-01-02T00:10:00Z")));
    assert_eq!(with("all").catchup, Catchup::All);
    // A cron with seconds, down for a year (31 million fire times): the
    // walk starts a window before now (`Schedule::passed`).
    let often = schedule(json!({"cron": "* * * * * *", "catchup": "latest"}));
    let (made, next) = often.catch_up(t("2027-01-01T00:00:00Z"), t("2028-01-01T00:00:00Z"));
    assert_eq!(made, [t("2028-01-01T00:00:00Z")]);
    assert_eq!(next, Some(t("2028-01-01T00:00:01Z")));
    let (made, _) = schedule(json!({"cron": "* * * * * *", "catchup": "all"}))
        .catch_up(t("2027-01-01T00:00:00Z"), t("2028-01-01T00:00:00Z"));
    assert_eq!(made.len(), MAX_CATCHUP);
    assert_eq!(made[0], t("2027-12-31T23:58:21Z"));
}

#[test]
fn a_fire_names_its_flow_and_labels_it() {
    let s = schedule(json!({"cron": "0 3 * * *", "flow": {"goals": ["report"], "labels": {"team": "ops"}}}));
    let at = t("2027-01-05T03:00:00Z");
    assert_eq!(s.flow_id(at), "nightly-20270105t030000.000z");
    let labels = s.flow_labels(at);
    assert_eq!(labels["schedule"], "nightly");
    assert_eq!(labels["scheduled_at"], "2027-01-05T03:00:00.000Z");
    assert_eq!(labels["team"], "ops");
    let s = schedule(json!({"every": "1h", "jitter": "10m"}));
    let j = s.jitter_for(at);
    assert_eq!(j, s.jitter_for(at), "the same for every engine");
    assert!(j < std::time::Duration::from_secs(600));
    assert_ne!(
        (0..20)
            .map(|h| s.jitter_for(at + chrono::Duration::hours(h)))
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        1,
        "spread"
    );
}

#[test]
fn each_refusal_names_its_field() {
    let now = "2027-01-01T00:00:00Z";
    for (body, field, says) in [
        (json!({}), "cron", "give one of cron, every or at"),
        (
            json!({"cron": "@daily", "every": "1h"}),
            "every",
            "not cron and every",
        ),
        (json!({"every": "500ms"}), "every", "at least 1s"),
        (json!({"every": "often"}), "every", "invalid duration"),
        (json!({"at": "2026-12-31T00:00:00Z"}), "at", "not in the future"),
        (json!({"at": "tomorrow"}), "at", "RFC 3339"),
        (
            json!({"cron": "@daily", "timezone": "Mars/Olympus"}),
            "timezone",
            "IANA",
        ),
        (
            json!({"cron": "@daily", "overlap": "sometimes"}),
            "overlap",
            "skip, allow",
        ),
        (
            json!({"cron": "@daily", "catchup": "most"}),
            "catchup",
            "latest, none, all",
        ),
        (
            json!({"every": "1m", "jitter": "1m"}),
            "jitter",
            "less than every",
        ),
        (json!({"cron": "@daily", "jitter": "2h"}), "jitter", "at most 1h"),
        (
            json!({"cron": "@daily", "end_at": "2026-01-01T00:00:00Z"}),
            "end_at",
            "not in the future",
        ),
        (
            json!({"cron": "@daily", "flow": {"goals": []}}),
            "flow.goals",
            "at least one goal",
        ),
        (
            json!({"cron": "@daily", "flow": {"goals": ["r"], "labels": {"schedule": "x"}}}),
            "flow.labels.schedule",
            "set by the schedule",
        ),
        (
            json!({"cron": "@daily", "id": "x".repeat(201)}),
            "id",
            "more than 200",
        ),
        (json!({"cron": "@daily", "id": "!!"}), "id", "empty"),
    ] {
        match parse_at(body.clone(), now) {
            Ok(_) => panic!("{body} was accepted"),
            Err((f, message)) => {
                assert_eq!(f, field, "{body}: {message}");
                assert!(message.contains(says), "{body}: {message}");
            }
        }
    }
    // Read back from the database, a fired `at` is not refused.
    let request: ScheduleRequest =
        serde_json::from_value(json!({"id": "once", "at": "2026-12-31T00:00:00Z", "flow": {"goals": ["r"]}}))
            .unwrap();
    assert!(request.parse(t(now), false).is_ok());
}
