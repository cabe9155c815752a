//! The step catalog as a whole: the attribute graph (who provides and who
//! consumes each attribute) and the rules that span steps (type conflicts,
//! dependency cycles).
//!
//! The catalog is persistent (`imbl`): a copy is O(1) and a change costs in
//! proportion to the step changed, with an attribute index kept alongside, so
//! that registering the 10,000th step costs what registering the first did
//! (docs/api.md, "Limits"). Every walk over the graph is iterative: a client
//! decides how long a chain is, not how deep our stack goes.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use imbl::{OrdMap, OrdSet};
use serde::{Deserialize, Serialize};

use crate::error::{CatalogError, ValidationError};
use crate::retry::RetryDefaults;
use crate::step::Step;

/// Providers and consumers of one attribute.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttributeEdges {
    pub providers: Vec<String>,
    pub consumers: Vec<String>,
}

pub type AttributeGraph = BTreeMap<String, AttributeEdges>;

/// Who declares one attribute name, by role.
#[derive(Debug, Clone, Default, PartialEq)]
struct AttributeIndex {
    providers: OrdSet<String>,
    consumers: OrdSet<String>,
    /// Every step declaring the name in any role (types must agree).
    users: OrdSet<String>,
}

/// Every registered step by id, and the attribute index over them. Steps
/// are shared (`Arc`) so that the map's nodes stay small.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    steps: OrdMap<String, Arc<Step>>,
    index: OrdMap<String, AttributeIndex>,
    /// The flow steps (`type: flow`): where a cycle through sub-flows starts.
    flow_steps: OrdSet<String>,
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
        let mut catalog = Self::default();
        for step in steps {
            catalog.insert(step);
        }
        catalog
    }

    /// Every step by id.
    pub fn steps(&self) -> &OrdMap<String, Arc<Step>> {
        &self.steps
    }

    pub fn get(&self, id: &str) -> Option<&Step> {
        self.steps.get(id).map(|s| &**s)
    }

    pub fn contains(&self, id: &str) -> bool {
        self.steps.contains_key(id)
    }

    /// A step id that is not registered, with the registered id nearest to
    /// it when near enough to be a slip ("did you mean").
    pub fn missing(&self, id: &str) -> crate::suggest::Missing {
        crate::suggest::Missing::among(id, self.steps.keys().map(String::as_str))
    }

    pub fn len(&self) -> usize {
        self.steps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Add or replace a step (already checked).
    pub fn insert(&mut self, step: Step) {
        self.remove(&step.id);
        for (name, attr) in &step.attributes {
            let mut entry = self.index.get(name).cloned().unwrap_or_default();
            entry.users.insert(step.id.clone());
            if attr.is_output() {
                entry.providers.insert(step.id.clone());
            } else if attr.is_input() {
                entry.consumers.insert(step.id.clone());
            }
            self.index.insert(name.clone(), entry);
        }
        if step.is_flow() {
            self.flow_steps.insert(step.id.clone());
        }
        self.steps.insert(step.id.clone(), Arc::new(step));
    }

    /// Remove a step; returns its definition.
    pub fn remove(&mut self, id: &str) -> Option<Arc<Step>> {
        let old = self.steps.remove(id)?;
        self.flow_steps.remove(id);
        for name in old.attributes.keys() {
            let Some(mut entry) = self.index.get(name).cloned() else {
                continue;
            };
            entry.users.remove(id);
            entry.providers.remove(id);
            entry.consumers.remove(id);
            if entry.users.is_empty() {
                self.index.remove(name);
            } else {
                self.index.insert(name.clone(), entry);
            }
        }
        Some(old)
    }

    /// Steps that output attribute `name`, by id.
    pub fn providers(&self, name: &str) -> impl Iterator<Item = &String> {
        self.index.get(name).into_iter().flat_map(|e| e.providers.iter())
    }

    /// Steps that take attribute `name` as an input, by id.
    pub fn consumers(&self, name: &str) -> impl Iterator<Item = &String> {
        self.index.get(name).into_iter().flat_map(|e| e.consumers.iter())
    }

    /// The whole attribute graph (for display).
    pub fn graph(&self) -> AttributeGraph {
        self.index
            .iter()
            .filter(|(_, e)| !e.providers.is_empty() || !e.consumers.is_empty())
            .map(|(name, e)| {
                let edges = AttributeEdges {
                    providers: e.providers.iter().cloned().collect(),
                    consumers: e.consumers.iter().cloned().collect(),
                };
                (name.clone(), edges)
            })
            .collect()
    }

    /// Normalise and check a new step. Identical re-registration is
    /// `Unchanged`; a different definition under the same id is `Exists`.
    pub fn check_register(
        &self,
        step: Step,
        defaults: &RetryDefaults,
    ) -> Result<(Step, Registration), CatalogError> {
        let step = step.normalize(defaults)?;
        if let Some(old) = self.steps.get(&step.id) {
            if **old == step {
                return Ok((step, Registration::Unchanged));
            }
            return Err(CatalogError::Exists(step.id));
        }
        self.check_fits(&step)?;
        Ok((step, Registration::Added))
    }

    /// Normalise and check a replacement for an existing step.
    pub fn check_update(&self, step: Step, defaults: &RetryDefaults) -> Result<Step, CatalogError> {
        let step = step.normalize(defaults)?;
        if !self.steps.contains_key(&step.id) {
            return Err(CatalogError::NotFound(self.missing(&step.id)));
        }
        self.check_fits(&step)?;
        Ok(step)
    }

    /// Rules that involve the rest of the catalog, looked up through the
    /// index: the cost follows the step, not the catalog.
    fn check_fits(&self, step: &Step) -> Result<(), ValidationError> {
        for (name, attr) in &step.attributes {
            // Every other user agrees on the type (this check keeps it so),
            // so the first one stands for all.
            let other = self
                .index
                .get(name)
                .and_then(|e| e.users.iter().find(|id| **id != step.id))
                .and_then(|id| self.steps.get(id));
            if let Some(other) = other {
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
        let mut next = self.clone();
        next.insert(step.clone());
        if next.on_cycle(&step.id) {
            return Err(ValidationError::new(
                "attributes",
                format!("circular dependency detected: step {}", step.id),
            ));
        }
        if let Some(cycle) = next.flow_cycle() {
            return Err(ValidationError::new(
                "flow.goals",
                format!(
                    "circular dependency detected: step {} (through sub-flows: {})",
                    cycle[0],
                    cycle.join(" -> ")
                ),
            ));
        }
        Ok(())
    }

    /// The steps a flow step's sub-flow may run: its goals and, transitively,
    /// every provider of their inputs.
    fn child_reach<'a>(&'a self, step: &'a Step) -> BTreeSet<&'a str> {
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut stack: Vec<&str> = step.child_goals().iter().map(String::as_str).collect();
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            stack.extend(
                self.upstream(id)
                    .map(String::as_str)
                    .filter(|p| !seen.contains(p)),
            );
        }
        seen
    }

    /// A cycle through sub-flows, if there is one: flow steps each of which
    /// may run the next in its sub-flow, the first one again at the end.
    /// Such a flow would start children without end. Only flow steps are
    /// searched, so a catalog without one costs nothing.
    pub fn flow_cycle(&self) -> Option<Vec<String>> {
        // Depth-first over flow steps, iterative; `path` is the current chain.
        let mut done: HashSet<&str> = HashSet::new();
        for start in &self.flow_steps {
            if done.contains(start.as_str()) {
                continue;
            }
            let mut path: Vec<&str> = Vec::new();
            let mut stack: Vec<Vec<&str>> = Vec::new();
            path.push(start.as_str());
            stack.push(self.flow_successors(start));
            while let Some(next) = stack.last_mut() {
                let Some(id) = next.pop() else {
                    stack.pop();
                    if let Some(left) = path.pop() {
                        done.insert(left);
                    }
                    continue;
                };
                if let Some(at) = path.iter().position(|p| *p == id) {
                    let mut cycle: Vec<String> = path[at..].iter().map(|s| s.to_string()).collect();
                    cycle.push(id.to_string());
                    return Some(cycle);
                }
                if done.contains(id) {
                    continue;
                }
                path.push(id);
                stack.push(self.flow_successors(id));
            }
        }
        None
    }

    /// The flow steps a flow step's sub-flow may run.
    fn flow_successors(&self, id: &str) -> Vec<&str> {
        let Some(step) = self.steps.get(id) else {
            return Vec::new();
        };
        self.child_reach(step)
            .into_iter()
            .filter(|s| self.flow_steps.contains(*s))
            .collect()
    }

    /// Steps whose outputs `id` takes as inputs.
    fn upstream<'a>(&'a self, id: &str) -> impl Iterator<Item = &'a String> + 'a {
        self.steps
            .get(id)
            .into_iter()
            .flat_map(|s| s.inputs())
            .flat_map(|(name, _)| self.providers(name))
    }

    /// Steps that take `id`'s outputs as inputs.
    fn downstream<'a>(&'a self, id: &str) -> impl Iterator<Item = &'a String> + 'a {
        self.steps
            .get(id)
            .into_iter()
            .flat_map(|s| s.outputs())
            .flat_map(|(name, _)| self.consumers(name))
    }

    /// Whether `id` depends on itself. The catalog without it was acyclic, so
    /// any new cycle passes through it. Searching up and down in lockstep and
    /// stopping when either side runs out bounds the work by the smaller side:
    /// a chain registered in either order costs O(1) per step.
    fn on_cycle(&self, id: &str) -> bool {
        let mut up = Reach::new(id);
        let mut down = Reach::new(id);
        loop {
            for (search, upward) in [(&mut up, true), (&mut down, false)] {
                let Some(node) = search.stack.pop() else {
                    return false;
                };
                let next: Vec<&String> = if upward {
                    self.upstream(node).collect()
                } else {
                    self.downstream(node).collect()
                };
                for n in next {
                    if n == id {
                        return true;
                    }
                    if search.seen.insert(n) {
                        search.stack.push(n);
                    }
                }
            }
        }
    }
}

/// One side of the lockstep search in `Catalog::on_cycle`.
struct Reach<'a> {
    stack: Vec<&'a str>,
    seen: HashSet<&'a str>,
}

impl<'a> Reach<'a> {
    fn new(start: &'a str) -> Self {
        Self {
            stack: vec![start],
            seen: HashSet::from([start]),
        }
    }
}

/// The first step, in id order, at which a cycle of "needs an input provided
/// by" closes, if there is one. Iterative depth-first search with one shared
/// `done` set: O(steps + edges) for the whole set.
pub fn find_cycle(steps: &BTreeMap<String, Arc<Step>>) -> Option<String> {
    let graph = attribute_graph(steps.values().map(|s| &**s));
    let providers = |id: &str| -> Vec<&str> {
        steps
            .get(id)
            .into_iter()
            .flat_map(|s| s.inputs())
            .flat_map(|(name, _)| graph.get(name).map(|e| e.providers.as_slice()).unwrap_or(&[]))
            .map(String::as_str)
            .collect()
    };
    let mut done: BTreeSet<&str> = BTreeSet::new();
    let mut on_path: HashSet<&str> = HashSet::new();
    for root in steps.keys() {
        if done.contains(root.as_str()) {
            continue;
        }
        // Each frame: a step on the current path and the providers left to visit.
        let mut path: Vec<(&str, std::vec::IntoIter<&str>)> = vec![(root, providers(root).into_iter())];
        on_path.insert(root);
        while let Some((id, rest)) = path.last_mut() {
            match rest.next() {
                Some(next) => {
                    if on_path.contains(next) {
                        return Some(next.to_string());
                    }
                    if done.contains(next) || !steps.contains_key(next) {
                        continue;
                    }
                    on_path.insert(next);
                    path.push((next, providers(next).into_iter()));
                }
                None => {
                    let id = *id;
                    on_path.remove(id);
                    done.insert(id);
                    path.pop();
                }
            }
        }
    }
    None
}
