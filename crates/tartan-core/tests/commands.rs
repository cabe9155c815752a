//! Every command of the flow state machine, decided at the core: the
//! events, their fields, the effects asked of the engine (calls with their
//! attempt numbers, timers with their times, aborts) and the flow and work
//! statuses that follow. Compensation results, accepted async calls,
//! heartbeats, inactivity and deadline timers, due retries, stops and
//! retries of finished flows were tested only end to end before.
//!
//! A fixed clock (`t`), receipt tokens counted `tok-1`, `tok-2`, ... and
//! randomness fixed at 0.5; the default retry policy (exponential from
//! 1000 ms, no jitter) makes every wait exact. After every decision the
//! state read back from JSON and the state replayed from the log are the
//! decided state.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::machine::{args, ok, t, types, with_gated_context, FLOW, WEBHOOK};
use tartan_core::health::{DispatchGate, HealthState};

use chrono::Duration;
use common::{catalog, chain_def, goals, init};
use serde_json::{json, Value};
use tartan_core::catalog::Catalog;
use tartan_core::flow::{
    ApplyError, FlowEvent, FlowOptions, FlowState, FlowStatus, RetriedWork, StepStatus, Time, WorkState,
    WorkStatus,
};
use tartan_core::machine::{
    apply, AttemptResult, CallKind, Command, Dispatch, Effect, Stop, Transition, Wake,
};
use tartan_core::outcome::{AttemptOutcome, FailureCause, FailureClass};
use tartan_core::plan::{start_plan, InitArgs};
use tartan_core::retry::RetryState;
use tartan_core::step::Args;
use tartan_core::timeouts::{OnTimeout, TimeoutScope};

// ---------------------------------------------------------------------------
// The harness

/// `millis` milliseconds after the same instant.
fn ms(millis: i64) -> Time {
    t(0) + Duration::milliseconds(millis)
}

/// A failure with an HTTP status: 5xx are retried by the default
/// `retry_on`, 4xx (but 408, 425, 429) are permanent.
fn failure(status: u16, error: &str) -> AttemptResult {
    AttemptResult::Failure {
        cause: FailureCause::Status(status),
        error: error.into(),
        retry_after_ms: None,
    }
}

fn touch(step: &str, token: &str) -> Effect {
    Effect::Touch {
        step_id: step.into(),
        token: token.into(),
    }
}

fn call(step: &str, token: &str, attempt: u32) -> Effect {
    Effect::Call(Dispatch {
        step_id: step.into(),
        token: token.into(),
        attempt,
        kind: CallKind::Step,
    })
}

fn undo_call(step: &str, token: &str, attempt: u32) -> Effect {
    Effect::Call(Dispatch {
        step_id: step.into(),
        token: token.into(),
        attempt,
        kind: CallKind::Compensation,
    })
}

fn abort(step: &str, token: &str) -> Effect {
    Effect::Abort {
        step_id: step.into(),
        token: token.into(),
    }
}

fn arm_retry(step: &str, token: &str, at: Time) -> Effect {
    Effect::Arm {
        wake: Wake::Retry {
            step_id: step.into(),
            token: token.into(),
        },
        at,
    }
}

fn arm_inactivity(step: &str, token: &str, at: Time) -> Effect {
    Effect::Arm {
        wake: Wake::Inactivity {
            step_id: step.into(),
            token: token.into(),
        },
        at,
    }
}

// Commands

fn record(step: &str, token: &str, attempt: u32, result: AttemptResult) -> Command {
    Command::Record {
        step_id: step.into(),
        token: token.into(),
        attempt,
        result,
        waited: None,
    }
}

fn record_undo(step: &str, token: &str, attempt: u32, result: AttemptResult) -> Command {
    Command::RecordCompensation {
        step_id: step.into(),
        token: token.into(),
        attempt,
        result,
    }
}

fn accept(step: &str, token: &str, attempt: u32) -> Command {
    Command::Accept {
        step_id: step.into(),
        token: token.into(),
        attempt,
    }
}

fn heartbeat(step: &str, token: &str) -> Command {
    Command::Heartbeat {
        step_id: step.into(),
        token: token.into(),
    }
}

fn retry_due(step: &str, token: &str) -> Command {
    Command::RetryDue {
        step_id: step.into(),
        token: token.into(),
    }
}

fn retry_now(step: &str, token: &str) -> Command {
    Command::RetryNow {
        step_id: step.into(),
        token: token.into(),
    }
}

fn inactivity_due(step: &str, token: &str, heard_until: Option<Time>) -> Command {
    Command::InactivityDue {
        step_id: step.into(),
        token: token.into(),
        heard_until,
    }
}

fn redispatch(step: &str, token: &str) -> Command {
    Command::Redispatch {
        step_id: step.into(),
        token: token.into(),
    }
}

fn retry(reset_attempts: bool, by: Option<&str>) -> Command {
    Command::Retry {
        reset_attempts,
        by: by.map(str::to_string),
    }
}

/// One flow driven through the machine: its state, every event with the
/// time it was applied, and the receipt-token counter.
struct Run {
    state: FlowState,
    log: Vec<(FlowEvent, Time)>,
    tokens: u32,
    /// The steps the decisions take for unhealthy.
    gate: DispatchGate,
}

impl Run {
    fn start(
        catalog: &Catalog,
        goal_ids: &[&str],
        init: InitArgs,
        options: FlowOptions,
    ) -> (Run, Transition) {
        Run::start_gated(catalog, goal_ids, init, options, DispatchGate::default())
    }

    /// `start`, with the steps `gate` closes unhealthy from the start on.
    fn start_gated(
        catalog: &Catalog,
        goal_ids: &[&str],
        init: InitArgs,
        options: FlowOptions,
        gate: DispatchGate,
    ) -> (Run, Transition) {
        let plan = match start_plan(catalog, &goals(goal_ids), &init) {
            Ok(plan) => plan,
            Err(e) => panic!("no plan: {e}"),
        };
        let mut tokens = 0;
        let tx = with_gated_context(&mut tokens, t(0), &gate, |ctx| {
            let start = Command::Start {
                flow_id: FLOW.into(),
                plan,
                init,
                options,
            };
            apply(FlowState::default(), start, ctx)
        })
        .unwrap();
        let mut run = Run {
            state: tx.state.clone(),
            log: Vec::new(),
            tokens,
            gate,
        };
        run.absorb(&tx);
        (run, tx)
    }

    /// Decide `command` at `at`; on success the run takes its state.
    fn try_apply(&mut self, command: Command, at: Time) -> Result<Transition, ApplyError> {
        let state = self.state.clone();
        let tx = with_gated_context(&mut self.tokens, at, &self.gate, |ctx| apply(state, command, ctx))?;
        self.absorb(&tx);
        Ok(tx)
    }

    fn apply(&mut self, command: Command, at: Time) -> Transition {
        let what = format!("{command:?}");
        match self.try_apply(command, at) {
            Ok(tx) => tx,
            Err(e) => panic!("{what} failed: {e}"),
        }
    }

    fn absorb(&mut self, tx: &Transition) {
        self.state = tx.state.clone();
        self.log.extend(tx.events.iter().map(|e| (e.clone(), tx.now)));
        let text = serde_json::to_string(&self.state).unwrap();
        let back: FlowState = serde_json::from_str(&text).unwrap();
        assert!(
            back == self.state,
            "the state read back differs from the decided one"
        );
        let replayed = FlowState::replay(self.log.iter().map(|(e, at)| (e, *at))).unwrap();
        assert!(
            replayed == self.state,
            "the replayed state differs from the decided one"
        );
    }

    fn status(&self, step: &str) -> StepStatus {
        self.state.executions[step].status
    }

    fn work(&self, step: &str, token: &str) -> &WorkState {
        &self.state.executions[step].work_items[token]
    }

    /// The receipt token of a step's only work item.
    fn token(&self, step: &str) -> String {
        let items = &self.state.executions[step].work_items;
        assert_eq!(items.len(), 1, "step {step} has {} work items", items.len());
        items.keys().next().cloned().unwrap()
    }
}

fn no_options() -> FlowOptions {
    FlowOptions::default()
}

fn deadline(at: Time, on_timeout: Option<OnTimeout>) -> FlowOptions {
    FlowOptions {
        deadline_at: Some(at),
        on_timeout,
        ..FlowOptions::default()
    }
}

// ---------------------------------------------------------------------------
// Catalogs

/// `s`: one item per element of `items`, each undone by `http.compensate`
/// when the step does not complete. Its `work_config` is given (parallelism
/// and retries).
fn undoable(work_config: Value) -> Catalog {
    catalog(vec![json!({
        "id": "s",
        "name": "Step s",
        "type": "sync",
        "http": { "endpoint": "http://svc.test/s", "compensate": "http://svc.test/undo" },
        "work_config": work_config,
        "attributes": {
            "items": { "role": "required", "required": { "for_each": true } },
            "out": { "role": "output" },
        },
    })])
}

/// `s` over two elements, both items running at once (`tok-1` for 10,
/// `tok-2` for 20), three attempts per call.
fn start_undoable(options: FlowOptions) -> Run {
    start_undoable_with(json!({ "parallelism": 2, "max_retries": 2 }), options)
}

fn start_undoable_with(work_config: Value, options: FlowOptions) -> Run {
    let (run, tx) = Run::start(
        &undoable(work_config),
        &["s"],
        init(&[("items", json!([10, 20]))]),
        options,
    );
    assert_eq!(run.work("s", "tok-1").inputs, args(json!({ "items": 10 })));
    assert_eq!(run.work("s", "tok-2").inputs, args(json!({ "items": 20 })));
    let started = tx.dispatches().len();
    assert!(started >= 1, "{:?}", types(&tx));
    run
}

/// A for_each input whose value is not an array runs the step once, as a
/// step without for_each runs, and its outputs are the item's own (Argyll
/// runs it so); an array of one element still answers an array.
#[test]
fn a_for_each_input_that_is_not_an_array_runs_the_step_once() {
    for (value, own, expected) in [
        (json!("one"), json!({}), json!(1)),
        (json!({ "a": 1 }), json!({}), json!(1)),
        (json!(7), json!({}), json!(1)),
        (
            json!([7]),
            json!({ "items": 7 }),
            json!([{ "items": 7, "out": 1 }]),
        ),
    ] {
        let (mut run, _) = Run::start(
            &undoable(json!({})),
            &["s"],
            init(&[("items", value.clone())]),
            no_options(),
        );
        let token = run.token("s");
        assert_eq!(run.work("s", &token).inputs, args(own), "{value}");
        let tx = run.apply(record("s", &token, 1, ok(json!({ "out": 1 }))), t(1));
        assert_eq!(run.status("s"), StepStatus::Completed, "{value}");
        let out = tx.events.iter().find_map(|e| match e {
            FlowEvent::StepCompleted { outputs, .. } => outputs.get("out").map(|v| Value::clone(v)),
            _ => None,
        });
        assert_eq!(out, Some(expected), "{value}");
    }
}

/// `tok-1` of `s` succeeded at 1 s, `tok-2` failed for good at 2 s: the
/// step and the flow failed, `tok-1` is being undone (attempt 1).
fn compensating(work_config: Value) -> Run {
    let mut run = start_undoable_with(work_config, no_options());
    run.apply(record("s", "tok-1", 1, ok(json!({ "out": 1 }))), t(1));
    run.apply(record("s", "tok-2", 1, failure(400, "rejected")), t(2));
    assert_eq!(run.work("s", "tok-1").status, WorkStatus::Compensating);
    run
}

fn default_compensating() -> Run {
    compensating(json!({ "parallelism": 2, "max_retries": 2 }))
}

/// An async step `a` (input `in`, output `x`), with an inactivity window of
/// `inactivity_ms` when given, and the given `work_config`.
fn async_step(inactivity_ms: Option<u64>, work_config: Option<Value>) -> Catalog {
    let mut def = chain_def("a", &["in"], &["x"]);
    def["type"] = json!("async");
    if let Some(window) = inactivity_ms {
        def["timeouts"] = json!({ "inactivity": window });
    }
    if let Some(wc) = work_config {
        def["work_config"] = wc;
    }
    catalog(vec![def])
}

/// The async step with a 10 s window, its attempt 1 (`tok-1`) accepted at 0 s.
fn accepted() -> Run {
    accepted_with(None)
}

fn accepted_with(work_config: Option<Value>) -> Run {
    let (mut run, _) = Run::start(
        &async_step(Some(10_000), work_config),
        &["a"],
        init(&[("in", json!(1))]),
        no_options(),
    );
    assert_eq!(run.token("a"), "tok-1");
    run.apply(accept("a", "tok-1", 1), t(0));
    assert_eq!(run.work("a", "tok-1").inactive_until, Some(t(10)));
    run
}

/// a needs `in` and gives x; b needs x and gives y (the goal).
fn pair(a_def: Value) -> Catalog {
    catalog(vec![a_def, chain_def("b", &["x"], &["y"])])
}

fn start_pair(a_def: Value, options: FlowOptions) -> Run {
    Run::start(&pair(a_def), &["b"], init(&[("in", json!(1))]), options).0
}

/// The pair with a 60 s deadline; a succeeded at 1 s, b (`tok-2`) runs.
fn pair_running_b(options: FlowOptions) -> Run {
    let mut run = start_pair(chain_def("a", &["in"], &["x"]), options);
    run.apply(record("a", "tok-1", 1, ok(json!({ "x": 5 }))), t(1));
    assert_eq!(run.token("b"), "tok-2");
    run
}

/// The pair timed out at its 60 s deadline while b ran: failed and
/// deactivated.
fn timed_out_pair() -> Run {
    let mut run = pair_running_b(deadline(t(60), None));
    run.apply(Command::DeadlineDue, t(60));
    assert_eq!(run.state.status, FlowStatus::Failed);
    assert_eq!(run.state.deactivated_at, Some(t(60)));
    run
}

// ---------------------------------------------------------------------------
// Start

#[test]
fn a_start_records_its_deadline_and_what_the_deadline_does() {
    let (run, tx) = Run::start(
        &pair(chain_def("a", &["in"], &["x"])),
        &["b"],
        init(&[("in", json!(1))]),
        deadline(t(60), Some(OnTimeout::Cancel)),
    );
    assert!(
        matches!(
            &tx.events[0],
            FlowEvent::FlowStarted { flow_id, deadline_at: Some(at), on_timeout: Some(OnTimeout::Cancel), .. }
                if flow_id == FLOW && *at == t(60)
        ),
        "{:?}",
        tx.events[0]
    );
    assert_eq!(
        tx.effects,
        [
            Effect::Arm {
                wake: Wake::Deadline,
                at: t(60)
            },
            touch("a", "tok-1"),
            call("a", "tok-1", 1)
        ]
    );
    assert_eq!(run.state.deadline_at, Some(t(60)));
    assert_eq!(run.state.on_timeout, Some(OnTimeout::Cancel));
}

// ---------------------------------------------------------------------------
// Record: an item still running when its step failed

#[test]
fn a_failed_step_undoes_its_succeeded_items() {
    let mut run = start_undoable(no_options());
    run.apply(record("s", "tok-1", 1, ok(json!({ "out": 1 }))), t(1));
    let tx = run.apply(record("s", "tok-2", 1, failure(400, "rejected")), t(2));
    assert_eq!(
        types(&tx),
        ["work_failed", "step_failed", "comp_started", "flow_failed"]
    );
    assert_eq!(
        tx.events[2],
        FlowEvent::CompStarted {
            flow_id: FLOW.into(),
            step_id: "s".into(),
            token: "tok-1".into(),
            attempt: 1,
        }
    );
    assert_eq!(
        tx.effects,
        [
            touch("s", "tok-2"),
            touch("s", "tok-1"),
            undo_call("s", "tok-1", 1),
            Effect::Finished(FlowStatus::Failed)
        ]
    );
    assert_eq!(run.state.status, FlowStatus::Failed);
    assert_eq!(run.state.error.as_deref(), Some("goal step s failed: rejected"));
    assert_eq!(run.state.deactivated_at, None, "a compensation call is in flight");
}

#[test]
fn an_item_that_succeeds_after_its_step_failed_is_undone_at_once() {
    let mut run = start_undoable(no_options());
    run.apply(record("s", "tok-1", 1, failure(400, "rejected")), t(1));
    assert_eq!(run.status("s"), StepStatus::Failed);
    assert_eq!(run.work("s", "tok-2").status, WorkStatus::Active);

    let tx = run.apply(record("s", "tok-2", 1, ok(json!({ "out": 2 }))), t(2));
    assert_eq!(types(&tx), ["work_succeeded", "comp_started"]);
    assert_eq!(tx.effects, [touch("s", "tok-2"), undo_call("s", "tok-2", 1)]);
    assert_eq!(run.work("s", "tok-2").status, WorkStatus::Compensating);
    assert_eq!(run.state.deactivated_at, None);
}

// ---------------------------------------------------------------------------
// RecordCompensation

#[test]
fn a_compensation_that_succeeds_leaves_the_item_compensated_and_deactivates_the_flow() {
    let mut run = default_compensating();
    let tx = run.apply(record_undo("s", "tok-1", 1, ok(json!({}))), t(3));
    assert_eq!(
        tx.events,
        [
            FlowEvent::CompSucceeded {
                flow_id: FLOW.into(),
                step_id: "s".into(),
                token: "tok-1".into(),
                attempt: 1,
            },
            FlowEvent::FlowDeactivated {
                flow_id: FLOW.into(),
                status: FlowStatus::Failed,
            }
        ]
    );
    assert_eq!(tx.effects, [touch("s", "tok-1")], "nothing more to call");
    let work = run.work("s", "tok-1");
    assert_eq!(work.status, WorkStatus::Compensated);
    assert_eq!(work.compensation.len(), 1);
    assert_eq!(work.compensation[0].number, 1);
    assert_eq!(work.compensation[0].started_at, t(2));
    assert_eq!(work.compensation[0].ended_at, Some(t(3)));
    assert_eq!(work.compensation[0].outcome, Some(AttemptOutcome::Success));
    assert_eq!(run.state.status, FlowStatus::Failed);
    assert_eq!(run.state.deactivated_at, Some(t(3)));
}

#[test]
fn a_retryable_compensation_failure_arms_a_compensation_retry() {
    let mut run = default_compensating();
    let tx = run.apply(record_undo("s", "tok-1", 1, failure(503, "HTTP 503")), t(3));
    assert_eq!(types(&tx), ["comp_retry_scheduled"]);
    assert!(
        matches!(
            &tx.events[0],
            FlowEvent::CompRetryScheduled {
                step_id, token, error, retry_count: 1, next_retry_at, delay_ms: 1000,
                class: FailureClass::Retryable, http_status: Some(503), ..
            } if step_id == "s" && token == "tok-1" && error == "HTTP 503" && *next_retry_at == t(4)
        ),
        "{:?}",
        tx.events[0]
    );
    assert_eq!(tx.effects, [touch("s", "tok-1"), arm_retry("s", "tok-1", t(4))]);
    let work = run.work("s", "tok-1");
    assert_eq!(work.status, WorkStatus::Compensating, "still to be undone");
    assert_eq!(work.next_retry_at, Some(t(4)));
    assert_eq!(work.compensation[0].ended_at, Some(t(3)));
    assert_eq!(work.compensation[0].outcome, Some(AttemptOutcome::Retryable));
    assert_eq!(work.compensation[0].http_status, Some(503));
    assert_eq!(
        run.state.deactivated_at, None,
        "a compensation waiting for its retry keeps the flow from deactivating"
    );

    // Not due yet: nothing.
    let early = run.apply(retry_due("s", "tok-1"), ms(3_999));
    assert!(early.events.is_empty() && early.effects.is_empty(), "{early:?}");

    // Due: the next compensation call, after the flow has failed.
    let tx = run.apply(retry_due("s", "tok-1"), t(4));
    assert_eq!(
        tx.events,
        [FlowEvent::CompStarted {
            flow_id: FLOW.into(),
            step_id: "s".into(),
            token: "tok-1".into(),
            attempt: 2,
        }]
    );
    assert_eq!(tx.effects, [touch("s", "tok-1"), undo_call("s", "tok-1", 2)]);
    let work = run.work("s", "tok-1");
    assert_eq!(work.next_retry_at, None);
    assert_eq!(
        work.compensation.iter().map(|a| a.number).collect::<Vec<_>>(),
        [1, 2]
    );
}

#[test]
fn a_compensation_that_keeps_failing_backs_off_then_fails_when_its_attempts_are_used_up() {
    // Three calls (max_retries 2), waits of 1 s then 2 s.
    let mut run = default_compensating();
    run.apply(record_undo("s", "tok-1", 1, failure(503, "HTTP 503")), t(3));
    run.apply(retry_due("s", "tok-1"), t(4));
    let tx = run.apply(record_undo("s", "tok-1", 2, failure(503, "HTTP 503")), t(5));
    assert!(
        matches!(
            &tx.events[..],
            [FlowEvent::CompRetryScheduled { retry_count: 2, delay_ms: 2000, next_retry_at, .. }]
                if *next_retry_at == t(7)
        ),
        "{:?}",
        tx.events
    );
    assert_eq!(tx.effects, [touch("s", "tok-1"), arm_retry("s", "tok-1", t(7))]);
    let tx = run.apply(retry_due("s", "tok-1"), t(7));
    assert_eq!(tx.dispatches().len(), 1);
    assert_eq!(tx.effects[1], undo_call("s", "tok-1", 3));

    let tx = run.apply(record_undo("s", "tok-1", 3, failure(503, "HTTP 503")), t(8));
    assert_eq!(
        tx.events,
        [
            FlowEvent::CompFailed {
                flow_id: FLOW.into(),
                step_id: "s".into(),
                token: "tok-1".into(),
                error: "HTTP 503".into(),
                attempt: 3,
                class: FailureClass::Retryable,
                http_status: Some(503),
            },
            FlowEvent::FlowDeactivated {
                flow_id: FLOW.into(),
                status: FlowStatus::Failed,
            }
        ]
    );
    assert_eq!(tx.effects, [touch("s", "tok-1")], "no further retry is armed");
    let work = run.work("s", "tok-1");
    assert_eq!(work.status, WorkStatus::CompensationFailed);
    assert_eq!(work.error.as_deref(), Some("HTTP 503"));
    assert_eq!(work.next_retry_at, None);
    assert_eq!(work.compensation.len(), 3);
}

#[test]
fn a_permanent_compensation_failure_is_final() {
    let mut run = default_compensating();
    let tx = run.apply(record_undo("s", "tok-1", 1, failure(400, "cannot undo")), t(3));
    assert_eq!(
        tx.events,
        [
            FlowEvent::CompFailed {
                flow_id: FLOW.into(),
                step_id: "s".into(),
                token: "tok-1".into(),
                error: "cannot undo".into(),
                attempt: 1,
                class: FailureClass::Permanent,
                http_status: Some(400),
            },
            FlowEvent::FlowDeactivated {
                flow_id: FLOW.into(),
                status: FlowStatus::Failed,
            }
        ]
    );
    assert_eq!(tx.effects, [touch("s", "tok-1")]);
    let work = run.work("s", "tok-1");
    assert_eq!(work.status, WorkStatus::CompensationFailed);
    assert_eq!(work.error.as_deref(), Some("cannot undo"));
    assert_eq!(work.compensation[0].outcome, Some(AttemptOutcome::Permanent));
    assert_eq!(work.compensation[0].ended_at, Some(t(3)));
    assert_eq!(run.state.deactivated_at, Some(t(3)));
}

#[test]
fn a_timed_out_compensation_call_is_retried_with_no_status() {
    let mut run = default_compensating();
    let timed_out = AttemptResult::TimedOut {
        scope: TimeoutScope::Attempt,
        limit_ms: 5_000,
        elapsed_ms: 5_001,
    };
    let tx = run.apply(record_undo("s", "tok-1", 1, timed_out), t(3));
    assert!(
        matches!(
            &tx.events[..],
            [FlowEvent::CompRetryScheduled {
                error, retry_count: 1, next_retry_at, class: FailureClass::Retryable, http_status: None, ..
            }] if error == "compensation attempt timeout after 5000 ms" && *next_retry_at == t(4)
        ),
        "{:?}",
        tx.events
    );
    assert_eq!(tx.effects, [touch("s", "tok-1"), arm_retry("s", "tok-1", t(4))]);
}

#[test]
fn a_compensation_result_for_another_call_is_late_and_changes_nothing() {
    let mut run = default_compensating();
    let before = run.state.clone();
    let tx = run.apply(record_undo("s", "tok-1", 2, ok(json!({}))), t(3));
    assert_eq!(
        tx.events,
        [FlowEvent::WorkLateResult {
            flow_id: FLOW.into(),
            step_id: "s".into(),
            token: "tok-1".into(),
            attempt: 2,
            detail: "compensation result for a call that is no longer running".into(),
            compensation: true,
        }]
    );
    assert!(tx.effects.is_empty(), "{:?}", tx.effects);
    assert_eq!(tx.state, before, "nothing of the flow changed");

    // Once the call ended, its own result again is late too.
    run.apply(record_undo("s", "tok-1", 1, ok(json!({}))), t(4));
    let tx = run.apply(record_undo("s", "tok-1", 1, failure(400, "no")), t(5));
    assert_eq!(types(&tx), ["work_late_result"]);
    assert_eq!(run.work("s", "tok-1").status, WorkStatus::Compensated);
}

#[test]
fn a_compensation_result_for_an_item_not_being_undone_is_late_and_an_unknown_item_is_an_error() {
    let mut run = start_undoable(no_options());
    let tx = run.apply(record_undo("s", "tok-1", 1, ok(json!({}))), t(1));
    assert!(
        matches!(
            &tx.events[..],
            [FlowEvent::WorkLateResult { token, attempt: 1, compensation: true, .. }] if token == "tok-1"
        ),
        "{:?}",
        tx.events
    );
    assert_eq!(run.work("s", "tok-1").status, WorkStatus::Active);
    assert!(run.work("s", "tok-1").compensation.is_empty());

    let unknown = run.try_apply(record_undo("s", "tok-99", 1, ok(json!({}))), t(2));
    assert_eq!(unknown.unwrap_err(), ApplyError::UnknownWork("tok-99".into()));
}

// ---------------------------------------------------------------------------
// Redispatch of what the engine cut off, beyond what machine.rs covers

#[test]
fn a_cut_off_compensation_call_is_made_again_as_the_next_attempt() {
    let mut run = default_compensating();
    let tx = run.apply(redispatch("s", "tok-1"), t(3));
    assert_eq!(
        tx.events,
        [FlowEvent::CompStarted {
            flow_id: FLOW.into(),
            step_id: "s".into(),
            token: "tok-1".into(),
            attempt: 2,
        }]
    );
    assert_eq!(tx.effects, [touch("s", "tok-1"), undo_call("s", "tok-1", 2)]);
    let cut = &run.work("s", "tok-1").compensation[0];
    assert_eq!(cut.outcome, Some(AttemptOutcome::Abandoned));
    assert_eq!(cut.ended_at, Some(t(3)));
    assert_eq!(
        cut.error.as_deref(),
        Some("engine stopped before the call finished")
    );
}

#[test]
fn a_cut_off_compensation_call_with_no_attempt_left_fails_the_compensation() {
    let mut run = compensating(json!({ "parallelism": 2, "max_attempts": 1 }));
    let tx = run.apply(redispatch("s", "tok-1"), t(3));
    assert_eq!(
        tx.events,
        [
            FlowEvent::CompFailed {
                flow_id: FLOW.into(),
                step_id: "s".into(),
                token: "tok-1".into(),
                error: "compensation attempt 1 cut off by a restart or lease takeover; attempts used up"
                    .into(),
                attempt: 1,
                class: FailureClass::Retryable,
                http_status: None,
            },
            FlowEvent::FlowDeactivated {
                flow_id: FLOW.into(),
                status: FlowStatus::Failed,
            }
        ]
    );
    assert!(tx.dispatches().is_empty());
    assert_eq!(run.work("s", "tok-1").status, WorkStatus::CompensationFailed);
}

#[test]
fn a_cut_off_call_with_no_attempt_left_fails_its_item_instead_of_calling_again() {
    let mut def = chain_def("a", &["in"], &["x"]);
    def["work_config"] = json!({ "max_attempts": 1 });
    let (mut run, _) = Run::start(
        &catalog(vec![def]),
        &["a"],
        init(&[("in", json!(1))]),
        no_options(),
    );
    let tx = run.apply(redispatch("a", "tok-1"), t(30));
    let error = "attempt 1 cut off by a restart or lease takeover; \
                 attempts used up: the step's 1 attempts are used up";
    assert_eq!(
        types(&tx),
        ["work_failed", "step_failed", "flow_failed", "flow_deactivated"]
    );
    assert!(
        matches!(
            &tx.events[0],
            FlowEvent::WorkFailed {
                error: e, attempt: 1, class: FailureClass::Retryable, http_status: None,
                retry_state: Some(RetryState::MaxAttempts), ..
            } if e == error
        ),
        "{:?}",
        tx.events[0]
    );
    assert_eq!(
        tx.effects,
        [touch("a", "tok-1"), Effect::Finished(FlowStatus::Failed)]
    );
    let work = run.work("a", "tok-1");
    assert_eq!(work.status, WorkStatus::Failed);
    assert_eq!(work.retry_state, Some(RetryState::MaxAttempts));
    assert_eq!(work.attempts.len(), 1);
    assert_eq!(
        run.state.error.as_deref(),
        Some(format!("goal step a failed: {error}").as_str())
    );
}

// ---------------------------------------------------------------------------
// Accept

#[test]
fn an_accepted_call_waits_for_its_webhook_within_its_inactivity_window() {
    let (mut run, _) = Run::start(
        &async_step(Some(10_000), None),
        &["a"],
        init(&[("in", json!(1))]),
        no_options(),
    );
    let tx = run.apply(accept("a", "tok-1", 1), t(1));
    assert_eq!(
        tx.events,
        [FlowEvent::WorkAccepted {
            flow_id: FLOW.into(),
            step_id: "a".into(),
            token: "tok-1".into(),
            attempt: 1,
            inactive_until: Some(t(11)),
        }]
    );
    assert_eq!(
        tx.effects,
        [touch("a", "tok-1"), arm_inactivity("a", "tok-1", t(11))]
    );
    let work = run.work("a", "tok-1");
    assert_eq!(work.status, WorkStatus::Active, "waiting for its webhook");
    assert_eq!(work.accepted_at, Some(t(1)));
    assert_eq!(work.inactive_until, Some(t(11)));
    assert_eq!(work.attempts[0].ended_at, None);
    assert_eq!(run.state.deactivated_at, None);

    // The webhook's result ends the attempt and the flow.
    let tx = run.apply(record("a", "tok-1", 1, ok(json!({ "x": 5 }))), t(4));
    assert!(types(&tx).contains(&"flow_completed"), "{:?}", types(&tx));
    assert_eq!(run.work("a", "tok-1").inactive_until, None);
    assert_eq!(run.state.status, FlowStatus::Completed);
}

#[test]
fn an_accepted_call_of_a_step_without_an_inactivity_timeout_arms_no_timer() {
    let (mut run, _) = Run::start(
        &async_step(None, None),
        &["a"],
        init(&[("in", json!(1))]),
        no_options(),
    );
    let tx = run.apply(accept("a", "tok-1", 1), t(1));
    assert!(
        matches!(
            &tx.events[..],
            [FlowEvent::WorkAccepted {
                attempt: 1,
                inactive_until: None,
                ..
            }]
        ),
        "{:?}",
        tx.events
    );
    assert_eq!(tx.effects, [touch("a", "tok-1")]);
    assert_eq!(run.work("a", "tok-1").accepted_at, Some(t(1)));

    // It waits however long it takes: no heartbeat is needed, none counts.
    let hb = run.apply(heartbeat("a", "tok-1"), t(500));
    assert!(hb.events.is_empty() && hb.effects.is_empty(), "{hb:?}");
    let due = run.apply(inactivity_due("a", "tok-1", None), t(1_000));
    assert!(due.events.is_empty() && due.effects.is_empty(), "{due:?}");
    assert_eq!(run.work("a", "tok-1").status, WorkStatus::Active);
}

#[test]
fn an_accept_for_another_attempt_or_an_item_no_longer_running_changes_nothing() {
    let (mut run, _) = Run::start(
        &async_step(Some(10_000), None),
        &["a"],
        init(&[("in", json!(1))]),
        no_options(),
    );
    let tx = run.apply(accept("a", "tok-1", 2), t(1));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
    assert_eq!(run.work("a", "tok-1").accepted_at, None);

    // Attempt 1 failed and waits for its retry: its 202 comes too late.
    run.apply(record("a", "tok-1", 1, failure(503, "HTTP 503")), t(2));
    let tx = run.apply(accept("a", "tok-1", 1), t(2));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
    assert_eq!(run.work("a", "tok-1").status, WorkStatus::Pending);
    assert!(run.work("a", "tok-1").waits_for_retry());
    assert_eq!(run.work("a", "tok-1").inactive_until, None);

    // An unknown step is an error.
    let unknown = run.try_apply(accept("zz", "tok-1", 1), t(3));
    assert_eq!(unknown.unwrap_err(), ApplyError::UnknownStep("zz".into()));
}

// ---------------------------------------------------------------------------
// Heartbeat

#[test]
fn a_heartbeat_is_noted_until_half_the_window_is_used_then_recorded() {
    let mut run = accepted();
    let before = run.state.clone();
    // Just over half of the window left (5001 ms of 10000): noted only.
    let tx = run.apply(heartbeat("a", "tok-1"), ms(4_999));
    assert!(tx.events.is_empty());
    assert_eq!(
        tx.effects,
        [Effect::Heard {
            step_id: "a".into(),
            token: "tok-1".into(),
            attempt: 1,
            until: ms(14_999),
        }]
    );
    assert_eq!(tx.state, before, "a noted heartbeat changes no state");

    // Exactly half left: recorded, and the timer moves.
    let tx = run.apply(heartbeat("a", "tok-1"), t(5));
    assert_eq!(
        tx.events,
        [FlowEvent::WorkHeartbeat {
            flow_id: FLOW.into(),
            step_id: "a".into(),
            token: "tok-1".into(),
            inactive_until: t(15),
        }]
    );
    assert_eq!(
        tx.effects,
        [touch("a", "tok-1"), arm_inactivity("a", "tok-1", t(15))]
    );
    assert_eq!(run.work("a", "tok-1").inactive_until, Some(t(15)));
}

#[test]
fn a_noted_heartbeat_names_the_attempt_that_is_running() {
    let mut run = accepted();
    run.apply(inactivity_due("a", "tok-1", None), t(10));
    run.apply(retry_due("a", "tok-1"), t(11));
    let tx = run.apply(accept("a", "tok-1", 2), t(12));
    assert!(
        matches!(
            &tx.events[..],
            [FlowEvent::WorkAccepted { attempt: 2, inactive_until: Some(u), .. }] if *u == t(22)
        ),
        "{:?}",
        tx.events
    );
    let tx = run.apply(heartbeat("a", "tok-1"), t(13));
    assert_eq!(
        tx.effects,
        [Effect::Heard {
            step_id: "a".into(),
            token: "tok-1".into(),
            attempt: 2,
            until: t(23),
        }]
    );
}

#[test]
fn a_heartbeat_for_a_call_not_accepted_or_an_ended_item_changes_nothing() {
    let (mut run, _) = Run::start(
        &async_step(Some(10_000), None),
        &["a"],
        init(&[("in", json!(1))]),
        no_options(),
    );
    // The call is still in flight: no window to move, no timer to arm.
    let tx = run.apply(heartbeat("a", "tok-1"), t(1));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
    assert_eq!(run.work("a", "tok-1").inactive_until, None);

    run.apply(accept("a", "tok-1", 1), t(1));
    run.apply(record("a", "tok-1", 1, ok(json!({ "x": 1 }))), t(2));
    let tx = run.apply(heartbeat("a", "tok-1"), t(8));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");

    // An unknown item is ignored; an unknown step is an error.
    let tx = run.apply(heartbeat("a", "tok-99"), t(9));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
    let unknown = run.try_apply(heartbeat("zz", "tok-1"), t(9));
    assert_eq!(unknown.unwrap_err(), ApplyError::UnknownStep("zz".into()));
}

// ---------------------------------------------------------------------------
// InactivityDue

#[test]
fn an_inactivity_timer_before_the_window_ends_does_nothing() {
    let mut run = accepted();
    let tx = run.apply(inactivity_due("a", "tok-1", None), ms(9_999));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
    assert_eq!(run.work("a", "tok-1").status, WorkStatus::Active);
    assert_eq!(run.work("a", "tok-1").inactive_until, Some(t(10)));
}

#[test]
fn a_window_that_passes_in_silence_times_the_attempt_out_and_a_retry_calls_again() {
    let mut run = accepted();
    let tx = run.apply(inactivity_due("a", "tok-1", None), t(10));
    assert_eq!(types(&tx), ["work_not_completed", "work_retry_scheduled"]);
    let FlowEvent::WorkNotCompleted {
        error,
        attempt,
        class,
        http_status,
        problem: Some(problem),
        ..
    } = &tx.events[0]
    else {
        panic!("{:?}", tx.events[0]);
    };
    assert_eq!(error, "inactivity timeout after 10000 ms");
    assert_eq!(*attempt, 1);
    assert_eq!(*class, FailureClass::Retryable);
    assert_eq!(*http_status, None);
    assert_eq!(problem["status"], json!(408));
    assert_eq!(problem["timeout_scope"], json!("inactivity"));
    assert_eq!(
        problem["detail"],
        json!("step inactivity timeout of 10000 ms exceeded")
    );
    assert_eq!(problem["instance"], json!("/executions/a/work_items/tok-1"));
    assert_eq!(problem["elapsed_ms"], json!(10_000));
    assert!(
        matches!(
            &tx.events[1],
            FlowEvent::WorkRetryScheduled { retry_count: 1, delay_ms: 1000, next_retry_at, .. }
                if *next_retry_at == t(11)
        ),
        "{:?}",
        tx.events[1]
    );
    assert_eq!(
        tx.effects,
        [touch("a", "tok-1"), arm_retry("a", "tok-1", t(11))],
        "an accepted call has nothing in flight to abort"
    );
    let work = run.work("a", "tok-1");
    // Waiting for its retry: `pending` with `next_retry_at`, as Argyll.
    assert_eq!(work.status, WorkStatus::Pending);
    assert_eq!(work.next_retry_at, Some(t(11)));
    assert_eq!(work.inactive_until, None);
    assert_eq!(work.attempts[0].outcome, Some(AttemptOutcome::Retryable));
    assert_eq!(work.attempts[0].ended_at, Some(t(10)));

    let tx = run.apply(retry_due("a", "tok-1"), t(11));
    assert_eq!(tx.effects, [touch("a", "tok-1"), call("a", "tok-1", 2)]);
    let work = run.work("a", "tok-1");
    assert_eq!(work.status, WorkStatus::Active);
    assert_eq!(work.accepted_at, None, "attempt 2 is not accepted yet");
}

#[test]
fn a_window_that_passes_with_no_attempt_left_fails_the_item_its_step_and_the_flow() {
    let mut run = accepted_with(Some(json!({ "max_attempts": 1 })));
    let tx = run.apply(inactivity_due("a", "tok-1", None), t(10));
    assert_eq!(
        types(&tx),
        ["work_failed", "step_failed", "flow_failed", "flow_deactivated"]
    );
    assert!(
        matches!(
            &tx.events[0],
            FlowEvent::WorkFailed {
                error, attempt: 1, class: FailureClass::Retryable,
                retry_state: Some(RetryState::MaxAttempts), problem: Some(_), ..
            } if error == "inactivity timeout after 10000 ms"
        ),
        "{:?}",
        tx.events[0]
    );
    let why = "inactivity timeout after 10000 ms; gave up after 1 of the step's 1 attempts";
    assert!(
        matches!(&tx.events[1], FlowEvent::StepFailed { error, .. } if error == why),
        "{:?}",
        tx.events[1]
    );
    assert_eq!(
        tx.effects,
        [touch("a", "tok-1"), Effect::Finished(FlowStatus::Failed)]
    );
    assert_eq!(run.work("a", "tok-1").status, WorkStatus::Failed);
    assert_eq!(run.state.status, FlowStatus::Failed);
    assert_eq!(
        run.state.error.as_deref(),
        Some(format!("goal step a failed: {why}").as_str())
    );
    let problem = run.state.problem.as_ref().unwrap();
    assert_eq!(problem["timeout_scope"], json!("inactivity"));
    assert_eq!(problem["instance"], json!("/executions/a"));
    assert_eq!(run.state.deactivated_at, Some(t(10)));
}

#[test]
fn a_heartbeat_noted_past_the_window_moves_it_instead_of_timing_out() {
    let mut run = accepted();
    let noted = run.apply(heartbeat("a", "tok-1"), t(3));
    assert!(noted.events.is_empty());
    let tx = run.apply(inactivity_due("a", "tok-1", Some(t(13))), t(10));
    assert_eq!(
        tx.events,
        [FlowEvent::WorkHeartbeat {
            flow_id: FLOW.into(),
            step_id: "a".into(),
            token: "tok-1".into(),
            inactive_until: t(13),
        }]
    );
    assert_eq!(
        tx.effects,
        [touch("a", "tok-1"), arm_inactivity("a", "tok-1", t(13))]
    );
    assert_eq!(run.work("a", "tok-1").status, WorkStatus::Active);
    assert_eq!(run.work("a", "tok-1").inactive_until, Some(t(13)));

    // Nothing heard since: the moved window ends the attempt.
    let tx = run.apply(inactivity_due("a", "tok-1", Some(t(13))), t(13));
    assert_eq!(types(&tx), ["work_not_completed", "work_retry_scheduled"]);
}

#[test]
fn a_noted_heartbeat_that_ended_before_the_window_does_not_keep_the_call_alive() {
    let mut run = accepted();
    // Noted for an earlier window (or attempt): it ends before now.
    let tx = run.apply(inactivity_due("a", "tok-1", Some(t(8))), t(10));
    assert_eq!(types(&tx), ["work_not_completed", "work_retry_scheduled"]);
    assert!(run.work("a", "tok-1").waits_for_retry());
}

#[test]
fn an_inactivity_timer_for_an_item_no_longer_waiting_does_nothing() {
    let mut run = accepted();
    run.apply(record("a", "tok-1", 1, ok(json!({ "x": 1 }))), t(4));
    let tx = run.apply(inactivity_due("a", "tok-1", None), t(10));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
    assert_eq!(run.work("a", "tok-1").status, WorkStatus::Succeeded);

    let unknown = run.try_apply(inactivity_due("a", "tok-99", None), t(10));
    assert_eq!(unknown.unwrap_err(), ApplyError::UnknownWork("tok-99".into()));
}

/// docs/work-items.md: items still running when their flow failed "finish
/// and are recorded", and a flow is deactivated only once nothing runs. An
/// accepted async call whose window passes after its flow failed is timed
/// out like any other (it once was ignored, and the flow never
/// deactivated), and is not retried: the flow has ended.
#[test]
fn an_inactivity_window_that_passes_after_the_flow_failed_still_ends_the_call() {
    let mut async_def = chain_def("a", &["in"], &["x"]);
    async_def["type"] = json!("async");
    async_def["timeouts"] = json!({ "inactivity": 10_000 });
    let catalog = catalog(vec![async_def, chain_def("g", &["in"], &["o"])]);
    let (mut run, _) = Run::start(&catalog, &["a", "g"], init(&[("in", json!(1))]), no_options());
    let a = run.token("a");
    let g = run.token("g");
    run.apply(accept("a", &a, 1), t(0));
    run.apply(record("g", &g, 1, failure(400, "rejected")), t(1));
    assert_eq!(run.state.status, FlowStatus::Failed);
    assert_eq!(run.state.deactivated_at, None, "a's call is still open");

    let tx = run.apply(inactivity_due("a", &a, None), t(10));
    assert_eq!(run.work("a", &a).status, WorkStatus::Failed, "{:?}", types(&tx));
    assert_eq!(run.work("a", &a).retry_state, Some(RetryState::FlowEnded));
    assert_eq!(run.state.deactivated_at, Some(t(10)));
}

/// A call still running when its flow failed may fail in a retryable way:
/// it is not retried (no retry of an ended flow would ever start), and the
/// flow deactivates once it is recorded.
#[test]
fn a_retryable_failure_after_the_flow_failed_ends_the_item_without_a_retry() {
    let catalog = catalog(vec![
        chain_def("a", &["in"], &["x"]),
        chain_def("g", &["in"], &["o"]),
    ]);
    let (mut run, _) = Run::start(&catalog, &["a", "g"], init(&[("in", json!(1))]), no_options());
    let a = run.token("a");
    let g = run.token("g");
    run.apply(record("g", &g, 1, failure(400, "rejected")), t(1));
    assert_eq!(run.state.status, FlowStatus::Failed);
    assert_eq!(run.state.deactivated_at, None, "a's call is still running");

    let tx = run.apply(record("a", &a, 1, failure(503, "busy")), t(2));
    assert_eq!(types(&tx), ["work_failed", "step_failed", "flow_deactivated"]);
    assert!(
        !tx.effects.iter().any(|e| matches!(e, Effect::Arm { .. })),
        "{:?}",
        tx.effects
    );
    let work = run.work("a", &a);
    assert_eq!(
        (work.status, work.retry_state),
        (WorkStatus::Failed, Some(RetryState::FlowEnded))
    );
    assert_eq!(work.next_retry_at, None);
    assert_eq!(run.state.deactivated_at, Some(t(2)));
}

// ---------------------------------------------------------------------------
// DeadlineDue

#[test]
fn a_deadline_not_yet_reached_does_nothing_but_arm_it_again() {
    let mut run = pair_running_b(deadline(t(60), None));
    let tx = run.apply(Command::DeadlineDue, ms(59_999));
    // The wake that came early was the only one: the deadline is armed again.
    assert!(tx.events.is_empty(), "{tx:?}");
    assert_eq!(
        tx.effects,
        vec![Effect::Arm {
            wake: Wake::Deadline,
            at: t(60)
        }]
    );
    assert_eq!(run.state.status, FlowStatus::Active);
    assert_eq!(run.work("b", "tok-2").status, WorkStatus::Active);
}

#[test]
fn a_deadline_that_passed_aborts_the_calls_and_fails_the_flow_with_the_timeout_problem() {
    let mut run = pair_running_b(deadline(t(60), None));
    let tx = run.apply(Command::DeadlineDue, t(60));
    assert_eq!(
        types(&tx),
        [
            "work_cancelled",
            "step_cancelled",
            "flow_timed_out",
            "flow_failed",
            "flow_deactivated"
        ]
    );
    assert_eq!(
        tx.events[0],
        FlowEvent::WorkCancelled {
            flow_id: FLOW.into(),
            step_id: "b".into(),
            token: "tok-2".into(),
            reason: "flow timed out".into(),
        }
    );
    assert_eq!(
        tx.events[1],
        FlowEvent::StepCancelled {
            flow_id: FLOW.into(),
            step_id: "b".into(),
            reason: "flow timed out".into(),
        }
    );
    let FlowEvent::FlowTimedOut { problem, .. } = &tx.events[2] else {
        panic!("{:?}", tx.events[2]);
    };
    assert_eq!(problem["status"], json!(408));
    assert_eq!(problem["timeout_scope"], json!("flow"));
    assert_eq!(problem["detail"], json!("flow timeout of 60000 ms exceeded"));
    assert_eq!(problem["instance"], json!("/"));
    assert_eq!(problem["elapsed_ms"], json!(60_000));
    assert!(
        matches!(
            &tx.events[3],
            FlowEvent::FlowFailed { error, problem: Some(p), .. }
                if error == "flow timeout of 60000 ms exceeded" && p == problem
        ),
        "{:?}",
        tx.events[3]
    );
    assert_eq!(
        tx.effects,
        [
            touch("b", "tok-2"),
            abort("b", "tok-2"),
            Effect::Finished(FlowStatus::Failed)
        ]
    );
    assert_eq!(run.state.status, FlowStatus::Failed);
    assert_eq!(
        run.state.error.as_deref(),
        Some("flow timeout of 60000 ms exceeded")
    );
    assert_eq!(run.state.problem.as_ref(), Some(problem));
    assert_eq!(run.state.deactivated_at, Some(t(60)));
    assert_eq!(
        run.status("a"),
        StepStatus::Completed,
        "a completed step stays so"
    );
    assert_eq!(run.status("b"), StepStatus::Cancelled);
    let work = run.work("b", "tok-2");
    assert_eq!(work.status, WorkStatus::Cancelled);
    assert_eq!(work.attempts[0].outcome, Some(AttemptOutcome::Cancelled));
    assert_eq!(work.attempts[0].error.as_deref(), Some("flow timed out"));
}

#[test]
fn a_deadline_with_on_timeout_cancel_cancels_the_flow() {
    let mut run = pair_running_b(deadline(t(60), Some(OnTimeout::Cancel)));
    let tx = run.apply(Command::DeadlineDue, t(60));
    assert_eq!(
        types(&tx),
        [
            "work_cancelled",
            "step_cancelled",
            "flow_timed_out",
            "flow_cancelled",
            "flow_deactivated"
        ]
    );
    assert_eq!(
        tx.events[3],
        FlowEvent::FlowCancelled {
            flow_id: FLOW.into(),
            reason: "flow timed out".into(),
            compensate: true,
        }
    );
    assert_eq!(
        tx.effects,
        [
            touch("b", "tok-2"),
            abort("b", "tok-2"),
            Effect::Finished(FlowStatus::Cancelled)
        ]
    );
    assert_eq!(run.state.status, FlowStatus::Cancelled);
    assert_eq!(run.state.error.as_deref(), Some("flow timed out"));
    assert!(!run.state.killed);
    assert_eq!(
        run.state.problem.as_ref().map(|p| p["timeout_scope"].clone()),
        Some(json!("flow"))
    );
}

#[test]
fn a_deadline_cancels_a_waiting_retry_without_aborting_anything() {
    let mut a = chain_def("a", &["in"], &["x"]);
    a["work_config"] = json!({ "init_backoff": 30_000 });
    let mut run = start_pair(a, deadline(t(20), None));
    let tx = run.apply(record("a", "tok-1", 1, failure(503, "HTTP 503")), t(1));
    assert_eq!(
        tx.effects[1],
        arm_retry("a", "tok-1", t(31)),
        "a retry is not held back by the deadline"
    );

    let tx = run.apply(Command::DeadlineDue, t(20));
    assert_eq!(
        types(&tx),
        [
            "work_cancelled",
            "step_cancelled",
            "flow_timed_out",
            "flow_failed",
            "flow_deactivated"
        ]
    );
    assert_eq!(
        tx.effects,
        [touch("a", "tok-1"), Effect::Finished(FlowStatus::Failed)],
        "no call was in flight"
    );
    assert_eq!(
        run.state.error.as_deref(),
        Some("flow timeout of 20000 ms exceeded")
    );
    let work = run.work("a", "tok-1");
    assert_eq!(work.status, WorkStatus::Cancelled);
    assert_eq!(work.next_retry_at, None);
    assert_eq!(
        work.attempts[0].outcome,
        Some(AttemptOutcome::Retryable),
        "the ended attempt keeps its outcome"
    );

    // The retry timer that was armed fires into a finished flow.
    let tx = run.apply(retry_due("a", "tok-1"), t(31));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
}

#[test]
fn a_deadline_undoes_the_succeeded_items_of_running_steps() {
    let mut run = start_undoable(deadline(t(60), None));
    run.apply(record("s", "tok-1", 1, ok(json!({ "out": 1 }))), t(1));
    let tx = run.apply(Command::DeadlineDue, t(60));
    assert_eq!(
        types(&tx),
        [
            "work_cancelled",
            "step_cancelled",
            "comp_started",
            "flow_timed_out",
            "flow_failed"
        ]
    );
    assert_eq!(
        tx.effects,
        [
            touch("s", "tok-2"),
            abort("s", "tok-2"),
            touch("s", "tok-1"),
            undo_call("s", "tok-1", 1),
            Effect::Finished(FlowStatus::Failed)
        ]
    );
    assert_eq!(run.work("s", "tok-1").status, WorkStatus::Compensating);
    assert_eq!(run.state.deactivated_at, None, "the undo call is in flight");
}

#[test]
fn a_deadline_of_a_finished_flow_or_no_deadline_does_nothing() {
    let mut run = pair_running_b(deadline(t(60), None));
    run.apply(record("b", "tok-2", 1, ok(json!({ "y": 1 }))), t(2));
    assert_eq!(run.state.status, FlowStatus::Completed);
    let tx = run.apply(Command::DeadlineDue, t(61));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
    assert_eq!(run.state.status, FlowStatus::Completed);

    let mut run = pair_running_b(no_options());
    let tx = run.apply(Command::DeadlineDue, t(100_000));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
    assert_eq!(run.state.status, FlowStatus::Active);
}

// ---------------------------------------------------------------------------
// RetryDue

#[test]
fn each_due_retry_calls_the_next_attempt_with_the_same_token_after_a_growing_wait() {
    let mut run = pair_running_b(no_options());
    let tx = run.apply(record("b", "tok-2", 1, failure(503, "HTTP 503")), t(2));
    assert_eq!(tx.effects, [touch("b", "tok-2"), arm_retry("b", "tok-2", t(3))]);
    let tx = run.apply(retry_due("b", "tok-2"), t(3));
    assert_eq!(
        tx.events,
        [FlowEvent::WorkStarted {
            flow_id: FLOW.into(),
            step_id: "b".into(),
            token: "tok-2".into(),
            inputs: Args::new(),
            attempt: 2,
            deadline_at: None,
        }]
    );
    assert_eq!(tx.effects, [touch("b", "tok-2"), call("b", "tok-2", 2)]);

    // The second wait doubles: 2 s.
    let tx = run.apply(record("b", "tok-2", 2, failure(502, "HTTP 502")), t(4));
    assert_eq!(tx.effects, [touch("b", "tok-2"), arm_retry("b", "tok-2", t(6))]);
    let early = run.apply(retry_due("b", "tok-2"), ms(5_999));
    assert!(
        early.events.is_empty() && early.effects.is_empty(),
        "an early timer neither calls nor re-arms: {early:?}"
    );
    let tx = run.apply(retry_due("b", "tok-2"), t(6));
    assert_eq!(tx.effects, [touch("b", "tok-2"), call("b", "tok-2", 3)]);

    let work = run.work("b", "tok-2");
    assert_eq!(work.status, WorkStatus::Active);
    assert_eq!(work.retry_count, 2);
    assert_eq!(work.next_retry_at, None);
    assert_eq!(
        work.attempts.iter().map(|a| a.number).collect::<Vec<_>>(),
        [1, 2, 3]
    );
}

#[test]
fn a_retry_timer_for_an_item_not_waiting_does_nothing_and_an_unknown_item_is_an_error() {
    let mut run = pair_running_b(no_options());
    // Running, not waiting: a stray timer starts no second call.
    let tx = run.apply(retry_due("b", "tok-2"), t(100));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
    assert_eq!(run.work("b", "tok-2").attempts.len(), 1);

    let unknown = run.try_apply(retry_due("b", "tok-99"), t(100));
    assert_eq!(unknown.unwrap_err(), ApplyError::UnknownWork("tok-99".into()));
}

#[test]
fn retry_now_starts_the_next_attempt_at_once_and_the_old_wake_then_does_nothing() {
    let mut run = pair_running_b(no_options());
    run.apply(record("b", "tok-2", 1, failure(503, "HTTP 503")), t(2));
    assert_eq!(run.work("b", "tok-2").next_retry_at, Some(t(3)));
    let tx = run.apply(retry_now("b", "tok-2"), ms(2_250));
    assert_eq!(types(&tx), ["work_retry_hastened", "work_started"]);
    assert_eq!(
        tx.events[0],
        FlowEvent::WorkRetryHastened {
            flow_id: FLOW.into(),
            step_id: "b".into(),
            token: "tok-2".into(),
            was_due_at: t(3),
        }
    );
    assert_eq!(tx.effects, [touch("b", "tok-2"), call("b", "tok-2", 2)]);
    let work = run.work("b", "tok-2");
    assert_eq!(work.status, WorkStatus::Active);
    assert_eq!(work.next_retry_at, None);
    assert_eq!(work.attempts[0].hastened_at, Some(ms(2_250)));
    assert_eq!(
        work.attempts[0].delay.map(|d| d.delay_ms),
        Some(1_000),
        "the scheduled wait is kept"
    );

    // The wake armed for t(3) finds the item running: no second call.
    let tx = run.apply(retry_due("b", "tok-2"), t(3));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
    // Running, not waiting: retry now changes nothing.
    let tx = run.apply(retry_now("b", "tok-2"), t(4));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
    let unknown = run.try_apply(retry_now("b", "tok-99"), t(4));
    assert_eq!(unknown.unwrap_err(), ApplyError::UnknownWork("tok-99".into()));
}

#[test]
fn retry_now_does_nothing_once_the_flow_has_ended() {
    let mut run = pair_running_b(no_options());
    run.apply(record("b", "tok-2", 1, failure(503, "HTTP 503")), t(2));
    run.apply(Command::Stop(Stop::Kill("by request".into())), ms(2_100));
    let tx = run.apply(retry_now("b", "tok-2"), ms(2_200));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
}

// ---------------------------------------------------------------------------
// Health gates dispatch

/// The gate with `step` unhealthy ("HTTP 503").
fn unhealthy(step: &str) -> DispatchGate {
    let checks = std::collections::BTreeMap::from([(step.to_string(), HealthState::failed("HTTP 503"))]);
    DispatchGate::of_checks(&checks)
}

fn deferred(step: &str, token: &str) -> FlowEvent {
    FlowEvent::DispatchDeferred {
        flow_id: FLOW.into(),
        step_id: step.into(),
        token: token.into(),
        error: "HTTP 503".into(),
    }
}

#[test]
fn an_item_of_an_unhealthy_step_waits_without_an_attempt_and_starts_once_its_step_is_healthy() {
    let (mut run, tx) = Run::start_gated(
        &pair(chain_def("a", &["in"], &["x"])),
        &["b"],
        init(&[("in", json!(1))]),
        no_options(),
        unhealthy("a"),
    );
    assert_eq!(types(&tx), ["flow_started", "step_started", "dispatch_deferred"]);
    assert_eq!(tx.events[2], deferred("a", "tok-1"));
    assert!(tx.dispatches().is_empty(), "no call goes out: {tx:?}");
    let work = run.work("a", "tok-1");
    assert_eq!(work.status, WorkStatus::Pending);
    assert_eq!(work.deferred_since, Some(t(0)));
    assert!(work.attempts.is_empty() && work.next_retry_at.is_none());
    assert!(work.waits_for_retry());

    // Still unhealthy: looking again decides nothing, and says nothing again.
    let tx = run.apply(retry_due("a", "tok-1"), t(30));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");

    // Healthy again: attempt 1, the first, goes out.
    run.gate = DispatchGate::default();
    let tx = run.apply(retry_due("a", "tok-1"), t(60));
    assert_eq!(types(&tx), ["work_started"]);
    assert_eq!(tx.dispatches().len(), 1);
    let work = run.work("a", "tok-1");
    assert_eq!((work.attempts.len(), work.attempts[0].number), (1, 1));
    assert_eq!(work.deferred_since, None);
    // Waiting before its first attempt takes nothing from its retry budget.
    assert_eq!(work.deferred_ms, 0);
}

#[test]
fn a_retry_of_an_unhealthy_step_waits_and_the_wait_is_left_out_of_its_retry_budget() {
    let a = json!({
        "id": "a", "name": "a", "type": "sync",
        "attributes": { "in": { "role": "required" }, "x": { "role": "output" } },
        "http": { "endpoint": "http://a.test/a" },
        "work_config": { "max_retries": 5, "backoff": 1000, "backoff_type": "fixed", "max_retry_duration": 10000 }
    });
    let mut run = start_pair(a, no_options());
    run.apply(record("a", "tok-1", 1, failure(503, "HTTP 503")), t(1));
    assert_eq!(run.work("a", "tok-1").next_retry_at, Some(t(2)));

    // Due while the step is unhealthy: deferred, attempt 2 not started.
    run.gate = unhealthy("a");
    let tx = run.apply(retry_due("a", "tok-1"), t(2));
    assert_eq!(tx.events, [deferred("a", "tok-1")]);
    assert!(tx.dispatches().is_empty());
    let work = run.work("a", "tok-1");
    assert_eq!((work.status, work.attempts.len()), (WorkStatus::Pending, 1));
    assert_eq!((work.next_retry_at, work.deferred_since), (None, Some(t(2))));
    assert_eq!(work.retry_count, 1, "a deferral is not a retry");

    // 100 s later, healthy: attempt 2. The 98 s waited are not budget.
    run.gate = DispatchGate::default();
    let tx = run.apply(retry_due("a", "tok-1"), t(100));
    assert_eq!(tx.dispatches().len(), 1);
    assert_eq!(run.work("a", "tok-1").deferred_ms, 98_000);
    // Attempt 2 fails at 101 s: 100 s after the first attempt, far past the
    // 10 s budget on the clock, 2 s into it without the wait: retried.
    let tx = run.apply(record("a", "tok-1", 2, failure(503, "HTTP 503")), t(101));
    assert_eq!(types(&tx), ["work_not_completed", "work_retry_scheduled"]);
    assert_eq!(run.work("a", "tok-1").next_retry_at, Some(t(102)));
}

#[test]
fn a_call_cut_off_while_its_step_is_unhealthy_is_deferred_not_made_again() {
    let mut run = pair_running_b(no_options());
    run.gate = unhealthy("b");
    let tx = run.apply(redispatch("b", "tok-2"), t(5));
    assert_eq!(tx.events, [deferred("b", "tok-2")]);
    assert!(tx.dispatches().is_empty());
    let work = run.work("b", "tok-2");
    assert_eq!(work.status, WorkStatus::Pending);
    assert_eq!(work.attempts[0].outcome, Some(AttemptOutcome::Abandoned));
    // Another step's health changes nothing for this one.
    run.gate = unhealthy("a");
    let tx = run.apply(retry_due("b", "tok-2"), t(6));
    assert_eq!(types(&tx), ["work_started"]);
    assert_eq!(run.work("b", "tok-2").attempts[1].number, 2);
}

#[test]
fn a_step_total_timeout_that_passes_while_its_item_waits_ends_the_item_without_a_call() {
    let a = json!({
        "id": "a", "name": "a", "type": "sync",
        "attributes": { "in": { "role": "required" }, "x": { "role": "output" } },
        "http": { "endpoint": "http://a.test/a" },
        "timeouts": { "total": "10s" },
        "work_config": { "max_retries": 5, "backoff": 1000, "backoff_type": "fixed" }
    });
    let mut run = start_pair(a, no_options());
    run.apply(record("a", "tok-1", 1, failure(503, "HTTP 503")), t(1));
    run.gate = unhealthy("a");
    run.apply(retry_due("a", "tok-1"), t(2));
    assert!(run.work("a", "tok-1").deferred_since.is_some());
    // Healthy again at 30 s, 20 s past the item's 10 s: no call, timed out.
    run.gate = DispatchGate::default();
    let tx = run.apply(retry_due("a", "tok-1"), t(30));
    assert!(tx.dispatches().is_empty(), "{tx:?}");
    assert_eq!(types(&tx)[..2], ["work_timed_out", "step_timed_out"]);
    assert_eq!(run.work("a", "tok-1").status, WorkStatus::Failed);
    assert_eq!(
        run.work("a", "tok-1").error.as_deref(),
        Some("step total timeout after 10000 ms")
    );
}

#[test]
fn an_item_deferred_before_its_first_attempt_gets_its_total_timeout_at_that_attempt() {
    let a = json!({
        "id": "a", "name": "a", "type": "sync",
        "attributes": { "in": { "role": "required" }, "x": { "role": "output" } },
        "http": { "endpoint": "http://a.test/a" },
        "timeouts": { "total": "10s" }
    });
    let (mut run, _) = Run::start_gated(
        &pair(a),
        &["b"],
        init(&[("in", json!(1))]),
        no_options(),
        unhealthy("a"),
    );
    assert_eq!(run.work("a", "tok-1").deadline_at, None);
    run.gate = DispatchGate::default();
    run.apply(retry_due("a", "tok-1"), t(60));
    // The total timeout counts from the first attempt, made at 60 s.
    assert_eq!(run.work("a", "tok-1").deadline_at, Some(t(70)));
}

#[test]
fn a_deferred_item_is_cancelled_with_its_flow() {
    let (mut run, _) = Run::start_gated(
        &pair(chain_def("a", &["in"], &["x"])),
        &["b"],
        init(&[("in", json!(1))]),
        no_options(),
        unhealthy("a"),
    );
    let tx = run.apply(Command::Stop(Stop::Cancel("client asked".into())), t(3));
    assert!(types(&tx).contains(&"work_cancelled"), "{:?}", types(&tx));
    assert_eq!(run.work("a", "tok-1").status, WorkStatus::Cancelled);
    assert_eq!(run.state.status, FlowStatus::Cancelled);
}

// ---------------------------------------------------------------------------
// Stop

#[test]
fn a_cancel_undoes_the_succeeded_items_of_running_steps_and_aborts_the_rest() {
    let mut run = start_undoable(no_options());
    run.apply(record("s", "tok-1", 1, ok(json!({ "out": 1 }))), t(1));
    let tx = run.apply(Command::Stop(Stop::Cancel("client asked".into())), t(2));
    assert_eq!(
        tx.events,
        [
            FlowEvent::WorkCancelled {
                flow_id: FLOW.into(),
                step_id: "s".into(),
                token: "tok-2".into(),
                reason: "client asked".into(),
            },
            FlowEvent::StepCancelled {
                flow_id: FLOW.into(),
                step_id: "s".into(),
                reason: "client asked".into(),
            },
            FlowEvent::CompStarted {
                flow_id: FLOW.into(),
                step_id: "s".into(),
                token: "tok-1".into(),
                attempt: 1,
            },
            FlowEvent::FlowCancelled {
                flow_id: FLOW.into(),
                reason: "client asked".into(),
                compensate: true,
            }
        ]
    );
    assert_eq!(
        tx.effects,
        [
            touch("s", "tok-2"),
            abort("s", "tok-2"),
            touch("s", "tok-1"),
            undo_call("s", "tok-1", 1),
            Effect::Finished(FlowStatus::Cancelled)
        ]
    );
    assert_eq!(run.state.status, FlowStatus::Cancelled);
    assert_eq!(run.state.error.as_deref(), Some("client asked"));
    assert!(!run.state.killed);
    assert_eq!(run.status("s"), StepStatus::Cancelled);
    assert_eq!(run.state.deactivated_at, None, "the undo call is in flight");

    let tx = run.apply(record_undo("s", "tok-1", 1, ok(json!({}))), t(3));
    assert_eq!(types(&tx), ["comp_succeeded", "flow_deactivated"]);
    assert!(matches!(
        &tx.events[1],
        FlowEvent::FlowDeactivated {
            status: FlowStatus::Cancelled,
            ..
        }
    ));
    assert_eq!(run.state.deactivated_at, Some(t(3)));
}

#[test]
fn a_cancel_leaves_completed_steps_alone_even_when_they_could_be_undone() {
    // docs/work-items.md: only a step that fails, times out or is cancelled
    // with its flow undoes its items; a completed one stays completed.
    let mut a = chain_def("a", &["in"], &["x"]);
    a["http"]["compensate"] = json!("http://svc.test/undo-a");
    let mut run = start_pair(a, no_options());
    run.apply(record("a", "tok-1", 1, ok(json!({ "x": 5 }))), t(1));
    let tx = run.apply(Command::Stop(Stop::Cancel("client asked".into())), t(2));
    assert_eq!(
        types(&tx),
        [
            "work_cancelled",
            "step_cancelled",
            "flow_cancelled",
            "flow_deactivated"
        ]
    );
    assert_eq!(
        tx.effects,
        [
            touch("b", "tok-2"),
            abort("b", "tok-2"),
            Effect::Finished(FlowStatus::Cancelled)
        ]
    );
    assert_eq!(run.status("a"), StepStatus::Completed);
    assert_eq!(run.work("a", "tok-1").status, WorkStatus::Succeeded);
    assert!(run.work("a", "tok-1").compensation.is_empty());
}

#[test]
fn a_cancel_cancels_pending_items_without_aborting_them() {
    let mut run = start_undoable_with(json!({ "parallelism": 1 }), no_options());
    assert_eq!(run.work("s", "tok-2").status, WorkStatus::Pending);
    let tx = run.apply(Command::Stop(Stop::Cancel("client asked".into())), t(1));
    assert_eq!(
        types(&tx),
        [
            "work_cancelled",
            "work_cancelled",
            "step_cancelled",
            "flow_cancelled",
            "flow_deactivated"
        ]
    );
    assert_eq!(
        tx.effects,
        [
            touch("s", "tok-1"),
            abort("s", "tok-1"),
            touch("s", "tok-2"),
            Effect::Finished(FlowStatus::Cancelled)
        ]
    );
    assert_eq!(run.work("s", "tok-2").status, WorkStatus::Cancelled);
    assert!(run.work("s", "tok-2").attempts.is_empty());
}

#[test]
fn a_kill_cancels_without_undoing_anything() {
    let mut run = start_undoable(no_options());
    run.apply(record("s", "tok-1", 1, ok(json!({ "out": 1 }))), t(1));
    let tx = run.apply(Command::Stop(Stop::Kill("stop now".into())), t(2));
    assert_eq!(
        types(&tx),
        [
            "work_cancelled",
            "step_cancelled",
            "flow_cancelled",
            "flow_deactivated"
        ]
    );
    assert_eq!(
        tx.events[2],
        FlowEvent::FlowCancelled {
            flow_id: FLOW.into(),
            reason: "stop now".into(),
            compensate: false,
        }
    );
    assert_eq!(
        tx.effects,
        [
            touch("s", "tok-2"),
            abort("s", "tok-2"),
            Effect::Finished(FlowStatus::Cancelled)
        ]
    );
    assert!(run.state.killed);
    assert_eq!(run.state.status, FlowStatus::Cancelled);
    assert_eq!(run.state.deactivated_at, Some(t(2)));
    assert_eq!(run.work("s", "tok-1").status, WorkStatus::Succeeded);
    assert!(run.work("s", "tok-1").compensation.is_empty());

    // The aborted call's result, should it still come, is late: not undone.
    let tx = run.apply(record("s", "tok-2", 1, ok(json!({ "out": 2 }))), t(3));
    assert_eq!(types(&tx), ["work_late_result"]);
    assert_eq!(run.work("s", "tok-2").status, WorkStatus::Cancelled);
}

#[test]
fn a_timeout_stop_ends_the_flow_as_its_deadline_timer_does() {
    let mut by_stop = pair_running_b(deadline(t(60), None));
    let mut by_timer = pair_running_b(deadline(t(60), None));
    let stopped = by_stop.apply(Command::Stop(Stop::Timeout), t(60));
    let due = by_timer.apply(Command::DeadlineDue, t(60));
    assert_eq!(
        types(&stopped),
        [
            "work_cancelled",
            "step_cancelled",
            "flow_timed_out",
            "flow_failed",
            "flow_deactivated"
        ]
    );
    assert_eq!(stopped.events, due.events);
    assert_eq!(stopped.effects, due.effects);
    assert_eq!(by_stop.state, by_timer.state);
}

#[test]
fn stopping_a_flow_that_is_over_does_nothing() {
    let mut run = pair_running_b(no_options());
    run.apply(record("b", "tok-2", 1, ok(json!({ "y": 1 }))), t(2));
    assert_eq!(run.state.status, FlowStatus::Completed);
    for stop in [
        Stop::Cancel("late".into()),
        Stop::Kill("late".into()),
        Stop::Timeout,
    ] {
        let tx = run.apply(Command::Stop(stop), t(3));
        assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
    }
    assert_eq!(run.state.status, FlowStatus::Completed);
    assert!(!run.state.killed);
}

// ---------------------------------------------------------------------------
// Retry of a finished flow

#[test]
fn a_retry_restarts_what_did_not_succeed_records_who_asked_and_counts_the_timeout_again() {
    let mut run = timed_out_pair();
    let tx = run.apply(retry(true, Some("job-7")), t(100));
    assert_eq!(
        tx.events[0],
        FlowEvent::FlowRetried {
            flow_id: FLOW.into(),
            reset_attempts: true,
            steps: vec!["b".into()],
            work: vec![RetriedWork {
                step_id: "b".into(),
                token: "tok-2".into(),
            }],
            deadline_at: Some(t(160)),
            by: Some("job-7".into()),
        }
    );
    assert_eq!(types(&tx), ["flow_retried", "work_started"]);
    assert_eq!(
        tx.effects,
        [
            touch("b", "tok-2"),
            Effect::Arm {
                wake: Wake::Deadline,
                at: t(160)
            },
            call("b", "tok-2", 1)
        ]
    );
    assert_eq!(run.state.status, FlowStatus::Active);
    assert_eq!(run.state.error, None);
    assert_eq!(run.state.problem, None);
    assert_eq!(run.state.deactivated_at, None);
    assert_eq!(run.state.deadline_at, Some(t(160)));
    assert_eq!(run.state.retried_at, Some(t(100)));
    assert_eq!(run.status("a"), StepStatus::Completed);
    assert_eq!(run.status("b"), StepStatus::Active);
    let work = run.work("b", "tok-2");
    assert_eq!(work.attempts.len(), 1, "attempts counted afresh");
    assert_eq!(work.started_at, Some(t(100)));

    // The timeout counts from the retry: the same 60 s again.
    let tx = run.apply(Command::DeadlineDue, t(159));
    assert!(tx.events.is_empty());
    let tx = run.apply(Command::DeadlineDue, t(160));
    let FlowEvent::FlowTimedOut { problem, .. } = &tx.events[2] else {
        panic!("{:?}", types(&tx));
    };
    assert_eq!(problem["elapsed_ms"], json!(60_000));
    assert_eq!(
        run.state.error.as_deref(),
        Some("flow timeout of 60000 ms exceeded")
    );
}

#[test]
fn a_retry_without_resetting_attempts_goes_on_counting() {
    let mut run = timed_out_pair();
    let tx = run.apply(retry(false, None), t(100));
    assert!(
        matches!(
            &tx.events[0],
            FlowEvent::FlowRetried {
                reset_attempts: false,
                by: None,
                ..
            }
        ),
        "{:?}",
        tx.events[0]
    );
    assert_eq!(tx.dispatches().len(), 1);
    assert_eq!(tx.effects.last(), Some(&call("b", "tok-2", 2)));
    let work = run.work("b", "tok-2");
    assert_eq!(work.attempts.iter().map(|a| a.number).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(work.attempts[0].outcome, Some(AttemptOutcome::Cancelled));
}

#[test]
fn a_retry_of_a_killed_flow_clears_the_kill_and_reruns_only_what_did_not_succeed() {
    let mut run = start_undoable(no_options());
    run.apply(record("s", "tok-1", 1, ok(json!({ "out": 1 }))), t(1));
    run.apply(Command::Stop(Stop::Kill("stop now".into())), t(2));
    assert!(run.state.killed);

    let tx = run.apply(retry(true, None), t(5));
    assert!(
        matches!(
            &tx.events[0],
            FlowEvent::FlowRetried { steps, work, deadline_at: None, .. }
                if steps == &["s".to_string()] && work.len() == 1 && work[0].token == "tok-2"
        ),
        "{:?}",
        tx.events[0]
    );
    assert_eq!(tx.effects, [touch("s", "tok-2"), call("s", "tok-2", 1)]);
    assert!(!run.state.killed);
    assert_eq!(run.state.status, FlowStatus::Active);
    assert_eq!(run.work("s", "tok-1").status, WorkStatus::Succeeded);

    // Both items succeeded now: the step and the flow complete.
    let tx = run.apply(record("s", "tok-2", 1, ok(json!({ "out": 2 }))), t(6));
    assert!(types(&tx).contains(&"flow_completed"), "{:?}", types(&tx));
}

#[test]
fn a_retry_reruns_items_that_were_undone() {
    let mut run = default_compensating();
    run.apply(record_undo("s", "tok-1", 1, ok(json!({}))), t(3));
    assert_eq!(run.state.deactivated_at, Some(t(3)));

    let tx = run.apply(retry(true, None), t(5));
    assert!(
        matches!(
            &tx.events[0],
            FlowEvent::FlowRetried { work, .. }
                if work.iter().map(|w| w.token.as_str()).collect::<Vec<_>>() == ["tok-1", "tok-2"]
        ),
        "{:?}",
        tx.events[0]
    );
    assert_eq!(tx.dispatches().len(), 2);
    assert!(tx.effects.contains(&call("s", "tok-1", 1)));
    assert!(tx.effects.contains(&call("s", "tok-2", 1)));
    assert_eq!(run.work("s", "tok-1").status, WorkStatus::Active);
    assert_eq!(run.work("s", "tok-1").outputs, None);
}

#[test]
fn a_retry_of_a_running_deactivating_or_completed_flow_changes_nothing() {
    // Running.
    let mut run = pair_running_b(no_options());
    let tx = run.apply(retry(true, Some("job-1")), t(2));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
    assert_eq!(run.state.retried_at, None);

    // Failed, but an undo call still runs.
    let mut run = default_compensating();
    assert_eq!(run.state.status, FlowStatus::Failed);
    let tx = run.apply(retry(true, None), t(3));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
    assert_eq!(run.state.status, FlowStatus::Failed);

    // Completed.
    let mut run = pair_running_b(no_options());
    run.apply(record("b", "tok-2", 1, ok(json!({ "y": 1 }))), t(2));
    let tx = run.apply(retry(false, None), t(3));
    assert!(tx.events.is_empty() && tx.effects.is_empty(), "{tx:?}");
    assert_eq!(run.state.status, FlowStatus::Completed);
}

// ---------------------------------------------------------------------------
// The call a Call effect makes (`machine::Call::of`)

/// The call of `dispatch` as the run's state has it, at `at`, with the
/// engine's default attempt timeout of 30 s.
fn call_of(run: &Run, dispatch: &Dispatch, at: Time) -> Option<tartan_core::machine::Call> {
    tartan_core::machine::Call::of(&run.state, dispatch, at, 30_000)
}

fn dispatch_of(step: &str, token: &str, attempt: u32, kind: CallKind) -> Dispatch {
    Dispatch {
        step_id: step.into(),
        token: token.into(),
        attempt,
        kind,
    }
}

#[test]
fn a_call_goes_to_the_step_endpoint_with_its_inputs_and_the_default_attempt_timeout() {
    let (run, _) = Run::start(
        &catalog(vec![chain_def("a", &["in"], &["x"])]),
        &["a"],
        init(&[("in", json!(7))]),
        no_options(),
    );
    let call = call_of(&run, &dispatch_of("a", "tok-1", 1, CallKind::Step), t(0)).expect("live");
    assert_eq!(call.kind, tartan_core::machine::CallKind::Step);
    assert_eq!(
        (call.endpoint.as_str(), call.method.as_str()),
        ("http://svc.test/a", "POST")
    );
    assert_eq!(
        (call.flow_id.as_str(), call.token.as_str(), call.attempt),
        (FLOW, "tok-1", 1)
    );
    let Some(tartan_core::machine::CallBody::Inputs(inputs)) = &call.body else {
        panic!("{:?}", call.body);
    };
    assert_eq!(inputs.get("in"), Some(&json!(7)));
    assert_eq!(
        call.bound,
        tartan_core::machine::AttemptBound {
            timeout_ms: 30_000,
            scope: TimeoutScope::Attempt,
            limit_ms: 30_000,
            scope_start: t(0),
        }
    );
    assert!(!call.expects_webhook);
}

#[test]
fn a_call_another_decision_already_ended_is_not_made() {
    let (mut run, _) = Run::start(
        &catalog(vec![chain_def("a", &["in"], &["x"])]),
        &["a"],
        init(&[("in", json!(7))]),
        no_options(),
    );
    // Attempt 2 of an item running attempt 1, and an item that succeeded.
    assert!(call_of(&run, &dispatch_of("a", "tok-1", 2, CallKind::Step), t(0)).is_none());
    run.apply(record("a", "tok-1", 1, ok(json!({ "x": 1 }))), t(1));
    assert!(call_of(&run, &dispatch_of("a", "tok-1", 1, CallKind::Step), t(1)).is_none());
    assert!(
        call_of(&run, &dispatch_of("a", "tok-1", 1, CallKind::Compensation), t(1)).is_none(),
        "not compensating"
    );
    assert!(call_of(&run, &dispatch_of("a", "tok-9", 1, CallKind::Step), t(1)).is_none());
}

#[test]
fn the_total_timeout_cuts_an_attempt_short_when_it_ends_first() {
    let mut def = chain_def("a", &["in"], &["x"]);
    def["timeouts"] = json!({ "attempt": "10s", "total": "25s" });
    let (mut run, _) = Run::start(
        &catalog(vec![def]),
        &["a"],
        init(&[("in", json!(1))]),
        no_options(),
    );
    let first = call_of(&run, &dispatch_of("a", "tok-1", 1, CallKind::Step), t(0)).expect("live");
    assert_eq!(
        (first.bound.timeout_ms, first.bound.scope),
        (10_000, TimeoutScope::Attempt)
    );
    // Attempt 1 fails at 10 s; attempt 2 starts at 11 s; attempt 3 at 20 s
    // has 5 s of the total left.
    run.apply(record("a", "tok-1", 1, failure(503, "busy")), t(10));
    run.apply(retry_due("a", "tok-1"), t(11));
    let second = call_of(&run, &dispatch_of("a", "tok-1", 2, CallKind::Step), t(11)).expect("live");
    assert_eq!(
        (second.bound.timeout_ms, second.bound.scope_start),
        (10_000, t(11))
    );
    run.apply(record("a", "tok-1", 2, failure(503, "busy")), t(18));
    run.apply(retry_due("a", "tok-1"), t(20));
    let third = call_of(&run, &dispatch_of("a", "tok-1", 3, CallKind::Step), t(20)).expect("live");
    assert_eq!(
        third.bound,
        tartan_core::machine::AttemptBound {
            timeout_ms: 5_000,
            scope: TimeoutScope::Total,
            limit_ms: 25_000,
            scope_start: t(0),
        }
    );
}

#[test]
fn a_compensation_posts_the_inputs_and_outputs_to_the_compensate_url() {
    let run = default_compensating();
    let call =
        call_of(&run, &dispatch_of("s", "tok-1", 1, CallKind::Compensation), t(2)).expect("compensating");
    assert!(call.is_compensation());
    assert_eq!(
        (call.endpoint.as_str(), call.method.as_str()),
        ("http://svc.test/undo", "POST")
    );
    assert_eq!(
        call.body,
        Some(tartan_core::machine::CallBody::Json(
            json!({ "input": { "items": 10 }, "output": { "out": 1 } })
        ))
    );
    assert_eq!(call.bound.scope, TimeoutScope::Attempt);
}

#[test]
fn an_async_call_is_handed_its_signed_webhook_in_its_meta_inputs() {
    let mut def = chain_def("a", &["in"], &["x"]);
    def["type"] = json!("async");
    def["attributes"]["hook"] = json!({ "role": "meta", "meta": { "key": "webhook_url" } });
    let (run, _) = Run::start(
        &catalog(vec![def]),
        &["a"],
        init(&[("in", json!(1))]),
        no_options(),
    );
    let mut call = call_of(&run, &dispatch_of("a", "tok-1", 1, CallKind::Step), t(0)).expect("live");
    assert!(call.expects_webhook);
    call.hand_webhook("http://engine.test/webhook/f/a/tok-1/sig");
    let Some(tartan_core::machine::CallBody::Inputs(inputs)) = &call.body else {
        panic!("{:?}", call.body);
    };
    assert_eq!(
        inputs.get("hook"),
        Some(&json!("http://engine.test/webhook/f/a/tok-1/sig"))
    );
    // Flow state keeps the unsigned URL.
    let stored = run.state.item_inputs("a", "tok-1").expect("item");
    assert_eq!(
        stored.get("hook"),
        Some(&json!(format!("{WEBHOOK}/webhook/{FLOW}/a/tok-1")))
    );
}
