//! The planner: from goal steps and initial inputs to the minimal set of
//! steps to run. Only steps whose outputs the goals need, transitively, are
//! included; a goal whose outputs the initial inputs already hold is not run.
//! The plans of the sub-flows of its flow steps are in `children`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::catalog::{AttributeGraph, Catalog};
use crate::error::PlanError;
use crate::retry::RetryDefaults;
use crate::step::AttributeSpec;
use crate::step::{Collect, Step};

mod children;

use children::{attach_children, check_subflow_inputs};
pub use children::{MAX_SUBFLOW_DEPTH, MAX_SUBFLOW_PLANS};

/// Initial values: each attribute maps to the list of its values.
pub type InitArgs = BTreeMap<String, Vec<serde_json::Value>>;

/// The compiled plan of a flow, in Argyll's shape. Its steps carry their
/// typed policies: a plan read back from storage parses them again, once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(try_from = "StoredPlan")]
pub struct ExecutionPlan {
    pub goals: Vec<String>,
    pub required: Vec<String>,
    /// Shared with the catalog: a plan copies no step definition.
    pub steps: BTreeMap<String, Arc<Step>>,
    /// Who provides and consumes each attribute.
    // Spelt out for the document: through the alias, utoipa would name the
    // schema `BTreeMap`.
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = BTreeMap<String, crate::catalog::AttributeEdges>)
    )]
    pub attributes: AttributeGraph,
    pub excluded: ExcludedSteps,
    /// The plans of the sub-flows its flow steps run, by step id
    /// (docs/steps.md, "Sub-flows").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, Object>))]
    pub children: BTreeMap<String, ExecutionPlan>,
    /// Whether a step of the plan has a script its decisions evaluate
    /// (predicate, match, mapping), found once.
    #[serde(skip)]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    scripted: std::sync::OnceLock<bool>,
}

/// A plan as stored, before its steps' policies are parsed.
#[derive(Deserialize)]
struct StoredPlan {
    goals: Vec<String>,
    required: Vec<String>,
    steps: BTreeMap<String, Step>,
    attributes: AttributeGraph,
    excluded: ExcludedSteps,
    #[serde(default)]
    children: BTreeMap<String, ExecutionPlan>,
}

impl TryFrom<StoredPlan> for ExecutionPlan {
    type Error = String;

    fn try_from(p: StoredPlan) -> Result<Self, String> {
        let steps = p
            .steps
            .into_iter()
            .map(|(id, step)| {
                // The stored work_config is explicit: the defaults fill nothing.
                let step = step
                    .with_policies(&RetryDefaults::default())
                    .map_err(|e| format!("stored step {id}: {e}"))?;
                Ok((id, Arc::new(step)))
            })
            .collect::<Result<_, String>>()?;
        Ok(ExecutionPlan {
            goals: p.goals,
            required: p.required,
            steps,
            attributes: p.attributes,
            excluded: p.excluded,
            children: p.children,
            scripted: std::sync::OnceLock::new(),
        })
    }
}

impl ExecutionPlan {
    /// Whether deciding on this plan's flows may evaluate scripts.
    pub fn is_scripted(&self) -> bool {
        *self.scripted.get_or_init(|| {
            self.steps.values().any(|s| {
                let scripts = s.scripts();
                scripts.predicate.is_some() || !scripts.matches.is_empty() || !scripts.mappings.is_empty()
            })
        })
    }

    /// What of the plan decides what its flows end with, for the memo
    /// identity of the flow step whose sub-flow it is (docs/steps.md,
    /// "Memoization"): its goals and required inputs, the definition of
    /// each step it runs (`Step::memo_definition`) and, the same way, the
    /// plans of its own sub-flows. `None` when a step's definition cannot
    /// be written.
    pub fn memo_definition(&self) -> Option<serde_json::Value> {
        let steps = self
            .steps
            .iter()
            .map(|(id, step)| Some((id.clone(), step.memo_definition()?)))
            .collect::<Option<serde_json::Map<_, _>>>()?;
        // Nested at most MAX_SUBFLOW_DEPTH deep: the recursion is bounded.
        let children = self
            .children
            .iter()
            .map(|(id, child)| Some((id.clone(), child.memo_definition()?)))
            .collect::<Option<serde_json::Map<_, _>>>()?;
        Some(serde_json::json!({
            "goals": self.goals,
            "required": self.required,
            "steps": steps,
            "children": children,
        }))
    }
}

/// Steps met while tracing dependencies that the plan does not run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExcludedSteps {
    /// Outputs already present in the initial inputs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub satisfied: BTreeMap<String, Vec<String>>,
    /// Inputs whose initial values make the step impossible (`collect: none`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub blocked: BTreeMap<String, Vec<String>>,
    /// Required inputs nothing can provide.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub missing: BTreeMap<String, Vec<String>>,
}

/// Whether unsatisfiable provider chains are followed (preview, to show the
/// whole path back to the missing inputs) or dropped (a real start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanMode {
    Start,
    Preview,
}

struct Builder<'a> {
    catalog: &'a Catalog,
    init: &'a InitArgs,
    /// A sub-flow's plan: the initial inputs are names whose values are
    /// not known yet, so no match is judged on them.
    names_only: bool,
    mode: PlanMode,
    available: BTreeSet<String>,
    satisfiable: BTreeSet<String>,
    visited: BTreeSet<String>,
    included: BTreeSet<String>,
    needed: BTreeSet<String>,
    missing: BTreeSet<String>,
    blocked: BTreeMap<String, Vec<String>>,
}

/// A step's `required.match`es as the planner sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PlanGate {
    Open,
    Closed,
    Unknown,
}

/// A step being collected (pass 2) on the explicit stack: the inputs left to
/// trace, and the selected providers of the current input left to visit.
struct Frame<'a> {
    id: &'a str,
    step: &'a Step,
    /// What its `required.match`es say from the initial inputs alone.
    gate: PlanGate,
    inputs: Vec<(&'a String, &'a AttributeSpec)>,
    next_input: usize,
    current: Option<Input<'a>>,
}

struct Input<'a> {
    name: &'a String,
    attr: &'a AttributeSpec,
    selected: Vec<String>,
    next: usize,
}

/// Build the plan for `goals`, with the plans of the sub-flows its flow
/// steps run. Missing required inputs are listed in `required`;
/// `start_plan` turns them into an error.
pub fn build_plan(
    catalog: &Catalog,
    goals: &[String],
    init: &InitArgs,
    mode: PlanMode,
) -> Result<ExecutionPlan, PlanError> {
    let mut plan = build_one(catalog, goals, init, mode, false)?;
    let mut budget = MAX_SUBFLOW_PLANS;
    attach_children(catalog, &mut plan, mode, &mut Vec::new(), &mut budget)?;
    Ok(plan)
}

pub(super) fn build_one(
    catalog: &Catalog,
    goals: &[String],
    init: &InitArgs,
    mode: PlanMode,
    names_only: bool,
) -> Result<ExecutionPlan, PlanError> {
    if goals.is_empty() {
        return Err(PlanError::NoGoals);
    }
    let unknown: Vec<&String> = goals.iter().filter(|g| !catalog.contains(g)).collect();
    if !unknown.is_empty() {
        return Err(PlanError::UnknownGoals(
            unknown.into_iter().map(|g| catalog.missing(g)).collect(),
        ));
    }
    let mut b = Builder {
        catalog,
        init,
        names_only,
        mode,
        available: BTreeSet::new(),
        satisfiable: BTreeSet::new(),
        visited: BTreeSet::new(),
        included: BTreeSet::new(),
        needed: BTreeSet::new(),
        missing: BTreeSet::new(),
        blocked: BTreeMap::new(),
    };
    b.compute_satisfiable();
    for goal in goals {
        b.collect(goal);
    }
    let plan = b.finish(goals);
    check_acyclic(&plan)?;
    Ok(plan)
}

/// Build the plan for a flow start: missing required inputs are an error.
pub fn start_plan(catalog: &Catalog, goals: &[String], init: &InitArgs) -> Result<ExecutionPlan, PlanError> {
    let plan = build_plan(catalog, goals, init, PlanMode::Start)?;
    if !plan.required.is_empty() {
        // Name the inputs the client must supply, at the root of the provider
        // chains, rather than the intermediate attribute nothing can make.
        let preview = build_plan(catalog, goals, init, PlanMode::Preview)?;
        let names = if preview.required.is_empty() {
            plan.required
        } else {
            preview.required
        };
        return Err(PlanError::MissingInputs(names));
    }
    check_subflow_inputs(&plan)?;
    Ok(plan)
}

impl Builder<'_> {
    fn has_init(&self, name: &str) -> bool {
        self.init.get(name).is_some_and(|v| !v.is_empty())
    }

    fn providers(&self, name: &str) -> Vec<String> {
        self.catalog.providers(name).cloned().collect()
    }

    fn blocked_inputs(&self, step: &Step) -> Vec<String> {
        step.attributes
            .iter()
            .filter(|(n, a)| a.is_input() && a.collect() == Collect::None && self.has_init(n))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Pass 1: which steps could run at all, from the initial inputs and the
    /// outputs of other steps that could run. A worklist: each step waits on a
    /// count of its missing inputs, and each attribute that becomes available
    /// wakes only its consumers, so the pass is linear in the catalog whatever
    /// the order of ids.
    fn compute_satisfiable(&mut self) {
        self.available = self
            .init
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, _)| k.clone())
            .collect();
        let counts = |a: &AttributeSpec| a.is_required() && a.collect() != Collect::None;
        let mut waiting: HashMap<&str, usize> = HashMap::new();
        let mut ready: Vec<&Step> = Vec::new();
        for step in self.catalog.steps().values() {
            if !self.blocked_inputs(step).is_empty() {
                continue;
            }
            let unmet = step
                .attributes
                .iter()
                .filter(|(n, a)| counts(a) && !self.available.contains(*n))
                .count();
            if unmet == 0 {
                ready.push(step);
            } else {
                waiting.insert(&step.id, unmet);
            }
        }
        while let Some(step) = ready.pop() {
            self.satisfiable.insert(step.id.clone());
            for (name, _) in step.outputs() {
                if !self.available.insert(name.clone()) {
                    continue;
                }
                for consumer in self.catalog.consumers(name) {
                    let Some(c) = self.catalog.get(consumer) else {
                        continue;
                    };
                    if !c.attributes.get(name).is_some_and(counts) {
                        continue;
                    }
                    if let Some(left) = waiting.get_mut(consumer.as_str()) {
                        *left -= 1;
                        if *left == 0 {
                            waiting.remove(consumer.as_str());
                            ready.push(c);
                        }
                    }
                }
            }
        }
    }

    /// Pass 2: walk back from a goal to the providers of its inputs, depth
    /// first on an explicit stack (same order as the recursion it replaces).
    fn collect(&mut self, goal: &str) {
        let catalog = self.catalog;
        let mut stack: Vec<Frame> = Vec::new();
        if let Some(frame) = self.enter(catalog, goal) {
            stack.push(frame);
        }
        while let Some(frame) = stack.last_mut() {
            if let Some(input) = &mut frame.current {
                if let Some(p) = input.selected.get(input.next).cloned() {
                    input.next += 1;
                    self.needed.insert(p.clone());
                    if let Some(child) = self.enter(catalog, &p) {
                        stack.push(child);
                    }
                    continue;
                }
                let (name, attr, has_provider) = (input.name, input.attr, !input.selected.is_empty());
                frame.current = None;
                // While a match may still close the step, what its other
                // inputs lack is not yet the client's to supply (Argyll).
                let undecided =
                    frame.gate == PlanGate::Unknown && !frame.step.scripts().matches.contains_key(name);
                if attr.is_required()
                    && !has_provider
                    && attr.collect() != Collect::None
                    && !self.has_init(name)
                    && !undecided
                {
                    self.missing.insert(name.clone());
                }
                continue;
            }
            if let Some(&(name, attr)) = frame.inputs.get(frame.next_input) {
                frame.next_input += 1;
                let collect = attr.collect();
                if self.has_init(name)
                    && collect == Collect::First
                    && self.init_matches(frame.step, name) != Some(false)
                {
                    self.mark_satisfied(name);
                    continue;
                }
                let providers = self.providers(name);
                let mut selected: Vec<String> = providers
                    .iter()
                    .filter(|p| self.satisfiable.contains(*p))
                    .cloned()
                    .collect();
                if selected.is_empty() && self.mode == PlanMode::Preview {
                    selected = providers.clone();
                }
                if collect == Collect::All && selected.len() != providers.len() {
                    selected.clear();
                }
                for p in &providers {
                    if !selected.contains(p) {
                        self.visited.insert(p.clone());
                    }
                }
                frame.current = Some(Input {
                    name,
                    attr,
                    selected,
                    next: 0,
                });
                continue;
            }
            let (id, step) = (frame.id, frame.step);
            stack.pop();
            if self.needed.contains(id) || !self.outputs_available(step) {
                self.included.insert(id.to_string());
            }
        }
    }

    /// The checks made on arriving at a step; `None` when there is nothing
    /// to trace from it.
    fn enter<'a>(&mut self, catalog: &'a Catalog, id: &str) -> Option<Frame<'a>> {
        if !self.visited.insert(id.to_string()) {
            return None;
        }
        let step = catalog.get(id)?;
        let blocked = self.blocked_inputs(step);
        if !blocked.is_empty() {
            self.blocked.insert(id.to_string(), blocked);
            return None;
        }
        // A goal whose outputs the initial inputs already hold does not run,
        // so neither do its providers, nor are its inputs required.
        if !self.needed.contains(id) && self.outputs_available(step) {
            return None;
        }
        let gate = self.gate(step);
        let scripts = step.scripts();
        Some(Frame {
            id: &step.id,
            step,
            gate,
            // A closed match: the step will be skipped, so nothing it would
            // have needed besides is traced.
            inputs: step
                .inputs()
                .filter(|(n, _)| gate != PlanGate::Closed || scripts.matches.contains_key(*n))
                .collect(),
            next_input: 0,
            current: None,
        })
    }

    /// Whether the initial values of `name` satisfy the step's match on it
    /// (`None`: no match, or it could not be read).
    fn init_matches(&self, step: &Step, name: &str) -> Option<bool> {
        if self.names_only {
            return None;
        }
        let script = step.scripts().matches.get(name)?;
        let limits = crate::step::ScriptLimits::default();
        let mut any = false;
        for v in self.init.get(name)? {
            any |= script.accepts(v, &limits).ok()?;
        }
        Some(any)
    }

    /// A step's matches judged on the initial inputs: closed when one of
    /// them has initial values and no provider, and none of the values
    /// matches; open when every one is met that way; unknown otherwise.
    fn gate(&self, step: &Step) -> PlanGate {
        let mut gate = PlanGate::Open;
        for name in step.scripts().matches.keys() {
            let decided = self.has_init(name) && self.catalog.providers(name).next().is_none();
            match self.init_matches(step, name) {
                Some(false) if decided => return PlanGate::Closed,
                Some(true) if decided => {}
                _ => gate = PlanGate::Unknown,
            }
        }
        gate
    }

    /// A provider whose outputs the initial inputs already hold need not run.
    fn mark_satisfied(&mut self, name: &str) {
        for p in self.providers(name) {
            if let Some(step) = self.catalog.get(&p) {
                if self.outputs_available(step) {
                    self.visited.insert(p);
                }
            }
        }
    }

    fn outputs_available(&self, step: &Step) -> bool {
        let mut outputs = step.outputs().peekable();
        outputs.peek().is_some() && outputs.all(|(n, _)| self.has_init(n))
    }

    fn finish(self, goals: &[String]) -> ExecutionPlan {
        let mut steps = BTreeMap::new();
        let mut attributes: AttributeGraph = BTreeMap::new();
        for id in &self.included {
            if let Some(step) = self.catalog.steps().get(id) {
                for (name, _) in step.outputs() {
                    attributes
                        .entry(name.clone())
                        .or_default()
                        .providers
                        .push(id.clone());
                }
                steps.insert(id.clone(), Arc::clone(step));
            }
        }
        for step in steps.values() {
            for (name, _) in step.inputs() {
                let provided = attributes.get(name).is_some_and(|e| !e.providers.is_empty());
                if provided || self.has_init(name) {
                    attributes
                        .entry(name.clone())
                        .or_default()
                        .consumers
                        .push(step.id.clone());
                }
            }
        }
        let mut excluded = ExcludedSteps::default();
        for id in &self.visited {
            if self.included.contains(id) {
                continue;
            }
            let Some(step) = self.catalog.get(id) else {
                continue;
            };
            if let Some(b) = self.blocked.get(id) {
                excluded.blocked.insert(id.clone(), b.clone());
            } else if self.outputs_available(step) {
                excluded
                    .satisfied
                    .insert(id.clone(), step.outputs().map(|(n, _)| n.clone()).collect());
            } else {
                let missing: Vec<String> = step
                    .attributes
                    .iter()
                    .filter(|(n, a)| a.is_required() && !self.available.contains(*n))
                    .map(|(n, _)| n.clone())
                    .collect();
                if !missing.is_empty() {
                    excluded.missing.insert(id.clone(), missing);
                }
            }
        }
        ExecutionPlan {
            goals: goals.to_vec(),
            required: self.missing.into_iter().collect(),
            steps,
            attributes,
            excluded,
            children: BTreeMap::new(),
            scripted: std::sync::OnceLock::new(),
        }
    }
}

/// Registration rejects cycles, but a plan is checked again so that a flow can
/// never wait on itself.
fn check_acyclic(plan: &ExecutionPlan) -> Result<(), PlanError> {
    match crate::catalog::find_cycle(&plan.steps) {
        Some(at) => Err(PlanError::Cycle(at)),
        None => Ok(()),
    }
}
