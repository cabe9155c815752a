//! Lanes as the API shows them (docs/lanes.md, "Operating").

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tartan_engine::{LaneView, LaneWait, LocalLane};
use utoipa::ToSchema;

type Time = chrono::DateTime<chrono::Utc>;

/// A lane's circuit breaker.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BreakerShown {
    /// `closed`, `open` or `half_open`.
    pub state: String,
    /// Consecutive retryable failures counted.
    pub failures: u64,
    /// Open: when its canary may go; half open: until when the canary runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub until: Option<Time>,
}

/// A lane in the engine that answers.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LaneHere {
    /// Calls of this engine going through the lane now.
    pub in_flight: u32,
    /// Calls of this engine waiting in the lane.
    pub waiting: usize,
    /// Slots of the lane this engine holds.
    pub slots_held: u32,
    /// How long the oldest waiting call has waited, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_ms: Option<u64>,
}

impl LaneHere {
    fn of(l: &LocalLane) -> LaneHere {
        LaneHere {
            in_flight: l.running,
            waiting: l.waiting,
            slots_held: l.held,
            waiting_ms: l
                .waiting_since
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        }
    }
}

/// One lane: its limits and state, across engines and here.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LaneShown {
    /// `step:<step id>` or `host:<host[:port]>`.
    pub id: String,
    /// `concurrency`, `rate`, `burst`, `breaker`, every value explicit.
    #[schema(value_type = Object)]
    pub limits: Value,
    /// Slots held by the live engines (lanes with a concurrency limit).
    pub slots_held: u64,
    /// Slots the live engines would use: beyond `slots_held`, calls wait.
    pub slots_wanted: u64,
    pub paused: bool,
    /// Absent while paused: until resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub paused_until: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_reason: Option<String>,
    /// Present when the lane has a breaker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerShown>,
    /// The lane in the engine that answered, once a call went through it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub here: Option<LaneHere>,
}

impl LaneShown {
    pub fn of(l: &LaneView) -> LaneShown {
        LaneShown {
            id: l.id.clone(),
            limits: l.limits.to_json(),
            slots_held: l.slots_held,
            slots_wanted: l.slots_wanted,
            paused: l.paused,
            paused_until: l.paused_until,
            pause_reason: l.pause_reason.clone(),
            breaker: l.limits.breaker.map(|_| BreakerShown {
                state: l.breaker.as_str().to_string(),
                failures: l.failures,
                until: l.breaker_until,
            }),
            here: l.here.as_ref().map(LaneHere::of),
        }
    }
}

/// Every lane.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LaneList {
    pub lanes: Vec<LaneShown>,
    pub count: usize,
}

/// The lane a work item's call waits in, in the engine that holds it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LaneWaitShown {
    pub id: String,
    /// Calls waiting in the lane in that engine, this one included.
    pub waiting: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_reason: Option<String>,
    /// `closed`, `open` or `half_open`.
    pub breaker: String,
}

impl LaneWaitShown {
    pub fn of(w: &LaneWait) -> LaneWaitShown {
        LaneWaitShown {
            id: w.lane.clone(),
            waiting: w.here.waiting,
            paused_ms: w
                .here
                .paused_for
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            pause_reason: w.here.pause_reason.clone(),
            breaker: w.here.breaker.as_str().to_string(),
        }
    }
}

/// `POST /engine/lanes/{id}/pause`: for how long (absent: until resumed).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LanePause {
    /// A duration (`"30s"`, `"PT1M"`, ms); absent: until resumed.
    #[serde(default, rename = "for")]
    #[schema(value_type = Option<String>)]
    pub for_: Option<Value>,
}
