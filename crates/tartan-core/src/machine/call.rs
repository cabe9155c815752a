//! What one call sends, built from a committed transition's `Call` effect
//! and the state it left: whether it is still to be made, where it goes,
//! with which method and body, and how long it may take (the attempt
//! timeout, cut short by the step's total deadline when that comes first).
//! The engine signs the webhook URL, takes a call slot and sends it.

use std::sync::Arc;

use serde_json::Value;

use crate::endpoint::params;
use crate::flow::{FlowState, Time, WorkStatus};
use crate::json::ItemInputs;
use crate::plan::ExecutionPlan;
use crate::step::{Args, Step};
use crate::timeouts::TimeoutScope;

use super::transition::{CallKind, Dispatch};

/// The HTTP method of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallMethod {
    Get,
    Post,
    Put,
    Delete,
}

impl CallMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            CallMethod::Get => "GET",
            CallMethod::Post => "POST",
            CallMethod::Put => "PUT",
            CallMethod::Delete => "DELETE",
        }
    }
}

/// How long a call may take, and which timeout that is (docs/timeouts.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptBound {
    /// How long this call may take.
    pub timeout_ms: u64,
    /// The timeout that ends it when it takes that long.
    pub scope: TimeoutScope,
    /// That timeout's configured length, for the problem's detail.
    pub limit_ms: u64,
    /// When that timeout's scope started (this attempt, or the item's
    /// first).
    pub scope_start: Time,
}

/// What a call sends.
#[derive(Debug, Clone, PartialEq)]
pub enum CallBody {
    /// A step's call: the item's inputs, written from the step's shared
    /// inputs and the item's own without copying either.
    Inputs(ItemInputs),
    /// A compensation call's `{"input","output"}`.
    Json(Value),
}

/// One call, whole.
#[derive(Debug, Clone)]
pub struct Call {
    pub kind: CallKind,
    pub flow_id: String,
    /// Shared by the calls of one decision (the items of a for_each step).
    pub step: Arc<Step>,
    pub token: String,
    pub attempt: u32,
    /// The URL template (the step's endpoint, or its compensate URL) and
    /// the values for its placeholders.
    pub endpoint: String,
    pub placeholders: Args,
    pub method: CallMethod,
    /// `None` for a GET.
    pub body: Option<CallBody>,
    pub bound: AttemptBound,
    /// An async step's call: its result comes to a webhook, whose signed
    /// URL the caller hands over (`hand_webhook`).
    pub expects_webhook: bool,
    /// A memoizable step's call: its answer may be reused.
    pub memo: Option<MemoCall>,
    /// The flow's priority: where the call waits (call slots, lanes),
    /// higher goes first (docs/concurrency.md, "Priority").
    pub priority: i32,
}

/// What identifies a memoizable step's call (docs/steps.md,
/// "Memoization"): the step's definition as far as it decides the answer,
/// its id included (`Step::memo_definition`); for a flow step, its
/// sub-flow's plan as the flow's plan holds it, with the definitions of
/// the steps it runs, transitively (`ExecutionPlan::memo_definition`); and
/// the call's inputs but its meta values (a flow id or a token differ from
/// call to call and decide nothing), in key order. The engine hashes it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoCall {
    pub identity: String,
    /// How long an answer is reused (`memo_ttl`); `None`: until evicted.
    pub ttl_ms: Option<u64>,
}

impl MemoCall {
    /// The memo identity of an item of `state`'s flow.
    pub fn for_item(state: &FlowState, step_id: &str, token: &str) -> Option<MemoCall> {
        let step = state.plan.steps.get(step_id)?;
        MemoCall::of(&state.plan, step, &state.item_inputs(step_id, token)?)
    }

    /// `None` for a step that is not memoizable, and for a call whose
    /// identity cannot be written whole: one told apart from others by
    /// less than all of it could be served their answers.
    fn of(plan: &ExecutionPlan, step: &Step, inputs: &ItemInputs) -> Option<MemoCall> {
        if !step.memoizable {
            return None;
        }
        // The sub-flow's plan was built from the catalog when the flow
        // started and is what the child runs: a step of it registered
        // again since changes the plan of flows started after, not this one.
        let subflow = if step.is_flow() {
            Some(plan.children.get(&step.id)?.memo_definition()?)
        } else {
            None
        };
        let meta = step.meta_names();
        let inputs: std::collections::BTreeMap<String, Value> = inputs
            .to_args()
            .into_iter()
            .filter(|(k, _)| !meta.contains(&k.as_str()))
            .collect();
        let identity = serde_json::json!({
            "step": step.memo_definition()?,
            "subflow": subflow,
            "inputs": inputs,
        });
        Some(MemoCall {
            identity: canonical(identity).to_string(),
            ttl_ms: (step.memo_ttl > 0).then_some(step.memo_ttl),
        })
    }
}

/// `value` with every object's keys in order: the identity does not depend
/// on the order a definition or an answer wrote them in. (As deep as
/// writing the value out goes, which the identity does anyway.)
fn canonical(value: Value) -> Value {
    match value {
        Value::Object(fields) => {
            let mut fields: Vec<(String, Value)> = fields.into_iter().collect();
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(fields.into_iter().map(|(k, v)| (k, canonical(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

impl Call {
    /// The call `dispatch` asks for, as `state` has it; `None` when a later
    /// decision of the same transition already ended it (that decision
    /// aborts it: `Effect::Abort`). `default_timeout_ms` is the engine's
    /// attempt timeout for steps that set none.
    pub fn of(state: &FlowState, dispatch: &Dispatch, now: Time, default_timeout_ms: u64) -> Option<Call> {
        let step = state.plan.steps.get(&dispatch.step_id)?;
        let work = state.find_work(&dispatch.step_id, &dispatch.token)?;
        let kind = dispatch.kind;
        let live = match kind {
            CallKind::Compensation => work.status == WorkStatus::Compensating,
            CallKind::Step => {
                work.status == WorkStatus::Active
                    && work.attempts.last().map(|a| a.number) == Some(dispatch.attempt)
            }
        };
        if !live {
            return None;
        }
        let inputs = state.item_inputs(&dispatch.step_id, &dispatch.token)?;
        let first_started = work.attempts.first().map(|a| a.started_at);
        // A sub-flow runs as long as its steps make it: the engine's default
        // attempt timeout is for calls (docs/steps.md, "Sub-flows").
        let default_timeout_ms = if step.is_flow() {
            u64::MAX
        } else {
            default_timeout_ms
        };
        let bound = bound(
            step,
            kind,
            work.deadline_at,
            first_started,
            now,
            default_timeout_ms,
        );
        let memo = (kind == CallKind::Step)
            .then(|| MemoCall::of(&state.plan, step, &inputs))
            .flatten();
        if step.is_script() || step.is_flow() {
            // Run by the engine: no endpoint, the inputs are the script's
            // or the sub-flow's.
            return (kind == CallKind::Step).then(|| Call {
                kind,
                flow_id: state.id.clone(),
                token: dispatch.token.clone(),
                attempt: dispatch.attempt,
                endpoint: String::new(),
                placeholders: Args::new(),
                method: CallMethod::Post,
                body: Some(CallBody::Inputs(inputs)),
                bound,
                expects_webhook: false,
                memo,
                priority: state.priority,
                step: Arc::clone(step),
            });
        }
        let http = step.http.as_ref()?;
        let template = match kind {
            CallKind::Step => &http.endpoint,
            CallKind::Compensation => &http.compensate,
        };
        let mut placeholders = inputs.pick(params(template).iter().map(String::as_str));
        let body = match kind {
            CallKind::Compensation => {
                // Placeholders from inputs and outputs, outputs win.
                let outputs = work
                    .outputs
                    .as_ref()
                    .map(crate::json::args_of)
                    .unwrap_or_default();
                placeholders.extend(outputs.iter().map(|(k, v)| (k.clone(), v.clone())));
                Some(CallBody::Json(
                    serde_json::json!({ "input": inputs.to_args(), "output": outputs }),
                ))
            }
            CallKind::Step => (step.method() != "GET").then_some(CallBody::Inputs(inputs)),
        };
        Some(Call {
            kind,
            flow_id: state.id.clone(),
            token: dispatch.token.clone(),
            attempt: dispatch.attempt,
            endpoint: template.clone(),
            placeholders,
            method: method_of(kind, step),
            body,
            bound,
            memo,
            expects_webhook: kind == CallKind::Step && step.is_async(),
            priority: state.priority,
            step: Arc::clone(step),
        })
    }

    pub fn is_compensation(&self) -> bool {
        self.kind == CallKind::Compensation
    }

    /// Hand the call its signed webhook URL: flow state keeps the unsigned
    /// one in the step's `webhook_url` meta inputs; the step alone is given
    /// the signed one there.
    pub fn hand_webhook(&mut self, signed_url: &str) {
        let Some(CallBody::Inputs(inputs)) = &mut self.body else {
            return;
        };
        for (name, attr) in &self.step.attributes {
            if attr.is_meta() && attr.meta_key() == "webhook_url" {
                inputs
                    .own
                    .insert(self.step.inner_name(name).to_string(), signed_url.into());
            }
        }
    }
}

/// A compensation is always a POST; a step's call its method, POST when
/// unset or unknown.
fn method_of(kind: CallKind, step: &Step) -> CallMethod {
    match (kind, step.method()) {
        (CallKind::Compensation, _) => CallMethod::Post,
        (CallKind::Step, "GET") => CallMethod::Get,
        (CallKind::Step, "PUT") => CallMethod::Put,
        (CallKind::Step, "DELETE") => CallMethod::Delete,
        _ => CallMethod::Post,
    }
}

/// The attempt timeout, cut short by the step's total deadline when that
/// comes first (then the total timeout is what fires). A compensation has
/// the attempt timeout alone.
fn bound(
    step: &Step,
    kind: CallKind,
    deadline: Option<Time>,
    first_started: Option<Time>,
    now: Time,
    default_timeout_ms: u64,
) -> AttemptBound {
    let policy = step.policies().map(|p| &p.timeouts);
    let attempt_ms = policy.map_or(default_timeout_ms, |p| p.attempt_or(default_timeout_ms));
    let attempt = AttemptBound {
        timeout_ms: attempt_ms,
        scope: TimeoutScope::Attempt,
        limit_ms: attempt_ms,
        scope_start: now,
    };
    let total = policy.and_then(|p| p.total_ms).filter(|_| kind == CallKind::Step);
    match (deadline, total) {
        (Some(deadline), Some(total)) => {
            let remaining = u64::try_from((deadline - now).num_milliseconds()).unwrap_or(0);
            if remaining <= attempt_ms {
                AttemptBound {
                    timeout_ms: remaining,
                    scope: TimeoutScope::Total,
                    limit_ms: total,
                    scope_start: first_started.unwrap_or(now),
                }
            } else {
                attempt
            }
        }
        _ => attempt,
    }
}
