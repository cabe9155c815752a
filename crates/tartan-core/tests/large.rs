//! Catalogs and plans of a size no one would write by hand: every walk over
//! the graph must be iterative and every change proportional to itself
//! (docs/api.md, "Limits"). Run on a thread with a small stack, so that
//! recursion as deep as the chain would overflow it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Instant;

use std::collections::BTreeMap;

use common::{chain_def, goals, normalized, step};
use tartan_core::catalog::{Catalog, Registration};
use tartan_core::error::CatalogError;
use tartan_core::flow::{FlowOptions, FlowState, FlowStatus};
use tartan_core::machine::{self, AttemptResult, Command, Context};
use tartan_core::plan::{build_plan, start_plan, InitArgs, PlanMode};
use tartan_core::retry::RetryDefaults;
use tartan_core::step::{Args, Step};

const SMALL_STACK: usize = 256 * 1024;

/// Step `i` of a chain consumes `a{i-1}` and outputs `a{i}`. Ids run against
/// the chain ("z" + reversed index) so that id order is the worst order.
fn chain_id(i: usize, n: usize) -> String {
    format!("z{:06}", n - i)
}

fn chain_step_def(i: usize, n: usize) -> serde_json::Value {
    let out = format!("a{i}");
    if i == 0 {
        chain_def(&chain_id(i, n), &[], &[&out])
    } else {
        let input = format!("a{}", i - 1);
        chain_def(&chain_id(i, n), &[&input], &[&out])
    }
}

fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(f)
        .unwrap()
        .join()
        .expect("the walk overflowed a 256 KiB stack or panicked")
}

/// A chain of `n` normalised steps, made by renaming one normalised
/// template (normalising 100,000 steps one by one would test serde, not the
/// graph).
fn chain_steps(n: usize) -> Vec<Step> {
    let first = normalized(chain_def("first", &[], &["a0"]));
    let next = normalized(chain_def("next", &["in"], &["out"]));
    (0..n)
        .map(|i| {
            let mut s = if i == 0 { first.clone() } else { next.clone() };
            s.id = chain_id(i, n);
            if i > 0 {
                let mut attributes = BTreeMap::new();
                attributes.insert(format!("a{}", i - 1), next.attributes["in"].clone());
                attributes.insert(format!("a{i}"), next.attributes["out"].clone());
                s.attributes = attributes;
            }
            s
        })
        .collect()
}

#[test]
fn a_100_000_step_chain_plans_and_is_checked_for_cycles_on_a_small_stack() {
    const N: usize = 100_000;
    let catalog = Catalog::new(chain_steps(N));
    assert_eq!(catalog.len(), N);
    on_small_stack(move || {
        let started = Instant::now();
        let goal = goals(&[&chain_id(N - 1, N)]);
        let plan = start_plan(&catalog, &goal, &InitArgs::new()).unwrap();
        assert_eq!(plan.steps.len(), N);
        assert!(plan.required.is_empty());
        // Without the first step's output the preview traces the whole chain
        // back to what is missing.
        let mut partial = catalog.clone();
        partial.remove(&chain_id(0, N));
        let preview = build_plan(&partial, &goal, &InitArgs::new(), PlanMode::Preview).unwrap();
        assert_eq!(preview.steps.len(), N - 1);
        assert_eq!(preview.required, vec!["a0".to_string()]);
        let planned = started.elapsed();

        // Closing the chain into a loop is refused.
        let started = Instant::now();
        let defaults = RetryDefaults::default();
        let closing = chain_def("loop", &[&format!("a{}", N - 1)], &["a0"]);
        match catalog.check_register(step(closing), &defaults) {
            Err(CatalogError::Invalid(e)) => assert!(e.message.contains("circular dependency"), "{e}"),
            other => panic!("a cycle was accepted: {other:?}"),
        }
        // One more step at the end is one step's work.
        let tail = chain_def("tail", &[&format!("a{}", N - 1)], &["end"]);
        let (tail, reg) = catalog.check_register(step(tail), &defaults).unwrap();
        assert_eq!(reg, Registration::Added);
        eprintln!(
            "{N} steps: planned twice in {planned:?}; loop refused and tail checked in {:?} ({})",
            started.elapsed(),
            tail.id
        );
    });
}

#[test]
fn a_chain_registered_backwards_is_as_cheap_and_still_refuses_a_loop() {
    const N: usize = 20_000;
    on_small_stack(|| {
        let defaults = RetryDefaults::default();
        let mut catalog = Catalog::default();
        for i in (0..N).rev() {
            let (s, _) = catalog
                .check_register(step(chain_step_def(i, N)), &defaults)
                .unwrap();
            catalog.insert(s);
        }
        let plan = start_plan(&catalog, &goals(&[&chain_id(N - 1, N)]), &InitArgs::new()).unwrap();
        assert_eq!(plan.steps.len(), N);
        // Replacing a middle step with one that needs the chain's end loops.
        let mid = N / 2;
        let looped = chain_def(
            &chain_id(mid, N),
            &[&format!("a{}", N - 1)],
            &[&format!("a{mid}")],
        );
        match catalog.check_update(step(looped), &defaults) {
            Err(CatalogError::Invalid(e)) => assert!(e.message.contains("circular dependency"), "{e}"),
            other => panic!("a cycle was accepted: {other:?}"),
        }
    });
}

/// A flow over a chain of 10,000 steps runs to the end, one call at a time:
/// each decision looks only at the steps its events concern, so the run is
/// linear in the chain, not quadratic (docs/api.md, "Limits").
#[test]
fn a_flow_over_a_10_000_step_chain_runs_to_completion() {
    const N: usize = 10_000;
    let catalog = Catalog::new(chain_steps(N));
    on_small_stack(move || {
        let started = Instant::now();
        let plan = start_plan(&catalog, &goals(&[&chain_id(N - 1, N)]), &InitArgs::new()).unwrap();
        let now = chrono::Utc::now();
        let mut n = 0u64;
        let mut token = move || {
            n += 1;
            format!("t{n}")
        };
        let mut random = || 0.5;
        let mut ctx = Context {
            now,
            webhook_base: "http://127.0.0.1:9",
            new_token: &mut token,
            random: &mut random,
            max_flow_bytes: tartan_core::json::DEFAULT_MAX_FLOW_BYTES,
            script_limits: tartan_core::step::ScriptLimits::default(),
            gate: &tartan_core::health::DispatchGate::default(),
        };
        let options = FlowOptions {
            max_step_attempts: 100_000,
            ..FlowOptions::default()
        };
        let start = Command::Start {
            flow_id: "long".into(),
            plan,
            init: InitArgs::new(),
            options,
        };
        let mut tx = machine::apply(FlowState::default(), start, &mut ctx).unwrap();
        for i in 0..N {
            let calls = tx.dispatches();
            assert_eq!(calls.len(), 1, "link {i}: one call at a time");
            let call = &calls[0];
            assert_eq!(call.step_id, chain_id(i, N));
            let mut outputs = Args::new();
            outputs.insert(format!("a{i}"), serde_json::json!(i));
            let result = AttemptResult::Success {
                outputs,
                http_status: Some(200),
            };
            let record = Command::Record {
                step_id: call.step_id.clone(),
                token: call.token.clone(),
                attempt: 1,
                result,
                waited: None,
            };
            tx = machine::apply(tx.state, record, &mut ctx).unwrap();
        }
        assert_eq!(tx.state.status, FlowStatus::Completed);
        assert!(tx.dispatches().is_empty());
        eprintln!("{N} links run in {:?}", started.elapsed());
    });
}
