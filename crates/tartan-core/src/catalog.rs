//! The step catalog as a whole: the attribute graph (who provides and who
//! consumes each attribute) and the rules that span steps (type conflicts,
//! dependency cycles).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::{CatalogError, ValidationError};
use crate::step::{Step, WorkDefaults};

/// Providers and consumers of one attribute.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeEdges {
    pub providers: Vec<String>,
    pub consumers: Vec<String>,
}

pub type AttributeGraph = BTreeMap<String, AttributeEdges>;

/// Every registered step by id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    pub steps: BTreeMap<String, Step>,
}

/// What a registration does to the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// A new step was added.
    Added,
    /// The same definition was already there: nothing changes.
    Unchanged,
}

/// Build the graph of the given steps.
pub fn attribute_graph<'a>(steps: impl IntoIterator<Item = &'a Step>) -> AttributeGraph {
    let mut graph = AttributeGraph::new();
    for step in steps {
        for (name, attr) in &step.attributes {
            if attr.is_output() {
                let edges = graph.entry(name.clone()).or_default();
                if !edges.providers.contains(&step.id) {
                    edges.providers.push(step.id.clone());
                }
            } else if attr.is_input() {
                let edges = graph.entry(name.clone()).or_default();
                if !edges.consumers.contains(&step.id) {
                    edges.consumers.push(step.id.clone());
                }
            }
        }
    }
    graph
}

impl Catalog {
    pub fn new(steps: impl IntoIterator<Item = Step>) -> Self {
        Self {
            steps: steps.into_iter().map(|s| (s.id.clone(), s)).collect(),
        }
    }

    pub fn graph(&self) -> AttributeGraph {
        attribute_graph(self.steps.values())
    }

    /// Normalise and check a new step. Identical re-registration is
    /// `Unchanged`; a different definition under the same id is `Exists`.
    pub fn check_register(
        &self,
        step: Step,
        defaults: &WorkDefaults,
    ) -> Result<(Step, Registration), CatalogError> {
        let step = step.normalize(defaults)?;
        if let Some(old) = self.steps.get(&step.id) {
            if *old == step {
                return Ok((step, Registration::Unchanged));
            }
            return Err(CatalogError::Exists(step.id));
        }
        self.check_fits(&step)?;
        Ok((step, Registration::Added))
    }

    /// Normalise and check a replacement for an existing step.
    pub fn check_update(&self, step: Step, defaults: &WorkDefaults) -> Result<Step, CatalogError> {
        let step = step.normalize(defaults)?;
        if !self.steps.contains_key(&step.id) {
            return Err(CatalogError::NotFound(step.id));
        }
        self.check_fits(&step)?;
        Ok(step)
    }

    /// Rules that involve the rest of the catalog.
    fn check_fits(&self, step: &Step) -> Result<(), ValidationError> {
        for (name, attr) in &step.attributes {
            for other in self.steps.values().filter(|o| o.id != step.id) {
                if let Some(theirs) = other.attributes.get(name) {
                    if theirs.attr_type != attr.attr_type {
                        return Err(ValidationError::new(
                            format!("attributes.{name}.type"),
                            format!(
                                "attribute type conflict: {name} is {:?} here and {:?} in step {}",
                                attr.attr_type, theirs.attr_type, other.id
                            ),
                        ));
                    }
                }
            }
        }
        let mut steps = self.steps.clone();
        steps.insert(step.id.clone(), step.clone());
        if let Some(at) = find_cycle(&steps, &step.id) {
            return Err(ValidationError::new(
                "attributes",
                format!("circular dependency detected: step {at}"),
            ));
        }
        Ok(())
    }
}

/// Depth-first search from `start` along "needs an input provided by"; returns
/// the step at which a cycle closes.
pub fn find_cycle(steps: &BTreeMap<String, Step>, start: &str) -> Option<String> {
    let graph = attribute_graph(steps.values());
    let mut stack = Vec::new();
    let mut done = BTreeSet::new();
    visit(steps, &graph, start, &mut stack, &mut done)
}

fn visit(
    steps: &BTreeMap<String, Step>,
    graph: &AttributeGraph,
    id: &str,
    stack: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<String> {
    if stack.iter().any(|s| s == id) {
        return Some(id.to_string());
    }
    if done.contains(id) {
        return None;
    }
    let step = steps.get(id)?;
    stack.push(id.to_string());
    for (name, _) in step.inputs() {
        for provider in graph.get(name).map(|e| e.providers.as_slice()).unwrap_or(&[]) {
            if let Some(at) = visit(steps, graph, provider, stack, done) {
                return Some(at);
            }
        }
    }
    stack.pop();
    done.insert(id.to_string());
    None
}
