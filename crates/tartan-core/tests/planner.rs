//! The planner (`build_plan`, `start_plan`): from goals and initial inputs to
//! the minimal set of steps to run, after Argyll's planner.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::{catalog, chain_def, goals, init, names, sync_def};
use serde_json::json;
use tartan_core::catalog::{AttributeEdges, Catalog};
use tartan_core::error::PlanError;
use tartan_core::plan::{build_plan, start_plan, ExecutionPlan, InitArgs, PlanMode};

/// a needs `in` and gives x; b needs x and gives y; c needs y and gives z;
/// u needs `in` and gives `unrelated`.
fn chain() -> Catalog {
    catalog(vec![
        chain_def("a", &["in"], &["x"]),
        chain_def("b", &["x"], &["y"]),
        chain_def("c", &["y"], &["z"]),
        chain_def("u", &["in"], &["unrelated"]),
    ])
}

fn step_ids(plan: &ExecutionPlan) -> Vec<&str> {
    plan.steps.keys().map(String::as_str).collect()
}

#[track_caller]
fn start(catalog: &Catalog, goal_ids: &[&str], init: &InitArgs) -> ExecutionPlan {
    match start_plan(catalog, &goals(goal_ids), init) {
        Ok(plan) => plan,
        Err(e) => panic!("plan for {goal_ids:?} failed: {e}"),
    }
}

fn edges(providers: &[&str], consumers: &[&str]) -> AttributeEdges {
    AttributeEdges {
        providers: names(providers),
        consumers: names(consumers),
    }
}

#[test]
fn a_plan_holds_only_the_steps_whose_outputs_the_goal_needs_transitively() {
    let plan = start(&chain(), &["c"], &init(&[("in", json!(1))]));
    assert_eq!(step_ids(&plan), ["a", "b", "c"]);
    assert_eq!(plan.goals, ["c"]);
    assert!(plan.required.is_empty());
    assert_eq!(plan.excluded, Default::default());
}

#[test]
fn the_plan_graph_covers_only_the_planned_steps() {
    let plan = start(&chain(), &["c"], &init(&[("in", json!(1))]));
    let expected = BTreeMap::from([
        ("in".to_string(), edges(&[], &["a"])),
        ("x".to_string(), edges(&["a"], &["b"])),
        ("y".to_string(), edges(&["b"], &["c"])),
        ("z".to_string(), edges(&["c"], &[])),
    ]);
    assert_eq!(plan.attributes, expected);
}

#[test]
fn a_goal_in_the_middle_of_a_chain_does_not_pull_in_its_consumers() {
    let plan = start(&chain(), &["b"], &init(&[("in", json!(1))]));
    assert_eq!(step_ids(&plan), ["a", "b"]);
}

#[test]
fn independent_goals_are_planned_together() {
    let plan = start(&chain(), &["b", "u"], &init(&[("in", json!(1))]));
    assert_eq!(step_ids(&plan), ["a", "b", "u"]);
    assert_eq!(plan.goals, ["b", "u"]);
}

#[test]
fn a_goal_whose_outputs_are_given_is_not_run() {
    let catalog = catalog(vec![chain_def("s", &[], &["data"])]);
    let plan = start(&catalog, &["s"], &init(&[("data", json!("ready"))]));
    assert!(plan.steps.is_empty());
    assert!(plan.required.is_empty());
    assert_eq!(
        plan.excluded.satisfied,
        BTreeMap::from([("s".to_string(), names(&["data"]))])
    );
}

#[test]
fn a_goal_whose_inputs_and_outputs_are_given_is_not_run_nor_its_providers() {
    let plan = start(&chain(), &["b"], &init(&[("x", json!(1)), ("y", json!(2))]));
    assert!(plan.steps.is_empty(), "planned {:?}", step_ids(&plan));
    assert_eq!(
        plan.excluded.satisfied,
        // b is not run, so its inputs are not traced and `a` is never met.
        BTreeMap::from([("b".to_string(), names(&["y"]))])
    );
}

#[test]
fn a_provider_made_unnecessary_by_the_initial_inputs_is_excluded() {
    let plan = start(&chain(), &["c"], &init(&[("x", json!(1))]));
    assert_eq!(step_ids(&plan), ["b", "c"]);
    assert_eq!(
        plan.excluded.satisfied,
        BTreeMap::from([("a".to_string(), names(&["x"]))])
    );
    assert!(plan.required.is_empty(), "`in` is not needed once x is given");
}

#[test]
fn an_init_key_without_values_does_not_count_as_given() {
    let empty: InitArgs = BTreeMap::from([("in".to_string(), Vec::new())]);
    let err = start_plan(&chain(), &goals(&["a"]), &empty).unwrap_err();
    assert_eq!(err, PlanError::MissingInputs(names(&["in"])));
}

#[test]
fn a_missing_input_is_named_at_the_root_of_the_chain() {
    let err = start_plan(&chain(), &goals(&["c"]), &InitArgs::new()).unwrap_err();
    assert_eq!(err, PlanError::MissingInputs(names(&["in"])));
    assert_eq!(err.to_string(), "required inputs not provided: in");
}

#[test]
fn every_missing_root_input_is_named() {
    let catalog = catalog(vec![
        chain_def("a", &["in"], &["x"]),
        chain_def("b", &["x"], &["y"]),
        chain_def("goal", &["y", "w"], &["z"]),
    ]);
    let err = start_plan(&catalog, &goals(&["goal"]), &InitArgs::new()).unwrap_err();
    assert_eq!(err, PlanError::MissingInputs(names(&["in", "w"])));
}

#[test]
fn a_missing_input_of_a_goal_without_providers_is_named() {
    let err = start_plan(&chain(), &goals(&["a"]), &InitArgs::new()).unwrap_err();
    assert_eq!(err, PlanError::MissingInputs(names(&["in"])));
}

#[test]
fn unknown_goals_are_named() {
    let err = start_plan(&chain(), &goals(&["c", "nope", "zap"]), &InitArgs::new()).unwrap_err();
    assert_eq!(err.to_string(), "step not found: nope, zap");
    let err = build_plan(&chain(), &goals(&["nope"]), &InitArgs::new(), PlanMode::Preview).unwrap_err();
    assert_eq!(err.to_string(), "step not found: nope");
    // A slip names the step meant.
    let err = start_plan(&chain(), &goals(&["bb"]), &InitArgs::new()).unwrap_err();
    assert_eq!(err.to_string(), "step not found: bb (did you mean \"b\"?)");
}

#[test]
fn a_plan_needs_at_least_one_goal() {
    let err = start_plan(&chain(), &[], &InitArgs::new()).unwrap_err();
    assert_eq!(err, PlanError::NoGoals);
}

#[test]
fn an_optional_input_without_any_provider_is_not_required() {
    let catalog = catalog(vec![sync_def(
        "g",
        json!({
            "in": { "role": "required" },
            "hint": { "role": "optional" },
            "out": { "role": "output" },
        }),
    )]);
    let plan = start(&catalog, &["g"], &init(&[("in", json!(1))]));
    assert_eq!(step_ids(&plan), ["g"]);
    assert!(plan.required.is_empty());
}

#[test]
fn an_optional_input_does_not_make_its_providers_inputs_required() {
    // p could provide g's optional input but needs q, which nobody gives.
    let catalog = catalog(vec![
        chain_def("p", &["q"], &["hint"]),
        sync_def(
            "g",
            json!({
                "in": { "role": "required" },
                "hint": { "role": "optional" },
                "out": { "role": "output" },
            }),
        ),
    ]);
    let plan = start(&catalog, &["g"], &init(&[("in", json!(1))]));
    assert_eq!(step_ids(&plan), ["g"]);
    assert!(plan.required.is_empty());
    assert_eq!(
        plan.excluded.missing,
        BTreeMap::from([("p".to_string(), names(&["q"]))])
    );
}

#[test]
fn a_runnable_provider_of_an_optional_input_is_planned() {
    let catalog = catalog(vec![
        chain_def("p", &["in"], &["hint"]),
        sync_def(
            "g",
            json!({
                "in": { "role": "required" },
                "hint": { "role": "optional" },
                "out": { "role": "output" },
            }),
        ),
    ]);
    let plan = start(&catalog, &["g"], &init(&[("in", json!(1))]));
    assert_eq!(step_ids(&plan), ["g", "p"]);
}

#[test]
fn preview_lists_the_required_inputs_instead_of_failing() {
    let plan = build_plan(&chain(), &goals(&["c"]), &InitArgs::new(), PlanMode::Preview).unwrap();
    assert_eq!(plan.required, names(&["in"]));
    assert_eq!(
        step_ids(&plan),
        ["a", "b", "c"],
        "preview shows the whole path back"
    );
}

#[test]
fn a_start_mode_build_lists_the_first_unmet_input_without_failing() {
    let plan = build_plan(&chain(), &goals(&["c"]), &InitArgs::new(), PlanMode::Start).unwrap();
    assert_eq!(plan.required, names(&["y"]));
    assert_eq!(step_ids(&plan), ["c"]);
}

#[test]
fn preview_and_start_agree_when_nothing_is_missing() {
    let given = init(&[("in", json!(1))]);
    let preview = build_plan(&chain(), &goals(&["c"]), &given, PlanMode::Preview).unwrap();
    assert_eq!(preview, start(&chain(), &["c"], &given));
}

#[test]
fn a_provider_that_cannot_run_is_not_chosen_over_one_that_can() {
    // Two providers of x: a (needs `in`, given) and alt (needs `never`).
    let catalog = catalog(vec![
        chain_def("a", &["in"], &["x"]),
        chain_def("alt", &["never"], &["x"]),
        chain_def("b", &["x"], &["y"]),
    ]);
    let plan = start(&catalog, &["b"], &init(&[("in", json!(1))]));
    assert_eq!(step_ids(&plan), ["a", "b"]);
    assert_eq!(
        plan.excluded.missing,
        BTreeMap::from([("alt".to_string(), names(&["never"]))])
    );
}

// Argyll's planner (engine/pkg/plan/plan.go, `includeProviders` before
// `shouldInclude`) behaves the same way: providers are marked needed while the
// goal's inputs are walked, before it is known that the goal itself is skipped.
#[test]
fn the_providers_of_a_goal_that_is_not_run_are_not_run_either() {
    // b's output y is given, so b does not run; nothing then needs a's x.
    let plan = start(&chain(), &["b"], &init(&[("in", json!(1)), ("y", json!(2))]));
    assert!(plan.steps.is_empty(), "planned {:?}", step_ids(&plan));
}

#[test]
fn a_goal_whose_outputs_are_given_needs_none_of_its_inputs() {
    let plan = start(&chain(), &["b"], &init(&[("y", json!(2))]));
    assert!(plan.steps.is_empty(), "planned {:?}", step_ids(&plan));
    assert_eq!(plan.excluded.satisfied.get("b"), Some(&names(&["y"])));
}

// ---------------------------------------------------------------------------
// Memo identity (docs/steps.md, "Memoization")

/// A memoizable flow step `id` running `goals`, needing `in`, giving `out`.
fn flow_def(id: &str, goals: &[&str]) -> serde_json::Value {
    json!({
        "id": id, "name": id, "type": "flow", "memoizable": true,
        "flow": {"goals": goals},
        "attributes": {"in": {"role": "required"}, "out": {"role": "output"}},
    })
}

fn memo_definition(catalog: &Catalog, goal: &str) -> serde_json::Value {
    let plan = start(catalog, &[goal], &init(&[("in", json!(1))]));
    let step = plan.steps.get(goal).and_then(|s| s.memo_definition());
    let child = plan.children.get(goal).and_then(ExecutionPlan::memo_definition);
    json!({"step": step, "child": child})
}

#[test]
fn a_steps_memo_definition_holds_its_id_and_what_decides_its_answer() {
    let def = |id: &str, name: &str, endpoint: &str| {
        let mut d = chain_def(id, &["in"], &["out"]);
        d["name"] = json!(name);
        d["http"]["endpoint"] = json!(endpoint);
        d["memoizable"] = json!(true);
        common::normalized(d).memo_definition()
    };
    let base = def("a", "A", "http://svc.test/x");
    assert!(base.is_some());
    assert_eq!(base, def("a", "Another name", "http://svc.test/x"));
    assert_ne!(base, def("b", "A", "http://svc.test/x"), "another step");
    assert_ne!(base, def("a", "A", "http://svc.test/y"), "another endpoint");
}

#[test]
fn a_flow_steps_memo_definition_holds_its_goals_and_its_sub_flows_steps() {
    let leaves = || {
        vec![
            chain_def("cheap", &["in"], &["out"]),
            chain_def("dear", &["in"], &["out"]),
        ]
    };
    let with = |flow: serde_json::Value, mut steps: Vec<serde_json::Value>| {
        steps.push(flow);
        catalog(steps)
    };
    let base = memo_definition(&with(flow_def("f", &["cheap"]), leaves()), "f");
    assert_ne!(
        base,
        memo_definition(&with(flow_def("f", &["dear"]), leaves()), "f"),
        "other goals"
    );
    let mut changed = leaves();
    changed[0]["http"]["endpoint"] = json!("http://svc.test/elsewhere");
    assert_ne!(
        base,
        memo_definition(&with(flow_def("f", &["cheap"]), changed), "f"),
        "a step of the sub-flow changed"
    );
    assert_eq!(
        base,
        memo_definition(&with(flow_def("f", &["cheap"]), leaves()), "f")
    );
}
