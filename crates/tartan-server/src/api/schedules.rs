//! Schedules as the API shows them (docs/schedules.md).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tartan_core::schedule::ScheduleRequest;
use tartan_engine::{FireView, ScheduleView, Triggered};
use utoipa::ToSchema;

/// A schedule: as given, its state, its next fire times and last fires.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ScheduleShown {
    pub id: String,
    /// The schedule as given (sanitised); `PUT` takes it back.
    pub spec: ScheduleRequest,
    pub paused: bool,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: DateTime<Utc>,
    /// The next five fire times; empty while paused or once none is left.
    #[schema(value_type = Vec<String>)]
    pub next: Vec<DateTime<Utc>>,
    /// A fire kept by `overlap: buffer_one`: it starts when the running flow ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub buffered: Option<DateTime<Utc>>,
    /// The last fire made, its flow and that flow's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<LastFireShown>,
    /// The latest fires, newest first (`GET /engine/schedule/{id}` only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fires: Vec<FireShown>,
}

/// The last fire of a schedule.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LastFireShown {
    #[schema(value_type = String, format = DateTime)]
    pub at: DateTime<Utc>,
    /// `started`, `skipped`, `buffered`, `missed` or `failed`.
    pub outcome: String,
    /// The flow it started (or, when it started none, the one still running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_id: Option<String>,
    /// That flow's status (absent once the flow is deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_status: Option<String>,
}

/// One fire of a schedule.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FireShown {
    /// The fire time.
    #[schema(value_type = String, format = DateTime)]
    pub at: DateTime<Utc>,
    /// `started`, `skipped`, `buffered`, `missed` or `failed`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_id: Option<String>,
    /// Why it was skipped, missed or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// When an engine made it.
    #[schema(value_type = String, format = DateTime)]
    pub made_at: DateTime<Utc>,
}

/// `GET /engine/schedule`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ScheduleList {
    pub count: usize,
    pub schedules: Vec<ScheduleShown>,
}

/// `POST /engine/schedule/{id}/trigger`: what the fire came to.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TriggerAnswer {
    pub schedule_id: String,
    /// `started`, `skipped`, `buffered` or `failed`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl ScheduleShown {
    pub fn of(v: ScheduleView) -> Self {
        Self {
            id: v.spec.id.clone(),
            spec: v.spec,
            paused: v.paused,
            created_at: v.created_at,
            updated_at: v.updated_at,
            next: v.next,
            buffered: v.buffered,
            last: v.last.map(|l| LastFireShown {
                at: l.at,
                outcome: l.outcome,
                flow_id: l.flow_id,
                flow_status: l.flow_status,
            }),
            fires: v.fires.into_iter().map(FireShown::of).collect(),
        }
    }
}

impl FireShown {
    fn of(f: FireView) -> Self {
        Self {
            at: f.at,
            outcome: f.outcome,
            flow_id: f.flow_id,
            detail: f.detail,
            made_at: f.made_at,
        }
    }
}

impl TriggerAnswer {
    pub fn of(schedule_id: &str, t: Triggered) -> Self {
        Self {
            schedule_id: schedule_id.to_string(),
            outcome: t.outcome,
            flow_id: t.flow_id,
            detail: t.detail,
        }
    }
}
