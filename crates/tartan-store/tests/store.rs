//! The `Store` contract, checked against both backends.
//!
//! Each case is an `async fn x(store: Arc<dyn Store>)`; `store_cases!`
//! turns it into `x::on_sqlite` (a fresh SQLite file) and `x::on_postgres` (a fresh
//! database on the server `TARTAN_TEST_DATABASE_URL` names, by default
//! 127.0.0.1:5432, skipped loudly when the server is unreachable
//! unless `CI` is set). Flows are built with the real state machine
//! (`tartan_core::machine`) and a fixed clock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::json;
use tartan_core::filter::FlowFilter;
use tartan_core::flow::{FlowEvent, FlowState, FlowStatus, Time, WorkStatus};
use tartan_core::machine::{Command, Transition};
use tartan_store::{
    event_of, CatalogChange, Claim, FlowCommit, FlowQuery, FlowSummary, FlowVersion, ScheduledTimer,
    SortOrder, Store, StoreError, WorkKey, WorkQuery, WorkView,
};

use support::{at, commit, fail, only_token, row, start, step, succeed, GREET};

support::store_cases! {
    fresh_database_is_ready,
    catalog_lifecycle,
    catalog_expected_sequence_ahead_is_conflict,
    flow_commit_and_load,
    flow_versions_name_the_flows_stored,
    flow_start_twice_is_flow_exists,
    flow_stale_base_is_conflict,
    flow_batch_commits_are_independent,
    flow_events_take_gap_free_global_positions,
    failed_commit_leaves_nothing_behind,
    flow_events_round_trip_and_replay,
    a_long_flow_is_snapshotted_and_loads_back_at_every_step,
    work_rows_upsert_and_filter,
    work_paging,
    query_flows_filters,
    query_flows_paging,
    query_flows_prefixes_and_children,
    claim_orphaned_work,
    renew_leases,
    heard_windows_only_move_later,
    leases_run_on_the_database_clock,
    scheduled_work,
    deferred_work,
    concurrent_claims_never_share_an_item,
    a_hundred_thousand_due_retries_are_claimed_at_once,
}

// Reopening, and the plans of the listings (a connection of the test's
// own), need the URL.
support::store_cases! {
    with_url: reopen_is_idempotent, flow_listings_are_served_by_their_indexes,
}

// Two stores on one database (two engines), so these need the URL too.

mod concurrent_commits_reach_the_feed_in_order_and_whole {
    use super::*;

    #[tokio::test]
    async fn on_sqlite() {
        support::run_sqlite(|store, _url| async move { feed_under_concurrent_commits(vec![store]).await })
            .await
    }

    #[tokio::test]
    async fn on_postgres() {
        support::run_postgres(|store, url| async move {
            let second = tartan_store::open(&url)
                .await
                .expect("a second store on the database");
            feed_under_concurrent_commits(vec![Arc::clone(&store), second]).await;
            // Purging the flows deletes the batches their events were in; the
            // head stays where it was.
            let head = store.feed_head().await.unwrap();
            let purged = store.purge_finished(chrono::Utc::now(), 10_000).await.unwrap();
            assert_eq!(purged, 180);
            let pool = own_connection(&url).await;
            let batches: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM event_batches")
                .fetch_one(&pool)
                .await
                .unwrap();
            assert_eq!(batches, 0);
            assert_eq!(store.feed_head().await.unwrap(), head);
        })
        .await
    }
}

/// Writers on each store commit flows (a start, then its end) in batches
/// at once while a reader follows the feed from where it last read. The
/// reader gets every event exactly once, at gap-free positions, each
/// flow's in sequence order: on Postgres, where positions are given after
/// the commit, none is given at or below one the reader has passed.
async fn feed_under_concurrent_commits(stores: Vec<Arc<dyn Store>>) {
    const WRITERS_PER_STORE: usize = 3;
    const FLOWS_PER_WRITER: usize = 30;
    let mut writers = tokio::task::JoinSet::new();
    let mut total = 0;
    for (s, store) in stores.iter().enumerate() {
        for w in 0..WRITERS_PER_STORE {
            let store = Arc::clone(store);
            let flows: Vec<(Transition, Transition)> = (0..FLOWS_PER_WRITER)
                .map(|k| {
                    let started = start(&format!("s{s}-w{w}-{k}"), &[], at(1));
                    let done = succeed(&started.state, at(2));
                    (started, done)
                })
                .collect();
            total += flows
                .iter()
                .map(|(a, b)| a.events.len() + b.events.len())
                .sum::<usize>();
            writers.spawn(async move {
                // Three flows a batch: their starts, then their ends.
                for chunk in flows.chunks(3) {
                    let starts = chunk.iter().map(|(a, _)| commit(a, 0, Some(REQUEST))).collect();
                    assert!(store.commit_flows(starts).await.iter().all(Result::is_ok));
                    let ends = chunk
                        .iter()
                        .map(|(a, b)| commit(b, a.events.len() as i64, None))
                        .collect();
                    assert!(store.commit_flows(ends).await.iter().all(Result::is_ok));
                }
            });
        }
    }
    let reader = Arc::clone(&stores[stores.len() - 1]);
    let mut read: Vec<(i64, String, i64)> = Vec::new();
    let mut after = 0;
    let mut writing = true;
    while writing || read.len() < total {
        writing = !writers.is_empty();
        while let Some(done) = writers.try_join_next() {
            done.unwrap();
        }
        let page = reader
            .feed_page(after, &Default::default(), 50, usize::MAX)
            .await
            .unwrap();
        for e in &page.events {
            read.push((e.position, e.event.aggregate_id.clone(), e.event.sequence));
        }
        assert!(page.reached >= after);
        after = page.reached;
        if page.events.is_empty() && !writing {
            assert!(
                read.len() >= total,
                "the feed stopped at {after} with {} of {total}",
                read.len()
            );
        }
        tokio::task::yield_now().await;
    }
    while let Some(done) = writers.join_next().await {
        done.unwrap();
    }
    assert_eq!(read.len(), total);
    let positions: Vec<i64> = read.iter().map(|(p, _, _)| *p).collect();
    assert_eq!(
        positions,
        (1..=total as i64).collect::<Vec<_>>(),
        "gap-free, each once"
    );
    let mut last: HashMap<&str, i64> = HashMap::new();
    for (_, flow, sequence) in &read {
        let before = last.insert(flow.as_str(), *sequence).unwrap_or(0);
        assert_eq!(*sequence, before + 1, "flow {flow} in sequence order");
    }
    assert_eq!(reader.feed_head().await.unwrap(), total as i64);
}

// ---------------------------------------------------------------------------
// helpers

const REQUEST: &str = r#"{"id":"order-1","goals":["greet"],"init":{"name":["ada"]}}"#;

/// Commit one flow commit and expect success.
async fn commit_ok(store: &Arc<dyn Store>, c: FlowCommit) {
    let id = c.flow_id.clone();
    let results = store.commit_flows(vec![c]).await;
    assert_eq!(results.len(), 1);
    if let Err(e) = &results[0] {
        panic!("commit of {id} failed: {e}");
    }
}

/// Commit one flow commit and return its error.
async fn commit_err(store: &Arc<dyn Store>, c: FlowCommit) -> StoreError {
    let id = c.flow_id.clone();
    let mut results = store.commit_flows(vec![c]).await;
    assert_eq!(results.len(), 1);
    match results.remove(0) {
        Ok(_) => panic!("commit of {id} succeeded but should have failed"),
        Err(e) => e,
    }
}

/// Start a flow and store it (base 0); returns the stored state.
async fn stored_start(store: &Arc<dyn Store>, id: &str, labels: &[(&str, &str)], secs: i64) -> FlowState {
    let tx = start(id, labels, at(secs));
    commit_ok(store, commit(&tx, 0, Some(REQUEST))).await;
    tx.state
}

fn work_query() -> WorkQuery {
    WorkQuery {
        limit: 1000,
        ..WorkQuery::default()
    }
}

fn flow_query() -> FlowQuery {
    FlowQuery {
        filter: FlowFilter::default(),
        limit: 1000,
        cursor: None,
        sort: SortOrder::OldestFirst,
        total: false,
    }
}

/// Every flow `filter` matches, oldest first.
fn filtered(filter: FlowFilter) -> FlowQuery {
    FlowQuery {
        filter,
        ..flow_query()
    }
}

async fn all_work(store: &Arc<dyn Store>, q: WorkQuery) -> Vec<WorkView> {
    let page = store.query_work(&q).await.unwrap();
    assert!(page.next_cursor.is_none(), "test queries fit one page");
    page.items
}

async fn work_tokens(store: &Arc<dyn Store>, q: WorkQuery) -> BTreeSet<String> {
    all_work(store, q).await.into_iter().map(|w| w.token).collect()
}

async fn flow_ids(store: &Arc<dyn Store>, q: FlowQuery) -> BTreeSet<String> {
    let page = store.query_flows(&q).await.unwrap();
    assert!(page.next_cursor.is_none(), "test queries fit one page");
    page.flows.into_iter().map(|f| f.id).collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// What a work view shows, comparable.
type WorkShape = (
    String,
    String,
    String,
    u32,
    Option<String>,
    Option<chrono::DateTime<chrono::Utc>>,
    String,
);

fn shape(views: &[WorkView]) -> Vec<WorkShape> {
    views
        .iter()
        .map(|w| {
            (
                w.flow_id.clone(),
                w.step_id.clone(),
                w.token.clone(),
                w.attempt,
                w.lease_owner.clone(),
                w.lease_expires_at,
                serde_json::to_string(&w.detail).unwrap(),
            )
        })
        .collect()
}

/// Everything stored about one flow, comparable.
async fn snapshot(
    store: &Arc<dyn Store>,
    id: &str,
) -> (FlowState, i64, Option<String>, usize, Vec<WorkShape>) {
    let loaded = store.load_flow(id).await.unwrap().expect("flow is stored");
    let events = store.flow_events(id).await.unwrap();
    let work = all_work(
        store,
        WorkQuery {
            flow_id: Some(id.to_string()),
            ..work_query()
        },
    )
    .await;
    (
        loaded.state,
        loaded.sequence,
        store.flow_request(id).await.unwrap(),
        events.len(),
        shape(&work),
    )
}

fn keys(claimed: &[WorkKey]) -> BTreeSet<String> {
    let tokens: BTreeSet<String> = claimed.iter().map(|k| k.token.clone()).collect();
    assert_eq!(
        tokens.len(),
        claimed.len(),
        "a claim returned an item twice: {claimed:?}"
    );
    tokens
}

fn claim(node: &str, now: i64, lease_until: i64, limit: usize) -> Claim {
    Claim {
        node: node.to_string(),
        at: Some(at(now)),
        lease: (at(lease_until) - at(now)).to_std().unwrap(),
        limit,
        include_own: true,
    }
}

// ---------------------------------------------------------------------------
// migrations

async fn fresh_database_is_ready(store: Arc<dyn Store>) {
    store.ready().await.expect("ready on a fresh database");
    let catalog = store.load_catalog().await.unwrap();
    assert!(catalog.steps.is_empty());
    assert_eq!(catalog.sequence, 0);
    assert_eq!(catalog.last_updated, None);
    assert!(store.catalog_events().await.unwrap().is_empty());
    assert!(store.load_flow("nope").await.unwrap().is_none());
    assert!(store.flow_request("nope").await.unwrap().is_none());
    assert!(store.flow_events("nope").await.unwrap().is_empty());
    let flows = store.query_flows(&flow_query()).await.unwrap();
    assert!(flows.flows.is_empty() && flows.next_cursor.is_none());
    let work = store.query_work(&work_query()).await.unwrap();
    assert!(work.items.is_empty() && work.next_cursor.is_none());
    assert!(store
        .claim_orphaned_work(&claim("a", 0, 60, 10))
        .await
        .unwrap()
        .is_empty());
}

async fn reopen_is_idempotent(store: Arc<dyn Store>, url: String) {
    store.ready().await.unwrap();
    let a = step("step-a", "http://127.0.0.1:9/a");
    store
        .commit_catalog(0, CatalogChange::Registered(a.clone(), at(1)))
        .await
        .unwrap();
    stored_start(&store, "order-1", &[], 2).await;

    // Open the same database again (migrations run again) while the first
    // store is still open, then a third time.
    let again = tartan_store::open(&url)
        .await
        .expect("reopening the same database");
    again.ready().await.expect("ready after reopening");
    let third = tartan_store::open(&url).await.expect("reopening a second time");
    third.ready().await.unwrap();

    let catalog = third.load_catalog().await.unwrap();
    assert_eq!(catalog.steps, vec![a]);
    assert_eq!(catalog.sequence, 1);
    assert_eq!(third.load_flow("order-1").await.unwrap().unwrap().sequence, 3);

    // The stores share one database: a change through one is seen by the other.
    let b = step("step-b", "http://127.0.0.1:9/b");
    again
        .commit_catalog(1, CatalogChange::Registered(b.clone(), at(3)))
        .await
        .unwrap();
    let catalog = store.load_catalog().await.unwrap();
    assert_eq!(catalog.sequence, 2);
    assert_eq!(catalog.steps.len(), 2);
    drop(again);
    drop(third);
    store.ready().await.unwrap();
}

// ---------------------------------------------------------------------------
// catalog

async fn catalog_lifecycle(store: Arc<dyn Store>) {
    let a = step("step-a", "http://127.0.0.1:9/a");
    let b = step("step-b", "http://127.0.0.1:9/b");
    let a2 = step("step-a", "http://127.0.0.1:9/a-v2");
    assert_ne!(a, a2);

    store
        .commit_catalog(0, CatalogChange::Registered(a.clone(), at(1)))
        .await
        .unwrap();
    let snap = store.load_catalog().await.unwrap();
    assert_eq!(snap.steps, vec![a.clone()]);
    assert_eq!(snap.sequence, 1);
    assert_eq!(snap.last_updated, Some(at(1)));

    // A writer that did not see the registration conflicts and changes nothing.
    let err = store
        .commit_catalog(0, CatalogChange::Registered(b.clone(), at(2)))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "stale register: {err:?}");
    let err = store
        .commit_catalog(0, CatalogChange::Unregistered("step-a".into(), at(2)))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict(_)),
        "stale unregister: {err:?}"
    );
    let snap = store.load_catalog().await.unwrap();
    assert_eq!(snap.steps, vec![a.clone()]);
    assert_eq!(snap.sequence, 1);
    assert_eq!(snap.last_updated, Some(at(1)));
    assert_eq!(store.catalog_events().await.unwrap().len(), 1);

    // Updated replaces the definition.
    store
        .commit_catalog(1, CatalogChange::Updated(a2.clone(), at(3)))
        .await
        .unwrap();
    let snap = store.load_catalog().await.unwrap();
    assert_eq!(snap.steps, vec![a2.clone()]);
    assert_eq!(snap.sequence, 2);

    store
        .commit_catalog(2, CatalogChange::Registered(b.clone(), at(4)))
        .await
        .unwrap();
    let snap = store.load_catalog().await.unwrap();
    assert_eq!(snap.steps, vec![a2.clone(), b.clone()], "ordered by id");
    assert_eq!(snap.sequence, 3);

    // A stale update conflicts and leaves the definition alone.
    let err = store
        .commit_catalog(2, CatalogChange::Updated(a.clone(), at(5)))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "stale update: {err:?}");
    assert_eq!(
        store.load_catalog().await.unwrap().steps,
        vec![a2.clone(), b.clone()]
    );

    // Unregistered removes.
    store
        .commit_catalog(3, CatalogChange::Unregistered("step-a".into(), at(6)))
        .await
        .unwrap();
    let snap = store.load_catalog().await.unwrap();
    assert_eq!(snap.steps, vec![b.clone()]);
    assert_eq!(snap.sequence, 4);
    assert_eq!(snap.last_updated, Some(at(6)));

    let events = store.catalog_events().await.unwrap();
    let summary: Vec<(i64, &str, chrono::DateTime<chrono::Utc>)> = events
        .iter()
        .map(|e| (e.sequence, e.event_type.as_str(), e.timestamp))
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, "step_registered", at(1)),
            (2, "step_updated", at(3)),
            (3, "step_registered", at(4)),
            (4, "step_unregistered", at(6)),
        ]
    );
    for e in &events {
        assert_eq!(e.aggregate_type, "catalog");
        assert_eq!(e.aggregate_id, "catalog");
    }
    assert_eq!(
        events[0].data,
        json!({ "step": serde_json::to_value(&a).unwrap() })
    );
    assert_eq!(
        events[1].data,
        json!({ "step": serde_json::to_value(&a2).unwrap() })
    );
    assert_eq!(
        events[2].data,
        json!({ "step": serde_json::to_value(&b).unwrap() })
    );
    assert_eq!(events[3].data, json!({ "step_id": "step-a" }));
    // The stored step definition reads back as the step.
    let read_back: tartan_core::step::Step = serde_json::from_value(events[1].data["step"].clone()).unwrap();
    assert_eq!(read_back, a2);

    // Catalog events are not flow events.
    assert!(store.flow_events("catalog").await.unwrap().is_empty());
}

/// The trait promises `Conflict` unless the catalog is still at
/// `expected_sequence`; a sequence ahead of it is just as wrong as a stale one.
async fn catalog_expected_sequence_ahead_is_conflict(store: Arc<dyn Store>) {
    let a = step("step-a", "http://127.0.0.1:9/a");
    let b = step("step-b", "http://127.0.0.1:9/b");
    store
        .commit_catalog(0, CatalogChange::Registered(a.clone(), at(1)))
        .await
        .unwrap();
    let result = store
        .commit_catalog(5, CatalogChange::Registered(b.clone(), at(2)))
        .await;
    let snap = store.load_catalog().await.unwrap();
    assert!(
        matches!(result, Err(StoreError::Conflict(_))),
        "expected_sequence 5 while the catalog is at 1 must conflict, got {result:?}; catalog now at sequence {} \
         with {} steps",
        snap.sequence,
        snap.steps.len()
    );
    assert_eq!(snap.sequence, 1);
    assert_eq!(snap.steps, vec![a]);
}

// ---------------------------------------------------------------------------
// flows

async fn flow_commit_and_load(store: Arc<dyn Store>) {
    let tx = start("order-1", &[("env", "prod")], at(0));
    commit_ok(&store, commit(&tx, 0, Some(REQUEST))).await;

    let loaded = store.load_flow("order-1").await.unwrap().expect("stored");
    assert_eq!(loaded.state, tx.state);
    assert_eq!(loaded.sequence, tx.events.len() as i64);
    assert_eq!(
        store.flow_request("order-1").await.unwrap().as_deref(),
        Some(REQUEST)
    );
    assert!(store.load_flow("order-2").await.unwrap().is_none());
    assert!(store.flow_request("order-2").await.unwrap().is_none());

    // The next decision, based on sequence 3.
    let tx2 = succeed(&tx.state, at(5));
    commit_ok(&store, commit(&tx2, 3, None)).await;
    let loaded = store.load_flow("order-1").await.unwrap().unwrap();
    assert_eq!(loaded.state, tx2.state);
    assert_eq!(loaded.state.status, FlowStatus::Completed);
    assert_eq!(loaded.sequence, (tx.events.len() + tx2.events.len()) as i64);
    assert_eq!(
        store.flow_request("order-1").await.unwrap().as_deref(),
        Some(REQUEST),
        "the start request is kept by later commits"
    );
    assert_eq!(
        store.flow_events("order-1").await.unwrap().len(),
        tx.events.len() + tx2.events.len()
    );
}

async fn flow_versions_name_the_flows_stored(store: Arc<dyn Store>) {
    let started = stored_start(&store, "order-1", &[], 0).await;
    let done = succeed(&started, at(5));
    commit_ok(&store, commit(&done, 3, None)).await;
    let second = stored_start(&store, "order-2", &[], 7).await;
    let version = |id: &'static str| {
        let store = store.clone();
        async move { store.load_flow(id).await.unwrap().unwrap().sequence }
    };
    let expected = vec![
        (
            "order-1".to_string(),
            FlowVersion {
                sequence: version("order-1").await,
                updated_at: done.state.last_updated,
            },
        ),
        (
            "order-2".to_string(),
            FlowVersion {
                sequence: version("order-2").await,
                updated_at: second.last_updated,
            },
        ),
    ];
    assert_eq!(expected[1].1.updated_at, at(7));
    // More ids than one statement takes, most of them unknown.
    let mut ids: Vec<String> = (0..2500).map(|i| format!("missing-{i}")).collect();
    ids.insert(1200, "order-2".into());
    ids.push("order-1".into());
    let mut found = store.flow_versions(&ids).await.unwrap();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(found, expected);
    assert!(store.flow_versions(&[]).await.unwrap().is_empty());
}

async fn flow_start_twice_is_flow_exists(store: Arc<dyn Store>) {
    stored_start(&store, "order-1", &[("env", "prod")], 0).await;
    let before = snapshot(&store, "order-1").await;

    // Another start of the same id: different labels, time, request and lease.
    let other = start("order-1", &[("env", "dev")], at(30));
    let mut c = commit(&other, 0, Some("another request"));
    for w in &mut c.work {
        w.lease_owner = Some("node-z".into());
    }
    let err = commit_err(&store, c).await;
    assert!(
        matches!(&err, StoreError::FlowExists(id) if id == "order-1"),
        "got {err:?}"
    );

    assert_eq!(snapshot(&store, "order-1").await, before);
    let q = filtered(FlowFilter {
        labels: vec![("env".into(), "dev".into())],
        ..FlowFilter::default()
    });
    assert!(
        flow_ids(&store, q).await.is_empty(),
        "the rejected start's labels were stored"
    );
    assert_eq!(store.query_flows(&flow_query()).await.unwrap().flows.len(), 1);
}

async fn flow_stale_base_is_conflict(store: Arc<dyn Store>) {
    let started = stored_start(&store, "order-1", &[], 0).await;
    let done = succeed(&started, at(5));
    commit_ok(&store, commit(&done, 3, None)).await;
    let before = snapshot(&store, "order-1").await;
    assert_eq!(before.1, 3 + done.events.len() as i64);
    let token = only_token(&started);

    // A decision taken on the old state (base 3): the flow has moved on.
    let stale = fail(&started, at(9));
    let mut c = commit(&stale, 3, None);
    c.work.push(row(
        "order-1",
        GREET,
        "order-1.extra",
        WorkStatus::Active,
        at(9),
        Some(("node-x", at(99))),
    ));
    let err = commit_err(&store, c).await;
    assert!(matches!(err, StoreError::Conflict(_)), "stale base: {err:?}");

    // So does a stale decision that leaves every indexed column as stored
    // (SQLite's writer tries an update of the other columns first).
    let err = commit_err(&store, commit(&done, 3, None)).await;
    assert!(
        matches!(err, StoreError::Conflict(_)),
        "stale, unchanged: {err:?}"
    );

    // A base ahead of the flow conflicts too.
    let err = commit_err(&store, commit(&stale, 99, None)).await;
    assert!(matches!(err, StoreError::Conflict(_)), "base ahead: {err:?}");

    // So does an update of a flow that does not exist.
    let ghost = succeed(&start("ghost", &[], at(0)).state, at(1));
    let err = commit_err(&store, commit(&ghost, 3, None)).await;
    assert!(matches!(err, StoreError::Conflict(_)), "unknown flow: {err:?}");
    assert!(store.load_flow("ghost").await.unwrap().is_none());
    assert!(store.flow_events("ghost").await.unwrap().is_empty());

    // Nothing of the stale commits was kept: state, events, work rows.
    assert_eq!(snapshot(&store, "order-1").await, before);
    assert_eq!(before.0.status, FlowStatus::Completed);
    let failed = WorkQuery {
        status: Some(WorkStatus::Failed),
        ..work_query()
    };
    assert!(work_tokens(&store, failed).await.is_empty());
    let succeeded = WorkQuery {
        status: Some(WorkStatus::Succeeded),
        ..work_query()
    };
    assert_eq!(work_tokens(&store, succeeded).await, set(&[&token]));
    assert_eq!(work_tokens(&store, work_query()).await, set(&[&token]));
    let types: Vec<String> = store
        .flow_events("order-1")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event_type)
        .collect();
    assert!(
        !types.iter().any(|t| t == "work_failed" || t == "flow_failed"),
        "{types:?}"
    );
}

async fn flow_batch_commits_are_independent(store: Arc<dyn Store>) {
    let existing = stored_start(&store, "existing", &[], 0).await;
    let moving = stored_start(&store, "moving", &[], 0).await;
    let moved = succeed(&moving, at(2));
    commit_ok(&store, commit(&moved, 3, None)).await;
    let existing_before = snapshot(&store, "existing").await;
    let moving_before = snapshot(&store, "moving").await;

    let new1 = start("new-1", &[("batch", "yes")], at(10));
    let new1_done = succeed(&new1.state, at(11));
    let new2 = start("new-2", &[("batch", "yes")], at(10));
    let again = start("existing", &[("batch", "yes")], at(10));
    let stale = fail(&moving, at(10));
    let batch = vec![
        commit(&new1, 0, Some("new-1 request")),
        commit(&again, 0, Some("again")),
        commit(&stale, 3, None),
        commit(&new2, 0, Some("new-2 request")),
        // A later decision on a flow created earlier in the same batch.
        commit(&new1_done, 3, None),
    ];
    let before = store.feed_head().await.unwrap();
    let results = store.commit_flows(batch).await;
    assert_eq!(results.len(), 5);
    assert!(results[0].is_ok(), "new-1: {:?}", results[0]);
    assert!(
        matches!(&results[1], Err(StoreError::FlowExists(id)) if id == "existing"),
        "{:?}",
        results[1]
    );
    assert!(
        matches!(results[2], Err(StoreError::Conflict(_))),
        "{:?}",
        results[2]
    );
    assert!(results[3].is_ok(), "new-2: {:?}", results[3]);
    assert!(results[4].is_ok(), "new-1 follow-up: {:?}", results[4]);

    let n1 = snapshot(&store, "new-1").await;
    assert_eq!(n1.0, new1_done.state);
    assert_eq!(n1.1, (new1.events.len() + new1_done.events.len()) as i64);
    assert_eq!(n1.2.as_deref(), Some("new-1 request"));
    assert_eq!(n1.3, new1.events.len() + new1_done.events.len());
    assert_eq!(n1.4.len(), 1);

    let n2 = snapshot(&store, "new-2").await;
    assert_eq!(n2.0, new2.state);
    assert_eq!(n2.1, 3);
    assert_eq!(n2.2.as_deref(), Some("new-2 request"));
    assert_eq!(n2.3, 3);
    assert_eq!(n2.4.len(), 1);

    assert_eq!(snapshot(&store, "existing").await, existing_before);
    assert_eq!(existing_before.0, existing);
    assert_eq!(snapshot(&store, "moving").await, moving_before);
    assert_eq!(moving_before.0, moved.state);

    let q = filtered(FlowFilter {
        labels: vec![("batch".into(), "yes".into())],
        ..FlowFilter::default()
    });
    assert_eq!(flow_ids(&store, q).await, set(&["new-1", "new-2"]));

    // An empty batch is no error.
    assert!(store.commit_flows(Vec::new()).await.is_empty());

    // The decisions that passed hold consecutive global positions, in
    // batch order; those refused took none. A store that numbers events
    // as it commits (SQLite) answers each decision's first position.
    let page = store
        .feed_page(before, &Default::default(), 1000, usize::MAX)
        .await
        .unwrap();
    let order: Vec<(&str, i64)> = page
        .events
        .iter()
        .map(|e| (e.event.aggregate_id.as_str(), e.event.sequence))
        .collect();
    let decided = |id: &'static str, from: usize, n: usize| (from..from + n).map(move |k| (id, 1 + k as i64));
    let expected: Vec<(&str, i64)> = decided("new-1", 0, new1.events.len())
        .chain(decided("new-2", 0, new2.events.len()))
        .chain(decided("new-1", new1.events.len(), new1_done.events.len()))
        .collect();
    assert_eq!(order, expected);
    let positions: Vec<i64> = page.events.iter().map(|e| e.position).collect();
    let head = before + expected.len() as i64;
    assert_eq!(positions, (before + 1..=head).collect::<Vec<_>>());
    assert_eq!(store.feed_head().await.unwrap(), head);
    let firsts = [
        before + 1,
        before + 1 + new1.events.len() as i64,
        before + 1 + (new1.events.len() + new2.events.len()) as i64,
    ];
    for (k, first) in [0, 3, 4].into_iter().zip(firsts) {
        if let Some(p) = results[k].as_ref().unwrap() {
            assert_eq!(*p, first, "decision {k}");
        }
    }
}

/// The feed (docs/api.md, "Event streams"): every flow event with a global
/// position, 1, 2, 3, ... in commit order, filtered by flow prefix and type.
async fn flow_events_take_gap_free_global_positions(store: Arc<dyn Store>) {
    assert_eq!(store.feed_head().await.unwrap(), 0);
    let a = start("a-1", &[], at(1));
    let b = start("b-1", &[], at(1));
    let results = store
        .commit_flows(vec![commit(&a, 0, Some(REQUEST)), commit(&b, 0, Some(REQUEST))])
        .await;
    let answered = |verdict: &Result<Option<i64>, StoreError>, first: i64| {
        if let Some(p) = verdict.as_ref().unwrap() {
            assert_eq!(*p, first);
        }
    };
    answered(&results[0], 1);
    answered(&results[1], 1 + a.events.len() as i64);
    let a_done = succeed(&a.state, at(2));
    let r = store
        .commit_flows(vec![commit(&a_done, a.events.len() as i64, None)])
        .await;
    let next = 1 + (a.events.len() + b.events.len()) as i64;
    answered(&r[0], next);
    // A refused decision takes no position.
    let stale = store
        .commit_flows(vec![commit(&a_done, a.events.len() as i64, None)])
        .await;
    assert!(matches!(stale[0], Err(StoreError::Conflict(_))), "{:?}", stale[0]);
    let head = next + a_done.events.len() as i64 - 1;
    assert_eq!(store.feed_head().await.unwrap(), head);

    let all = store
        .feed_page(0, &Default::default(), 1000, usize::MAX)
        .await
        .unwrap();
    let positions: Vec<i64> = all.events.iter().map(|e| e.position).collect();
    assert_eq!(positions, (1..=head).collect::<Vec<_>>());
    // In commit order: a's start, b's, then a's end.
    let flows: Vec<&str> = all.events.iter().map(|e| e.event.aggregate_id.as_str()).collect();
    let mut expected = vec!["a-1"; a.events.len()];
    expected.extend(vec!["b-1"; b.events.len()]);
    expected.extend(vec!["a-1"; a_done.events.len()]);
    assert_eq!(flows, expected);
    assert_eq!((all.reached, all.head), (head, head));
    let a_events: Vec<_> = all
        .events
        .iter()
        .filter(|e| e.event.aggregate_id == "a-1")
        .map(|e| e.event.clone())
        .collect();
    assert_eq!(a_events, store.flow_events("a-1").await.unwrap());

    // Paged: a page of two ends at its last event.
    let page = store
        .feed_page(0, &Default::default(), 2, usize::MAX)
        .await
        .unwrap();
    assert_eq!(page.events.len(), 2);
    assert_eq!(page.reached, 2);
    // Bounded in bytes: the page stops before the event that would pass
    // the bound, but holds one however large; and it ends where it stopped.
    let size = |k: usize| all.events[k].event.data.to_string().len();
    let two = size(0) + size(1);
    let page = store.feed_page(0, &Default::default(), 10, two).await.unwrap();
    assert_eq!(page.events.len(), 2);
    assert_eq!(page.reached, 2);
    let page = store.feed_page(0, &Default::default(), 10, 1).await.unwrap();
    assert_eq!(page.events.len(), 1);
    assert_eq!(page.reached, 1);
    // A flow's history likewise: one event per page, `next` its sequence,
    // and paging through yields each event once.
    let mut after = 0;
    let mut paged = Vec::new();
    loop {
        let page = store.flow_events_page("a-1", after, 10, 1).await.unwrap();
        assert!(page.events.len() <= 1);
        paged.extend(page.events.iter().cloned());
        match page.next {
            Some(next) => after = next,
            None => break,
        }
    }
    assert_eq!(paged, store.flow_events("a-1").await.unwrap());
    // Filtered: only flow `a-*`'s `flow_started`, and the page reaches the head.
    let filter = tartan_store::FeedFilter {
        flow_prefix: Some("a-".into()),
        event_types: vec!["flow_started".into()],
    };
    let page = store.feed_page(0, &filter, 10, usize::MAX).await.unwrap();
    assert_eq!(page.events.len(), 1);
    assert_eq!(page.events[0].position, 1);
    assert_eq!(page.events[0].event.event_type, "flow_started");
    assert_eq!(page.reached, head);
    // Past the head: nothing, and no error.
    let page = store
        .feed_page(head + 5, &Default::default(), 10, usize::MAX)
        .await
        .unwrap();
    assert!(page.events.is_empty());
    assert_eq!(page.reached, head + 5);
}

/// A commit that fails halfway (after its flow row and events are written)
/// leaves nothing behind, and the batch's other commits still land. Postgres
/// refuses a NUL byte in TEXT, so there the poisoned work row (written last)
/// fails the commit and its savepoint must be rolled back; SQLite stores it,
/// and then the commit must be stored whole.
async fn failed_commit_leaves_nothing_behind(store: Arc<dyn Store>) {
    let ok1 = start("ok-1", &[], at(0));
    let poison = start("poison", &[("p", "yes")], at(0));
    let ok2 = start("ok-2", &[], at(0));
    let mut bad = commit(&poison, 0, Some("poison request"));
    bad.work.push(row(
        "poison",
        GREET,
        "poison.\0nul",
        WorkStatus::Pending,
        at(0),
        None,
    ));
    let results = store
        .commit_flows(vec![
            commit(&ok1, 0, Some("r1")),
            bad,
            commit(&ok2, 0, Some("r2")),
        ])
        .await;
    assert_eq!(results.len(), 3);
    assert!(results[0].is_ok(), "ok-1: {:?}", results[0]);
    assert!(results[2].is_ok(), "ok-2 after a failed commit: {:?}", results[2]);
    for (id, tx) in [("ok-1", &ok1), ("ok-2", &ok2)] {
        let s = snapshot(&store, id).await;
        assert_eq!((s.0, s.1, s.3, s.4.len()), (tx.state.clone(), 3, 3, 1), "{id}");
    }
    let q = WorkQuery {
        flow_id: Some("poison".into()),
        ..work_query()
    };
    if store.backend() == "postgres" {
        assert!(
            matches!(results[1], Err(StoreError::Database(_))),
            "postgres must refuse the NUL byte: {:?}",
            results[1]
        );
    }
    match &results[1] {
        Err(_) => {
            assert!(
                store.load_flow("poison").await.unwrap().is_none(),
                "flow row kept"
            );
            assert!(store.flow_request("poison").await.unwrap().is_none());
            assert!(
                store.flow_events("poison").await.unwrap().is_empty(),
                "events kept"
            );
            assert!(all_work(&store, q).await.is_empty(), "work rows kept");
            let labelled = filtered(FlowFilter {
                labels: vec![("p".into(), "yes".into())],
                ..FlowFilter::default()
            });
            assert!(flow_ids(&store, labelled).await.is_empty(), "labels kept");
        }
        Ok(_) => {
            let s = snapshot(&store, "poison").await;
            assert_eq!((s.1, s.3, s.4.len()), (3, 3, 2));
            assert!(all_work(&store, q)
                .await
                .iter()
                .any(|w| w.token == "poison.\0nul"));
        }
    }
}

async fn flow_events_round_trip_and_replay(store: Arc<dyn Store>) {
    let tx = start("order-1", &[("env", "prod")], at(0));
    commit_ok(&store, commit(&tx, 0, Some(REQUEST))).await;
    let tx2 = succeed(&tx.state, at(7));
    commit_ok(&store, commit(&tx2, 3, None)).await;
    // Another flow's events stay with it.
    let other = stored_start(&store, "order-2", &[], 1).await;
    store
        .commit_catalog(
            0,
            CatalogChange::Registered(step("step-a", "http://127.0.0.1:9/a"), at(2)),
        )
        .await
        .unwrap();

    let expected: Vec<(FlowEvent, chrono::DateTime<chrono::Utc>)> = tx
        .events
        .iter()
        .map(|e| (e.clone(), at(0)))
        .chain(tx2.events.iter().map(|e| (e.clone(), at(7))))
        .collect();
    assert!(expected.len() > 5, "fixture: a whole flow");

    let stored = store.flow_events("order-1").await.unwrap();
    assert_eq!(stored.len(), expected.len());
    let mut decoded = Vec::new();
    for (i, (s, (event, when))) in stored.iter().zip(&expected).enumerate() {
        assert_eq!(s.sequence, i as i64 + 1, "events in sequence order");
        assert_eq!(s.aggregate_type, "flow");
        assert_eq!(s.aggregate_id, "order-1");
        assert_eq!(s.event_type, event.type_name());
        assert_eq!(s.timestamp, *when);
        assert_eq!(s.data, event.data());
        let back = event_of(s).unwrap();
        assert_eq!(&back, event);
        decoded.push((back, s.timestamp));
    }

    let replayed = FlowState::replay(decoded.iter().map(|(e, t)| (e, *t))).unwrap();
    let loaded = store.load_flow("order-1").await.unwrap().unwrap();
    assert_eq!(
        replayed, loaded.state,
        "replaying the log gives the stored projection"
    );
    assert_eq!(replayed, tx2.state);

    let other_events = store.flow_events("order-2").await.unwrap();
    assert_eq!(other_events.len(), 3);
    assert!(other_events.iter().all(|e| e.aggregate_id == "order-2"));
    let decoded_other: Vec<(FlowEvent, chrono::DateTime<chrono::Utc>)> = other_events
        .iter()
        .map(|s| (event_of(s).unwrap(), s.timestamp))
        .collect();
    let replayed_other = FlowState::replay(decoded_other.iter().map(|(e, t)| (e, *t))).unwrap();
    assert_eq!(replayed_other, other);
}

/// A flow whose events outgrow its first ones (ten failures of 20 KB each):
/// its snapshot is written again once the events after it outweigh it, and
/// at every step what loads back (snapshot plus replayed events) is exactly
/// the state the decisions produced.
async fn a_long_flow_is_snapshotted_and_loads_back_at_every_step(store: Arc<dyn Store>) {
    let tx = start("long", &[("env", "prod")], at(0));
    commit_ok(&store, commit(&tx, 0, Some(REQUEST))).await;
    let (mut state, mut seq) = (tx.state, tx.events.len() as i64);
    let token = only_token(&state);
    let loaded = store.load_flow("long").await.unwrap().unwrap();
    assert_eq!(
        (loaded.state.clone(), loaded.sequence, loaded.snapshot),
        (state.clone(), seq, 0)
    );

    let mut snapshots = BTreeSet::new();
    for attempt in 1..=10u32 {
        let now = at(i64::from(attempt) * 100_000);
        let mut new_token = || "unused".to_string();
        let mut random = || 0.5;
        let mut ctx = tartan_core::machine::Context {
            now,
            webhook_base: "http://127.0.0.1:9",
            new_token: &mut new_token,
            random: &mut random,
            max_flow_bytes: tartan_core::json::DEFAULT_MAX_FLOW_BYTES,
            script_limits: tartan_core::step::ScriptLimits::default(),
            gate: &tartan_core::health::DispatchGate::default(),
        };
        let record = Command::Record {
            step_id: GREET.to_string(),
            token: token.clone(),
            attempt,
            waited: None,
            result: tartan_core::machine::AttemptResult::Failure {
                cause: tartan_core::outcome::FailureCause::Status(503),
                error: format!("{attempt}:{}", "x".repeat(20_000)),
                retry_after_ms: None,
            },
        };
        let failed = tartan_core::machine::apply(state.clone(), record, &mut ctx).unwrap();
        commit_ok(&store, commit(&failed, seq, None)).await;
        seq += failed.events.len() as i64;
        let due = failed
            .state
            .find_work(GREET, &token)
            .and_then(|w| w.next_retry_at)
            .unwrap();
        ctx.now = due;
        let due = Command::RetryDue {
            step_id: GREET.to_string(),
            token: token.clone(),
        };
        let retry = tartan_core::machine::apply(failed.state, due, &mut ctx).unwrap();
        assert!(!retry.events.is_empty(), "attempt {attempt}: the retry starts");
        commit_ok(&store, commit(&retry, seq, None)).await;
        seq += retry.events.len() as i64;
        state = retry.state;

        let loaded = store.load_flow("long").await.unwrap().unwrap();
        assert_eq!(loaded.sequence, seq, "attempt {attempt}");
        assert!(
            loaded.state == state,
            "attempt {attempt}: the loaded state differs from the decided one"
        );
        snapshots.insert(loaded.snapshot);
    }
    // 200 KB of events after a start of a few KB: snapshots were taken (more
    // than one, each once the events after the last outweighed it), and the
    // last load replayed only the events after the latest.
    assert!(snapshots.len() >= 3, "snapshots loaded from: {snapshots:?}");
    // ...and not at every decision: 20 decisions, a handful of snapshots.
    assert!(
        snapshots.len() <= 6,
        "a snapshot nearly every decision: {snapshots:?}"
    );
    assert!(snapshots.iter().all(|&s| s < seq));
    // A listing still shows the labels and the flow's (empty) error.
    let page = store.query_flows(&flow_query()).await.unwrap();
    let long = page.flows.iter().find(|f| f.id == "long").unwrap();
    assert_eq!(long.labels.get("env").map(String::as_str), Some("prod"));
    assert_eq!(long.error, None);
}

// ---------------------------------------------------------------------------
// work rows

/// Two flows with hand-made work rows besides their real one. Returns every
/// token in `(created_at, token)` order.
async fn seed_work(store: &Arc<dyn Store>) -> Vec<String> {
    use WorkStatus::*;
    // (flow, step, token, status, created second)
    let rows_w1 = [
        ("w-1", GREET, "w-1.r1", Pending, 3),
        ("w-1", GREET, "w-1.r2", Succeeded, 3),
        ("w-1", "other", "w-1.r3", Pending, 3),
        ("w-1", "other", "w-1.r4", Failed, 1),
        ("w-1", GREET, "w-1.r5", Active, 5),
        ("w-1", "other", "w-1.r6", Pending, 2),
        ("w-1", GREET, "w-1.r7", Cancelled, 3),
    ];
    let rows_w2 = [
        ("w-2", GREET, "w-2.r1", Pending, 3),
        ("w-2", "other", "w-2.r2", Active, 4),
        ("w-2", "other", "w-2.r3", Pending, 1),
        ("w-2", GREET, "w-2.r4", Succeeded, 6),
    ];
    let mut all = Vec::new();
    for (id, rows, secs) in [("w-1", &rows_w1[..], 0), ("w-2", &rows_w2[..], 0)] {
        let tx = start(id, &[], at(secs));
        let mut c = commit(&tx, 0, Some(REQUEST));
        all.push((at(secs), only_token(&tx.state)));
        for (flow, step_id, token, status, created) in rows {
            let lease = (*status == Active).then(|| ("node-a", at(100)));
            c.work
                .push(row(flow, step_id, token, *status, at(*created), lease));
            all.push((at(*created), token.to_string()));
        }
        commit_ok(store, c).await;
    }
    all.sort();
    all.into_iter().map(|(_, t)| t).collect()
}

async fn work_rows_upsert_and_filter(store: Arc<dyn Store>) {
    let order = seed_work(&store).await;
    assert_eq!(order.len(), 13);

    let all = all_work(&store, work_query()).await;
    let tokens: Vec<String> = all.iter().map(|w| w.token.clone()).collect();
    assert_eq!(tokens, order, "ordered by (created_at, token)");
    let r5 = all.iter().find(|w| w.token == "w-1.r5").unwrap();
    assert_eq!((r5.flow_id.as_str(), r5.step_id.as_str()), ("w-1", GREET));
    assert_eq!(r5.attempt, 1);
    assert_eq!(r5.lease_owner.as_deref(), Some("node-a"));
    assert_eq!(r5.lease_expires_at, Some(at(100)));
    assert_eq!(r5.detail, support::detail(WorkStatus::Active, "original"));
    let r1 = all.iter().find(|w| w.token == "w-1.r1").unwrap();
    assert_eq!((r1.lease_owner.as_ref(), r1.lease_expires_at), (None, None));

    let by = |flow: Option<&str>, step: Option<&str>, status: Option<WorkStatus>| WorkQuery {
        flow_id: flow.map(str::to_string),
        step_id: step.map(str::to_string),
        status,
        ..work_query()
    };
    let w1 = all_work(&store, by(Some("w-1"), None, None)).await;
    assert_eq!(w1.len(), 8);
    assert!(w1.iter().all(|w| w.flow_id == "w-1"));
    assert_eq!(
        work_tokens(&store, by(None, Some("other"), None)).await,
        set(&["w-1.r3", "w-1.r4", "w-1.r6", "w-2.r2", "w-2.r3"])
    );
    assert_eq!(
        work_tokens(&store, by(None, None, Some(WorkStatus::Pending))).await,
        set(&["w-1.r1", "w-1.r3", "w-1.r6", "w-2.r1", "w-2.r3"])
    );
    assert_eq!(
        work_tokens(&store, by(None, None, Some(WorkStatus::Active))).await,
        set(&["w-1.tok1", "w-1.r5", "w-2.tok1", "w-2.r2"])
    );
    assert_eq!(
        work_tokens(&store, by(Some("w-2"), Some("other"), Some(WorkStatus::Pending))).await,
        set(&["w-2.r3"])
    );
    assert!(work_tokens(&store, by(Some("w-3"), None, None)).await.is_empty());
    assert!(
        work_tokens(&store, by(None, None, Some(WorkStatus::Compensating)))
            .await
            .is_empty()
    );

    // Upsert: the flow moves on; its real item succeeds and r1 becomes active
    // on attempt 2 under another lease. The row count stays.
    let w1_state = store.load_flow("w-1").await.unwrap().unwrap();
    let done = succeed(&w1_state.state, at(20));
    let mut c = commit(&done, w1_state.sequence, None);
    let mut r1 = row(
        "w-1",
        GREET,
        "w-1.r1",
        WorkStatus::Active,
        at(50), // a later created_at does not move the item
        Some(("node-b", at(200))),
    );
    r1.attempt = 2;
    r1.detail = support::detail(WorkStatus::Active, "updated");
    c.work.push(r1);
    commit_ok(&store, c).await;

    let after = all_work(&store, work_query()).await;
    let tokens: Vec<String> = after.iter().map(|w| w.token.clone()).collect();
    assert_eq!(tokens, order, "upserts neither add rows nor move them");
    let r1 = after.iter().find(|w| w.token == "w-1.r1").unwrap();
    assert_eq!(r1.attempt, 2);
    assert_eq!(r1.lease_owner.as_deref(), Some("node-b"));
    assert_eq!(r1.lease_expires_at, Some(at(200)));
    assert_eq!(r1.detail, support::detail(WorkStatus::Active, "updated"));
    let real = after.iter().find(|w| w.token == "w-1.tok1").unwrap();
    assert_eq!(real.detail.status, WorkStatus::Succeeded);
    assert_eq!(real.lease_owner, None);
    assert_eq!(
        work_tokens(&store, by(None, None, Some(WorkStatus::Pending))).await,
        set(&["w-1.r3", "w-1.r6", "w-2.r1", "w-2.r3"])
    );
    assert_eq!(
        work_tokens(&store, by(None, None, Some(WorkStatus::Active))).await,
        set(&["w-1.r1", "w-1.r5", "w-2.tok1", "w-2.r2"])
    );
    assert_eq!(
        work_tokens(&store, by(Some("w-1"), None, Some(WorkStatus::Succeeded))).await,
        set(&["w-1.tok1", "w-1.r2"])
    );
}

/// Page through `q` with `limit`; every page but the last is full.
async fn page_work(store: &Arc<dyn Store>, q: &WorkQuery, limit: usize) -> Vec<String> {
    let mut q = WorkQuery {
        limit,
        cursor: None,
        ..q.clone()
    };
    let mut seen = Vec::new();
    for _ in 0..100 {
        let page = store.query_work(&q).await.unwrap();
        assert!(page.items.len() <= limit);
        seen.extend(page.items.iter().map(|w| w.token.clone()));
        match page.next_cursor {
            Some(c) => {
                assert_eq!(page.items.len(), limit, "a page with a next cursor is full");
                q.cursor = Some(c);
            }
            None => return seen,
        }
    }
    panic!("paging did not end");
}

async fn work_paging(store: Arc<dyn Store>) {
    let order = seed_work(&store).await;
    for limit in [1, 2, 3, 5, 12, 13, 14, 100] {
        let seen = page_work(&store, &work_query(), limit).await;
        assert_eq!(seen, order, "limit {limit}: every row once, in order");
    }
    let w1 = WorkQuery {
        flow_id: Some("w-1".into()),
        ..work_query()
    };
    let expected: Vec<String> = order.iter().filter(|t| t.starts_with("w-1.")).cloned().collect();
    for limit in [1, 3, 8] {
        assert_eq!(
            page_work(&store, &w1, limit).await,
            expected,
            "w-1, limit {limit}"
        );
    }
    let pending = WorkQuery {
        status: Some(WorkStatus::Pending),
        ..work_query()
    };
    let pending_tokens = set(&["w-1.r1", "w-1.r3", "w-1.r6", "w-2.r1", "w-2.r3"]);
    let expected: Vec<String> = order
        .iter()
        .filter(|t| pending_tokens.contains(*t))
        .cloned()
        .collect();
    for limit in [1, 2, 5] {
        assert_eq!(
            page_work(&store, &pending, limit).await,
            expected,
            "pending, limit {limit}"
        );
    }
    let bad = WorkQuery {
        cursor: Some("not a cursor".into()),
        ..work_query()
    };
    assert!(
        store.query_work(&bad).await.is_err(),
        "a malformed cursor is an error"
    );
}

// ---------------------------------------------------------------------------
// query_flows

async fn query_flows_filters(store: Arc<dyn Store>) {
    let completed = |s: &FlowState, secs| succeed(s, at(secs));
    // id, labels, created second, ending
    let a_b_1 = stored_start(&store, "a_b-1", &[("env", "prod"), ("team", "core")], 1).await;
    commit_ok(&store, commit(&completed(&a_b_1, 20), 3, None)).await;
    stored_start(&store, "a_b-2", &[("env", "dev"), ("team", "core")], 2).await;
    let axb_1 = stored_start(&store, "axb-1", &[("env", "prod"), ("team", "edge")], 3).await;
    commit_ok(&store, commit(&fail(&axb_1, at(21)), 3, None)).await;
    stored_start(&store, "a_bc", &[("env", "prod")], 4).await;
    let b_b = stored_start(&store, "b_b", &[], 5).await;
    commit_ok(&store, commit(&completed(&b_b, 22), 3, None)).await;
    stored_start(&store, "zz", &[("env", "prod"), ("team", "core")], 6).await;

    let prefix = |p: &str| {
        filtered(FlowFilter {
            id_prefix: Some(p.to_string()),
            ..FlowFilter::default()
        })
    };
    assert_eq!(
        flow_ids(&store, prefix("a_b")).await,
        set(&["a_b-1", "a_b-2", "a_bc"]),
        "`_` is literal"
    );
    assert_eq!(
        flow_ids(&store, prefix("a_")).await,
        set(&["a_b-1", "a_b-2", "a_bc"])
    );
    assert_eq!(flow_ids(&store, prefix("a_b-")).await, set(&["a_b-1", "a_b-2"]));
    assert_eq!(
        flow_ids(&store, prefix("a")).await,
        set(&["a_b-1", "a_b-2", "axb-1", "a_bc"])
    );
    assert_eq!(flow_ids(&store, prefix("b_")).await, set(&["b_b"]));
    assert_eq!(
        flow_ids(&store, prefix("_")).await,
        set(&[]),
        "`_` does not match any character"
    );
    assert_eq!(flow_ids(&store, prefix("zz")).await, set(&["zz"]));
    assert_eq!(flow_ids(&store, prefix("zzz")).await, set(&[]));
    assert_eq!(flow_ids(&store, prefix("")).await.len(), 6);

    let labels = |ls: &[(&str, &str)]| {
        filtered(FlowFilter {
            labels: ls.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..FlowFilter::default()
        })
    };
    assert_eq!(
        flow_ids(&store, labels(&[("env", "prod")])).await,
        set(&["a_b-1", "axb-1", "a_bc", "zz"])
    );
    assert_eq!(
        flow_ids(&store, labels(&[("env", "prod"), ("team", "core")])).await,
        set(&["a_b-1", "zz"]),
        "all labels must match"
    );
    assert_eq!(
        flow_ids(&store, labels(&[("team", "core"), ("env", "dev")])).await,
        set(&["a_b-2"])
    );
    assert_eq!(flow_ids(&store, labels(&[("env", "staging")])).await, set(&[]));
    assert_eq!(
        flow_ids(&store, labels(&[("env", "prod"), ("team", "none")])).await,
        set(&[])
    );
    assert_eq!(flow_ids(&store, labels(&[("prod", "env")])).await, set(&[]));

    let statuses = |ss: &[FlowStatus]| {
        filtered(FlowFilter {
            statuses: ss.to_vec(),
            ..FlowFilter::default()
        })
    };
    assert_eq!(
        flow_ids(&store, statuses(&[FlowStatus::Completed])).await,
        set(&["a_b-1", "b_b"])
    );
    assert_eq!(
        flow_ids(&store, statuses(&[FlowStatus::Failed])).await,
        set(&["axb-1"])
    );
    assert_eq!(
        flow_ids(&store, statuses(&[FlowStatus::Completed, FlowStatus::Failed])).await,
        set(&["a_b-1", "b_b", "axb-1"])
    );
    assert_eq!(
        flow_ids(&store, statuses(&[FlowStatus::Active])).await,
        set(&["a_b-2", "a_bc", "zz"])
    );
    assert_eq!(
        flow_ids(&store, statuses(&[FlowStatus::Cancelled])).await,
        set(&[])
    );

    let combined = filtered(FlowFilter {
        id_prefix: Some("a".into()),
        labels: vec![("env".into(), "prod".into())],
        statuses: vec![FlowStatus::Active, FlowStatus::Failed],
        ..FlowFilter::default()
    });
    assert_eq!(flow_ids(&store, combined).await, set(&["axb-1", "a_bc"]));

    // The summaries.
    let page = store.query_flows(&flow_query()).await.unwrap();
    let by_id: HashMap<&str, &FlowSummary> = page.flows.iter().map(|f| (f.id.as_str(), f)).collect();
    let s = by_id["a_b-1"];
    assert_eq!(s.status, FlowStatus::Completed);
    assert_eq!(s.created_at, at(1));
    assert_eq!(s.updated_at, at(20));
    assert_eq!(
        s.labels,
        BTreeMap::from([
            ("env".to_string(), "prod".to_string()),
            ("team".to_string(), "core".to_string())
        ])
    );
    assert_eq!(s.error, None);
    let s = by_id["axb-1"];
    assert_eq!(s.status, FlowStatus::Failed);
    assert_eq!(s.updated_at, at(21));
    assert!(
        s.error.as_deref().is_some_and(|e| e.contains("boom")),
        "{:?}",
        s.error
    );
    let s = by_id["a_bc"];
    assert_eq!(
        (s.status, s.created_at, s.updated_at),
        (FlowStatus::Active, at(4), at(4))
    );
}

/// Page through `q` with `limit`; every page but the last is full.
async fn page_flows(store: &Arc<dyn Store>, q: &FlowQuery, limit: usize) -> Vec<String> {
    let mut q = FlowQuery {
        limit,
        cursor: None,
        ..q.clone()
    };
    let mut seen = Vec::new();
    for _ in 0..100 {
        let page = store.query_flows(&q).await.unwrap();
        assert!(page.flows.len() <= limit);
        seen.extend(page.flows.iter().map(|f| f.id.clone()));
        match page.next_cursor {
            Some(c) => {
                assert_eq!(page.flows.len(), limit, "a page with a next cursor is full");
                q.cursor = Some(c);
            }
            None => return seen,
        }
    }
    panic!("paging did not end");
}

/// Prefixes are matched literally (`_`, `%` and `\\` too, and past ASCII),
/// child flows (ids with a `:`) only when asked for, with statuses as well.
async fn query_flows_prefixes_and_children(store: Arc<dyn Store>) {
    for (i, id) in [
        "a_b", "axb", "a%b", "a\\b", "a\\c", "a\\", "ab", "a", "b", "é-1", "é", "e-1", "a_b:s:1", "a_b:s:2",
        "axb:s:1", "a\\b:s:1", "é-1:s:1",
    ]
    .into_iter()
    .enumerate()
    {
        let state = stored_start(&store, id, &[], i as i64).await;
        if id.ends_with(":s:1") {
            commit_ok(&store, commit(&fail(&state, at(100)), 3, None)).await;
        }
    }
    let query = |prefix: &str, children: bool, statuses: &[FlowStatus]| {
        filtered(FlowFilter {
            id_prefix: Some(prefix.to_string()),
            children,
            statuses: statuses.to_vec(),
            ..FlowFilter::default()
        })
    };
    let cases: &[(&str, bool, &[FlowStatus], &[&str])] = &[
        ("a_", false, &[], &["a_b"]),
        ("a_", true, &[], &["a_b", "a_b:s:1", "a_b:s:2"]),
        ("a%", false, &[], &["a%b"]),
        ("a\\", false, &[], &["a\\b", "a\\c", "a\\"]),
        ("a\\b", true, &[], &["a\\b", "a\\b:s:1"]),
        ("a\\b:", true, &[], &["a\\b:s:1"]),
        ("a\\b:", false, &[], &[]),
        (
            "a",
            false,
            &[],
            &["a_b", "axb", "a%b", "a\\b", "a\\c", "a\\", "ab", "a"],
        ),
        ("a", false, &[FlowStatus::Failed], &[]),
        (
            "a",
            true,
            &[FlowStatus::Failed],
            &["a_b:s:1", "axb:s:1", "a\\b:s:1"],
        ),
        ("é", false, &[], &["é-1", "é"]),
        ("é", true, &[FlowStatus::Active], &["é-1", "é"]),
        ("é", true, &[FlowStatus::Failed], &["é-1:s:1"]),
        ("e", false, &[], &["e-1"]),
        ("_", true, &[], &[]),
        ("%", true, &[], &[]),
        ("\\", true, &[], &[]),
        (
            "",
            false,
            &[],
            &[
                "a_b", "axb", "a%b", "a\\b", "a\\c", "a\\", "ab", "a", "b", "é-1", "é", "e-1",
            ],
        ),
    ];
    for (prefix, children, statuses, want) in cases {
        assert_eq!(
            flow_ids(&store, query(prefix, *children, statuses)).await,
            set(want),
            "prefix {prefix:?}, children {children}, statuses {statuses:?}"
        );
    }
    // Without a prefix: children hidden, or shown.
    assert_eq!(flow_ids(&store, flow_query()).await.len(), 12);
    let all = filtered(FlowFilter {
        children: true,
        ..FlowFilter::default()
    });
    assert_eq!(flow_ids(&store, all).await.len(), 17);
    let failed = filtered(FlowFilter {
        statuses: vec![FlowStatus::Failed],
        ..FlowFilter::default()
    });
    assert_eq!(flow_ids(&store, failed).await, set(&[]));
}

/// A connection of the test's own to the store's database.
async fn own_connection(url: &str) -> sqlx::AnyPool {
    sqlx::any::install_default_drivers();
    sqlx::any::AnyPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .unwrap()
}

/// The plan of each kind of flow listing, as the store builds it
/// (`tartan_store::flow_query_sql`), on a database with many child flows:
/// each is served by the index meant for it (migrations/*/
/// 20261205000000_flow_indexes.sql), none reads the whole table, and root
/// listings read no child flow.
async fn flow_listings_are_served_by_their_indexes(store: Arc<dyn Store>, url: String) {
    let backend = store.backend();
    let pool = own_connection(&url).await;
    // 5,000 root flows (`r-100000` on), one in a hundred failed, one in
    // fifty running, and 20,000 failed children of the first, created
    // among them. No planner setting
    // is changed: with the table analysed, both choose these plans.
    let insert = |n: u32, id: &str, status: &str, created: &str| {
        format!(
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {last}) \
             INSERT INTO flows (id, status, sequence, created_us, updated_us, completed_us, request, state) \
             SELECT {id}, {status}, 1, {created}, {created}, \
             CASE WHEN {status} = 'active' THEN NULL ELSE {created} + 3 END, '{{}}', '{{}}' FROM n",
            last = n - 1
        )
    };
    for sql in [
        insert(
            5_000,
            "'r-' || CAST(100000 + i AS TEXT)",
            "CASE WHEN i % 100 = 7 THEN 'failed' WHEN i % 50 = 3 THEN 'active' ELSE 'completed' END",
            "i * 4",
        ),
        insert(20_000, "'r-100000:s:' || CAST(i AS TEXT)", "'failed'", "i"),
    ] {
        sqlx::query(&sql).execute(&pool).await.unwrap();
    }
    sqlx::query("ANALYZE").execute(&pool).await.unwrap();

    let query = |filter: FlowFilter, sort: SortOrder, cursor: Option<String>| FlowQuery {
        filter,
        limit: 50,
        cursor,
        sort,
        total: false,
    };
    let roots = FlowFilter::default();
    let failed = FlowFilter {
        statuses: vec![FlowStatus::Failed],
        ..FlowFilter::default()
    };
    let ended = FlowFilter {
        statuses: vec![FlowStatus::Failed, FlowStatus::Cancelled],
        ..FlowFilter::default()
    };
    let prefix = FlowFilter {
        id_prefix: Some("r-1012".into()),
        ..FlowFilter::default()
    };
    let prefix_with_children = FlowFilter {
        children: true,
        ..prefix.clone()
    };
    // A cursor well into the listing (past its running flows, among the
    // ended ones): its page starts there.
    let mut cursor = None;
    for _ in 0..3 {
        cursor = store
            .query_flows(&query(roots.clone(), SortOrder::OldestFirst, cursor))
            .await
            .unwrap()
            .next_cursor;
    }
    assert!(
        cursor.as_deref().is_some_and(|c| c.starts_with('e')),
        "{cursor:?}"
    );
    let pk = if backend == "postgres" {
        "flows_by_id_bytes"
    } else {
        "sqlite_autoindex_flows_1"
    };
    use tartan_store::ListGroup::{Active, Ended};
    let cases = [
        (
            "running roots",
            query(roots.clone(), SortOrder::OldestFirst, None),
            Active,
            "flows_roots_by_status",
        ),
        (
            "running roots, recent first",
            query(roots.clone(), SortOrder::RecentFirst, None),
            Active,
            "flows_roots_by_status",
        ),
        (
            "ended roots",
            query(roots.clone(), SortOrder::OldestFirst, None),
            Ended,
            "flows_roots_by_end",
        ),
        (
            "ended roots, recent first",
            query(roots.clone(), SortOrder::RecentFirst, None),
            Ended,
            "flows_roots_by_end",
        ),
        (
            "ended roots, next page",
            query(roots, SortOrder::OldestFirst, cursor),
            Ended,
            "flows_roots_by_end",
        ),
        // The failed roots are few: read by status, or in end order.
        (
            "failed roots",
            query(failed, SortOrder::RecentFirst, None),
            Ended,
            "flows_roots_by_",
        ),
        (
            "failed or cancelled roots",
            query(ended, SortOrder::OldestFirst, None),
            Ended,
            "flows_roots_by_",
        ),
        (
            "roots by prefix",
            query(prefix.clone(), SortOrder::OldestFirst, None),
            Ended,
            "flows_roots_by_",
        ),
        (
            "running roots by prefix",
            query(prefix, SortOrder::OldestFirst, None),
            Active,
            "flows_roots_by_",
        ),
        (
            "all by prefix",
            query(prefix_with_children, SortOrder::OldestFirst, None),
            Ended,
            pk,
        ),
    ];
    let mut wrong = Vec::new();
    for (name, q, group, index) in cases {
        let (sql, binds) = tartan_store::flow_query_sql(backend, &q, group).unwrap();
        let explain = if backend == "postgres" {
            format!("EXPLAIN {sql}")
        } else {
            format!("EXPLAIN QUERY PLAN {sql}")
        };
        let mut statement = sqlx::query(&explain);
        for b in binds {
            statement = match b {
                tartan_store::Bind::Text(t) => statement.bind(t),
                tartan_store::Bind::Int(i) => statement.bind(i),
            };
        }
        let lines: Vec<String> = statement
            .fetch_all(&pool)
            .await
            .unwrap()
            .iter()
            .map(|row| {
                use sqlx::Row;
                row.try_get::<String, _>(if backend == "postgres" { 0 } else { 3 })
                    .unwrap()
            })
            .collect();
        let plan = lines.join("\n");
        if !plan.contains(index) {
            wrong.push(format!("{name}: not served by {index}:\n{plan}\n{sql}"));
        }
        // A whole-table read: Postgres's `Seq Scan`, SQLite's bare `SCAN f`
        // (`SCAN f USING INDEX x` walks an index, in its order).
        if plan.contains("Seq Scan") || lines.iter().any(|l| l.trim() == "SCAN f") {
            wrong.push(format!("{name}: reads the whole table:\n{plan}"));
        }
    }
    pool.close().await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

async fn query_flows_paging(store: Arc<dyn Store>) {
    // p-00 .. p-10, created in groups that share a time (ties broken by id),
    // not in id order, a third of them ended (also sharing times); plus
    // flows outside the prefix. Running flows list first, by start, then
    // ended ones, by end, each group in the sort's direction.
    let mut running: Vec<(chrono::DateTime<chrono::Utc>, String)> = Vec::new();
    let mut ended: Vec<(chrono::DateTime<chrono::Utc>, String)> = Vec::new();
    for i in 0..11i64 {
        let id = format!("p-{i:02}");
        let secs = (i * 7) % 4;
        let labels: &[(&str, &str)] = if i % 2 == 0 { &[("even", "yes")] } else { &[] };
        let state = stored_start(&store, &id, labels, secs).await;
        if i % 3 == 1 {
            // Ended in an order of their own, not their start's.
            let end = 10 + (i * 5) % 3;
            let tx = if i % 2 == 0 {
                succeed(&state, at(end))
            } else {
                fail(&state, at(end))
            };
            commit_ok(&store, commit(&tx, 3, None)).await;
            ended.push((at(end), id));
        } else {
            running.push((at(secs), id));
        }
    }
    for (id, secs) in [("q-00", 0), ("q-01", 2)] {
        stored_start(&store, id, &[("even", "yes")], secs).await;
    }
    running.sort();
    ended.sort();
    let ids = |group: &[(chrono::DateTime<chrono::Utc>, String)], rev: bool| {
        let mut ids: Vec<String> = group.iter().map(|(_, id)| id.clone()).collect();
        if rev {
            ids.reverse();
        }
        ids
    };
    let oldest: Vec<String> = [ids(&running, false), ids(&ended, false)].concat();
    let recent: Vec<String> = [ids(&running, true), ids(&ended, true)].concat();

    // Every page counts every match, when asked.
    let counted = FlowQuery {
        limit: 2,
        total: true,
        ..filtered(FlowFilter {
            id_prefix: Some("p-".into()),
            ..FlowFilter::default()
        })
    };
    let first = store.query_flows(&counted).await.unwrap();
    assert_eq!(first.total, Some(11));
    let second = FlowQuery {
        cursor: first.next_cursor,
        ..counted.clone()
    };
    assert_eq!(store.query_flows(&second).await.unwrap().total, Some(11));
    assert_eq!(store.query_flows(&flow_query()).await.unwrap().total, None);

    let base = filtered(FlowFilter {
        id_prefix: Some("p-".into()),
        ..FlowFilter::default()
    });
    for (sort, want) in [
        (SortOrder::OldestFirst, &oldest),
        (SortOrder::RecentFirst, &recent),
    ] {
        let q = FlowQuery { sort, ..base.clone() };
        for limit in [1, 2, 3, 4, 10, 11, 12, 100] {
            let seen = page_flows(&store, &q, limit).await;
            assert_eq!(&seen, want, "{sort:?}, limit {limit}: every flow once, in order");
        }
    }

    // With a label filter too.
    let even = |order: &[String]| -> Vec<String> {
        order
            .iter()
            .filter(|id| id[2..].parse::<i64>().unwrap() % 2 == 0)
            .cloned()
            .collect()
    };
    for (sort, want) in [
        (SortOrder::OldestFirst, even(&oldest)),
        (SortOrder::RecentFirst, even(&recent)),
    ] {
        let q = FlowQuery {
            sort,
            filter: FlowFilter {
                labels: vec![("even".into(), "yes".into())],
                ..base.filter.clone()
            },
            ..base.clone()
        };
        for limit in [1, 2, 5] {
            assert_eq!(
                page_flows(&store, &q, limit).await,
                want,
                "even, {sort:?}, limit {limit}"
            );
        }
    }

    // Without a prefix every flow shows, once.
    let all = page_flows(&store, &flow_query(), 3).await;
    assert_eq!(all.len(), 13);
    assert_eq!(all.iter().collect::<BTreeSet<_>>().len(), 13);

    let bad = FlowQuery {
        cursor: Some("garbage".into()),
        ..flow_query()
    };
    assert!(
        store.query_flows(&bad).await.is_err(),
        "a malformed cursor is an error"
    );
}

// ---------------------------------------------------------------------------
// claims

async fn claim_orphaned_work(store: Arc<dyn Store>) {
    use WorkStatus::*;
    let tx = start("c-1", &[], at(0));
    let mut c = commit(&tx, 0, Some(REQUEST));
    c.work = vec![
        row("c-1", GREET, "c.a1", Active, at(0), Some(("a", at(60)))),
        row("c-1", "other", "c.a2", Active, at(0), Some(("a", at(120)))),
        row("c-1", GREET, "c.b1", Active, at(0), Some(("b", at(60)))),
        // Not active: never claimed, whoever holds them and however old.
        row("c-1", GREET, "c.p", Pending, at(0), Some(("a", at(10)))),
        row("c-1", GREET, "c.s", Succeeded, at(0), Some(("a", at(10)))),
        row("c-1", GREET, "c.f", Failed, at(0), None),
        // Compensation waiting for its retry is a timer, not an orphan (one in
        // flight is claimed like active work).
        {
            let mut r = row("c-1", GREET, "c.cmp", Compensating, at(0), Some(("a", at(10))));
            r.due_at = Some(at(20));
            r
        },
        row("c-1", GREET, "c.x", Cancelled, at(0), Some(("b", at(10)))),
    ];
    commit_ok(&store, c).await;
    let active = set(&["c.a1", "c.a2", "c.b1"]);
    let lease_of = |views: &[WorkView], token: &str| {
        let w = views.iter().find(|w| w.token == token).unwrap();
        (w.lease_owner.clone(), w.lease_expires_at)
    };

    // b before a's leases expire: only b's own lease comes back.
    let got = store.claim_orphaned_work(&claim("b", 0, 300, 100)).await.unwrap();
    assert_eq!(keys(&got), set(&["c.b1"]));
    assert_eq!(
        got[0],
        WorkKey {
            flow_id: "c-1".into(),
            step_id: GREET.into(),
            token: "c.b1".into()
        }
    );
    let views = all_work(&store, work_query()).await;
    assert_eq!(
        lease_of(&views, "c.a1"),
        (Some("a".into()), Some(at(60))),
        "b took a's lease"
    );
    assert_eq!(lease_of(&views, "c.b1"), (Some("b".into()), Some(at(300))));

    // A third node gets nothing while every lease holds.
    assert!(store
        .claim_orphaned_work(&claim("c", 59, 300, 100))
        .await
        .unwrap()
        .is_empty());

    // a restarted: its own leases come back to it, whatever their expiry.
    let got = store.claim_orphaned_work(&claim("a", 0, 90, 100)).await.unwrap();
    assert_eq!(keys(&got), set(&["c.a1", "c.a2"]));
    let a2 = got.iter().find(|k| k.token == "c.a2").unwrap();
    assert_eq!((a2.flow_id.as_str(), a2.step_id.as_str()), ("c-1", "other"));
    let views = all_work(&store, work_query()).await;
    assert_eq!(lease_of(&views, "c.a1"), (Some("a".into()), Some(at(90))));
    assert_eq!(lease_of(&views, "c.a2"), (Some("a".into()), Some(at(90))));

    // Before the new expiry b gets only its own item; after it, a's too.
    let got = store
        .claim_orphaned_work(&claim("b", 89, 400, 100))
        .await
        .unwrap();
    assert_eq!(keys(&got), set(&["c.b1"]));
    let got = store
        .claim_orphaned_work(&claim("b", 91, 400, 100))
        .await
        .unwrap();
    assert_eq!(keys(&got), active);
    let views = all_work(&store, work_query()).await;
    for t in &active {
        assert_eq!(lease_of(&views, t), (Some("b".into()), Some(at(400))), "{t}");
    }
    // a lost them.
    assert!(store
        .claim_orphaned_work(&claim("a", 91, 500, 100))
        .await
        .unwrap()
        .is_empty());

    // The limit is respected; the rest stay with b until they expire.
    let got = store
        .claim_orphaned_work(&claim("d", 401, 1000, 2))
        .await
        .unwrap();
    let first = keys(&got);
    assert_eq!(first.len(), 2);
    assert!(first.is_subset(&active));
    let got = store
        .claim_orphaned_work(&claim("e", 402, 1000, 100))
        .await
        .unwrap();
    let rest = keys(&got);
    assert_eq!(rest.len(), 1);
    assert!(first.is_disjoint(&rest));
    assert_eq!(&first | &rest, active);

    // Non-active items were never claimed and keep their leases.
    assert_eq!(
        keys(
            &store
                .claim_orphaned_work(&claim("z", 100_000, 200_000, 100))
                .await
                .unwrap()
        ),
        active
    );
    let views = all_work(&store, work_query()).await;
    assert_eq!(lease_of(&views, "c.p"), (Some("a".into()), Some(at(10))));
    assert_eq!(lease_of(&views, "c.s"), (Some("a".into()), Some(at(10))));
    assert_eq!(lease_of(&views, "c.f"), (None, None));
    assert_eq!(lease_of(&views, "c.cmp"), (Some("a".into()), Some(at(10))));
    assert_eq!(lease_of(&views, "c.x"), (Some("b".into()), Some(at(10))));
}

/// Work deferred for an unhealthy step: pending items of active flows,
/// longest waiting first, but those of the steps still closed.
async fn deferred_work(store: Arc<dyn Store>) {
    use WorkStatus::*;
    let deferred = |mut r: tartan_store::WorkRow, secs: i64| {
        r.deferred_at = Some(at(secs));
        r
    };
    let live = start("d-live", &[], at(0));
    let mut c = commit(&live, 0, Some(REQUEST));
    c.work.extend([
        deferred(row("d-live", GREET, "d.late", Pending, at(0), None), 20),
        deferred(row("d-live", GREET, "d.early", Pending, at(0), None), 10),
        deferred(row("d-live", "down", "d.closed", Pending, at(0), None), 5),
        // Not deferred, or no longer waiting.
        row("d-live", GREET, "d.plain", Pending, at(0), None),
        deferred(row("d-live", GREET, "d.cancelled", Cancelled, at(0), None), 1),
    ]);
    commit_ok(&store, c).await;
    let ended = start("d-ended", &[], at(0));
    let mut c = commit(&ended, 0, Some(REQUEST));
    c.work.push(deferred(
        row("d-ended", GREET, "d.ended", Pending, at(0), None),
        1,
    ));
    commit_ok(&store, c).await;
    commit_ok(&store, commit(&succeed(&ended.state, at(40)), 3, None)).await;

    let tokens = |keys: Vec<tartan_store::WorkKey>| keys.into_iter().map(|k| k.token).collect::<Vec<_>>();
    let all = store.deferred_work(&[], 100).await.unwrap();
    assert_eq!(tokens(all), ["d.closed", "d.early", "d.late"]);
    let open = store.deferred_work(&["down".to_string()], 100).await.unwrap();
    assert_eq!(tokens(open), ["d.early", "d.late"]);
    let first = store.deferred_work(&["down".to_string()], 1).await.unwrap();
    assert_eq!(tokens(first), ["d.early"]);
}

/// Retries waiting in active flows, with their due times; nothing else.
async fn scheduled_work(store: Arc<dyn Store>) {
    use WorkStatus::*;
    let due = |mut r: tartan_store::WorkRow, secs: Option<i64>| {
        r.due_at = secs.map(at);
        r
    };
    let live = start("s-live", &[], at(0));
    let mut c = commit(&live, 0, Some(REQUEST));
    c.work.extend([
        due(
            row("s-live", GREET, "s.due1", NotCompleted, at(0), None),
            Some(30),
        ),
        // Waiting for its retry as the engine records it now: `pending`
        // with a due time (`not_completed` above, as before).
        due(row("s-live", "other", "s.due2", Pending, at(0), None), Some(10)),
        // Not waiting for a retry, or with no due time: not scheduled.
        due(row("s-live", GREET, "s.nodue", NotCompleted, at(0), None), None),
        due(row("s-live", GREET, "s.pending", Pending, at(0), None), None),
        due(row("s-live", GREET, "s.failed", Failed, at(0), None), Some(10)),
        due(
            row("s-live", GREET, "s.active", Active, at(0), Some(("a", at(60)))),
            Some(10),
        ),
    ]);
    commit_ok(&store, c).await;
    // A flow that has ended keeps no timers.
    let ended = start("s-ended", &[], at(0));
    let mut c = commit(&ended, 0, Some(REQUEST));
    c.work.push(due(
        row("s-ended", GREET, "s.ended", NotCompleted, at(0), None),
        Some(20),
    ));
    commit_ok(&store, c).await;
    let before: BTreeMap<String, chrono::DateTime<chrono::Utc>> = retries(&store, at(1_000))
        .await
        .into_iter()
        .map(|(k, t)| (k.token, t))
        .collect();
    let want = [("s.due1", at(30)), ("s.due2", at(10)), ("s.ended", at(20))];
    assert_eq!(
        before,
        want.iter().map(|(k, t)| (k.to_string(), *t)).collect(),
        "both flows are still active"
    );
    commit_ok(&store, commit(&succeed(&ended.state, at(40)), 3, None)).await;

    let mut got = retries(&store, at(1_000)).await;
    got.sort();
    // Only what is due before the horizon.
    let soon: Vec<String> = retries(&store, at(25))
        .await
        .into_iter()
        .map(|(k, _)| k.token)
        .collect();
    assert_eq!(
        soon,
        ["s.due2"],
        "due at 30 is past the horizon; s.ended's flow is over"
    );
    assert_eq!(
        got,
        vec![
            (
                WorkKey {
                    flow_id: "s-live".into(),
                    step_id: GREET.into(),
                    token: "s.due1".into()
                },
                at(30)
            ),
            (
                WorkKey {
                    flow_id: "s-live".into(),
                    step_id: "other".into(),
                    token: "s.due2".into()
                },
                at(10)
            ),
        ]
    );
}

/// The retry timers among the scheduled ones.
async fn retries(store: &Arc<dyn Store>, before: Time) -> Vec<(WorkKey, Time)> {
    store
        .scheduled_work(before)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|t| match t {
            ScheduledTimer::Retry(k, due) => Some((k, due)),
            _ => None,
        })
        .collect()
}

async fn concurrent_claims_never_share_an_item(store: Arc<dyn Store>) {
    let tx = start("cc-1", &[], at(0));
    let mut c = commit(&tx, 0, Some(REQUEST));
    c.work = (0..40)
        .map(|i| {
            row(
                "cc-1",
                GREET,
                &format!("cc.{i:02}"),
                WorkStatus::Active,
                at(0),
                Some(("old", at(10))),
            )
        })
        .collect();
    let all: BTreeSet<String> = c.work.iter().map(|w| w.token.clone()).collect();
    commit_ok(&store, c).await;

    let mut tasks = Vec::new();
    for n in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let node = format!("n{n}");
            let got = store
                .claim_orphaned_work(&claim(&node, 100, 1000, 40))
                .await
                .unwrap();
            (node, got)
        }));
    }
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    for t in tasks {
        let (node, got) = t.await.unwrap();
        for k in got {
            if let Some(prev) = owner.insert(k.token.clone(), node.clone()) {
                panic!("{} claimed by both {prev} and {node}", k.token);
            }
        }
    }
    assert_eq!(
        owner.keys().cloned().collect::<BTreeSet<_>>(),
        all,
        "every expired item claimed"
    );
    for w in all_work(&store, work_query()).await {
        assert_eq!(w.lease_owner.as_ref(), owner.get(&w.token), "{}", w.token);
        assert_eq!(w.lease_expires_at, Some(at(1000)));
    }
}

/// A node extends only its own leases, and only on work still in flight.
async fn renew_leases(store: Arc<dyn Store>) {
    use WorkStatus::*;
    let tx = start("r-1", &[], at(0));
    let mut c = commit(&tx, 0, Some(REQUEST));
    c.work = vec![
        row("r-1", GREET, "r.mine", Active, at(0), Some(("a", at(60)))),
        row("r-1", GREET, "r.theirs", Active, at(0), Some(("b", at(60)))),
        row("r-1", GREET, "r.done", Succeeded, at(0), Some(("a", at(60)))),
    ];
    commit_ok(&store, c).await;
    let tokens: Vec<String> = ["r.mine", "r.theirs", "r.done"]
        .iter()
        .map(|t| t.to_string())
        .collect();
    // Renewed for a length, from the database's now.
    let before = chrono::Utc::now();
    let renewed = store
        .renew_leases("a", &tokens, std::time::Duration::from_secs(500))
        .await
        .unwrap();
    let after = chrono::Utc::now();
    assert_eq!(renewed, vec!["r.mine".to_string()]);
    let views = all_work(&store, work_query()).await;
    let lease = |token: &str| views.iter().find(|w| w.token == token).unwrap().lease_expires_at;
    let mine = lease("r.mine").unwrap();
    let slack = chrono::Duration::seconds(2);
    let length = chrono::Duration::seconds(500);
    assert!(
        mine >= before + length - slack && mine <= after + length + slack,
        "{mine} is not 500 s after {before}..{after}"
    );
    assert_eq!(
        lease("r.theirs"),
        Some(at(60)),
        "another node's lease is untouched"
    );
    assert_eq!(lease("r.done"), Some(at(60)), "finished work is not renewed");
    assert!(store
        .renew_leases("a", &[], std::time::Duration::from_secs(900))
        .await
        .unwrap()
        .is_empty());
}

/// A process whose clock is months off (the fixture's `at(0)`, March 2026)
/// still leases a call until the database's now plus the lease, and a claim
/// made on the database's clock sees that lease as live: expiry is computed
/// and compared on the database's clock, not on the committing process's.
async fn leases_run_on_the_database_clock(store: Arc<dyn Store>) {
    use WorkStatus::*;
    let tx = start("clock-1", &[], at(0));
    let mut c = commit(&tx, 0, Some(REQUEST));
    let mut call = row("clock-1", GREET, "clock.call", Active, at(0), Some(("a", at(0))));
    call.lease_expires_at = None;
    call.lease_for = Some(std::time::Duration::from_secs(60));
    c.work = vec![call];
    let before = chrono::Utc::now();
    commit_ok(&store, c).await;
    let after = chrono::Utc::now();
    let lease = all_work(&store, work_query()).await[0].lease_expires_at.unwrap();
    let (slack, length) = (chrono::Duration::seconds(2), chrono::Duration::seconds(60));
    assert!(
        lease >= before + length - slack && lease <= after + length + slack,
        "the lease {lease} runs from the database's now ({before}..{after}), not from the process's {}",
        at(0)
    );
    // Another node claiming now, on the database's clock, leaves it alone;
    // one whose clock is past the lease (a fixed `at`) would take it.
    let claim = |at: Option<chrono::DateTime<chrono::Utc>>| Claim {
        node: "b".into(),
        at,
        lease: std::time::Duration::from_secs(60),
        limit: 10,
        include_own: false,
    };
    assert!(store.claim_orphaned_work(&claim(None)).await.unwrap().is_empty());
    let later = Some(after + chrono::Duration::seconds(120));
    assert_eq!(store.claim_orphaned_work(&claim(later)).await.unwrap().len(), 1);
}

/// After an outage 100,000 retries fall due together: one claim takes them
/// all, though no statement may carry that many parameters (SQLite allows
/// 32,766, Postgres 65,535).
async fn a_hundred_thousand_due_retries_are_claimed_at_once(store: Arc<dyn Store>) {
    const N: usize = 100_000;
    let flow = start("outage", &[], at(0));
    let mut c = commit(&flow, 0, Some(REQUEST));
    c.work = (0..N)
        .map(|i| {
            let mut r = row(
                "outage",
                GREET,
                &format!("due.{i:06}"),
                WorkStatus::NotCompleted,
                at(0),
                None,
            );
            r.due_at = Some(at(10));
            r
        })
        .collect();
    commit_ok(&store, c).await;
    let tokens: Vec<String> = (0..N).map(|i| format!("due.{i:06}")).collect();
    let claimed = store
        .claim_due_work(&claim("a", 20, 600, N), &tokens)
        .await
        .unwrap();
    assert_eq!(keys(&claimed).len(), N);
    // Leased now: another node's claim of the same tokens gets none.
    let again = store
        .claim_due_work(&claim("b", 21, 600, N), &tokens)
        .await
        .unwrap();
    assert!(again.is_empty(), "{} claimed twice", again.len());
}

async fn heard_windows_only_move_later(store: Arc<dyn Store>) {
    use WorkStatus::*;
    let tx = start("h-1", &[], at(0));
    let mut c = commit(&tx, 0, Some(REQUEST));
    c.work = vec![
        row("h-1", GREET, "h.active", Active, at(0), Some(("a", at(60)))),
        row("h-1", GREET, "h.done", Succeeded, at(0), Some(("a", at(60)))),
    ];
    commit_ok(&store, c).await;
    let key = |token: &str| WorkKey {
        flow_id: "h-1".into(),
        step_id: GREET.into(),
        token: token.into(),
    };
    assert_eq!(store.heard_until(&key("h.active")).await.unwrap(), None);
    store
        .note_heard(&key("h.active"), 1, at(100), at(130))
        .await
        .unwrap();
    assert_eq!(store.heard_until(&key("h.active")).await.unwrap(), Some(at(100)));
    // Out of order: an earlier end does not move it back.
    store
        .note_heard(&key("h.active"), 1, at(90), at(120))
        .await
        .unwrap();
    assert_eq!(store.heard_until(&key("h.active")).await.unwrap(), Some(at(100)));
    // Another attempt's, or a finished item's: nothing noted.
    store
        .note_heard(&key("h.active"), 2, at(200), at(230))
        .await
        .unwrap();
    assert_eq!(store.heard_until(&key("h.active")).await.unwrap(), Some(at(100)));
    store
        .note_heard(&key("h.done"), 1, at(100), at(130))
        .await
        .unwrap();
    assert_eq!(store.heard_until(&key("h.done")).await.unwrap(), None);
    let views = all_work(&store, work_query()).await;
    let lease = |token: &str| views.iter().find(|w| w.token == token).unwrap().lease_expires_at;
    assert_eq!(
        lease("h.active"),
        Some(at(130)),
        "the lease moved with the window"
    );
    assert_eq!(lease("h.done"), Some(at(60)));
}
