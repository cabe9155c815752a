//! A schedule as a client sends it (`POST /engine/schedule`), and its
//! checks: each refusal names its field.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{parse_cron, parse_timezone, Catchup, Overlap, Schedule, When, MAX_JITTER, MIN_EVERY};
use crate::duration::{parse_duration, DurationKind};
use crate::error::{check_labels, ValidationError};
use crate::flow::Time;
use crate::ids::{is_dot_id, sanitize_id};
use crate::plan::InitArgs;
use crate::request::{check_init, goals, time_value, MAX_LABELS};

/// The longest schedule id: its flows' ids add the fire time to it.
pub const MAX_SCHEDULE_ID_LEN: usize = 200;

/// A schedule: when it fires (one of `cron`, `every`, `at`), what it
/// starts, and what it does about overlaps and missed times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScheduleRequest {
    /// The schedule's id, sanitised as a flow's; required.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(required, max_length = 200, example = "nightly-report")
    )]
    pub id: String,
    /// Five fields (minute hour day-of-month month day-of-week), six with
    /// seconds first, or `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = "0 3 * * *"))]
    pub cron: Option<String>,
    /// A period, at least 1 s, in any duration form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "15m"))]
    pub every: Option<Value>,
    /// One time (RFC 3339), in the future.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub at: Option<Value>,
    /// The IANA time zone `cron` is read in; UTC when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = "Europe/Berlin"))]
    pub timezone: Option<String>,
    /// What each fire starts.
    #[serde(default)]
    pub flow: ScheduleFlow,
    /// `skip` (default), `allow`, `cancel_previous` or `buffer_one`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<String>,
    /// `latest` (default), `none` or `all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catchup: Option<String>,
    /// Each fire is made up to this much after its time (the same for
    /// every engine); at most 1 h, and less than `every`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "30s"))]
    pub jitter: Option<Value>,
    /// Created paused: nothing fires until it is resumed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// No fire after this time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub end_at: Option<Value>,
}

/// The flow a schedule starts: a start request without an id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScheduleFlow {
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required, min_items = 1, max_items = 64))]
    pub goals: Vec<String>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, Vec<Value>>))]
    pub init: InitArgs,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// A concurrency key for every flow it starts (docs/concurrency.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<crate::concurrency::Concurrency>,
    /// The priority of every flow it starts (docs/concurrency.md).
    #[serde(default, skip_serializing_if = "crate::concurrency::is_default_priority")]
    #[cfg_attr(feature = "openapi", schema(minimum = -1000, maximum = 1000))]
    pub priority: i32,
}

impl ScheduleRequest {
    /// The request sanitised and checked; `now` refuses an `at` or `end_at`
    /// already past when `new` (a schedule read back from the database is
    /// not refused for having fired).
    pub fn parse(mut self, now: Time, new: bool) -> Result<(Self, Schedule), ValidationError> {
        self.id = sanitize_id(&self.id);
        if self.id.is_empty() {
            return Err(ValidationError::new("id", "schedule ID empty"));
        }
        if is_dot_id(&self.id) {
            return Err(ValidationError::new(
                "id",
                "schedule ID \".\" or \"..\" is refused",
            ));
        }
        if self.id.len() > MAX_SCHEDULE_ID_LEN {
            return Err(ValidationError::new(
                "id",
                format!(
                    "{} bytes, more than {MAX_SCHEDULE_ID_LEN}: a schedule's flows add the fire time to it",
                    self.id.len()
                ),
            ));
        }
        self.flow.goals = goals(std::mem::take(&mut self.flow.goals))
            .map_err(|e| ValidationError::new(format!("flow.{}", e.field), e.message))?;
        check_init(&self.flow.init)
            .map_err(|e| ValidationError::new(format!("flow.{}", e.field), e.message))?;
        // Two labels are the schedule's own.
        if self.flow.labels.len() > MAX_LABELS - 2 {
            return Err(ValidationError::new(
                "flow.labels",
                format!(
                    "too many labels: maximum is {} (two more are the schedule's)",
                    MAX_LABELS - 2
                ),
            ));
        }
        if let Some(key) = [super::SCHEDULE_LABEL, super::SCHEDULED_AT_LABEL]
            .into_iter()
            .find(|k| self.flow.labels.contains_key(*k))
        {
            return Err(ValidationError::new(
                format!("flow.labels.{key}"),
                "is set by the schedule on every flow it starts",
            ));
        }
        check_labels("flow.labels", &self.flow.labels)?;
        if let Some(c) = &self.flow.concurrency {
            c.check()
                .map_err(|e| ValidationError::new(format!("flow.{}", e.field), e.message))?;
        }
        crate::concurrency::check_priority(self.flow.priority)
            .map_err(|e| ValidationError::new(format!("flow.{}", e.field), e.message))?;
        let timezone = parse_timezone(self.timezone.as_deref())?;
        let when = self.when(now, new)?;
        let end_at = self
            .end_at
            .as_ref()
            .filter(|v| !v.is_null())
            .map(|v| time_value("end_at", v))
            .transpose()?;
        if new && end_at.is_some_and(|end| end <= now) {
            return Err(ValidationError::new("end_at", "is not in the future"));
        }
        let overlap = choice::<Overlap>(
            "overlap",
            self.overlap.as_deref(),
            "skip, allow, cancel_previous, buffer_one",
        )?;
        let catchup = choice::<Catchup>("catchup", self.catchup.as_deref(), "latest, none, all")?;
        let jitter = match self.jitter.as_ref().filter(|v| !v.is_null()) {
            None => std::time::Duration::ZERO,
            Some(v) => parse_duration(v, DurationKind::Delay)
                .map_err(|e| ValidationError::new("jitter", e.to_string()))?,
        };
        if jitter > MAX_JITTER {
            return Err(ValidationError::new("jitter", "at most 1h"));
        }
        if let When::Every(period) = &when {
            if jitter >= *period {
                return Err(ValidationError::new("jitter", "must be less than every"));
            }
        }
        let schedule = Schedule {
            id: self.id.clone(),
            when,
            timezone,
            goals: self.flow.goals.clone(),
            init: self.flow.init.clone(),
            labels: self.flow.labels.clone(),
            concurrency: self.flow.concurrency.clone(),
            priority: self.flow.priority,
            overlap,
            catchup,
            jitter,
            paused: self.paused,
            end_at,
        };
        if new && schedule.next_after(now).is_none() {
            return Err(ValidationError::new(
                ["cron", "every", "at"]
                    .into_iter()
                    .find(|f| self.given(f))
                    .unwrap_or("cron"),
                "never fires (before end_at)",
            ));
        }
        Ok((self, schedule))
    }

    fn given(&self, field: &str) -> bool {
        match field {
            "cron" => self.cron.is_some(),
            "every" => self.every.as_ref().is_some_and(|v| !v.is_null()),
            _ => self.at.as_ref().is_some_and(|v| !v.is_null()),
        }
    }

    /// One of `cron`, `every` and `at`.
    fn when(&self, now: Time, new: bool) -> Result<When, ValidationError> {
        let given: Vec<&str> = ["cron", "every", "at"]
            .into_iter()
            .filter(|f| self.given(f))
            .collect();
        match given.as_slice() {
            ["cron"] => Ok(When::Cron(Box::new(parse_cron(
                self.cron.as_deref().unwrap_or_default(),
            )?))),
            ["every"] => {
                let v = self.every.as_ref().unwrap_or(&Value::Null);
                let period = parse_duration(v, DurationKind::Timeout)
                    .map_err(|e| ValidationError::new("every", e.to_string()))?;
                if period < MIN_EVERY {
                    return Err(ValidationError::new("every", "must be at least 1s"));
                }
                Ok(When::Every(period))
            }
            ["at"] => {
                let at = time_value("at", self.at.as_ref().unwrap_or(&Value::Null))?;
                if new && at <= now {
                    return Err(ValidationError::new("at", "is not in the future"));
                }
                Ok(When::At(at))
            }
            [] => Err(ValidationError::new("cron", "give one of cron, every or at")),
            _ => Err(ValidationError::new(
                given[1],
                format!("give one of cron, every or at, not {}", given.join(" and ")),
            )),
        }
    }
}

/// An enumerated setting, its default when absent.
fn choice<T: FromStr + Default>(
    field: &str,
    given: Option<&str>,
    allowed: &str,
) -> Result<T, ValidationError> {
    match given.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(T::default()),
        Some(text) => T::from_str(text)
            .map_err(|_| ValidationError::new(field, format!("{text:?} is not one of {allowed}"))),
    }
}
