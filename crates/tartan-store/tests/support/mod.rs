//! Backends and fixtures for the `Store` test suite (`tests/store.rs`).
//!
//! Every case runs once per backend, on a database from `tartan_testkit`:
//! `run_sqlite` opens a store on a fresh file under the system temp
//! directory, `run_postgres` on a fresh database on the local server. Both
//! remove what they created afterwards, also when the case panics (the case
//! runs in its own task, so its panic is caught, the database removed and
//! the panic then resumed).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use chrono::{TimeZone, Utc};
use serde_json::json;
use tartan_core::catalog::Catalog;
use tartan_core::flow::{FlowOptions, FlowState, Time, WorkState, WorkStatus, DEFAULT_MAX_STEP_ATTEMPTS};
use tartan_core::machine::{self, AttemptResult, Command, Context, Transition};
use tartan_core::outcome::FailureCause;
use tartan_core::plan::{start_plan, InitArgs};
use tartan_core::retry::RetryDefaults;
use tartan_core::step::{Args, Step};
use tartan_store::{FlowCommit, Store, WorkRow};
use tartan_testkit::{Backend, TestDb};

/// Resume a case's panic (so the test reports the case's own message).
fn finish(result: Result<(), tokio::task::JoinError>) {
    if let Err(e) = result {
        if e.is_panic() {
            std::panic::resume_unwind(e.into_panic());
        }
        panic!("test case did not finish: {e}");
    }
}

/// `case, ...`: each `async fn case(store: Arc<dyn Store>)` run on a fresh
/// SQLite file (`case::on_sqlite`) and a fresh Postgres database
/// (`case::on_postgres`), one name per case; `with_url: case, ...` for a
/// case that also takes the database's URL (to open a second store or a
/// connection of its own).
macro_rules! store_cases {
    (with_url: $( $(#[$meta:meta])* $case:ident ),* $(,)?) => {$(
        mod $case {
            $(#[$meta])*
            #[tokio::test]
            async fn on_sqlite() {
                crate::support::run_sqlite(super::$case).await
            }

            $(#[$meta])*
            #[tokio::test]
            async fn on_postgres() {
                crate::support::run_postgres(super::$case).await
            }
        }
    )*};
    ($( $(#[$meta:meta])* $case:ident ),* $(,)?) => {$(
        mod $case {
            $(#[$meta])*
            #[tokio::test]
            async fn on_sqlite() {
                crate::support::run_sqlite(|store, _url| super::$case(store)).await
            }

            $(#[$meta])*
            #[tokio::test]
            async fn on_postgres() {
                crate::support::run_postgres(|store, _url| super::$case(store)).await
            }
        }
    )*};
}
pub(crate) use store_cases;

/// Run `case` against a store on a new SQLite file; the case also gets the URL.
pub async fn run_sqlite<F, Fut>(case: F)
where
    F: FnOnce(Arc<dyn Store>, String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        panic!("no temporary directory for a SQLite file");
    };
    run_on(db, "sqlite", case).await;
}

/// Run `case` against a store on a new Postgres database; the case also gets
/// the URL. When the server cannot be reached the test is skipped loudly, or
/// fails when `CI` is set (`tartan_testkit::TestDb`).
pub async fn run_postgres<F, Fut>(case: F)
where
    F: FnOnce(Arc<dyn Store>, String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    run_on(db, "postgres", case).await;
}

/// Open the store on `db` and run `case` in a task of its own, so that a
/// panic in it is caught, the database removed, then the panic resumed.
async fn run_on<F, Fut>(db: TestDb, backend: &str, case: F)
where
    F: FnOnce(Arc<dyn Store>, String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let url = db.url.clone();
    let result = match tartan_store::open(&url).await {
        Ok(store) => {
            assert_eq!(store.backend(), backend);
            Ok(tokio::spawn(case(store, url.clone())).await)
        }
        Err(e) => Err(e),
    };
    // The case's store (and its pools) went with its task.
    drop(db);
    match result {
        Ok(joined) => finish(joined),
        Err(e) => panic!("opening {url} failed: {e}"),
    }
}

/// The fixed clock: `at(s)` is `s` seconds after a fixed instant (whole
/// seconds, so every time survives the store's microsecond precision).
pub fn at(secs: i64) -> Time {
    Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap() + chrono::Duration::seconds(secs)
}

/// A valid, normalised sync step with one required input `name` and one
/// output `greeting`.
pub fn step(id: &str, endpoint: &str) -> Step {
    let step: Step = serde_json::from_value(json!({
        "id": id,
        "name": format!("Step {id}"),
        "type": "sync",
        "http": { "endpoint": endpoint },
        "attributes": {
            "name": { "role": "required", "type": "string" },
            "greeting": { "role": "output", "type": "string" }
        }
    }))
    .unwrap();
    step.normalize(&RetryDefaults::default()).unwrap()
}

/// The id of the one step every test flow runs.
pub const GREET: &str = "greet";

/// A catalog of one step.
pub fn catalog() -> Catalog {
    Catalog::new([step(GREET, "http://127.0.0.1:9/greet")])
}

/// Tokens `<flow_id>.tok<n>`: unique across flows, and with a `.` so that
/// work cursors (`<micros>.<token>`) are exercised with one.
fn tokens(flow_id: &str) -> impl FnMut() -> String + Send {
    let prefix = flow_id.to_string();
    let mut n = 0u32;
    move || {
        n += 1;
        format!("{prefix}.tok{n}")
    }
}

/// Start a flow of the one-step catalog at `now`: `flow_started`,
/// `step_started`, `work_started` (one active work item).
pub fn start(flow_id: &str, labels: &[(&str, &str)], now: Time) -> Transition {
    let catalog = catalog();
    let init: InitArgs = BTreeMap::from([("name".to_string(), vec![json!("ada")])]);
    let plan = start_plan(&catalog, &[GREET.to_string()], &init).unwrap();
    let labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut token = tokens(flow_id);
    let mut random = || 0.5;
    let mut ctx = Context {
        now,
        webhook_base: "http://127.0.0.1:9",
        new_token: &mut token,
        random: &mut random,
        max_flow_bytes: tartan_core::json::DEFAULT_MAX_FLOW_BYTES,
        script_limits: tartan_core::step::ScriptLimits::default(),
        gate: &tartan_core::health::DispatchGate::default(),
    };
    let options = FlowOptions {
        labels,
        max_step_attempts: DEFAULT_MAX_STEP_ATTEMPTS,
        ..FlowOptions::default()
    };
    let start = Command::Start {
        flow_id: flow_id.to_string(),
        plan,
        init,
        options,
    };
    let tx = machine::apply(FlowState::default(), start, &mut ctx).unwrap();
    assert_eq!(tx.events.len(), 3, "fixture: a start is three events");
    tx
}

/// The token of the flow's one work item.
pub fn only_token(state: &FlowState) -> String {
    state.executions[GREET].work_items.keys().next().cloned().unwrap()
}

fn record(state: &FlowState, result: AttemptResult, now: Time) -> Transition {
    let token = only_token(state);
    let mut new_token = tokens(&format!("{}.late", state.id));
    let mut random = || 0.5;
    let mut ctx = Context {
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
        token,
        attempt: 1,
        result,
        waited: None,
    };
    machine::apply(state.clone(), record, &mut ctx).unwrap()
}

/// The step's call succeeded: the flow completes.
pub fn succeed(state: &FlowState, now: Time) -> Transition {
    let mut outputs = Args::new();
    outputs.insert("greeting".into(), json!("hello ada"));
    let tx = record(
        state,
        AttemptResult::Success {
            outputs,
            http_status: Some(200),
        },
        now,
    );
    assert_eq!(
        tx.state.status,
        tartan_core::flow::FlowStatus::Completed,
        "fixture"
    );
    tx
}

/// The step's call failed permanently (refused before it was sent, so no
/// retry policy can retry it): the flow fails.
pub fn fail(state: &FlowState, now: Time) -> Transition {
    let tx = record(
        state,
        AttemptResult::Failure {
            cause: FailureCause::Refused,
            error: "boom".into(),
            retry_after_ms: None,
        },
        now,
    );
    assert_eq!(tx.state.status, tartan_core::flow::FlowStatus::Failed, "fixture");
    tx
}

/// The work rows of every item of `state`, as the engine writes them: active
/// items leased to `owner` for a minute.
pub fn work_rows(state: &FlowState, now: Time, owner: &str) -> Vec<WorkRow> {
    let mut rows = Vec::new();
    for (step_id, exec) in &state.executions {
        for (token, w) in &exec.work_items {
            let active = w.status == WorkStatus::Active;
            rows.push(WorkRow {
                token: token.clone(),
                flow_id: state.id.clone(),
                step_id: step_id.clone(),
                status: w.status,
                attempt: w.attempts.last().map(|a| a.number).unwrap_or(0),
                retry_count: w.retry_count,
                due_at: w.next_retry_at,
                lease_owner: active.then(|| owner.to_string()),
                lease_expires_at: active.then(|| now + chrono::Duration::seconds(60)),
                lease_for: None,
                created_at: now,
                detail: w.clone(),
                deferred_at: w.deferred_since,
            });
        }
    }
    rows
}

/// The commit of a transition, with the work rows of its state.
pub fn commit(tx: &Transition, base_sequence: i64, request: Option<&str>) -> FlowCommit {
    FlowCommit {
        flow_id: tx.state.id.clone(),
        base_sequence,
        at: tx.now,
        events: tx.events.clone(),
        state: std::sync::Arc::new(tx.state.clone()),
        request: request.map(str::to_string),
        work: work_rows(&tx.state, tx.now, "node-a"),
        line: None,
    }
}

/// A work item's detail, marked by `note` (kept in `inputs`) so that an
/// upsert can be told from the original.
pub fn detail(status: WorkStatus, note: &str) -> WorkState {
    let mut inputs = Args::new();
    inputs.insert("note".into(), json!(note));
    WorkState {
        status,
        ..WorkState::pending(inputs, 0)
    }
}

/// A hand-made work row.
pub fn row(
    flow_id: &str,
    step_id: &str,
    token: &str,
    status: WorkStatus,
    created_at: Time,
    lease: Option<(&str, Time)>,
) -> WorkRow {
    WorkRow {
        token: token.to_string(),
        flow_id: flow_id.to_string(),
        step_id: step_id.to_string(),
        status,
        attempt: 1,
        retry_count: 0,
        due_at: None,
        lease_owner: lease.map(|(o, _)| o.to_string()),
        lease_expires_at: lease.map(|(_, t)| t),
        lease_for: None,
        created_at,
        detail: detail(status, "original"),
        deferred_at: None,
    }
}
