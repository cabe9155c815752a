//! `tartan plan GOAL...`: the plan a flow would run, nothing started.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

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
    /// An initial value, name=value (repeatable; JSON when it parses, else text).
    #[arg(long = "init", value_name = "NAME=VALUE")]
    init: Vec<String>,
}

pub async fn run(args: PlanArgs) -> Result<u8, CliError> {
    let client = args.conn.client()?;
    let init = super::parse_init(&args.init)?;
    let plan = client
        .post(&["engine", "plan"], &json!({"goals": args.goals, "init": init}))
        .await?;
    if args.conn.output == Format::Json {
        output::json(&plan);
        return Ok(exit::OK);
    }
    let mut table = Table::new(&["#", "STEP", "TYPE", "INPUTS", "OUTPUTS"]);
    for (i, id) in order(&plan).iter().enumerate() {
        let step = &plan["steps"][id];
        let (inputs, outputs) = super::step::io_of(step);
        let goal = plan["goals"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g.as_str() == Some(id)));
        table.row(vec![
            (i + 1).to_string(),
            if goal { format!("{id} (goal)") } else { id.clone() },
            output::s(step, "type").into(),
            inputs.join(","),
            outputs.join(","),
        ]);
    }
    table.print();
    let required: Vec<&str> = plan["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    output::line(&format!(
        "required inputs: {}",
        if required.is_empty() {
            "none".to_string()
        } else {
            required.join(", ")
        }
    ));
    for (why, steps) in plan["excluded"].as_object().into_iter().flatten() {
        for (step, attrs) in steps.as_object().into_iter().flatten() {
            output::line(&format!("excluded {step} ({why}: {})", output::cell(attrs)));
        }
    }
    Ok(exit::OK)
}

/// A plan's steps in an order that runs each after the steps providing its
/// inputs; ties by id.
pub fn order(plan: &Value) -> Vec<String> {
    let steps: BTreeSet<String> = plan["steps"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    let mut after: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for id in &steps {
        let deps = after.entry(id).or_default();
        for (name, attr) in plan["steps"][id]["attributes"].as_object().into_iter().flatten() {
            if !matches!(output::s(attr, "role"), "required" | "optional") {
                continue;
            }
            for provider in plan["attributes"][name]["providers"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if let Some(p) = provider.as_str() {
                    if p != id && steps.contains(p) {
                        deps.insert(p.to_string());
                    }
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
