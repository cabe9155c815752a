//! A schedule in Europe/Berlin across the spring change, on the engine's
//! paused clock: 02:30 does not occur on 2030-03-31, so the daily 02:30 fire
//! is made once, at 03:00 CEST; the hourly one fires each hour once.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;
use tartan_engine::Clock;
use tartan_testkit::both_backends;

use super::{counting_step, tick, time};
use crate::helpers::{start_on_with, Backend, TestApp, TestDb};

both_backends!(a_cron_time_in_the_spring_gap_fires_once_at_the_change);

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().to_utc()
}

/// Wait (wall time, bounded) until the schedule's next fire lies after
/// `now`: the engine has made what was due.
async fn caught_up(app: &TestApp, id: &str, now: DateTime<Utc>) {
    for _ in 0..500 {
        let r = app.get(&format!("/engine/schedule/{id}")).await;
        if r.body["next"][0].as_str().is_some_and(|n| time(&json!(n)) > now) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "{id} did not move past {now}: {:?}",
        app.get(&format!("/engine/schedule/{id}")).await.body
    );
}

async fn a_cron_time_in_the_spring_gap_fires_once_at_the_change(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    // 00:00 CET on the day of the change (at 01:00 UTC, 02:00 CET becomes
    // 03:00 CEST).
    let start = t("2030-03-30T23:00:00Z");
    let clock = Clock::paused_at(start);
    let app = start_on_with(db, "dst", |c| c.clock = clock.clone()).await;
    let (svc, _) = counting_step(0).await;
    app.register(&tick(&svc)).await;
    for (id, cron) in [("daily", "30 2 * * *"), ("hourly", "0 * * * *")] {
        let r = app
            .post(
                "/engine/schedule",
                &json!({"id": id, "cron": cron, "timezone": "Europe/Berlin", "flow": {"goals": ["tick"]}}),
            )
            .await;
        assert_eq!(r.status.as_u16(), 201, "{:?}", r.body);
    }
    let daily = app.get("/engine/schedule/daily").await;
    assert_eq!(daily.body["next"][0], "2030-03-31T01:00:00Z", "{:?}", daily.body);
    assert_eq!(daily.body["next"][1], "2030-04-01T00:30:00Z", "{:?}", daily.body);
    // Three hours, five minutes at a time.
    let mut now = start;
    for _ in 0..36 {
        clock.advance(Duration::from_secs(300));
        now += chrono::Duration::minutes(5);
        caught_up(&app, "daily", now).await;
        caught_up(&app, "hourly", now).await;
    }
    let fired = |id: &str| {
        let app = &app;
        let id = id.to_string();
        async move {
            let r = app
                .post(
                    "/engine/flow/query",
                    &json!({"labels": {"schedule": id}, "sort": "recent_asc"}),
                )
                .await;
            r.body["flows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["labels"]["scheduled_at"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(fired("daily").await, ["2030-03-31T01:00:00.000Z"]);
    assert_eq!(
        fired("hourly").await,
        // 01:00 CET, then 03:00 and 04:00 CEST: 02:00 did not occur.
        [
            "2030-03-31T00:00:00.000Z",
            "2030-03-31T01:00:00.000Z",
            "2030-03-31T02:00:00.000Z"
        ]
    );
}
