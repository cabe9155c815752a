//! Commits the database lost (see the module above).

use std::time::Duration;

use serde_json::{json, Value};
use sqlx::Connection;

use super::{
    accepted, async_step, completes, forget_flow, metric_reaches, metrics, registered, start_held,
    with_steps, FLOW_TABLES,
};
use crate::helpers::{call, held_server, json_reply, sync_step, Backend, StepServer, TestDb};

/// A flow whose start the database lost after acknowledging it (a
/// failover to a standby that had not received it: here its rows are
/// deleted while its call is in flight) is not lost silently: when the
/// call ends, the engine says so in an ERROR line naming it and counts it,
/// and goes on serving the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_the_database_lost_is_reported_not_dropped_silently() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let (release, svc) = held_server().await;
    let engine = with_steps(&db, "lost", &svc).await;
    start_held(&engine, &svc, "gone").await;
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    forget_flow(&mut conn, "gone").await;
    let _ = conn.close().await;
    release.send_replace(true);
    let reported = crate::helpers::wait_until(Duration::from_secs(30), || {
        engine
            .log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("flow lost by the database") && l.contains("gone"))
    })
    .await;
    assert!(reported, "{:#?}", engine.log.lock().unwrap());
    let metrics = metrics(&engine.addr).await;
    assert!(
        metrics.lines().any(|l| l == "tartan_flows_lost_total 1"),
        "{metrics}"
    );
    let start = json!({"id": "after", "goals": ["s"], "init": {"seed": ["x"]}});
    completes(&engine, start).await;
}

/// A flow the database lost while its async call waited for the webhook
/// (which, its token unknown there, is refused) gives its place in
/// `TARTAN_MAX_ACTIVE_FLOWS` back: the sweep finds the database without it,
/// reports it lost, and the next start is taken. Before, such a flow kept
/// its place until the engine restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_the_database_lost_while_it_waited_for_a_webhook_gives_its_place_back() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    // `/a` accepts and never calls back; `/s` answers at once.
    let svc = StepServer::start(|r, _| match r.path.as_str() {
        "/a" => json_reply(202, json!({})),
        _ => json_reply(200, json!({"s": "done"})),
    })
    .await;
    let engine = registered(
        &db,
        "forgotten",
        &[("TARTAN_MAX_ACTIVE_FLOWS", "1"), ("TARTAN_LEASE", "1s")],
        vec![
            async_step("a", &svc.url("/a"), &[]),
            sync_step("s", &svc.url("/s"), &[], &["s"]),
        ],
    )
    .await;
    let start = |id: &str, goal: &str| json!({"id": id, "goals": [goal]});
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(start("waiting", "a")),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    accepted(&engine, "waiting", "a").await;
    // The one place is taken.
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(start("next", "s")),
    )
    .await;
    assert_eq!(status, 503, "{body}");

    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    forget_flow(&mut conn, "waiting").await;
    let _ = conn.close().await;
    let text = metric_reaches(&engine, "tartan_flows_active 0").await;
    assert!(text.lines().any(|l| l == "tartan_flows_lost_total 1"), "{text}");
    let log = engine.log.lock().unwrap().join("\n");
    assert!(
        log.lines()
            .any(|l| l.contains("flow lost by the database") && l.contains("waiting")),
        "{log}"
    );
    completes(&engine, start("next", "s")).await;
}

/// A flow whose last commits the database lost (rewound to an earlier
/// copy of its rows, as a failover to a standby that had not received
/// them): the engine held the later state in memory, its async call
/// accepted there waiting for a webhook that cannot come. It goes on from
/// what the database holds: the call the database still thinks active is
/// made again with its receipt token, and the flow finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_the_database_rewound_goes_on_from_what_the_database_holds() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    // `/held` answers once released; `/w` accepts, and calls back from its
    // second call on (the first's webhook is what the rewind loses).
    let (release, held) = tokio::sync::watch::channel(false);
    let svc = StepServer::start_async(move |r, n| {
        let mut held = held.clone();
        Box::pin(async move {
            if r.path == "/held" {
                let _ = held.wait_for(|released| *released).await;
                return json_reply(200, json!({"held": "done"}));
            }
            if n > 0 {
                let hook = r.headers["argyll-webhook-url"].to_str().unwrap().to_string();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    let _ = reqwest::Client::new()
                        .post(hook)
                        .json(&json!({"w": "done"}))
                        .send()
                        .await;
                });
            }
            json_reply(202, json!({}))
        })
    })
    .await;
    let engine = registered(
        &db,
        "rewound",
        &[("TARTAN_LEASE", "1s"), ("TARTAN_STEP_TIMEOUT", "3s")],
        vec![
            sync_step("h", &svc.url("/held"), &[], &["held"]),
            async_step("w", &svc.url("/w"), &["held"]),
        ],
    )
    .await;
    let start = json!({"id": "r", "goals": ["w"]});
    let (status, body) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
    assert_eq!(status, 201, "{body}");
    let called = crate::helpers::wait_until(Duration::from_secs(30), || {
        svc.requests().iter().any(|r| r.path == "/held")
    })
    .await;
    assert!(called, "h is called");

    // A copy of the flow's rows while h's call is in flight...
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    for (table, column) in FLOW_TABLES {
        sqlx::raw_sql(&format!(
            "CREATE TEMPORARY TABLE kept_{table} AS SELECT * FROM {table} WHERE {column} = 'r'"
        ))
        .execute(&mut conn)
        .await
        .unwrap();
    }
    // ...then h ends and w's call is accepted...
    release.send_replace(true);
    accepted(&engine, "r", "w").await;
    // ...and the database goes back to the copy, at once.
    let mut tx = conn.begin().await.unwrap();
    forget_flow(&mut tx, "r").await;
    for (table, _) in FLOW_TABLES {
        sqlx::raw_sql(&format!("INSERT INTO {table} SELECT * FROM kept_{table}"))
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    let _ = conn.close().await;

    let mut flow = Value::Null;
    for _ in 0..600 {
        flow = call(&engine, reqwest::Method::GET, "/engine/flow/r", None)
            .await
            .1;
        if flow["status"] != "active" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(flow["status"], "completed", "{flow}");
    let requests = svc.requests();
    let tokens = |path: &str| -> Vec<String> {
        requests
            .iter()
            .filter(|r| r.path == path)
            .map(crate::helpers::token_of)
            .collect()
    };
    let h = tokens("/held");
    assert_eq!(h.len(), 2, "h called again after the rewind: {h:?}");
    assert_eq!(h[0], h[1], "with the same receipt token");
    assert_eq!(tokens("/w").len(), 2, "w called again: the database never saw it");
    let log = engine.log.lock().unwrap().join("\n");
    assert!(log.contains("the database lost commits of a flow"), "{log}");
    metric_reaches(&engine, "tartan_flows_active 0").await;
}
