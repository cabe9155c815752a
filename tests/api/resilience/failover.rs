//! While the database answers but takes no writes, as during a failover
//! (a standby reached before the proxy moves, docs/durability.md "When the
//! database goes away"): `/ready` is false, writes are answered `503` with
//! `Retry-After`, reads go on, the engine neither crashes nor exits, and
//! once writes are taken again it is ready and starts and finishes flows.
//! A database set `default_transaction_read_only`, its connections cut,
//! stands in for the standby.

use std::time::Duration;

use serde_json::{json, Value};
use sqlx::Connection;

use crate::helpers::{
    call, held_server, json_reply, register, spawn_binary_with, sync_step, wait_for_terminal, Backend,
    Binary, StepServer, TestDb,
};

/// Set the test database read-only (or back) and cut its connections, so
/// that the engine's next ones see the change.
async fn set_read_only(db: &TestDb, on: bool) {
    set_read_only_cutting(db, on, true).await
}

/// The same, cutting the connections open or not: those kept go on as
/// they began (a session's `default_transaction_read_only` is read when it
/// starts), as connections to a standby do after a failover.
async fn set_read_only_cutting(db: &TestDb, on: bool, cut: bool) {
    let name = db
        .url
        .rsplit('/')
        .next()
        .unwrap()
        .split('?')
        .next()
        .unwrap()
        .to_string();
    let mut admin = sqlx::PgConnection::connect(&tartan_testkit::pg_admin_url())
        .await
        .unwrap();
    let setting = if on {
        format!("ALTER DATABASE {name} SET default_transaction_read_only = on")
    } else {
        format!("ALTER DATABASE {name} RESET default_transaction_read_only")
    };
    sqlx::raw_sql(&setting).execute(&mut admin).await.unwrap();
    if !cut {
        let _ = admin.close().await;
        return;
    }
    sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()")
        .bind(&name)
        .execute(&mut admin)
        .await
        .unwrap();
    let _ = admin.close().await;
}

/// `GET /ready`: its status, `Retry-After` and body.
async fn ready(addr: &str) -> (u16, Option<String>, Value) {
    let resp = reqwest::get(format!("http://{addr}/ready")).await.unwrap();
    let status = resp.status().as_u16();
    let retry = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (status, retry, resp.json().await.unwrap_or(Value::Null))
}

/// `tartan serve` on `db` as `node`, with `s` (answers at once) and `h`
/// (its call held until released) registered on `svc`.
async fn with_steps(db: &TestDb, node: &str, svc: &StepServer) -> Binary {
    let steps = vec![
        sync_step("s", &svc.url("/s"), &["seed"], &["s"]),
        sync_step("h", &svc.url("/held"), &["seed"], &["held"]),
    ];
    registered(db, node, &[], steps).await
}

/// `tartan serve` on `db` as `node`, with `env`, and `steps` registered.
async fn registered(db: &TestDb, node: &str, env: &[(&str, &str)], steps: Vec<Value>) -> Binary {
    let engine = spawn_binary_with(db, node, env).await;
    register(&engine, steps).await;
    engine
}

/// Start flow `id` of `h` and return once its call is held.
async fn start_held(engine: &Binary, svc: &StepServer, id: &str) {
    let start = json!({"id": id, "goals": ["h"], "init": {"seed": ["x"]}});
    let (status, body) = call(engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
    assert_eq!(status, 201, "{body}");
    let called = crate::helpers::wait_until(Duration::from_secs(30), || {
        svc.requests().iter().any(|r| r.path == "/held")
    })
    .await;
    assert!(called, "the held step is called");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_takes_no_writes_is_not_ready_and_writes_wait_for_it() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    // /held answers once released: its result comes back while the
    // database takes no writes.
    let (release, svc) = held_server().await;
    let engine = with_steps(&db, "read-only", &svc).await;
    let start = |id: &str| json!({"id": id, "goals": ["s"], "init": {"seed": ["x"]}});
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(start("before")),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(wait_for_terminal(&engine, "before").await["status"], "completed");
    start_held(&engine, &svc, "held").await;
    assert_eq!(ready(&engine.addr).await.0, 200);

    set_read_only(&db, true).await;
    let mut answer = ready(&engine.addr).await;
    for _ in 0..300 {
        if answer.0 == 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        answer = ready(&engine.addr).await;
    }
    let (status, retry, problem) = answer;
    assert_eq!(status, 503, "{problem}");
    assert_eq!(retry.as_deref(), Some("5"));
    assert_eq!(problem["type"], "urn:tartan:problem:unavailable", "{problem}");
    assert!(
        problem["detail"].as_str().unwrap().contains("takes no writes"),
        "{problem}"
    );
    let during = metrics(&engine.addr).await;
    assert!(
        during.lines().any(|l| l == "tartan_database_unavailable 1"),
        "{during}"
    );
    // A write: 503 with Retry-After, a problem, and nothing created.
    let refused = reqwest::Client::new()
        .post(format!("http://{}/engine/flow", engine.addr))
        .json(&start("during"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().contains_key("retry-after"));
    let problem: Value = refused.json().await.unwrap();
    assert_eq!(problem["type"], "urn:tartan:problem:unavailable", "{problem}");
    // Reads go on.
    let (status, flow) = call(&engine, reqwest::Method::GET, "/engine/flow/before", None).await;
    assert_eq!(status, 200, "{flow}");
    assert_eq!(flow["status"], "completed");
    let (status, _) = call(&engine, reqwest::Method::GET, "/engine/flow/during", None).await;
    assert_eq!(status, 404, "a refused start creates nothing");
    // The held call ends now: its result cannot be written yet, and is
    // kept until it can.
    release.send_replace(true);
    tokio::time::sleep(Duration::from_millis(500)).await;

    set_read_only(&db, false).await;
    let mut status = 0;
    for _ in 0..300 {
        status = ready(&engine.addr).await.0;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200, "ready again once writes are taken");
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(start("after")),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(wait_for_terminal(&engine, "after").await["status"], "completed");
    // The result that came back meanwhile is recorded: called once.
    assert_eq!(wait_for_terminal(&engine, "held").await["status"], "completed");
    let held_calls = svc.requests().iter().filter(|r| r.path == "/held").count();
    assert_eq!(held_calls, 1, "the result was kept, not the call made again");
    // The outage is marked: one, over, logged as it began and as it ended.
    let metrics = metrics(&engine.addr).await;
    for line in ["tartan_database_unavailable 0", "tartan_database_outages_total 1"] {
        assert!(metrics.lines().any(|l| l == line), "{line} in {metrics}");
    }
    let log = engine.log.lock().unwrap().join("\n");
    assert!(log.contains("database outage began"), "{log}");
    assert!(log.contains("database outage ended after"), "{log}");
    let mut engine = engine;
    assert!(
        engine.child.try_wait().unwrap().is_none(),
        "the engine never exited"
    );
}

/// The tables that hold a flow's rows, and the column naming it.
const FLOW_TABLES: [(&str, &str); 5] = [
    ("flows", "id"),
    ("events", "aggregate_id"),
    ("work_items", "flow_id"),
    ("flow_values", "flow_id"),
    ("flow_labels", "flow_id"),
];

/// Delete every row of flow `id`, as a database that never received its
/// start would be.
async fn forget_flow(conn: &mut sqlx::PgConnection, id: &str) {
    for (table, column) in FLOW_TABLES.iter().rev() {
        sqlx::query(&format!("DELETE FROM {table} WHERE {column} = $1"))
            .bind(id)
            .execute(&mut *conn)
            .await
            .unwrap();
    }
}

/// Connections opened while the database took no writes (to a standby,
/// through a proxy or a DNS name not yet moved to the new primary) are not
/// kept once writes are taken again: their sessions would refuse every
/// write until the pool closed them for being idle. Here the database
/// takes writes again while the engine's sessions, opened read-only, stay
/// open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_reached_a_standby_are_not_reused() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let (_release, svc) = held_server().await;
    let engine = with_steps(&db, "standby", &svc).await;
    let start = |id: &str| json!({"id": id, "goals": ["s"], "init": {"seed": ["x"]}});
    set_read_only(&db, true).await;
    // The engine's pool fills with read-only sessions.
    let mut refused = 0;
    for i in 0..100 {
        let (status, _) = call(
            &engine,
            reqwest::Method::POST,
            "/engine/flow",
            Some(start(&format!("ro-{i}"))),
        )
        .await;
        if status == 503 {
            refused += 1;
            if refused == 5 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(refused, 5, "starts are refused while no writes are taken");
    // Readiness checks at once: the pool opens as many sessions.
    let checks: Vec<_> = (0..16).map(|_| ready(&engine.addr)).collect();
    for (status, _, _) in futures::future::join_all(checks).await {
        assert_eq!(status, 503);
    }

    set_read_only_cutting(&db, false, false).await;
    let mut answers = Vec::new();
    for _ in 0..100 {
        let (status, body) = call(
            &engine,
            reqwest::Method::POST,
            "/engine/flow",
            Some(start("after")),
        )
        .await;
        answers.push(status);
        if status == 201 {
            break;
        }
        assert_eq!(status, 503, "{body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(answers.last(), Some(&201), "{answers:?}");
    // One refusal: the session it reached is found read-only, and the
    // others opened before it are not handed out again.
    assert!(answers.len() <= 2, "taken after one refusal: {answers:?}");
    assert_eq!(wait_for_terminal(&engine, "after").await["status"], "completed");
    assert_eq!(ready(&engine.addr).await.0, 200);
}

/// `GET /metrics`, as text.
async fn metrics(addr: &str) -> String {
    reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

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
    let (status, body) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(wait_for_terminal(&engine, "after").await["status"], "completed");
}

/// `/metrics` shows `line`, within 60 s.
async fn metric_reaches(engine: &Binary, line: &str) -> String {
    let mut text = String::new();
    for _ in 0..600 {
        text = metrics(&engine.addr).await;
        if text.lines().any(|l| l == line) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{line} never in {text}");
}

/// Flow `id` once its step `step` has a call the step accepted (`202`)
/// recorded, within 60 s.
async fn accepted(engine: &Binary, id: &str, step: &str) -> Value {
    let mut flow = Value::Null;
    for _ in 0..600 {
        flow = call(engine, reqwest::Method::GET, &format!("/engine/flow/{id}"), None)
            .await
            .1;
        let items = flow["executions"][step]["work_items"].as_object();
        if items.is_some_and(|items| items.values().any(|w| w["accepted_at"].is_string())) {
            return flow;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{step} of {id} never accepted: {flow}");
}

/// An async step `id` at `endpoint` with output `id`.
fn async_step(id: &str, endpoint: &str, inputs: &[&str]) -> Value {
    let mut step = sync_step(id, endpoint, inputs, &[id]);
    step["type"] = json!("async");
    step
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
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(start("next", "s")),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(wait_for_terminal(&engine, "next").await["status"], "completed");
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

/// A bulk retry job running while the database takes no writes waits for
/// it: every flow is retried once writes come back, none is marked failed
/// for the outage, and each is retried once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_job_waits_out_a_database_that_takes_no_writes() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    const FLOWS: usize = 12;
    // `/f` refuses (400) until `fixed` is set, then answers.
    let fixed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let svc = {
        let fixed = fixed.clone();
        StepServer::start(move |_, _| {
            if fixed.load(std::sync::atomic::Ordering::SeqCst) {
                json_reply(200, json!({"f": "done"}))
            } else {
                json_reply(400, json!({"error": "not yet"}))
            }
        })
        .await
    };
    let engine = registered(
        &db,
        "bulk",
        &[],
        vec![sync_step("f", &svc.url("/f"), &[], &["f"])],
    )
    .await;
    for i in 0..FLOWS {
        let start = json!({"id": format!("b-{i}"), "goals": ["f"], "labels": {"batch": "outage"}});
        let (status, body) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
        assert_eq!(status, 201, "{body}");
    }
    for i in 0..FLOWS {
        assert_eq!(
            wait_for_terminal(&engine, &format!("b-{i}")).await["status"],
            "failed"
        );
    }
    fixed.store(true, std::sync::atomic::Ordering::SeqCst);
    // Four flows a second: the outage falls in the middle of the job.
    let retry = json!({"filter": {"labels": {"batch": "outage"}}, "rate": 4});
    let (status, job) = call(&engine, reqwest::Method::POST, "/engine/bulk/retry", Some(retry)).await;
    assert_eq!(status, 202, "{job}");
    let path = format!("/engine/bulk/{}", job["id"].as_str().unwrap());
    let started = crate::helpers::wait_until(Duration::from_secs(30), || svc.requests().len() > FLOWS).await;
    assert!(started, "the job retries a first flow");
    set_read_only(&db, true).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    set_read_only(&db, false).await;

    let mut job = Value::Null;
    for _ in 0..600 {
        job = call(&engine, reqwest::Method::GET, &path, None).await.1;
        if job["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(job["status"], "completed", "{job}");
    let counts = (&job["done"], &job["skipped"], &job["failed"]);
    assert_eq!(counts, (&json!(FLOWS), &json!(0), &json!(0)), "{job}");
    for i in 0..FLOWS {
        let flow = wait_for_terminal(&engine, &format!("b-{i}")).await;
        assert_eq!(flow["status"], "completed", "{flow}");
    }
    assert_eq!(svc.requests().len(), 2 * FLOWS, "each flow retried once");
}
