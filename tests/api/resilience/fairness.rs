//! One bad step cannot starve the rest (docs/durability.md, "Call slots"
//! and "Connection pools"): calls are bounded by `TARTAN_MAX_CALLS`, one
//! step holds at most half of the slots the other steps leave (and at most
//! `TARTAN_MAX_CALLS_PER_STEP` when set), the slots held beyond each step's
//! first are at most half of all together, the calls waiting
//! for a slot are bounded and served round-robin across steps, and a burst
//! of API listings does not hold up the engine's commits. Each test runs
//! the real binary.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};

use crate::helpers::{
    call, json_reply, register, spawn_binary_with, sync_step, wait_for_terminal, Backend, Binary, StepServer,
    TestDb,
};
use tartan_testkit::both_backends;

both_backends!(
    a_step_whose_endpoint_hangs_leaves_slots_to_other_steps,
    several_hanging_steps_still_leave_a_slot_to_another_step,
    calls_beyond_the_queue_bound_are_made_later_not_lost,
    a_burst_of_flow_listings_does_not_hold_up_a_flow,
);

/// Generous: a fast flow takes milliseconds; starved, it waits 60 s.
const PROMPT: Duration = Duration::from_secs(10);

async fn health(engine: &Binary) -> Value {
    let (status, body) = call(engine, reqwest::Method::GET, "/health", None).await;
    assert_eq!(status, 200, "{body}");
    body["details"].clone()
}

fn count(details: &Value, key: &str) -> u64 {
    details[key]
        .as_u64()
        .unwrap_or_else(|| panic!("/health shows no {key}: {details}"))
}

/// A step server whose endpoint holds every request for 60 s; counts them.
async fn hanging_step(engine: &Binary, items: usize) -> (StepServer, Arc<AtomicUsize>) {
    hanging_step_named(engine, "hang", "stuck", items).await
}

/// `hanging_step` for step `step`, in flow `flow`.
async fn hanging_step_named(
    engine: &Binary,
    step: &str,
    flow: &str,
    items: usize,
) -> (StepServer, Arc<AtomicUsize>) {
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let svc = StepServer::start_async(move |_, _| {
        s.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            json_reply(200, json!({"out": "late"}))
        })
    })
    .await;
    register(engine, vec![for_each_step(step, &svc.url("/hang"), 60_000)]).await;
    let elements: Vec<usize> = (0..items).collect();
    let (status, body) = call(
        engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(json!({"id": flow, "goals": [step], "init": {"items": [elements]}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    (svc, seen)
}

/// A for_each step over `items`, every item active at once, each attempt
/// allowed `attempt_ms`.
fn for_each_step(id: &str, endpoint: &str, attempt_ms: u64) -> Value {
    json!({
        "id": id,
        "name": id,
        "type": "sync",
        "http": {"endpoint": endpoint},
        "attributes": {
            "items": {"role": "required", "type": "array", "required": {"for_each": true}},
            "out": {"role": "output"},
        },
        "work_config": {"parallelism": 10_000, "max_retries": 0},
        "timeouts": {"attempt": attempt_ms},
    })
}

async fn quick_step(engine: &Binary) -> StepServer {
    let svc = StepServer::start(|_, _| json_reply(200, json!({"q": "x"}))).await;
    register(engine, vec![sync_step("quick", &svc.url("/quick"), &[], &["q"])]).await;
    svc
}

/// Start a flow of `quick` and wait for it; how long it took.
async fn quick_flow(engine: &Binary, id: &str) -> Duration {
    let began = Instant::now();
    let (status, body) = call(
        engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(json!({"id": id, "goals": ["quick"]})),
    )
    .await;
    assert_eq!(status, 201, "{id}: {body}");
    let deadline = began + PROMPT;
    loop {
        let (_, flow) = call(engine, reqwest::Method::GET, &format!("/engine/flow/{id}"), None).await;
        if flow["status"] == "completed" {
            return began.elapsed();
        }
        assert_eq!(flow["status"], "active", "{id}: {flow}");
        assert!(
            Instant::now() < deadline,
            "{id} still not completed after {PROMPT:?}: starved of call slots or connections"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Wait (bounded) until `n` calls reached the hanging endpoint.
async fn wait_for_calls(seen: &AtomicUsize, n: usize) {
    for _ in 0..400 {
        if seen.load(Ordering::SeqCst) >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("only {} of {n} calls arrived", seen.load(Ordering::SeqCst));
}

async fn a_step_whose_endpoint_hangs_leaves_slots_to_other_steps(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    // 8 slots; one step holds at most half of them by default.
    let engine = spawn_binary_with(&db, "fair", &[("TARTAN_MAX_CALLS", "8")]).await;
    let quick = quick_step(&engine).await;
    let (_hang, seen) = hanging_step(&engine, 2_000).await;
    wait_for_calls(&seen, 4).await;

    let details = health(&engine).await;
    assert_eq!(count(&details, "max_calls"), 8, "{details}");
    assert_eq!(count(&details, "max_calls_per_step"), 4, "{details}");
    assert_eq!(count(&details, "calls_in_flight"), 4, "{details}");
    assert_eq!(count(&details, "calls_queued"), 1_996, "{details}");

    // Flows of another step go through the free slots meanwhile.
    for i in 0..5 {
        let took = quick_flow(&engine, &format!("quick-{i}")).await;
        eprintln!("quick-{i} completed in {took:?} beside 2,000 hanging calls");
    }
    // Together, as well: more quick calls than free slots, served in turn.
    let many = (0..20).map(|i| {
        let engine = &engine;
        async move { quick_flow(engine, &format!("together-{i}")).await }
    });
    futures::future::join_all(many).await;
    assert_eq!(quick.requests().len(), 25);

    // The hanging step never got more than its share.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        seen.load(Ordering::SeqCst),
        4,
        "calls made to the hanging endpoint"
    );
    let details = health(&engine).await;
    assert!(count(&details, "calls_in_flight") <= 8, "{details}");
    assert_eq!(count(&details, "calls_queued"), 1_996, "{details}");
    assert_eq!(count(&details, "calls_deferred"), 0, "{details}");

    // Cancelling the flow frees its slots and its queue.
    let (status, body) = call(&engine, reqwest::Method::POST, "/engine/flow/stuck/cancel", None).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(wait_for_terminal(&engine, "stuck").await["status"], "cancelled");
    let mut details = Value::Null;
    for _ in 0..200 {
        details = health(&engine).await;
        if count(&details, "calls_in_flight") == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(count(&details, "calls_in_flight"), 0, "{details}");
    assert_eq!(count(&details, "calls_queued"), 0, "{details}");
    quick_flow(&engine, "after-cancel").await;
    // A slot freed while the abort reaches the waiting calls may start one
    // of them, aborted at once; the 1,996 are not made.
    assert!(
        seen.load(Ordering::SeqCst) <= 8,
        "{} calls made",
        seen.load(Ordering::SeqCst)
    );
}

async fn several_hanging_steps_still_leave_a_slot_to_another_step(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    // 16 slots, no explicit per-step cap: a step holds at most half of the
    // slots the others leave, and the slots held beyond each step's first
    // are at most 8 together.
    let engine = spawn_binary_with(&db, "fair", &[("TARTAN_MAX_CALLS", "16")]).await;
    let _quick = quick_step(&engine).await;
    // One after the other, each taking what it may: 8 (half), then 2 (the
    // 8 beyond first slots are held), then one each. By halving shares
    // alone, the five would have held 8, 4, 2, 1 and 1: every slot.
    let mut hanging = Vec::new();
    let mut in_flight = 0;
    for (n, (step, share)) in [
        ("hang-a", 8),
        ("hang-b", 2),
        ("hang-c", 1),
        ("hang-d", 1),
        ("hang-e", 1),
    ]
    .into_iter()
    .enumerate()
    {
        let (svc, seen) = hanging_step_named(&engine, step, &format!("stuck-{step}"), 100).await;
        wait_for_calls(&seen, share).await;
        in_flight += share;
        let details = health(&engine).await;
        assert_eq!(
            count(&details, "calls_in_flight"),
            in_flight as u64,
            "{step}: {details}"
        );
        // Two hanging steps, then more: another step's flow still completes.
        if n > 0 {
            let took = quick_flow(&engine, &format!("quick-beside-{step}")).await;
            eprintln!("quick flow completed in {took:?} beside {} hanging steps", n + 1);
        }
        hanging.push((svc, seen, share));
    }
    // No step took more than its share.
    tokio::time::sleep(Duration::from_millis(200)).await;
    for (_, seen, share) in &hanging {
        assert_eq!(
            seen.load(Ordering::SeqCst),
            *share,
            "calls made to a hanging endpoint"
        );
    }
    let details = health(&engine).await;
    assert_eq!(count(&details, "calls_in_flight"), 13, "{details}");
    assert_eq!(count(&details, "max_calls_per_step"), 8, "{details}");
}

async fn calls_beyond_the_queue_bound_are_made_later_not_lost(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    // 4 slots, of which one step alone holds 2; 3 places in the queue;
    // leases of 2 s, so that a call refused a place is taken up again soon.
    let engine = spawn_binary_with(
        &db,
        "fair",
        &[
            ("TARTAN_MAX_CALLS", "4"),
            ("TARTAN_MAX_CALLS_PER_STEP", "2"),
            ("TARTAN_MAX_QUEUED_CALLS", "3"),
            ("TARTAN_STEP_TIMEOUT", "1s"),
            ("TARTAN_LEASE", "1s"),
        ],
    )
    .await;
    let peak = Arc::new(AtomicUsize::new(0));
    let current = Arc::new(AtomicUsize::new(0));
    let (p, c) = (peak.clone(), current.clone());
    let svc = StepServer::start_async(move |r, _| {
        let (peak, current) = (p.clone(), c.clone());
        Box::pin(async move {
            let now = current.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(300)).await;
            current.fetch_sub(1, Ordering::SeqCst);
            json_reply(200, json!({"out": r.body["items"]}))
        })
    })
    .await;
    register(&engine, vec![for_each_step("slow", &svc.url("/slow"), 5_000)]).await;
    let elements: Vec<usize> = (0..10).collect();
    let (status, body) = call(
        &engine,
        reqwest::Method::POST,
        "/engine/flow",
        Some(json!({"id": "ten", "goals": ["slow"], "init": {"items": [elements]}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let details = health(&engine).await;
    assert!(count(&details, "calls_in_flight") <= 2, "{details}");
    assert!(count(&details, "calls_queued") <= 3, "{details}");
    assert_eq!(
        count(&details, "calls_deferred"),
        5,
        "2 running, 3 queued, 5 left: {details}"
    );

    // The five left to their lease are made when it runs out.
    let mut flow = Value::Null;
    for _ in 0..600 {
        (_, flow) = call(&engine, reqwest::Method::GET, "/engine/flow/ten", None).await;
        if flow["status"] != "active" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(flow["status"], "completed", "{flow}");
    let mut made: Vec<i64> = svc
        .requests()
        .iter()
        .filter_map(|r| r.body["items"].as_i64())
        .collect();
    made.sort_unstable();
    made.dedup();
    assert_eq!(made, (0..10).collect::<Vec<i64>>(), "every item called");
    assert!(peak.load(Ordering::SeqCst) <= 2, "at most 2 calls at once");
}

async fn a_burst_of_flow_listings_does_not_hold_up_a_flow(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let engine = spawn_binary_with(&db, "fair", &[]).await;
    let _quick = quick_step(&engine).await;
    // A few thousand flows to list.
    let starts = futures::stream::iter(0..3_000).map(|i| {
        let engine = &engine;
        async move {
            let (status, body) = call(
                engine,
                reqwest::Method::POST,
                "/engine/flow",
                Some(json!({"id": format!("old-{i}"), "goals": ["quick"]})),
            )
            .await;
            assert_eq!(status, 201, "{body}");
        }
    });
    starts.buffer_unordered(32).collect::<Vec<()>>().await;

    // 200 listings of 1,000 flows each at once, while a flow runs.
    let client = reqwest::Client::new();
    let url = format!("http://{}/engine/flow", engine.addr);
    let burst: Vec<_> = (0..200)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                match client.get(&url).send().await {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        let _ = r.bytes().await;
                        status
                    }
                    Err(_) => 0,
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut took = Vec::new();
    for i in 0..3 {
        took.push(quick_flow(&engine, &format!("during-{i}")).await);
    }
    let mut statuses = Vec::new();
    for b in burst {
        statuses.push(b.await.unwrap());
    }
    eprintln!("flows completed in {took:?} during the burst");
    // Every listing answered, each a success or a 503 naming the cause
    // (no connection free in time), never a 500.
    assert!(statuses.iter().all(|s| *s == 200 || *s == 503), "{statuses:?}");
}
