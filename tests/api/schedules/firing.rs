//! One engine: a schedule fires on time, its flows carry its labels;
//! pause, resume, trigger, delete; `overlap: skip` and `buffer_one` with
//! a slow flow.

use std::time::Duration;

use serde_json::json;
use tartan_testkit::{both_backends, TestDb};

use super::{counting_step, flows_of, tick, time};
use crate::helpers::{call, spawn_binary, Backend};

both_backends!(
    a_one_second_schedule_fires_on_time_and_labels_its_flows,
    pause_resume_trigger_and_delete,
    a_fire_while_the_last_flow_runs_is_skipped_or_kept_as_overlap_says,
);

async fn a_one_second_schedule_fires_on_time_and_labels_its_flows(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let (svc, calls) = counting_step(0).await;
    let engine = spawn_binary(&db, "sched-a").await;
    assert_eq!(
        call(&engine, reqwest::Method::POST, "/engine/step", Some(tick(&svc)))
            .await
            .0,
        201
    );
    let (status, made) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/schedule",
        Some(json!({"id": "Every Second", "every": "1s", "flow": {"goals": ["tick"], "labels": {"team": "ops"}}})),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["id"], "every-second");
    let next: Vec<_> = made["next"].as_array().unwrap().iter().map(time).collect();
    assert_eq!(next.len(), 5);
    assert!(
        next.windows(2).all(|w| (w[1] - w[0]).num_milliseconds() == 1000),
        "{next:?}"
    );
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let (_, shown) = call(
        &engine,
        reqwest::Method::GET,
        "/engine/schedule/every-second",
        None,
    )
    .await;
    let flows = flows_of(&engine, "every-second").await;
    assert!((3..=5).contains(&flows.len()), "{} flows: {flows:?}", flows.len());
    for flow in &flows {
        let at = time(&flow["labels"]["scheduled_at"]);
        assert_eq!(flow["labels"]["team"], "ops");
        assert_eq!(at.timestamp_subsec_millis(), 0, "a whole second: {at}");
        assert_eq!(
            flow["id"],
            format!("every-second-{}", at.format("%Y%m%dt%H%M%S%.3fz"))
        );
        // On time: started within a generous second of its fire time.
        let late = (time(&flow["created_at"]) - at).num_milliseconds();
        assert!(
            (0..1000).contains(&late),
            "{} started {late} ms after its time",
            flow["id"]
        );
    }
    let last = &shown["last"];
    assert_eq!(last["outcome"], "started", "{shown}");
    assert!(
        ["active", "completed"].contains(&last["flow_status"].as_str().unwrap_or_default()),
        "{shown}"
    );
    assert!(shown["fires"].as_array().is_some_and(|f| f.len() >= 3), "{shown}");
    // Each flow called its step once.
    let calls = calls.lock().unwrap().clone();
    assert!(calls.values().all(|n| *n == 1), "{calls:?}");
    // The fires, and how late each was made, are metrics.
    let metrics = reqwest::get(format!("http://{}/metrics", engine.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |series: &str| -> f64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.trim().parse().ok()))
            .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
    };
    let started = value("tartan_schedule_fires_total{outcome=\"started\"} ");
    assert!(started >= 3.0, "{started}");
    assert_eq!(value("tartan_schedule_fires_total{outcome=\"skipped\"} "), 0.0);
    assert!(value("tartan_schedule_fire_lateness_seconds_count ") >= 3.0);
}

async fn pause_resume_trigger_and_delete(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let (svc, _) = counting_step(0).await;
    let engine = spawn_binary(&db, "sched-b").await;
    call(&engine, reqwest::Method::POST, "/engine/step", Some(tick(&svc))).await;
    let body = json!({"id": "hourly", "cron": "0 * * * *", "timezone": "America/New_York", "flow": {"goals": ["tick"]}});
    assert_eq!(
        call(
            &engine,
            reqwest::Method::POST,
            "/engine/schedule",
            Some(body.clone())
        )
        .await
        .0,
        201
    );
    // A second with the same id.
    let (status, problem) = call(&engine, reqwest::Method::POST, "/engine/schedule", Some(body)).await;
    assert_eq!(status, 409, "{problem}");
    let (status, paused) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/schedule/hourly/pause",
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 200, "{paused}");
    assert_eq!(paused["paused"], true);
    assert_eq!(paused["next"], json!([]));
    // A trigger fires a paused schedule too, once, now.
    let (status, fired) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/schedule/hourly/trigger",
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 200, "{fired}");
    assert_eq!(fired["outcome"], "started", "{fired}");
    let flow_id = fired["flow_id"].as_str().unwrap().to_string();
    let (_, status_now) = call(
        &engine,
        reqwest::Method::GET,
        &format!("/engine/flow/{flow_id}/status?wait=10s"),
        None,
    )
    .await;
    assert_eq!(status_now["status"], "completed", "{status_now}");
    let (_, resumed) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/schedule/hourly/resume",
        Some(json!({})),
    )
    .await;
    assert_eq!(resumed["paused"], false);
    let next = time(&resumed["next"][0]);
    assert_eq!(next.format("%M:%S").to_string(), "00:00", "{resumed}");
    assert_eq!(resumed["last"]["flow_id"], flow_id.as_str(), "{resumed}");
    assert_eq!(resumed["last"]["flow_status"], "completed", "{resumed}");
    // Replaced: every 2 s, and it fires.
    let (status, replaced) = call(
        &engine,
        reqwest::Method::PUT,
        "/engine/schedule/hourly",
        Some(json!({"every": "2s", "flow": {"goals": ["tick"]}})),
    )
    .await;
    assert_eq!(status, 200, "{replaced}");
    assert_eq!(replaced["spec"]["every"], "2s");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(flows_of(&engine, "hourly").await.len() >= 2);
    assert_eq!(
        call(&engine, reqwest::Method::DELETE, "/engine/schedule/hourly", None)
            .await
            .0,
        204
    );
    let (status, _) = call(&engine, reqwest::Method::GET, "/engine/schedule/hourly", None).await;
    assert_eq!(status, 404);
    let kept = flows_of(&engine, "hourly").await.len();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        flows_of(&engine, "hourly").await.len(),
        kept,
        "a deleted schedule fires no more; its flows stay"
    );
}

async fn a_fire_while_the_last_flow_runs_is_skipped_or_kept_as_overlap_says(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    // Each flow takes 2.5 s; the schedules fire every second.
    let (svc, _) = counting_step(2500).await;
    let engine = spawn_binary(&db, "sched-c").await;
    call(&engine, reqwest::Method::POST, "/engine/step", Some(tick(&svc))).await;
    for (id, overlap) in [("skips", "skip"), ("keeps", "buffer_one")] {
        let body = json!({"id": id, "every": "1s", "overlap": overlap, "flow": {"goals": ["tick"]}});
        assert_eq!(
            call(&engine, reqwest::Method::POST, "/engine/schedule", Some(body))
                .await
                .0,
            201
        );
    }
    tokio::time::sleep(Duration::from_millis(6200)).await;
    for id in ["skips", "keeps"] {
        call(
            &engine,
            reqwest::Method::POST,
            &format!("/engine/schedule/{id}/pause"),
            Some(json!({})),
        )
        .await;
    }
    let (_, skips) = call(&engine, reqwest::Method::GET, "/engine/schedule/skips", None).await;
    let fires = skips["fires"].as_array().cloned().unwrap_or_default();
    let skipped: Vec<_> = fires.iter().filter(|f| f["outcome"] == "skipped").collect();
    assert!(skipped.len() >= 2, "{skips}");
    assert!(
        skipped[0]["detail"].as_str().unwrap().contains("is still active"),
        "{skips}"
    );
    // Never two of its flows at once.
    let mut flows = flows_of(&engine, "skips").await;
    flows.sort_by_key(|f| time(&f["created_at"]));
    for pair in flows.windows(2) {
        let (_, first) = call(
            &engine,
            reqwest::Method::GET,
            &format!("/engine/flow/{}", pair[0]["id"].as_str().unwrap()),
            None,
        )
        .await;
        assert!(
            time(&first["completed_at"]) <= time(&pair[1]["created_at"]),
            "{} overlapped {}",
            pair[0]["id"],
            pair[1]["id"]
        );
    }
    // buffer_one: a kept fire starts when the running flow ends.
    let (_, keeps) = call(&engine, reqwest::Method::GET, "/engine/schedule/keeps", None).await;
    let fires = keeps["fires"].as_array().cloned().unwrap_or_default();
    // Of the fires kept while it ran, the latest started; the older ones
    // gave up their place.
    assert!(
        fires.iter().any(|f| f["outcome"] == "skipped"
            && f["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("took its place")),
        "{keeps}"
    );
    let started: Vec<_> = fires.iter().filter(|f| f["outcome"] == "started").collect();
    assert!(started.len() >= 2, "{keeps}");
    // Paused: no fire is left kept, in the schedule or in its history.
    assert!(keeps.get("buffered").is_none(), "{keeps}");
    assert!(fires.iter().all(|f| f["outcome"] != "buffered"), "{keeps}");
    let mut flows = flows_of(&engine, "keeps").await;
    flows.sort_by_key(|f| time(&f["created_at"]));
    let (_, first) = call(
        &engine,
        reqwest::Method::GET,
        &format!("/engine/flow/{}", flows[0]["id"].as_str().unwrap()),
        None,
    )
    .await;
    let gap = (time(&flows[1]["created_at"]) - time(&first["completed_at"])).num_milliseconds();
    assert!(
        (0..1000).contains(&gap),
        "the kept fire started {gap} ms after the first flow ended"
    );
}
