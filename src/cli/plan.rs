//! `tartan plan GOAL...`: the plan a flow would run, nothing started.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;
use tartan_core::plan::ExecutionPlan;

use super::client::{exit, CliError};
use super::output::{self, Format, Table};
use super::Conn;

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    #[command(flatten)]
    conn: Conn,
    /// The goal steps.
    #[arg(required = true)]
    goals: Vec<String>,
    /// An initial value, name=value (repeatable; JSON when it parses, else text; one starting with {, [ or " must be JSON).
    #[arg(long = "init", value_name = "NAME=VALUE")]
    init: Vec<String>,
}

pub async fn run(args: PlanArgs) -> Result<u8, CliError> {
    let client = args.conn.client()?;
    let init = super::parse_init(&args.init)?;
    let body = client
        .post(&["engine", "plan"], &json!({"goals": args.goals, "init": init}))
        .await?;
    if args.conn.output == Format::Json {
        output::json(&body);
        return Ok(exit::OK);
    }
    let plan: ExecutionPlan = client.typed(body)?;
    let mut table = Table::new(&["#", "STEP", "TYPE", "INPUTS", "OUTPUTS"]);
    for (i, id) in order(&plan).iter().enumerate() {
        let Some(step) = plan.steps.get(id) else { continue };
        let (inputs, outputs) = super::step::io_of(step);
        let goal = plan.goals.contains(id);
        table.row(vec![
            (i + 1).to_string(),
            if goal { format!("{id} (goal)") } else { id.clone() },
            step.step_type.clone(),
            inputs.join(","),
            outputs.join(","),
        ]);
    }
    table.print();
    output::line(&format!(
        "required inputs: {}",
        if plan.required.is_empty() {
            "none".to_string()
        } else {
            plan.required.join(", ")
        }
    ));
    // In the order the server writes them.
    let excluded = &plan.excluded;
    for (why, steps) in [
        ("satisfied", &excluded.satisfied),
        ("blocked", &excluded.blocked),
        ("missing", &excluded.missing),
    ] {
        for (step, attrs) in steps {
            output::line(&format!("excluded {step} ({why}: {})", json!(attrs)));
        }
    }
    Ok(exit::OK)
}

/// A plan's steps in an order that runs each after the steps providing its
/// inputs; ties by id.
pub fn order(plan: &ExecutionPlan) -> Vec<String> {
    let steps: BTreeSet<String> = plan.steps.keys().cloned().collect();
    let mut after: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (id, step) in &plan.steps {
        let deps = after.entry(id.as_str()).or_default();
        for (name, attr) in &step.attributes {
            if !matches!(attr.role.as_str(), "required" | "optional") {
                continue;
            }
            let providers = plan.attributes.get(name).map(|a| a.providers.as_slice());
            for p in providers.unwrap_or_default() {
                if p != id && steps.contains(p) {
                    deps.insert(p.clone());
                }
            }
        }
    }
    let mut done: Vec<String> = Vec::new();
    let mut left: BTreeSet<&String> = steps.iter().collect();
    while !left.is_empty() {
        let ready: Vec<&String> = left
            .iter()
            .copied()
            .filter(|id| {
                after
                    .get(id.as_str())
                    .is_none_or(|d| d.iter().all(|d| done.contains(d)))
            })
            .collect();
        // A cycle cannot be registered; should one appear, list the rest as is.
        let take = if ready.is_empty() {
            left.iter().copied().collect()
        } else {
            ready
        };
        for id in take {
            left.remove(id);
            done.push(id.clone());
        }
    }
    done
}
