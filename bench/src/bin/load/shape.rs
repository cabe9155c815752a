//! The flow shapes the in-process load runs: their steps, goal and inputs.

use clap::ValueEnum;
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum Shape {
    /// Three sync steps a → b → c.
    Chain,
    /// A for_each step over 10 elements, then a step over their aggregate.
    Fanout,
    /// One step failing twice with 503 before succeeding (fixed 50 ms backoff).
    Retry,
}

/// Elements of the fan-out.
pub(super) const FAN: usize = 10;

impl Shape {
    pub(super) fn name(self) -> &'static str {
        match self {
            Shape::Chain => "chain",
            Shape::Fanout => "fanout",
            Shape::Retry => "retry",
        }
    }

    /// The steps to register; each endpoint's last path segment is the
    /// output the step server answers.
    pub(super) fn steps(self, base: &str) -> Vec<Value> {
        let sync = |id: &str, input: &str, output: &str| {
            json!({
                "id": id, "name": id, "type": "sync",
                "http": {"endpoint": format!("{base}/{output}")},
                "attributes": {input: {"role": "required"}, output: {"role": "output"}}
            })
        };
        match self {
            Shape::Chain => vec![sync("a", "seed", "a"), sync("b", "a", "b"), sync("c", "b", "c")],
            Shape::Fanout => vec![
                json!({
                    "id": "fan", "name": "fan", "type": "sync",
                    "http": {"endpoint": format!("{base}/part")},
                    "attributes": {
                        "items": {"role": "required", "type": "array", "required": {"for_each": true}},
                        "part": {"role": "output"}
                    },
                    "work_config": {"parallelism": FAN}
                }),
                sync("sum", "part", "total"),
            ],
            Shape::Retry => {
                let mut step = sync("flaky", "seed", "flaky");
                step["work_config"] = json!({
                    "backoff_type": "fixed", "init_backoff": 50, "max_backoff": 50,
                    "max_retries": 3, "jitter": "none"
                });
                vec![step]
            }
        }
    }

    pub(super) fn goal(self) -> &'static str {
        match self {
            Shape::Chain => "c",
            Shape::Fanout => "sum",
            Shape::Retry => "flaky",
        }
    }

    pub(super) fn init(self, i: u64) -> Value {
        match self {
            Shape::Fanout => json!({"items": [(0..FAN).collect::<Vec<_>>()]}),
            Shape::Chain | Shape::Retry => json!({"seed": [i]}),
        }
    }

    pub(super) fn steps_per_flow(self) -> u64 {
        match self {
            Shape::Chain => 3,
            Shape::Fanout => 2,
            Shape::Retry => 1,
        }
    }

    /// Calls of each receipt token the step server answers with 503.
    pub(super) fn failures_first(self) -> usize {
        match self {
            Shape::Retry => 2,
            Shape::Chain | Shape::Fanout => 0,
        }
    }
}
