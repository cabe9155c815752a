//! The flow state machine (`apply` with `Start`, `Record`, `Redispatch`) and
//! the event log it writes (`FlowState::replay`, `FlowEvent` round trips),
//! with a fixed clock and counted receipt tokens.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::machine::{args, ok, t, types, with_context, FLOW};

use common::{catalog, chain_def, goals, init, sync_def};
use serde_json::{json, Value};
use tartan_core::catalog::Catalog;
use tartan_core::flow::{
    ApplyError, AttributeValue, FlowEvent, FlowOptions, FlowState, FlowStatus, StepStatus, Time, WorkState,
    WorkStatus,
};
use tartan_core::json::outputs_of;
use tartan_core::machine::{apply, AttemptResult, Command, Dispatch, Effect, Stop, Transition, Wake};
use tartan_core::outcome::{AttemptOutcome, FailureCause};
use tartan_core::plan::{start_plan, InitArgs};

fn permanent(status: u16, error: &str) -> AttemptResult {
    AttemptResult::Failure {
        cause: FailureCause::Status(status),
        error: error.into(),
        retry_after_ms: None,
    }
}

fn dispatch(step: &str, token: &str, attempt: u32) -> Dispatch {
    Dispatch {
        step_id: step.into(),
        token: token.into(),
        attempt,
        kind: tartan_core::machine::CallKind::Step,
    }
}

/// One flow being driven through the machine: its current state, every event
/// with the time it was applied, and the receipt-token counter.
struct Run {
    state: FlowState,
    log: Vec<(FlowEvent, Time)>,
    tokens: u32,
}

impl Run {
    fn start(catalog: &Catalog, goal_ids: &[&str], init: InitArgs, at: Time) -> (Run, Transition) {
        Run::start_with(catalog, goal_ids, init, FlowOptions::default(), at)
    }

    fn start_with(
        catalog: &Catalog,
        goal_ids: &[&str],
        init: InitArgs,
        options: FlowOptions,
        at: Time,
    ) -> (Run, Transition) {
        let plan = match start_plan(catalog, &goals(goal_ids), &init) {
            Ok(plan) => plan,
            Err(e) => panic!("no plan: {e}"),
        };
        let mut tokens = 0;
        let tx = with_context(&mut tokens, at, |ctx| {
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
        };
        run.absorb(&tx);
        (run, tx)
    }

    fn try_record(
        &mut self,
        step: &str,
        token: &str,
        attempt: u32,
        result: AttemptResult,
        at: Time,
    ) -> Result<Transition, ApplyError> {
        let state = self.state.clone();
        let tx = with_context(&mut self.tokens, at, |ctx| {
            let record = Command::Record {
                step_id: step.into(),
                token: token.into(),
                attempt,
                result,
                waited: None,
            };
            apply(state, record, ctx)
        })?;
        self.absorb(&tx);
        Ok(tx)
    }

    fn record(
        &mut self,
        step: &str,
        token: &str,
        attempt: u32,
        result: AttemptResult,
        at: Time,
    ) -> Transition {
        match self.try_record(step, token, attempt, result, at) {
            Ok(tx) => tx,
            Err(e) => panic!("recording {step} {token} attempt {attempt} failed: {e}"),
        }
    }

    fn redispatch(&mut self, step: &str, token: &str, at: Time) -> Transition {
        let state = self.state.clone();
        let redispatch = Command::Redispatch {
            step_id: step.into(),
            token: token.into(),
        };
        let tx = with_context(&mut self.tokens, at, |ctx| apply(state, redispatch, ctx)).unwrap();
        self.absorb(&tx);
        tx
    }

    fn absorb(&mut self, tx: &Transition) {
        self.state = tx.state.clone();
        // Read back from JSON, the state is the same: what `apply` keeps
        // beside the fields (the count of calls in flight) agrees with a
        // recount after every decision of every test.
        let text = serde_json::to_string(&self.state).unwrap();
        let back: FlowState = serde_json::from_str(&text).unwrap();
        assert!(
            back == self.state,
            "the state read back differs from the decided one"
        );
        self.log.extend(tx.events.iter().map(|e| (e.clone(), tx.now)));
    }

    fn status(&self, step: &str) -> StepStatus {
        self.state.executions[step].status
    }

    /// The receipt token of a step's only work item.
    fn token(&self, step: &str) -> String {
        let items = &self.state.executions[step].work_items;
        assert_eq!(items.len(), 1, "step {step} has {} work items", items.len());
        items.keys().next().cloned().unwrap()
    }

    fn work(&self, step: &str) -> &WorkState {
        let token = self.token(step);
        &self.state.executions[step].work_items[&token]
    }

    /// What the step's item is called with: the step's inputs and its own.
    fn called_with(&self, step: &str) -> serde_json::Map<String, serde_json::Value> {
        let token = self.token(step);
        self.state.item_inputs(step, &token).unwrap().to_args()
    }

    /// Apply any command at `at`.
    fn command(&mut self, command: Command, at: Time) -> Transition {
        let state = self.state.clone();
        let tx = with_context(&mut self.tokens, at, |ctx| apply(state, command, ctx)).unwrap();
        self.absorb(&tx);
        tx
    }

    fn replayed(&self) -> FlowState {
        FlowState::replay(self.log.iter().map(|(e, at)| (e, *at))).unwrap()
    }
}

/// a needs `in` and gives x; b needs x and gives y; c needs y and gives z.
fn chain() -> Catalog {
    catalog(vec![
        chain_def("a", &["in"], &["x"]),
        chain_def("b", &["x"], &["y"]),
        chain_def("c", &["y"], &["z"]),
    ])
}

fn start_chain() -> (Run, Transition) {
    Run::start(&chain(), &["c"], init(&[("in", json!(1))]), t(0))
}

// ---------------------------------------------------------------------------
// Starting

#[test]
fn starting_a_flow_starts_only_the_first_step_of_a_chain() {
    let (run, tx) = start_chain();
    assert_eq!(types(&tx), ["flow_started", "step_started", "work_started"]);
    assert_eq!(tx.dispatches(), [dispatch("a", "tok-1", 1)]);
    assert!(
        matches!(
            &tx.events[2],
            FlowEvent::WorkStarted { step_id, token, attempt: 1, inputs, .. }
                if step_id == "a" && token == "tok-1" && inputs.is_empty()
        ),
        "an item holds only its own inputs; the step's are held once"
    );
    assert_eq!(*run.state.executions["a"].inputs.args(), args(json!({ "in": 1 })));
    assert_eq!(run.called_with("a"), args(json!({ "in": 1 })));
    assert_eq!(run.status("a"), StepStatus::Active);
    assert_eq!(run.status("b"), StepStatus::Pending);
    assert_eq!(run.status("c"), StepStatus::Pending);
    assert_eq!(run.state.status, FlowStatus::Active);
    assert_eq!(run.state.created_at, t(0));
}

/// The chain, started at t(0) to run at t(60).
fn start_chain_delayed() -> (Run, Transition) {
    let options = FlowOptions {
        starts_at: Some(t(60)),
        ..FlowOptions::default()
    };
    Run::start_with(&chain(), &["c"], init(&[("in", json!(1))]), options, t(0))
}

#[test]
fn a_delayed_flow_starts_no_step_before_its_time() {
    let (mut run, tx) = start_chain_delayed();
    assert_eq!(types(&tx), ["flow_started"]);
    assert!(tx.dispatches().is_empty());
    assert_eq!(
        tx.effects,
        [Effect::Arm {
            wake: Wake::Deadline,
            at: t(60)
        }]
    );
    assert_eq!(run.state.starts_at, Some(t(60)));
    assert_eq!(run.status("a"), StepStatus::Pending);
    // A wake before the time (another engine's sweep) changes nothing and
    // arms the start again.
    let early = run.command(Command::DeadlineDue, t(59));
    assert!(early.events.is_empty(), "{:?}", types(&early));
    assert!(early.effects.contains(&Effect::Arm {
        wake: Wake::Deadline,
        at: t(60)
    }));
    let tx = run.command(Command::DeadlineDue, t(60));
    assert_eq!(types(&tx), ["flow_released", "step_started", "work_started"]);
    assert_eq!(tx.dispatches(), [dispatch("a", "tok-1", 1)]);
    assert_eq!(run.state.starts_at, None);
    assert_eq!(run.state.wake_at(), None);
    assert_eq!(run.replayed(), run.state);
}

#[test]
fn a_delayed_flow_cancelled_before_its_time_calls_nothing_and_a_retry_runs_it_now() {
    let (mut run, _) = start_chain_delayed();
    let tx = run.command(Command::Stop(Stop::Cancel("client asked".into())), t(10));
    assert_eq!(types(&tx), ["flow_cancelled", "flow_deactivated"]);
    assert_eq!(run.state.status, FlowStatus::Cancelled);
    let due = run.command(Command::DeadlineDue, t(60));
    assert!(due.events.is_empty(), "{:?}", types(&due));
    let tx = run.command(
        Command::Retry {
            reset_attempts: false,
            by: None,
        },
        t(20),
    );
    assert_eq!(types(&tx), ["flow_retried", "step_started", "work_started"]);
    assert_eq!(tx.dispatches(), [dispatch("a", "tok-1", 1)]);
    assert_eq!(run.state.starts_at, None);
    assert_eq!(run.replayed(), run.state);
}

/// A turn for the place in the line joined at `t(secs)`.
fn admit(secs: i64) -> Command {
    Command::Admit {
        joined_us: t(secs).timestamp_micros(),
    }
}

/// The chain, started at t(0) with a concurrency key.
fn start_chain_keyed(starts_at: Option<tartan_core::flow::Time>) -> (Run, Transition) {
    let options = FlowOptions {
        starts_at,
        concurrency: Some(tartan_core::concurrency::Concurrency {
            key: "customer-1".into(),
            limit: 1,
        }),
        priority: 5,
        ..FlowOptions::default()
    };
    Run::start_with(&chain(), &["c"], init(&[("in", json!(1))]), options, t(0))
}

#[test]
fn a_keyed_flow_joins_its_line_and_starts_no_step_before_its_turn() {
    use tartan_core::concurrency::LineChange;
    let (mut run, tx) = start_chain_keyed(None);
    assert_eq!(types(&tx), ["flow_started"]);
    assert_eq!(tx.effects, [Effect::Line(LineChange::Join)]);
    assert!(run.state.queued);
    assert_eq!(run.state.priority, 5);
    // Nothing else lets it go: a wake changes nothing.
    assert!(run.command(Command::DeadlineDue, t(5)).events.is_empty());
    assert!(
        run.command(admit(1), t(10)).events.is_empty(),
        "a turn for another place in the line is not its turn"
    );
    let tx = run.command(admit(0), t(10));
    assert_eq!(types(&tx), ["flow_admitted", "step_started", "work_started"]);
    assert!(tx.effects.contains(&Effect::Line(LineChange::Admitted)));
    assert_eq!(tx.dispatches(), [dispatch("a", "tok-1", 1)]);
    assert!(!run.state.queued);
    // A second turn changes nothing.
    assert!(run.command(admit(0), t(11)).events.is_empty());
    assert_eq!(run.replayed(), run.state);
}

#[test]
fn a_keyed_flow_leaves_its_line_however_it_ends_and_a_retry_joins_again() {
    use tartan_core::concurrency::LineChange;
    let (mut run, _) = start_chain_keyed(None);
    let tx = run.command(Command::Stop(Stop::Cancel("client asked".into())), t(3));
    assert_eq!(types(&tx), ["flow_cancelled", "flow_deactivated"]);
    assert!(tx.effects.contains(&Effect::Line(LineChange::Leave)));
    assert!(
        run.command(admit(0), t(4)).events.is_empty(),
        "an ended flow is not let in"
    );
    let tx = run.command(
        Command::Retry {
            reset_attempts: false,
            by: None,
        },
        t(20),
    );
    assert_eq!(types(&tx), ["flow_retried"], "it waits for its turn again");
    assert!(tx.effects.contains(&Effect::Line(LineChange::Join)));
    assert!(run.state.queued);
    // A turn given for its first place (cancelled and retried since) is
    // not its turn: it waits in its new place.
    assert!(run.command(admit(0), t(21)).events.is_empty());
    let tx = run.command(admit(20), t(21));
    assert_eq!(types(&tx), ["flow_admitted", "step_started", "work_started"]);
    assert_eq!(run.replayed(), run.state);
}

#[test]
fn a_delayed_keyed_flow_joins_its_line_at_its_start_time() {
    use tartan_core::concurrency::LineChange;
    let (mut run, tx) = start_chain_keyed(Some(t(60)));
    assert!(
        !tx.effects.contains(&Effect::Line(LineChange::Join)),
        "no turn held while it waits"
    );
    assert!(
        run.command(admit(0), t(10)).events.is_empty(),
        "not in its line yet"
    );
    let tx = run.command(Command::DeadlineDue, t(60));
    assert_eq!(types(&tx), ["flow_released"]);
    assert!(tx.effects.contains(&Effect::Line(LineChange::Join)));
    let tx = run.command(admit(60), t(61));
    assert_eq!(types(&tx), ["flow_admitted", "step_started", "work_started"]);
    assert_eq!(run.replayed(), run.state);
}

#[test]
fn the_initial_inputs_are_attributes_without_a_step() {
    let (run, _) = start_chain();
    let expected = AttributeValue {
        value: json!(1).into(),
        set_at: t(0),
        step: None,
    };
    assert_eq!(run.state.attributes["in"], [expected]);
}

#[test]
fn the_first_attempt_of_a_work_item_is_open() {
    let (run, _) = start_chain();
    let work = run.work("a");
    assert_eq!(work.status, WorkStatus::Active);
    assert_eq!(work.started_at, Some(t(0)));
    assert_eq!(work.attempts.len(), 1);
    assert_eq!(work.attempts[0].number, 1);
    assert_eq!(work.attempts[0].started_at, t(0));
    assert_eq!(work.attempts[0].ended_at, None);
    assert_eq!(work.attempts[0].outcome, None);
}

#[test]
fn independent_steps_start_together() {
    let catalog = catalog(vec![
        chain_def("p", &["in"], &["x"]),
        chain_def("q", &["in"], &["y"]),
        chain_def("r", &["x", "y"], &["z"]),
    ]);
    let (mut run, tx) = Run::start(&catalog, &["r"], init(&[("in", json!(1))]), t(0));
    assert_eq!(
        tx.dispatches(),
        [dispatch("p", "tok-1", 1), dispatch("q", "tok-2", 1)]
    );
    assert_eq!(run.status("r"), StepStatus::Pending);

    let tx = run.record("p", "tok-1", 1, ok(json!({ "x": "px" })), t(1));
    assert!(tx.dispatches().is_empty(), "r still waits for y");
    assert_eq!(run.status("r"), StepStatus::Pending);

    let tx = run.record("q", "tok-2", 1, ok(json!({ "y": "qy" })), t(2));
    assert_eq!(tx.dispatches(), [dispatch("r", "tok-3", 1)]);
    assert_eq!(run.called_with("r"), args(json!({ "x": "px", "y": "qy" })));
}

#[test]
fn meta_and_const_inputs_are_passed_to_the_work_item() {
    let mut def = sync_def(
        "s",
        json!({
            "in": { "role": "required" },
            "region": { "role": "const", "const": { "value": "\"eu\"" } },
            "flow": { "role": "meta", "meta": { "key": "flow_id" } },
            "receipt": { "role": "meta", "meta": { "key": "receipt_token" } },
            "callback": { "role": "meta", "meta": { "key": "webhook_url" } },
            "out": { "role": "output" },
        }),
    );
    def["type"] = json!("async");
    let (run, _) = Run::start(&catalog(vec![def]), &["s"], init(&[("in", json!(7))]), t(0));
    assert_eq!(
        run.called_with("s"),
        args(json!({
            "callback": "http://tartan.test/webhook/flow-1/s/tok-1",
            "flow": FLOW,
            "in": 7,
            "receipt": "tok-1",
            "region": "eu",
        }))
    );
}

// ---------------------------------------------------------------------------
// Results

/// a gives x, which its endpoint calls `xOut`; b takes x as `inX`.
fn mapped() -> Catalog {
    catalog(vec![
        sync_def(
            "a",
            json!({
                "in": { "role": "required" },
                "x": { "role": "output", "output": { "mapping": { "name": "xOut" } } },
            }),
        ),
        sync_def(
            "b",
            json!({
                "x": { "role": "required", "required": { "mapping": { "name": "inX" } } },
                "y": { "role": "output" },
            }),
        ),
    ])
}

#[test]
fn a_successful_result_sets_the_mapped_outputs_with_their_provenance() {
    let (mut run, _) = Run::start(&mapped(), &["b"], init(&[("in", json!(1))]), t(0));
    let tx = run.record("a", "tok-1", 1, ok(json!({ "xOut": 5, "extra": true })), t(2));
    assert_eq!(
        types(&tx),
        [
            "work_succeeded",
            "attribute_set",
            "step_completed",
            "step_started",
            "work_started"
        ]
    );
    let expected = AttributeValue {
        value: json!(5).into(),
        set_at: t(2),
        step: Some("a".into()),
    };
    assert_eq!(run.state.attributes["x"], [expected]);
    assert!(!run.state.attributes.contains_key("xOut"));
    assert!(
        !run.state.attributes.contains_key("extra"),
        "undeclared outputs are not attributes"
    );

    let a = &run.state.executions["a"];
    assert_eq!(a.status, StepStatus::Completed);
    assert_eq!(a.outputs, Some(outputs_of(args(json!({ "x": 5 })))));
    assert_eq!(a.completed_at, Some(t(2)));
    assert_eq!(a.duration, Some(2000));

    let work = run.work("a");
    assert_eq!(work.status, WorkStatus::Succeeded);
    assert_eq!(
        work.outputs,
        Some(outputs_of(args(json!({ "xOut": 5, "extra": true }))))
    );
    assert_eq!(
        work.attempts[0].outcome.map(AttemptOutcome::as_str),
        Some("success")
    );
    assert_eq!(work.attempts[0].http_status, Some(200));
    assert_eq!(work.attempts[0].ended_at, Some(t(2)));
}

#[test]
fn a_completed_step_starts_the_next_with_its_inputs_by_mapped_name() {
    let (mut run, _) = Run::start(&mapped(), &["b"], init(&[("in", json!(1))]), t(0));
    let tx = run.record("a", "tok-1", 1, ok(json!({ "xOut": 5 })), t(2));
    assert_eq!(tx.dispatches(), [dispatch("b", "tok-2", 1)]);
    assert_eq!(run.status("b"), StepStatus::Active);
    assert_eq!(
        *run.state.executions["b"].inputs.args(),
        args(json!({ "inX": 5 }))
    );
    assert_eq!(run.called_with("b"), args(json!({ "inX": 5 })));
}

#[test]
fn a_flow_completes_with_its_goals_outputs_and_is_deactivated() {
    let (mut run, _) = start_chain();
    run.record("a", "tok-1", 1, ok(json!({ "x": 1 })), t(1));
    run.record("b", "tok-2", 1, ok(json!({ "y": 2 })), t(2));
    let tx = run.record("c", "tok-3", 1, ok(json!({ "z": 3 })), t(3));
    assert_eq!(
        types(&tx),
        [
            "work_succeeded",
            "attribute_set",
            "step_completed",
            "flow_completed",
            "flow_deactivated"
        ]
    );
    assert!(
        matches!(&tx.events[3], FlowEvent::FlowCompleted { result, .. } if *result == outputs_of(args(json!({ "z": 3 }))))
    );
    assert_eq!(run.state.status, FlowStatus::Completed);
    assert_eq!(run.state.completed_at, Some(t(3)));
    assert_eq!(run.state.deactivated_at, Some(t(3)));
}

#[test]
fn a_permanent_failure_of_a_goal_fails_the_flow_and_deactivates_it() {
    let catalog = catalog(vec![chain_def("g", &["in"], &["out"])]);
    let (mut run, _) = Run::start(&catalog, &["g"], init(&[("in", json!(1))]), t(0));
    let tx = run.record("g", "tok-1", 1, permanent(400, "no such order"), t(1));
    assert_eq!(
        types(&tx),
        ["work_failed", "step_failed", "flow_failed", "flow_deactivated"]
    );
    assert_eq!(run.status("g"), StepStatus::Failed);
    assert_eq!(run.state.status, FlowStatus::Failed);
    assert_eq!(
        run.state.error.as_deref(),
        Some("goal step g failed: no such order")
    );
    assert_eq!(run.state.deactivated_at, Some(t(1)));
    let attempt = &run.work("g").attempts[0];
    assert_eq!(attempt.outcome.map(AttemptOutcome::as_str), Some("permanent"));
    assert_eq!(attempt.http_status, Some(400));
    assert_eq!(attempt.error.as_deref(), Some("no such order"));
}

#[test]
fn a_failed_flow_is_deactivated_only_once_its_last_call_returns() {
    let catalog = catalog(vec![
        chain_def("g", &["in"], &["o1"]),
        chain_def("h", &["in"], &["o2"]),
    ]);
    let (mut run, _) = Run::start(&catalog, &["g", "h"], init(&[("in", json!(1))]), t(0));
    let tx = run.record("g", "tok-1", 1, permanent(400, "bad"), t(1));
    assert_eq!(types(&tx), ["work_failed", "step_failed", "flow_failed"]);
    assert_eq!(run.state.status, FlowStatus::Failed);
    assert_eq!(run.state.deactivated_at, None, "h is still running");

    let tx = run.record("h", "tok-2", 1, ok(json!({ "o2": 2 })), t(2));
    assert_eq!(
        types(&tx),
        [
            "work_succeeded",
            "attribute_set",
            "step_completed",
            "flow_deactivated"
        ]
    );
    assert_eq!(run.state.status, FlowStatus::Failed);
    assert_eq!(run.state.deactivated_at, Some(t(2)));
}

#[test]
fn a_failed_provider_fails_the_steps_downstream_and_the_flow() {
    let (mut run, _) = start_chain();
    let tx = run.record("a", "tok-1", 1, permanent(400, "boom"), t(1));
    assert_eq!(run.status("a"), StepStatus::Failed);
    assert_eq!(run.status("b"), StepStatus::Failed);
    assert_eq!(run.status("c"), StepStatus::Failed);
    assert_eq!(
        run.state.executions["c"].error.as_deref(),
        Some("required input no longer available")
    );
    assert!(
        !types(&tx).contains(&"flow_completed"),
        "events: {:?}",
        types(&tx)
    );
    assert_eq!(run.state.status, FlowStatus::Failed);
    assert_eq!(
        run.state.error.as_deref(),
        Some("goal step c failed: required input no longer available")
    );
    assert_eq!(run.state.deactivated_at, Some(t(1)));
}

#[test]
fn a_goal_that_can_no_longer_run_while_other_work_runs_fails_the_flow() {
    // a (provider of the goal c's input) fails while the other goal h still runs.
    let catalog = catalog(vec![
        chain_def("a", &["in"], &["y"]),
        chain_def("c", &["y"], &["z"]),
        chain_def("h", &["in"], &["w"]),
    ]);
    let (mut run, _) = Run::start(&catalog, &["c", "h"], init(&[("in", json!(1))]), t(0));
    let tx = run.record("a", "tok-1", 1, permanent(400, "boom"), t(1));
    assert_eq!(
        types(&tx),
        ["work_failed", "step_failed", "step_failed", "flow_failed"]
    );
    assert_eq!(run.status("c"), StepStatus::Failed);
    assert_eq!(run.state.status, FlowStatus::Failed);
    assert_eq!(
        run.state.error.as_deref(),
        Some("goal step c failed: required input no longer available")
    );
    assert_eq!(run.state.deactivated_at, None, "h is still running");
}

/// p may provide g's optional `hint`, which defaults to "plain"; g waits
/// for it a minute.
fn optional_hint(default: Option<&str>) -> Catalog {
    optional_hint_within(default, 60_000)
}

fn optional_hint_within(default: Option<&str>, deadline: u64) -> Catalog {
    let mut hint = json!({ "role": "optional", "optional": { "deadline": deadline } });
    if let Some(default) = default {
        hint["optional"]["default"] = json!(default);
    }
    catalog(vec![
        chain_def("p", &["in"], &["hint"]),
        sync_def(
            "g",
            json!({ "in": { "role": "required" }, "hint": hint, "out": { "role": "output" } }),
        ),
    ])
}

#[test]
fn an_optional_input_waits_for_its_provider_until_its_deadline() {
    let (run, tx) = Run::start(
        &optional_hint(Some("\"plain\"")),
        &["g"],
        init(&[("in", json!(1))]),
        t(0),
    );
    assert_eq!(tx.dispatches(), [dispatch("p", "tok-1", 1)]);
    assert_eq!(run.status("g"), StepStatus::Pending);
    assert!(types(&tx).contains(&"step_waiting"), "{:?}", types(&tx));
    assert!(tx.effects.contains(&Effect::Arm {
        wake: Wake::Deadline,
        at: t(60)
    }));
    assert_eq!(run.state.wake_at(), Some(t(60)));
}

#[test]
fn at_its_deadline_an_optional_input_takes_its_default() {
    let (mut run, _) = Run::start(
        &optional_hint(Some("\"plain\"")),
        &["g"],
        init(&[("in", json!(1))]),
        t(0),
    );
    let early = run.decide(Command::DeadlineDue, t(59));
    assert!(early.events.is_empty(), "{:?}", types(&early));
    let tx = run.decide(Command::DeadlineDue, t(60));
    assert_eq!(types(&tx), ["step_started", "work_started"]);
    assert_eq!(run.called_with("g"), args(json!({ "in": 1, "hint": "plain" })));
    assert_eq!(run.state.wake_at(), None);
}

#[test]
fn without_a_deadline_an_optional_input_does_not_wait_and_its_provider_is_not_needed() {
    let (run, tx) = Run::start(
        &optional_hint_within(Some("\"plain\""), 0),
        &["g"],
        init(&[("in", json!(1))]),
        t(0),
    );
    assert_eq!(tx.dispatches(), [dispatch("g", "tok-1", 1)]);
    assert_eq!(run.called_with("g"), args(json!({ "in": 1, "hint": "plain" })));
    assert_eq!(run.status("p"), StepStatus::Skipped);
    assert_eq!(
        run.state.executions["p"].reason.as_deref(),
        Some("outputs not needed")
    );
}

#[test]
fn an_optional_input_takes_its_default_when_its_provider_failed() {
    let (mut run, _) = Run::start(
        &optional_hint(Some("\"plain\"")),
        &["g"],
        init(&[("in", json!(1))]),
        t(0),
    );
    let tx = run.record("p", "tok-1", 1, permanent(422, "cannot hint"), t(1));
    assert_eq!(
        types(&tx),
        ["work_failed", "step_failed", "step_started", "work_started"]
    );
    assert_eq!(run.called_with("g"), args(json!({ "in": 1, "hint": "plain" })));
    assert_eq!(run.state.status, FlowStatus::Active);

    let tx = run.record("g", "tok-2", 1, ok(json!({ "out": "done" })), t(2));
    assert!(types(&tx).contains(&"flow_completed"));
    assert_eq!(run.state.status, FlowStatus::Completed);
}

#[test]
fn an_optional_input_without_a_default_is_left_out_when_its_provider_failed() {
    let (mut run, _) = Run::start(&optional_hint(None), &["g"], init(&[("in", json!(1))]), t(0));
    run.record("p", "tok-1", 1, permanent(422, "cannot hint"), t(1));
    assert_eq!(run.called_with("g"), args(json!({ "in": 1 })));
}

#[test]
fn an_optional_input_takes_its_providers_value_when_it_succeeded() {
    let (mut run, _) = Run::start(
        &optional_hint(Some("\"plain\"")),
        &["g"],
        init(&[("in", json!(1))]),
        t(0),
    );
    run.record("p", "tok-1", 1, ok(json!({ "hint": "fancy" })), t(1));
    assert_eq!(run.called_with("g"), args(json!({ "in": 1, "hint": "fancy" })));
}

// ---------------------------------------------------------------------------
// Late results

#[test]
fn a_result_for_another_attempt_is_late_and_changes_nothing() {
    let (mut run, _) = start_chain();
    let before = run.state.clone();
    let tx = run.record("a", "tok-1", 2, ok(json!({ "x": 1 })), t(5));
    assert_eq!(
        tx.events,
        [FlowEvent::WorkLateResult {
            flow_id: FLOW.into(),
            step_id: "a".into(),
            token: "tok-1".into(),
            attempt: 2,
            detail: "result for an attempt that is no longer running".into(),
            compensation: false,
        }]
    );
    assert!(tx.dispatches().is_empty());
    // Only the note that attempt 2's late result is recorded changed.
    let mut noted = before.clone();
    if let Some(w) = noted
        .executions
        .get_mut("a")
        .and_then(|e| e.work_items.get_mut("tok-1"))
    {
        w.late_results = vec![2];
    }
    assert_eq!(tx.state, noted);
    // The same late result again (a step retrying its webhook POST) is not
    // recorded again.
    let again = run.record("a", "tok-1", 2, ok(json!({ "x": 1 })), t(6));
    assert!(again.events.is_empty());
}

#[test]
fn a_result_for_an_item_that_is_no_longer_active_is_late_and_changes_nothing() {
    let (mut run, _) = start_chain();
    run.record("a", "tok-1", 1, ok(json!({ "x": 1 })), t(1));
    let before = run.state.clone();
    let tx = run.record("a", "tok-1", 1, permanent(400, "again"), t(2));
    assert_eq!(types(&tx), ["work_late_result"]);
    let mut noted = before.clone();
    if let Some(w) = noted
        .executions
        .get_mut("a")
        .and_then(|e| e.work_items.get_mut("tok-1"))
    {
        w.late_results = vec![1];
    }
    assert_eq!(tx.state, noted);
}

#[test]
fn a_result_for_an_unknown_token_is_an_error() {
    let (mut run, _) = start_chain();
    let result = run.try_record("a", "nope", 1, ok(json!({})), t(1));
    assert_eq!(result.unwrap_err(), ApplyError::UnknownWork("nope".into()));
}

// ---------------------------------------------------------------------------
// Redispatch

#[test]
fn redispatching_an_active_item_starts_the_next_attempt_with_the_same_token() {
    let (mut run, _) = start_chain();
    let item_inputs = run.work("a").inputs.clone();
    let tx = run.redispatch("a", "tok-1", t(30));
    assert_eq!(
        tx.events,
        [FlowEvent::WorkStarted {
            flow_id: FLOW.into(),
            step_id: "a".into(),
            token: "tok-1".into(),
            inputs: item_inputs,
            attempt: 2,
            deadline_at: None,
        }]
    );
    assert_eq!(tx.dispatches(), [dispatch("a", "tok-1", 2)]);

    let work = run.work("a");
    assert_eq!(work.status, WorkStatus::Active);
    assert_eq!(work.started_at, Some(t(0)), "the item keeps its first start");
    assert_eq!(work.attempts.len(), 2);
    assert_eq!(work.attempts[0].number, 1);
    assert_eq!(work.attempts[0].ended_at, Some(t(30)));
    assert_eq!(
        work.attempts[0].outcome.map(AttemptOutcome::as_str),
        Some("abandoned")
    );
    assert_eq!(work.attempts[1].number, 2);
    assert_eq!(work.attempts[1].started_at, t(30));
    assert_eq!(work.attempts[1].outcome, None);
}

#[test]
fn after_a_redispatch_only_the_new_attempt_counts() {
    let (mut run, _) = start_chain();
    run.redispatch("a", "tok-1", t(30));
    let tx = run.record("a", "tok-1", 1, ok(json!({ "x": "old" })), t(31));
    assert_eq!(types(&tx), ["work_late_result"]);
    let tx = run.record("a", "tok-1", 2, ok(json!({ "x": "new" })), t(32));
    assert_eq!(tx.dispatches(), [dispatch("b", "tok-2", 1)]);
    assert_eq!(*run.state.attributes["x"][0].value, json!("new"));
}

#[test]
fn redispatching_an_item_that_is_not_active_does_nothing() {
    let (mut run, _) = start_chain();
    run.record("a", "tok-1", 1, ok(json!({ "x": 1 })), t(1));
    let before = run.state.clone();
    let tx = run.redispatch("a", "tok-1", t(2));
    assert!(tx.events.is_empty());
    assert_eq!(tx.state, before);
}

// ---------------------------------------------------------------------------
// Replay and the stored form of events

/// A whole run of the chain with a redispatch and a late result on the way.
fn full_run() -> Run {
    let (mut run, _) = start_chain();
    run.redispatch("a", "tok-1", t(10));
    run.record("a", "tok-1", 1, ok(json!({ "x": "late" })), t(11));
    run.record("a", "tok-1", 2, ok(json!({ "x": 1 })), t(12));
    run.record("b", "tok-2", 1, ok(json!({ "y": 2 })), t(15));
    run.record("c", "tok-3", 1, ok(json!({ "z": 3 })), t(20));
    assert_eq!(run.state.status, FlowStatus::Completed);
    run
}

#[test]
fn replaying_the_events_of_a_run_gives_its_final_state_exactly() {
    let run = full_run();
    assert_eq!(run.replayed(), run.state);
}

#[test]
fn replaying_every_prefix_of_a_run_gives_the_state_at_that_point() {
    let (mut run, _) = start_chain();
    let steps: [fn(&mut Run); 5] = [
        |r| {
            r.redispatch("a", "tok-1", t(10));
        },
        |r| {
            r.record("a", "tok-1", 1, ok(json!({ "x": "late" })), t(11));
        },
        |r| {
            r.record("a", "tok-1", 2, ok(json!({ "x": 1 })), t(12));
        },
        |r| {
            r.record("b", "tok-2", 1, ok(json!({ "y": 2 })), t(15));
        },
        |r| {
            r.record("c", "tok-3", 1, ok(json!({ "z": 3 })), t(20));
        },
    ];
    assert_eq!(run.replayed(), run.state);
    for step in steps {
        step(&mut run);
        assert_eq!(run.replayed(), run.state);
    }
}

#[test]
fn replaying_a_failed_run_gives_its_final_state_exactly() {
    let catalog = catalog(vec![
        chain_def("g", &["in"], &["o1"]),
        chain_def("h", &["in"], &["o2"]),
    ]);
    let (mut run, _) = Run::start(&catalog, &["g", "h"], init(&[("in", json!(1))]), t(0));
    run.record("g", "tok-1", 1, permanent(400, "bad"), t(1));
    run.record("h", "tok-2", 1, ok(json!({ "o2": 2 })), t(2));
    assert_eq!(run.replayed(), run.state);
}

#[test]
fn replay_needs_a_log_that_starts_with_flow_started() {
    let run = full_run();
    let rest = run.log.iter().skip(1).map(|(e, at)| (e, *at));
    assert_eq!(FlowState::replay(rest).unwrap_err(), ApplyError::NotStarted);
    assert_eq!(
        FlowState::replay(std::iter::empty()).unwrap_err(),
        ApplyError::NotStarted
    );
}

#[test]
fn applying_a_second_flow_started_is_an_error() {
    let mut run = full_run();
    let (first, at) = run.log[0].clone();
    assert_eq!(
        run.state.apply(&first, at).unwrap_err(),
        ApplyError::AlreadyStarted
    );
}

#[test]
fn every_event_round_trips_through_its_stored_type_and_data() {
    let run = full_run();
    let mut seen = std::collections::BTreeSet::new();
    for (event, _) in &run.log {
        seen.insert(event.type_name());
        let back = FlowEvent::from_parts(event.type_name(), event.data()).unwrap();
        assert_eq!(&back, event);
        // As stored: the data as JSON text.
        let text = serde_json::to_string(&event.data()).unwrap();
        let back = FlowEvent::from_parts(event.type_name(), serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(&back, event);
    }
    for kind in [
        "flow_started",
        "step_started",
        "work_started",
        "work_succeeded",
        "work_late_result",
        "attribute_set",
        "step_completed",
        "flow_completed",
        "flow_deactivated",
    ] {
        assert!(seen.contains(kind), "the run has no {kind} event");
    }
}

#[test]
fn failure_events_round_trip_through_their_stored_type_and_data() {
    let (mut run, _) = start_chain();
    run.record("a", "tok-1", 1, permanent(400, "boom"), t(1));
    let failures: Vec<&FlowEvent> = run
        .log
        .iter()
        .map(|(e, _)| e)
        .filter(|e| matches!(e.type_name(), "work_failed" | "step_failed" | "step_skipped"))
        .collect();
    assert!(
        failures.len() >= 3,
        "events: {:?}",
        run.log.iter().map(|(e, _)| e.type_name()).collect::<Vec<_>>()
    );
    for event in failures {
        assert_eq!(
            &FlowEvent::from_parts(event.type_name(), event.data()).unwrap(),
            event
        );
    }
}

#[test]
fn event_data_carries_no_type_tag() {
    let (run, _) = start_chain();
    let data = run.log[2].0.data();
    assert_eq!(data["token"], json!("tok-1"));
    assert_eq!(data["attempt"], json!(1));
    assert!(data.get("type").is_none());
}

// ---------------------------------------------------------------------------
// Effects: what a decision asks of the engine, derived with its events

fn call(step: &str, token: &str, attempt: u32) -> Effect {
    Effect::Call(dispatch(step, token, attempt))
}

fn touch(step: &str, token: &str) -> Effect {
    Effect::Touch {
        step_id: step.into(),
        token: token.into(),
    }
}

fn retryable(status: u16) -> AttemptResult {
    AttemptResult::Failure {
        cause: FailureCause::Status(status),
        error: format!("HTTP {status}"),
        retry_after_ms: None,
    }
}

impl Run {
    fn decide(&mut self, command: Command, at: Time) -> Transition {
        let state = self.state.clone();
        let tx = with_context(&mut self.tokens, at, |ctx| apply(state, command, ctx)).unwrap();
        self.absorb(&tx);
        tx
    }
}

#[test]
fn a_start_calls_the_ready_step_and_writes_its_item() {
    let (_, tx) = start_chain();
    assert_eq!(tx.effects, [touch("a", "tok-1"), call("a", "tok-1", 1)]);
}

#[test]
fn a_start_with_a_deadline_arms_it() {
    let plan = start_plan(&chain(), &goals(&["c"]), &init(&[("in", json!(1))])).unwrap();
    let options = FlowOptions {
        deadline_at: Some(t(60)),
        ..FlowOptions::default()
    };
    let mut tokens = 0;
    let tx = with_context(&mut tokens, t(0), |ctx| {
        let start = Command::Start {
            flow_id: FLOW.into(),
            plan,
            init: init(&[("in", json!(1))]),
            options,
        };
        apply(FlowState::default(), start, ctx)
    })
    .unwrap();
    assert_eq!(
        tx.effects[0],
        Effect::Arm {
            wake: Wake::Deadline,
            at: t(60)
        }
    );
    assert_eq!(tx.dispatches(), [dispatch("a", "tok-1", 1)]);
}

#[test]
fn starting_a_started_flow_is_refused() {
    let (run, _) = start_chain();
    let plan = start_plan(&chain(), &goals(&["c"]), &InitArgs::new());
    let mut tokens = 0;
    let again = with_context(&mut tokens, t(1), |ctx| {
        let start = Command::Start {
            flow_id: FLOW.into(),
            plan: plan.unwrap_or_default(),
            init: InitArgs::new(),
            options: FlowOptions::default(),
        };
        apply(run.state.clone(), start, ctx)
    });
    assert!(matches!(again, Err(ApplyError::AlreadyStarted)), "{again:?}");
}

#[test]
fn a_retryable_failure_arms_the_retry_and_calls_nothing() {
    let (mut run, _) = start_chain();
    let tx = run.record("a", "tok-1", 1, retryable(503), t(1));
    let FlowEvent::WorkRetryScheduled { next_retry_at, .. } = &tx.events[1] else {
        panic!("no retry scheduled: {:?}", types(&tx));
    };
    assert_eq!(
        tx.effects,
        [
            touch("a", "tok-1"),
            Effect::Arm {
                wake: Wake::Retry {
                    step_id: "a".into(),
                    token: "tok-1".into()
                },
                at: *next_retry_at
            }
        ]
    );
    let due = run.decide(
        Command::RetryDue {
            step_id: "a".into(),
            token: "tok-1".into(),
        },
        *next_retry_at,
    );
    assert_eq!(due.effects, [touch("a", "tok-1"), call("a", "tok-1", 2)]);
}

#[test]
fn a_retry_that_is_not_due_yet_does_nothing() {
    let (mut run, _) = start_chain();
    run.record("a", "tok-1", 1, retryable(503), t(1));
    let early = run.decide(
        Command::RetryDue {
            step_id: "a".into(),
            token: "tok-1".into(),
        },
        t(1),
    );
    assert!(early.events.is_empty() && early.effects.is_empty());
}

#[test]
fn the_last_result_finishes_the_flow() {
    let (mut run, _) = start_chain();
    run.record("a", "tok-1", 1, ok(json!({ "x": 1 })), t(1));
    run.record("b", "tok-2", 1, ok(json!({ "y": 2 })), t(2));
    let tx = run.record("c", "tok-3", 1, ok(json!({ "z": 3 })), t(3));
    assert_eq!(
        tx.effects,
        [touch("c", "tok-3"), Effect::Finished(FlowStatus::Completed)]
    );
}

#[test]
fn cancelling_aborts_the_call_in_flight_and_finishes_the_flow() {
    let (mut run, _) = start_chain();
    let tx = run.decide(
        Command::Stop(tartan_core::machine::Stop::Cancel("by test".into())),
        t(1),
    );
    assert_eq!(
        tx.effects,
        [
            touch("a", "tok-1"),
            Effect::Abort {
                step_id: "a".into(),
                token: "tok-1".into()
            },
            Effect::Finished(FlowStatus::Cancelled)
        ]
    );
}

/// `started` with a cancel absorbed into it, as when the flow is stopped
/// in the decision that started it.
fn cancelled_in_the_same_decision(mut merged: Transition, mut tokens: u32) -> Transition {
    let stopped = with_context(&mut tokens, t(0), |ctx| {
        apply(
            merged.state.clone(),
            Command::Stop(tartan_core::machine::Stop::Cancel("at once".into())),
            ctx,
        )
    })
    .unwrap();
    merged.absorb(stopped);
    merged
}

#[test]
fn a_call_stopped_in_the_decision_that_made_it_is_never_made() {
    let (run, started) = start_chain();
    let merged = cancelled_in_the_same_decision(started, run.tokens);
    assert!(merged.dispatches().is_empty(), "{:?}", merged.effects);
    assert!(
        !merged.effects.iter().any(|e| matches!(e, Effect::Abort { .. })),
        "nothing went out, so nothing is aborted: {:?}",
        merged.effects
    );
    assert!(merged.effects.contains(&Effect::Finished(FlowStatus::Cancelled)));
}

#[test]
fn an_accepted_async_call_arms_its_inactivity_window() {
    let mut def = chain_def("a", &["in"], &["x"]);
    def["type"] = json!("async");
    def["timeouts"] = json!({ "inactivity": "30s" });
    let (mut run, _) = Run::start(&catalog(vec![def]), &["a"], init(&[("in", json!(1))]), t(0));
    let tx = run.decide(
        Command::Accept {
            step_id: "a".into(),
            token: "tok-1".into(),
            attempt: 1,
        },
        t(1),
    );
    assert_eq!(
        tx.effects,
        [
            touch("a", "tok-1"),
            Effect::Arm {
                wake: Wake::Inactivity {
                    step_id: "a".into(),
                    token: "tok-1".into()
                },
                at: t(31)
            }
        ]
    );
}

#[test]
fn the_text_the_store_writes_is_each_events_data() {
    let run = full_run();
    for (event, _) in &run.log {
        let text = event.data_text().unwrap();
        let parsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed, event.data(), "{}", event.type_name());
    }
}

// ---------------------------------------------------------------------------
// Retrying a finished flow

#[test]
fn a_retry_restarts_what_failed_and_what_was_skipped_and_nothing_else() {
    let (mut run, _) = start_chain();
    run.record("a", "tok-1", 1, ok(json!({ "x": 1 })), t(1));
    let failed = run.record("b", "tok-2", 1, permanent(400, "no"), t(2));
    assert_eq!(run.state.status, FlowStatus::Failed, "{:?}", types(&failed));
    assert!(run.state.deactivated_at.is_some());
    assert_eq!(run.status("c"), StepStatus::Failed);

    let retry = Command::Retry {
        reset_attempts: true,
        by: None,
    };
    let tx = run.decide(retry.clone(), t(3));
    assert_eq!(types(&tx), ["flow_retried", "work_started"]);
    assert_eq!(tx.dispatches(), [dispatch("b", "tok-2", 1)], "a fresh attempt 1");
    assert!(matches!(
        &tx.events[0],
        FlowEvent::FlowRetried { steps, work, .. }
            if steps == &["b".to_string(), "c".to_string()] && work.len() == 1 && work[0].token == "tok-2"
    ));
    assert_eq!(run.state.status, FlowStatus::Active);
    assert_eq!(run.state.deactivated_at, None);
    assert_eq!(run.status("a"), StepStatus::Completed);
    assert_eq!(run.status("c"), StepStatus::Pending);
    assert_eq!(run.replayed(), run.state, "replay reproduces the retried state");

    // Active now: a second retry changes nothing.
    let again = run.decide(retry, t(4));
    assert!(again.events.is_empty(), "{:?}", types(&again));

    run.record("b", "tok-2", 1, ok(json!({ "y": 2 })), t(5));
    run.record("c", "tok-3", 1, ok(json!({ "z": 3 })), t(6));
    assert_eq!(run.state.status, FlowStatus::Completed);
    assert_eq!(run.replayed(), run.state);
}

#[test]
fn a_retry_may_keep_counting_attempts() {
    let (mut run, _) = start_chain();
    run.record("a", "tok-1", 1, permanent(400, "no"), t(1));
    let tx = run.decide(
        Command::Retry {
            reset_attempts: false,
            by: Some("job-1".into()),
        },
        t(2),
    );
    assert_eq!(tx.dispatches(), [dispatch("a", "tok-1", 2)]);
    assert_eq!(run.work("a").attempts.len(), 2);
    assert_eq!(run.replayed(), run.state);
}

#[test]
fn a_kill_cancels_without_compensation() {
    let (mut run, _) = start_chain();
    let tx = run.decide(
        Command::Stop(tartan_core::machine::Stop::Kill("by test".into())),
        t(1),
    );
    assert!(matches!(
        tx.events.iter().find(|e| e.type_name() == "flow_cancelled"),
        Some(FlowEvent::FlowCancelled {
            compensate: false,
            ..
        })
    ));
    assert!(run.state.killed);
    assert_eq!(run.replayed(), run.state);
}

// Heartbeats

#[test]
fn a_heartbeat_is_recorded_once_the_window_is_half_used_and_noted_before() {
    let mut def = chain_def("a", &[], &["x"]);
    def["type"] = json!("async");
    def["timeouts"] = json!({ "inactivity": 10_000 });
    let (mut run, _) = Run::start(&catalog(vec![def]), &["a"], init(&[]), t(0));
    let token = run.token("a");
    let accept = Command::Accept {
        step_id: "a".into(),
        token: token.clone(),
        attempt: 1,
    };
    run.command(accept, t(0));
    assert_eq!(run.work("a").inactive_until, Some(t(10)));
    let heartbeat = || Command::Heartbeat {
        step_id: "a".into(),
        token: token.clone(),
    };
    let due = |heard: Time| Command::InactivityDue {
        step_id: "a".into(),
        token: token.clone(),
        heard_until: Some(heard),
    };
    // 8 s of the 10 left: noted for the engine to keep, no event.
    let tx = run.command(heartbeat(), t(2));
    assert!(tx.events.is_empty());
    assert_eq!(
        tx.effects,
        [Effect::Heard {
            step_id: "a".into(),
            token: token.clone(),
            attempt: 1,
            until: t(12),
        }]
    );
    // Half used: recorded, and its timer moves.
    let tx = run.command(heartbeat(), t(5));
    assert_eq!(types(&tx), ["work_heartbeat"]);
    assert_eq!(run.work("a").inactive_until, Some(t(15)));
    assert!(tx.effects.contains(&Effect::Arm {
        wake: Wake::Inactivity {
            step_id: "a".into(),
            token: token.clone(),
        },
        at: t(15),
    }));
    // Noted again; when the recorded window ends, the noted one is recorded.
    assert!(run.command(heartbeat(), t(7)).events.is_empty());
    let tx = run.command(due(t(17)), t(15));
    assert_eq!(types(&tx), ["work_heartbeat"]);
    assert_eq!(run.work("a").inactive_until, Some(t(17)));
    assert_eq!(run.work("a").status, WorkStatus::Active);
    // Nothing heard since: it ends a full window after the last heartbeat.
    let tx = run.command(due(t(17)), t(17));
    assert_eq!(types(&tx)[0], "work_not_completed", "{:?}", types(&tx));
    assert_eq!(run.replayed(), run.state);
}

// ---------------------------------------------------------------------------
// Calls of its own

/// `sub` runs `double` in a child flow; `side` is a step of the flow's own.
fn with_sub_flow() -> Catalog {
    catalog(vec![
        chain_def("double", &["n"], &["doubled"]),
        json!({
            "id": "sub", "name": "sub", "type": "flow",
            "flow": {"goals": ["double"]},
            "attributes": {
                "amount": {"role": "required", "required": {"mapping": {"name": "n"}}},
                "result": {"role": "output", "output": {"mapping": {"name": "doubled"}}},
            },
        }),
        chain_def("side", &["x"], &["y"]),
    ])
}

/// A flow whose only calls in flight are flow steps' (they wait for child
/// flows) has none of its own: the engine need not hold it in memory
/// (docs/steps.md, "Sub-flows"). Read back, it is counted the same.
#[test]
fn a_flow_steps_call_is_not_a_call_of_the_flows_own() {
    let (mut run, _) = Run::start(
        &with_sub_flow(),
        &["sub", "side"],
        init(&[("amount", json!(1)), ("x", json!(2))]),
        t(0),
    );
    assert!(run.state.has_active_work() && run.state.has_own_calls());
    let side = run.token("side");
    run.record(
        "side",
        &side,
        1,
        AttemptResult::Success {
            outputs: args(json!({"y": 3})),
            http_status: None,
        },
        t(1),
    );
    assert!(
        run.state.has_active_work(),
        "the flow step's call waits for its child"
    );
    assert!(!run.state.has_own_calls());
    let back = run.replayed();
    assert!(back.has_active_work() && !back.has_own_calls());
}

/// A flow step's item that ended while its call waited for a place never
/// started its child; the engine, finding no such flow, says so
/// (`ChildNotStarted`): the id moves from `children` to
/// `children_not_started`, once, and the item's next child is numbered
/// after it. While the item still waits for that child, nothing changes
/// (docs/steps.md, "Sub-flows").
#[test]
fn a_child_that_never_started_is_listed_apart_from_the_children() {
    use tartan_core::machine::Stop;
    let (mut run, _) = Run::start(&with_sub_flow(), &["sub"], init(&[("amount", json!(1))]), t(0));
    let token = run.token("sub");
    let first = format!("{FLOW}:sub:{token}");
    assert_eq!(run.work("sub").children, std::slice::from_ref(&first));
    let never = |child: &str| Command::ChildNotStarted {
        step_id: "sub".into(),
        token: token.clone(),
        child_flow_id: child.into(),
    };
    let tx = run.command(never(&first), t(1));
    assert!(tx.events.is_empty(), "its call may still start it");

    let tx = run.command(Command::Stop(Stop::Cancel("by test".into())), t(2));
    let abort = Effect::Abort {
        step_id: "sub".into(),
        token: token.clone(),
    };
    assert!(tx.effects.contains(&abort), "{:?}", tx.effects);
    let tx = run.command(never(&first), t(3));
    assert_eq!(types(&tx), ["work_child_not_started"]);
    let event = &tx.events[0];
    assert_eq!(
        &FlowEvent::from_parts(event.type_name(), event.data()).unwrap(),
        event
    );
    assert!(tx.effects.contains(&Effect::Touch {
        step_id: "sub".into(),
        token: token.clone(),
    }));
    assert!(run.work("sub").children.is_empty());
    assert_eq!(run.work("sub").children_not_started, std::slice::from_ref(&first));
    assert!(run.command(never(&first), t(4)).events.is_empty(), "once");
    assert!(run.command(never("another"), t(4)).events.is_empty());

    run.command(
        Command::Retry {
            reset_attempts: true,
            by: None,
        },
        t(5),
    );
    assert_eq!(run.work("sub").children, [format!("{first}:2")]);
    assert_eq!(run.work("sub").children_not_started, [first]);
    assert_eq!(run.replayed(), run.state);
}

/// A flow step's call taken back by the decision that made it (the flow
/// stopped in it) still has its abort: the engine, stopping the child,
/// finds it never started and says so.
#[test]
fn a_flow_steps_call_stopped_in_the_decision_that_made_it_keeps_its_abort() {
    let (run, started) = Run::start(&with_sub_flow(), &["sub"], init(&[("amount", json!(1))]), t(0));
    let token = run.token("sub");
    let merged = cancelled_in_the_same_decision(started, run.tokens);
    assert!(merged.dispatches().is_empty(), "{:?}", merged.effects);
    assert!(
        merged.effects.contains(&Effect::Abort {
            step_id: "sub".into(),
            token,
        }),
        "{:?}",
        merged.effects
    );
}
