//! The machine's test harness: a fixed clock, results, and the context a
//! decision is made in (tokens `tok-1`, `tok-2`, ...; randomness 0.5).

use chrono::{Duration, TimeZone, Utc};
use serde_json::Value;
use tartan_core::flow::{FlowEvent, Time};
use tartan_core::health::DispatchGate;
use tartan_core::machine::{AttemptResult, Context, Transition};
use tartan_core::step::Args;

pub const FLOW: &str = "flow-1";
pub const WEBHOOK: &str = "http://tartan.test";

/// `secs` seconds after a fixed instant.
pub fn t(secs: i64) -> Time {
    Utc.timestamp_opt(1_700_000_000, 0).single().unwrap() + Duration::seconds(secs)
}

pub fn args(value: Value) -> Args {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

pub fn ok(outputs: Value) -> AttemptResult {
    AttemptResult::Success {
        outputs: args(outputs),
        http_status: Some(200),
    }
}

pub fn types(tx: &Transition) -> Vec<&'static str> {
    tx.events.iter().map(FlowEvent::type_name).collect()
}

/// A decision's context at `at`: tokens `tok-1`, `tok-2`, ... counted in
/// `tokens`, randomness fixed at 0.5.
pub fn with_context<R>(tokens: &mut u32, at: Time, decide: impl FnOnce(&mut Context<'_>) -> R) -> R {
    with_gated_context(tokens, at, &DispatchGate::default(), decide)
}

/// `with_context`, with the steps `gate` closes unhealthy.
pub fn with_gated_context<R>(
    tokens: &mut u32,
    at: Time,
    gate: &DispatchGate,
    decide: impl FnOnce(&mut Context<'_>) -> R,
) -> R {
    let mut new_token = move || {
        *tokens += 1;
        format!("tok-{tokens}")
    };
    let mut ctx = Context {
        now: at,
        webhook_base: WEBHOOK,
        new_token: &mut new_token,
        random: &mut || 0.5,
        max_flow_bytes: tartan_core::json::DEFAULT_MAX_FLOW_BYTES,
        script_limits: tartan_core::step::ScriptLimits::default(),
        gate,
    };
    decide(&mut ctx)
}
