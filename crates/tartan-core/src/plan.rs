//! The planner: from goal steps and initial inputs to the minimal set of
//! steps to run. Only steps whose outputs the goals need, transitively, are
//! included; a goal whose outputs the initial inputs already hold is not run.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::catalog::{AttributeGraph, Catalog};
use crate::error::PlanError;
use crate::step::{Collect, Step};

/// Initial values: each attribute maps to the list of its values.
pub type InitArgs = BTreeMap<String, Vec<serde_json::Value>>;

/// The compiled plan of a flow, in Argyll's shape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecutionPlan {
    pub goals: Vec<String>,
    pub required: Vec<String>,
    pub steps: BTreeMap<String, Step>,
    pub attributes: AttributeGraph,
    pub excluded: ExcludedSteps,
}

/// Steps met while tracing dependencies that the plan does not run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    graph: AttributeGraph,
    init: &'a InitArgs,
    mode: PlanMode,
    available: BTreeSet<String>,
    satisfiable: BTreeSet<String>,
    visited: BTreeSet<String>,
    included: BTreeSet<String>,
    needed: BTreeSet<String>,
    missing: BTreeSet<String>,
    blocked: BTreeMap<String, Vec<String>>,
}

/// Build the plan for `goals`. Missing required inputs are listed in
/// `required`; `start_plan` turns them into an error.
pub fn build_plan(
    catalog: &Catalog,
    goals: &[String],
    init: &InitArgs,
    mode: PlanMode,
) -> Result<ExecutionPlan, PlanError> {
    if goals.is_empty() {
        return Err(PlanError::NoGoals);
    }
    let unknown: Vec<String> = goals
        .iter()
        .filter(|g| !catalog.steps.contains_key(*g))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        return Err(PlanError::UnknownGoals(unknown));
    }
    let mut b = Builder {
        catalog,
        graph: catalog.graph(),
        init,
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
    Ok(plan)
}

impl Builder<'_> {
    fn has_init(&self, name: &str) -> bool {
        self.init.get(name).is_some_and(|v| !v.is_empty())
    }

    fn providers(&self, name: &str) -> Vec<String> {
        self.graph
            .get(name)
            .map(|e| e.providers.clone())
            .unwrap_or_default()
    }

    fn blocked_inputs(&self, step: &Step) -> Vec<String> {
        step.attributes
            .iter()
            .filter(|(n, a)| a.is_input() && a.collect() == Collect::None && self.has_init(n))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Pass 1: which steps could run at all, from the initial inputs and the
    /// outputs of other steps that could run.
    fn compute_satisfiable(&mut self) {
        self.available = self
            .init
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, _)| k.clone())
            .collect();
        let mut progress = true;
        while progress {
            progress = false;
            for step in self.catalog.steps.values() {
                if self.satisfiable.contains(&step.id) || !self.blocked_inputs(step).is_empty() {
                    continue;
                }
                let ready = step
                    .attributes
                    .iter()
                    .filter(|(_, a)| a.is_required() && a.collect() != Collect::None)
                    .all(|(n, _)| self.available.contains(n));
                if ready {
                    self.satisfiable.insert(step.id.clone());
                    progress = true;
                    for (name, _) in step.outputs() {
                        self.available.insert(name.clone());
                    }
                }
            }
        }
    }

    /// Pass 2: walk back from a step to the providers of its inputs.
    fn collect(&mut self, id: &str) {
        if !self.visited.insert(id.to_string()) {
            return;
        }
        let Some(step) = self.catalog.steps.get(id) else {
            return;
        };
        let blocked = self.blocked_inputs(step);
        if !blocked.is_empty() {
            self.blocked.insert(id.to_string(), blocked);
            return;
        }
        // A goal whose outputs the initial inputs already hold does not run,
        // so neither do its providers, nor are its inputs required.
        if !self.needed.contains(id) && self.outputs_available(step) {
            return;
        }
        for (name, attr) in step.inputs() {
            let collect = attr.collect();
            if self.has_init(name) && collect == Collect::First {
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
            for p in &selected {
                self.needed.insert(p.clone());
                self.collect(p);
            }
            let has_provider = !selected.is_empty();
            if attr.is_required() && !has_provider && collect != Collect::None && !self.has_init(name) {
                self.missing.insert(name.clone());
            }
        }
        if self.needed.contains(id) || !self.outputs_available(step) {
            self.included.insert(id.to_string());
        }
    }

    /// A provider whose outputs the initial inputs already hold need not run.
    fn mark_satisfied(&mut self, name: &str) {
        for p in self.providers(name) {
            if let Some(step) = self.catalog.steps.get(&p) {
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
            if let Some(step) = self.catalog.steps.get(id) {
                for (name, _) in step.outputs() {
                    attributes
                        .entry(name.clone())
                        .or_default()
                        .providers
                        .push(id.clone());
                }
                steps.insert(id.clone(), step.clone());
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
            let Some(step) = self.catalog.steps.get(id) else {
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
        }
    }
}

/// Registration rejects cycles, but a plan is checked again so that a flow can
/// never wait on itself.
fn check_acyclic(plan: &ExecutionPlan) -> Result<(), PlanError> {
    for id in plan.steps.keys() {
        if let Some(at) = crate::catalog::find_cycle(&plan.steps, id) {
            return Err(PlanError::Cycle(at));
        }
    }
    Ok(())
}
