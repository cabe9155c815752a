//! What the events of a flow say so far, folded from the typed events
//! (`tartan_core::flow::FlowEvent`): a line per event, and the per-step
//! table the terminal view redraws.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use tartan_core::flow::FlowEvent;
use tartan_core::json::{args_of, Outputs};
use tartan_core::plan::ExecutionPlan;
use tartan_server::api::answers::Event;

use super::client::{shorten, ProblemText};
use super::output;

/// One step as the events tell it.
#[derive(Debug, Default)]
struct StepView {
    status: String,
    /// By token: each work item's latest.
    items: BTreeMap<String, ItemView>,
    note: String,
    done_ms: Option<u64>,
    /// By token: the element of its `for_each` each item runs on, when
    /// the step made several (`step_started`'s order).
    element: BTreeMap<String, usize>,
}

#[derive(Debug, Default, Clone)]
struct ItemView {
    status: String,
    attempt: u64,
    error: Option<String>,
    next_retry_at: Option<DateTime<Utc>>,
    started_at: Option<DateTime<Utc>>,
}

/// What the events of a flow say so far.
#[derive(Debug)]
pub struct View {
    pub(super) flow_id: String,
    pub(super) status: String,
    order: Vec<String>,
    steps: BTreeMap<String, StepView>,
    pub(super) result: Option<Value>,
    error: Option<String>,
    started: Option<DateTime<Utc>>,
    /// When it completed, failed or was cancelled: the elapsed time stops.
    ended: Option<DateTime<Utc>>,
    /// `flow_deactivated` seen: nothing more will happen.
    pub(super) over: bool,
}

/// What the line of an event of a kind this client does not know (a
/// newer server's) reads of its data: no type describes it.
#[derive(Deserialize)]
struct UnknownEvent {
    step_id: String,
}

/// The work item an event is about, when it is about one: its line names
/// the item's element (`step greet[2]`), so that the lines of a
/// `for_each`'s items can be told apart.
#[derive(Deserialize)]
struct ItemOf {
    step_id: String,
    token: String,
}

impl View {
    pub fn new(flow_id: &str) -> View {
        View {
            flow_id: flow_id.to_string(),
            status: "active".into(),
            order: Vec::new(),
            steps: BTreeMap::new(),
            result: None,
            error: None,
            started: None,
            ended: None,
            over: false,
        }
    }

    fn step(&mut self, id: &str) -> &mut StepView {
        if !self.steps.contains_key(id) {
            self.order.push(id.to_string());
        }
        self.steps.entry(id.to_string()).or_insert_with(|| StepView {
            status: "pending".into(),
            ..StepView::default()
        })
    }

    /// Take in one event; answer its plain line:
    /// `HH:MM:SS.mmm <what happened>` (UTC).
    pub fn apply(&mut self, event: &Event) -> String {
        let at = event.timestamp;
        let kind = event.event_type.as_str();
        let text = match FlowEvent::from_parts(kind, event.data.clone()) {
            Ok(e) => self.fold(&e, at),
            // A kind this client does not know (a newer server): named.
            Err(_) => match UnknownEvent::deserialize(&event.data) {
                Ok(UnknownEvent { step_id }) if !step_id.is_empty() => format!("{kind} step {step_id}"),
                _ => kind.to_string(),
            },
        };
        let text = self.naming_the_element(&event.data, text);
        format!("{} {text}", at.format("%H:%M:%S%.3f"))
    }

    /// `step X ...` as `step X[i] ...` when the event is about the item of
    /// element `i` of a step that made several.
    fn naming_the_element(&self, data: &Value, text: String) -> String {
        let Ok(ItemOf { step_id, token }) = ItemOf::deserialize(data) else {
            return text;
        };
        let element = self.steps.get(&step_id).and_then(|s| s.element.get(&token));
        let prefix = format!("step {step_id} ");
        match (element, text.strip_prefix(&prefix)) {
            (Some(i), Some(rest)) => format!("step {step_id}[{i}] {rest}"),
            _ => text,
        }
    }

    /// One event: what it changes of the view, and its line.
    fn fold(&mut self, event: &FlowEvent, at: DateTime<Utc>) -> String {
        use FlowEvent as E;
        let flow = self.flow_id.clone();
        match event {
            E::FlowStarted { plan, starts_at, .. } => self.flow_started(plan, *starts_at, at),
            E::StepStarted {
                step_id,
                work_items,
                order,
                ..
            } => self.step_started(step_id, work_items.len(), order),
            E::WorkStarted {
                step_id,
                token,
                attempt,
                ..
            } => self.work_started(step_id, token, *attempt, at),
            E::WorkAccepted {
                step_id,
                token,
                attempt,
                ..
            } => {
                self.item(step_id, token).status = "accepted".into();
                format!("step {step_id} attempt {attempt} accepted (async)")
            }
            E::WorkSucceeded {
                step_id,
                token,
                attempt,
                http_status,
                ..
            } => self.work_succeeded(step_id, token, *attempt, *http_status),
            E::WorkNotCompleted {
                step_id,
                token,
                attempt,
                error,
                ..
            } => {
                let error = self.item_failed(step_id, token, "failed", error);
                format!("step {step_id} attempt {attempt} failed (retryable: {error})")
            }
            E::WorkRetryScheduled {
                step_id,
                token,
                next_retry_at,
                delay_ms,
                ..
            } => self.retry_scheduled(step_id, token, *next_retry_at, *delay_ms),
            E::DispatchDeferred {
                step_id,
                token,
                error,
                ..
            } => {
                self.held(step_id, token, "deferred");
                format!("step {step_id} unhealthy ({error}): its call waits until it is healthy")
            }
            E::WorkParked {
                step_id,
                token,
                attempt,
                error,
                ..
            } => {
                self.held(step_id, token, "parked");
                format!("step {step_id} attempt {attempt} parked: {error}; resume the flow to try again")
            }
            E::WorkResumed { step_id, token, .. } => {
                self.item(step_id, token).status = "pending".into();
                format!("step {step_id} resumed")
            }
            E::WorkRetryHastened { step_id, .. } => {
                format!("step {step_id} retried now, by request")
            }
            E::WorkFailed {
                step_id,
                token,
                attempt,
                error,
                class,
                retry_state,
                ..
            } => {
                let error = self.item_failed(step_id, token, "failed", error);
                let why = retry_state.map(|r| format!(", no retry: {}", r.as_str()));
                let (class, why) = (class.as_str(), why.unwrap_or_default());
                format!("step {step_id} attempt {attempt} failed ({class}: {error}{why})")
            }
            E::WorkTimedOut {
                step_id,
                token,
                error,
                ..
            } => format!(
                "step {step_id} work timed out: {}",
                self.item_failed(step_id, token, "timed out", error)
            ),
            E::WorkCancelled {
                step_id,
                token,
                reason,
                ..
            } => self.item_cancelled(step_id, token, reason),
            E::StepCompleted {
                step_id, duration, ..
            } => self.step_completed(step_id, *duration),
            E::StepFailed { step_id, error, .. } => self.step_ended(step_id, "failed", error),
            E::StepTimedOut { step_id, error, .. } => self.step_ended(step_id, "timed out", error),
            E::StepSkipped { step_id, reason, .. } => self.step_ended(step_id, "skipped", reason),
            E::StepCancelled { step_id, reason, .. } => self.step_ended(step_id, "cancelled", reason),
            // What changes nothing the view shows beside its line.
            E::WorkHeartbeat { .. }
            | E::WorkLaneWaited { .. }
            | E::WorkLateResult { .. }
            | E::WorkChildNotStarted { .. }
            | E::AttributeSet { .. }
            | E::WorkSkipped { .. }
            | E::StepWaiting { .. }
            | E::FlowTimedOut { .. }
            | E::FlowReleased { .. }
            | E::FlowAdmitted { .. }
            | E::CompStarted { .. }
            | E::CompSucceeded { .. }
            | E::CompRetryScheduled { .. }
            | E::CompFailed { .. } => line_only(event),
            E::FlowCompleted { result, .. } => self.flow_completed(result, at),
            E::FlowFailed { error, .. } => self.flow_failed(error, at),
            E::FlowCancelled { reason, .. } => {
                self.ended = Some(at);
                self.status = "cancelled".into();
                format!("flow {flow} cancelled: {}", output::one_line(reason))
            }
            E::FlowRetried {
                steps,
                reset_attempts,
                ..
            } => self.retried(steps, *reset_attempts),
            E::FlowDeactivated { status, .. } => {
                self.over = true;
                self.status = status.as_str().to_string();
                format!("flow {flow} deactivated ({})", self.status)
            }
        }
    }

    /// An item that waits without a retry time: deferred or parked.
    fn held(&mut self, step_id: &str, token: &str, status: &str) {
        let it = self.item(step_id, token);
        it.status = status.into();
        it.next_retry_at = None;
    }

    fn flow_started(
        &mut self,
        plan: &ExecutionPlan,
        starts_at: Option<DateTime<Utc>>,
        at: DateTime<Utc>,
    ) -> String {
        self.started = Some(at);
        for id in super::plan::order(plan) {
            self.step(&id);
        }
        let goals = plan.goals.join(", ");
        match starts_at {
            Some(when) => format!(
                "flow {} started (goals: {goals}); its steps start at {}",
                self.flow_id,
                output::time(&when)
            ),
            None => format!("flow {} started (goals: {goals})", self.flow_id),
        }
    }

    fn step_started(&mut self, step_id: &str, items: usize, order: &[String]) -> String {
        let step = self.step(step_id);
        step.status = "active".into();
        step.element = order.iter().enumerate().map(|(i, t)| (t.clone(), i)).collect();
        match items {
            n if n > 1 => format!("step {step_id} started ({n} work items)"),
            _ => format!("step {step_id} started"),
        }
    }

    fn work_started(&mut self, step_id: &str, token: &str, attempt: u32, at: DateTime<Utc>) -> String {
        let it = self.item(step_id, token);
        it.status = "running".into();
        it.attempt = u64::from(attempt);
        it.next_retry_at = None;
        it.started_at = Some(at);
        format!("step {step_id} attempt {attempt} started")
    }

    fn work_succeeded(
        &mut self,
        step_id: &str,
        token: &str,
        attempt: u32,
        http_status: Option<u16>,
    ) -> String {
        let it = self.item(step_id, token);
        it.status = "succeeded".into();
        it.error = None;
        let http = http_status.map(|s| format!(" (HTTP {s})")).unwrap_or_default();
        format!("step {step_id} attempt {attempt} succeeded{http}")
    }

    fn retry_scheduled(&mut self, step_id: &str, token: &str, next: DateTime<Utc>, delay_ms: u64) -> String {
        let it = self.item(step_id, token);
        it.status = "retrying".into();
        it.next_retry_at = Some(next);
        let when = next.format("%H:%M:%S%.3f");
        format!(
            "step {step_id} retry in {} (at {when})",
            output::seconds(delay_ms)
        )
    }

    fn step_completed(&mut self, step_id: &str, duration: i64) -> String {
        let ms = u64::try_from(duration).ok();
        let s = self.step(step_id);
        s.status = "completed".into();
        s.done_ms = ms;
        match ms {
            Some(ms) => format!("step {step_id} completed in {ms}ms"),
            None => format!("step {step_id} completed"),
        }
    }

    fn item_cancelled(&mut self, step_id: &str, token: &str, reason: &str) -> String {
        self.item(step_id, token).status = "cancelled".into();
        format!("step {step_id} work cancelled: {reason}")
    }

    fn flow_completed(&mut self, result: &Outputs, at: DateTime<Utc>) -> String {
        self.ended = Some(at);
        self.status = "completed".into();
        let result = Value::Object(args_of(result));
        let line = format!("flow {} completed, result: {result}", self.flow_id);
        self.result = Some(result);
        line
    }

    fn flow_failed(&mut self, error: &str, at: DateTime<Utc>) -> String {
        self.ended = Some(at);
        let error = output::one_line(error);
        self.status = "failed".into();
        self.error = Some(error.clone());
        format!("flow {} failed: {error}", self.flow_id)
    }

    /// A work item's latest, created when first seen.
    fn item(&mut self, step_id: &str, token: &str) -> &mut ItemView {
        self.step(step_id).items.entry(token.to_string()).or_default()
    }

    /// An item's attempt ended without success: its status and error (on
    /// one line), which is answered.
    fn item_failed(&mut self, step_id: &str, token: &str, status: &str, error: &str) -> String {
        let error = output::one_line(error);
        let it = self.item(step_id, token);
        it.status = status.into();
        it.error = Some(error.clone());
        error
    }

    /// A step ended other than by completing: `failed`, `timed out`,
    /// `skipped` or `cancelled`, and why.
    fn step_ended(&mut self, step_id: &str, status: &str, why: &str) -> String {
        let why = output::one_line(why);
        let s = self.step(step_id);
        s.status = status.into();
        s.note = why.clone();
        format!("step {step_id} {status}: {why}")
    }

    /// A failed or cancelled flow runs again: not over any more.
    fn retried(&mut self, steps: &[String], reset_attempts: bool) -> String {
        self.over = false;
        self.status = "active".into();
        self.ended = None;
        self.error = None;
        self.result = None;
        for id in steps {
            let s = self.step(id);
            s.status = "pending".into();
            s.items.clear();
            s.note.clear();
            s.done_ms = None;
        }
        let attempts = if reset_attempts { "reset" } else { "kept" };
        format!(
            "flow {} retried (steps: {}; attempts {attempts})",
            self.flow_id,
            steps.join(", ")
        )
    }

    /// The terminal view: one row per step, the retry countdowns at `now`.
    pub fn table(&self, now: DateTime<Utc>) -> String {
        let elapsed = self
            .started
            .map(|s| output::seconds((self.ended.unwrap_or(now) - s).num_milliseconds().max(0) as u64))
            .unwrap_or_default();
        let mut table = output::Table::new(&["STEP", "STATUS", "ITEMS", "ATTEMPT", "NOTE"]);
        for id in &self.order {
            let Some(s) = self.steps.get(id) else { continue };
            // The item that says most: one still going, else the last seen.
            let latest = s
                .items
                .values()
                .find(|it| matches!(it.status.as_str(), "running" | "retrying" | "accepted"))
                .or_else(|| s.items.values().last());
            let done = s.items.values().filter(|it| it.status == "succeeded").count();
            let mut status = s.status.clone();
            let note = match (s.status.as_str(), latest) {
                ("completed", _) => s.done_ms.map(|ms| format!("done in {ms}ms")).unwrap_or_default(),
                ("active", Some(it)) => {
                    status = it.status.clone();
                    match it.status.as_str() {
                        "retrying" => {
                            let left = it
                                .next_retry_at
                                .map(|t| (t - now).num_milliseconds().max(0) as u64)
                                .unwrap_or(0);
                            format!(
                                "{} — retry in {}",
                                it.error.clone().unwrap_or_default(),
                                output::seconds(left)
                            )
                        }
                        "running" | "accepted" => it
                            .started_at
                            .map(|t| {
                                format!(
                                    "for {}",
                                    output::seconds((now - t).num_milliseconds().max(0) as u64)
                                )
                            })
                            .unwrap_or_default(),
                        _ => it.error.clone().unwrap_or_default(),
                    }
                }
                _ => s.note.clone(),
            };
            table.row(vec![
                id.clone(),
                status,
                if s.items.is_empty() {
                    String::new()
                } else {
                    format!("{done}/{}", s.items.len())
                },
                latest.map(|it| it.attempt.to_string()).unwrap_or_default(),
                shorten(&note, 200),
            ]);
        }
        // The table escapes its cells; the head is escaped here.
        let mut head = format!(
            "flow {}  {}  {elapsed}\n",
            output::escape(&self.flow_id),
            output::escape(&self.status)
        );
        if let Some(e) = &self.error {
            head.push_str(&format!("error: {}\n", output::escape(&shorten(e, 200))));
        }
        head + &table.render()
    }
}

/// The line of an event that changes nothing else of the view.
fn line_only(event: &FlowEvent) -> String {
    match event {
        FlowEvent::WorkHeartbeat { step_id, .. } => format!("step {step_id} heartbeat"),
        FlowEvent::WorkLaneWaited {
            step_id,
            attempt,
            lanes,
            waited_ms,
            ..
        } => format!(
            "step {step_id} attempt {attempt} waited {waited_ms} ms in lane {}",
            lanes.join(", ")
        ),
        FlowEvent::WorkLateResult { step_id, attempt, .. } => {
            format!("step {step_id} late result for attempt {attempt} ignored")
        }
        FlowEvent::WorkChildNotStarted {
            step_id,
            child_flow_id,
            ..
        } => format!("step {step_id} child flow {child_flow_id} never started"),
        FlowEvent::AttributeSet { key, value, .. } => {
            format!("attribute {key} = {}", shorten(&value.to_string(), 200))
        }
        FlowEvent::WorkSkipped { step_id, reason, .. } => {
            format!("step {step_id} work item skipped: {reason}")
        }
        FlowEvent::StepWaiting { step_id, until, .. } => format!(
            "step {step_id} waits for an optional input until {}",
            output::time(until)
        ),
        FlowEvent::FlowReleased { flow_id } => format!("flow {flow_id}: its start time came"),
        FlowEvent::FlowAdmitted { flow_id } => {
            format!("flow {flow_id}: its turn on its concurrency key came")
        }
        FlowEvent::FlowTimedOut { flow_id, problem, .. } => format!(
            "flow {flow_id} timed out: {}",
            output::maybe(&ProblemText::of(problem).detail)
        ),
        FlowEvent::CompStarted { step_id, attempt, .. } => {
            format!("step {step_id} compensation attempt {attempt} started")
        }
        FlowEvent::CompSucceeded { step_id, attempt, .. } => {
            format!("step {step_id} compensation attempt {attempt} succeeded")
        }
        FlowEvent::CompRetryScheduled {
            step_id,
            error,
            delay_ms,
            ..
        } => format!(
            "step {step_id} compensation failed ({}), retry in {}",
            output::one_line(error),
            output::seconds(*delay_ms)
        ),
        FlowEvent::CompFailed {
            step_id,
            attempt,
            error,
            ..
        } => format!(
            "step {step_id} compensation attempt {attempt} failed: {}",
            output::one_line(error)
        ),
        other => other.type_name().to_string(),
    }
}
