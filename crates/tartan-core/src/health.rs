//! Step health (docs/operating.md, "Health checks and the cluster"): what a
//! check of a step's `http.health_check` found, which engine checks which
//! step, and the health of every step of the catalog, flow and script
//! steps included, as Argyll resolves it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::plan::{build_plan, PlanMode};

/// A step's health, in Argyll's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
// `as_str` (and `parse`, where there is one) uses serde's names, by the
// same rule; tests/names.rs holds the two equal.
#[derive(strum::IntoStaticStr, strum::EnumIter, strum::EnumString)]
#[strum(serialize_all = "lowercase")]
pub enum HealthStatus {
    Unknown,
    Healthy,
    Unhealthy,
}

impl HealthStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

/// A step's health and, when it is not healthy, why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HealthState {
    pub status: HealthStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl HealthState {
    pub fn unknown() -> Self {
        Self {
            status: HealthStatus::Unknown,
            error: None,
        }
    }

    pub fn healthy() -> Self {
        Self {
            status: HealthStatus::Healthy,
            error: None,
        }
    }

    /// What a health check's answer means: a status below 400 is healthy
    /// (Argyll's threshold), anything else unhealthy with the status.
    pub fn of_status(status: u16) -> Self {
        if status < 400 {
            Self::healthy()
        } else {
            Self {
                status: HealthStatus::Unhealthy,
                error: Some(format!("HTTP {status}")),
            }
        }
    }

    /// A check that got no answer.
    pub fn failed(error: impl Into<String>) -> Self {
        Self {
            status: HealthStatus::Unhealthy,
            error: Some(error.into()),
        }
    }
}

/// The steps whose work is not called now, each with why: those whose own
/// health check found them unhealthy (docs/operating.md, "Health gates
/// dispatch"). A step without a health check is never in it. The machine
/// defers an item of such a step instead of starting its attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DispatchGate {
    closed: BTreeMap<String, String>,
}

impl DispatchGate {
    /// The gate of the checks' results (`checked`, by step): every step
    /// found unhealthy.
    pub fn of_checks<'a>(checked: impl IntoIterator<Item = (&'a String, &'a HealthState)>) -> Self {
        let closed = checked
            .into_iter()
            .filter(|(_, h)| h.status == HealthStatus::Unhealthy)
            .map(|(id, h)| (id.clone(), h.error.clone().unwrap_or_else(|| "unhealthy".into())))
            .collect();
        Self { closed }
    }

    /// Why `step_id`'s work waits, when it does.
    pub fn closed(&self, step_id: &str) -> Option<&str> {
        self.closed.get(step_id).map(String::as_str)
    }

    pub fn is_open(&self) -> bool {
        self.closed.is_empty()
    }

    /// The steps whose work waits.
    pub fn closed_steps(&self) -> impl Iterator<Item = &String> {
        self.closed.keys()
    }

    /// The same gate with `step_id` closed, for `why`.
    pub fn closing(&self, step_id: &str, why: &str) -> Self {
        let mut closed = self.closed.clone();
        closed.insert(step_id.to_string(), why.to_string());
        Self { closed }
    }

    /// The same gate with `step_id` open (its health was forgotten).
    pub fn opened(&self, step_id: &str) -> Self {
        let mut closed = self.closed.clone();
        closed.remove(step_id);
        Self { closed }
    }
}

/// The engine that checks `step_id` among the live `nodes`: the one whose
/// hash with the step is highest (rendezvous hashing). Every engine computes
/// the same answer from the same list, so the checks are shared out without
/// a leader, and when an engine joins or leaves only its share moves.
pub fn checker_of<'a>(step_id: &str, nodes: &'a [String]) -> Option<&'a str> {
    nodes
        .iter()
        .max_by_key(|node| (stable_hash(step_id, node), node.as_str()))
        .map(String::as_str)
}

/// FNV-1a over the two ids: the same in every build and version of the
/// engine (std's hasher may change between releases, and engines of two
/// versions must agree during an upgrade). Hand-written: eight lines, where
/// a crate would add a dependency for them.
fn stable_hash(a: &str, b: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in a.bytes().chain([0u8]).chain(b.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The health of every step of `catalog`, from the checks' results
/// (`checked`, by step): a step with a health check has its result, or
/// `unknown` until its first check; a step without one is `unknown` (no
/// check says otherwise), a script step `healthy` (its scripts compiled
/// when it was registered), and a flow step takes the health of the steps
/// its sub-flow runs: unhealthy when one is, naming it; unknown when one
/// is unknown for a reason; else healthy (Argyll's rules).
pub fn resolve(catalog: &Catalog, checked: &BTreeMap<String, HealthState>) -> BTreeMap<String, HealthState> {
    let mut resolved = BTreeMap::new();
    for id in catalog.steps().keys() {
        let health = resolve_one(catalog, checked, id, &mut BTreeSet::new());
        resolved.insert(id.clone(), health);
    }
    resolved
}

fn resolve_one(
    catalog: &Catalog,
    checked: &BTreeMap<String, HealthState>,
    id: &str,
    visiting: &mut BTreeSet<String>,
) -> HealthState {
    let Some(step) = catalog.get(id) else {
        return HealthState {
            status: HealthStatus::Unknown,
            error: Some(format!("step not found: {id}")),
        };
    };
    if step.is_script() {
        return HealthState::healthy();
    }
    if !step.is_flow() {
        return checked.get(id).cloned().unwrap_or_else(HealthState::unknown);
    }
    // Registration refuses cycles through sub-flows; this guards a catalog
    // stored before it did.
    if !visiting.insert(id.to_string()) {
        return HealthState {
            status: HealthStatus::Unknown,
            error: Some(format!("flow health cycle at step {id}")),
        };
    }
    let health = match build_plan(
        catalog,
        step.child_goals(),
        &Default::default(),
        PlanMode::Preview,
    ) {
        Err(e) => HealthState {
            status: HealthStatus::Unknown,
            error: Some(format!("flow preview failed for {id}: {e}")),
        },
        Ok(plan) => {
            let mut unknown = None;
            let mut unhealthy = None;
            for child in plan.steps.keys() {
                let h = resolve_one(catalog, checked, child, visiting);
                match (h.status, h.error) {
                    (HealthStatus::Unhealthy, error) => {
                        let why = error.unwrap_or_else(|| "unhealthy".into());
                        unhealthy = Some(format!("step {child}: {why}"));
                        break;
                    }
                    (HealthStatus::Unknown, Some(error)) if unknown.is_none() => {
                        unknown = Some(format!("step {child}: {error}"));
                    }
                    _ => {}
                }
            }
            match (unhealthy, unknown) {
                (Some(error), _) => HealthState::failed(error),
                (None, Some(error)) => HealthState {
                    status: HealthStatus::Unknown,
                    error: Some(error),
                },
                (None, None) => HealthState::healthy(),
            }
        }
    };
    visiting.remove(id);
    health
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checker_of_a_step_is_the_same_from_any_list_order_and_moves_only_with_its_node() {
        let nodes = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let reversed: Vec<String> = nodes.iter().rev().cloned().collect();
        let steps: Vec<String> = (0..200).map(|i| format!("step-{i}")).collect();
        let mut counts = BTreeMap::new();
        for s in &steps {
            let one = checker_of(s, &nodes);
            assert_eq!(one, checker_of(s, &reversed));
            *counts.entry(one.unwrap_or_default()).or_insert(0) += 1;
        }
        // Shared out: every node checks some (200 steps, three nodes).
        assert_eq!(counts.len(), 3, "{counts:?}");
        assert!(counts.values().all(|n| *n > 30), "{counts:?}");
        // Node `b` leaves: only its steps move.
        let without_b = vec!["a".to_string(), "c".to_string()];
        for s in &steps {
            let before = checker_of(s, &nodes);
            if before != Some("b") {
                assert_eq!(checker_of(s, &without_b), before, "{s}");
            }
        }
        assert_eq!(checker_of("x", &[]), None);
    }

    #[test]
    fn a_status_below_400_is_healthy() {
        assert_eq!(HealthState::of_status(204).status, HealthStatus::Healthy);
        assert_eq!(HealthState::of_status(399).status, HealthStatus::Healthy);
        let down = HealthState::of_status(503);
        assert_eq!(down.status, HealthStatus::Unhealthy);
        assert_eq!(down.error.as_deref(), Some("HTTP 503"));
    }
}
