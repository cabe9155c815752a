//! Flow start and plan requests, and the filters that find flows again:
//! shape, id sanitising and limits (docs/api.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::concurrency::{check_priority, Concurrency};
use crate::error::{check_key, check_labels, check_len, ValidationError};
use crate::flow::{FlowOptions, FlowStatus, Time};
use crate::ids::{is_dot_id, is_valid_id_prefix, sanitize_id, shown_key, MAX_FLOW_ID_LEN, MAX_ID_LEN};
use crate::plan::InitArgs;
use crate::timeouts::{parse_flow_timeout, OnTimeout};

pub const MAX_GOALS: usize = 64;
pub const MAX_INIT_KEYS: usize = 128;
pub const MAX_LABELS: usize = 32;
/// Labels one filter may name (a query, a bulk job's filter): as many as a
/// flow may carry. Each is one more condition on the query the database
/// runs, so their number is bounded, not left to the body's size.
pub const MAX_FILTER_LABELS: usize = MAX_LABELS;
/// Statuses one filter may list: a flow has four, so more can only repeat
/// them (each is a parameter of the database's query).
pub const MAX_FILTER_STATUSES: usize = 4;
/// Longest cursor accepted: a time and a flow id (`<micros>.<id>`).
pub const MAX_CURSOR_LEN: usize = 32 + MAX_ID_LEN;

/// `POST /engine/flow`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StartFlow {
    // `id` and `goals` are required: an absent one is refused by `parse`,
    // with a 400 naming it, rather than by the JSON's shape.
    /// The flow's id, sanitised; required.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required, max_length = 256))]
    pub id: String,
    /// The steps whose completion is the point of the flow; required.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required, min_items = 1, max_items = 64))]
    pub goals: Vec<String>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, Vec<Value>>))]
    pub init: InitArgs,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Bounds the whole flow: a duration, or `{"after": duration, "on_timeout": "error"|"cancel"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<serde_json::Value>,
    /// Bounds the whole flow by an absolute time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<serde_json::Value>,
    /// Cap on the attempts of all work items together; the engine default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_step_attempts: Option<u32>,
    /// A delayed start: no step starts before this time (RFC 3339). A time
    /// already past starts the flow at once. Not with `start_in`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub start_at: Option<serde_json::Value>,
    /// A delayed start: no step starts before this duration has passed (any
    /// duration form). Not with `start_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "10m"))]
    pub start_in: Option<serde_json::Value>,
    /// A concurrency key: at most `limit` flows with `key` run at once,
    /// across every engine; the others wait their turn (docs/concurrency.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<Concurrency>,
    /// Higher goes first wherever flows and their calls wait: call slots,
    /// lanes, concurrency keys; each point is worth a second of waiting
    /// (docs/concurrency.md, "Priority"). -1000 to 1000, default 0.
    #[serde(default, skip_serializing_if = "crate::concurrency::is_default_priority")]
    #[cfg_attr(feature = "openapi", schema(minimum = -1000, maximum = 1000))]
    pub priority: i32,
}

/// How far ahead a flow's start may be put off (`start_at`, `start_in`):
/// a waiting flow is a row and a timer, but a start years ahead is more
/// likely a mistake than a plan (docs/schedules.md, "Delayed starts").
pub const MAX_START_DELAY_DAYS: i64 = 366;

/// A start request, parsed and checked: what the engine starts.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowStart {
    pub id: String,
    pub goals: Vec<String>,
    pub init: InitArgs,
    pub options: FlowOptions,
    /// The normalised request as JSON text: a repeated start with the same
    /// id is accepted when its text is the same.
    pub text: String,
}

/// `POST /engine/plan`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanRequest {
    /// The goal steps; required.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required, min_items = 1, max_items = 64))]
    pub goals: Vec<String>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, Vec<Value>>))]
    pub init: InitArgs,
}

impl StartFlow {
    /// Parse the request into what is started, in one step: ids sanitised,
    /// limits checked, the attempt cap (the engine's `cap` unless the
    /// request lowers it; it may not raise it, docs/retries.md), and the
    /// deadline measured from `now`, the flow's start.
    pub fn parse(self, now: Time, cap: u32) -> Result<FlowStart, ValidationError> {
        let request = self.normalize()?;
        if let Some(asked) = request.max_step_attempts.filter(|n| *n > cap) {
            return Err(ValidationError::new(
                "max_step_attempts",
                format!("{asked} is above this engine's cap of {cap} (TARTAN_MAX_STEP_ATTEMPTS)"),
            ));
        }
        // A delayed flow's timeout counts from its start.
        let starts_at = request.starts_at(now)?;
        let (deadline_at, on_timeout) = request.deadline(starts_at.unwrap_or(now))?;
        let text = serde_json::to_string(&request)
            .map_err(|e| ValidationError::new("request", format!("cannot be written back: {e}")))?;
        Ok(FlowStart {
            options: FlowOptions {
                labels: request.labels,
                max_step_attempts: request.max_step_attempts.unwrap_or(cap),
                deadline_at,
                on_timeout,
                trace: None,
                parent: None,
                starts_at,
                concurrency: request.concurrency,
                priority: request.priority,
            },
            id: request.id,
            goals: request.goals,
            init: request.init,
            text,
        })
    }

    /// Sanitise ids and check the limits.
    fn normalize(mut self) -> Result<Self, ValidationError> {
        self.id = sanitize_id(&self.id);
        if self.id.is_empty() {
            return Err(ValidationError::new("id", "flow ID empty"));
        }
        if is_dot_id(&self.id) {
            return Err(ValidationError::new(
                "id",
                format!(
                    "flow ID {:?} is refused: it would be a relative path segment",
                    self.id
                ),
            ));
        }
        if self.id.len() > MAX_FLOW_ID_LEN {
            return Err(ValidationError::too_long("id", &self.id));
        }
        self.goals = goals(self.goals)?;
        check_init(&self.init)?;
        if self.labels.len() > MAX_LABELS {
            return Err(ValidationError::new(
                "labels",
                format!("too many labels: maximum is {MAX_LABELS}"),
            ));
        }
        check_labels("labels", &self.labels)?;
        if self.max_step_attempts == Some(0) {
            return Err(ValidationError::new("max_step_attempts", "must be at least 1"));
        }
        if let Some(c) = &self.concurrency {
            c.check()?;
        }
        check_priority(self.priority)?;
        Ok(self)
    }

    /// When a delayed flow starts (`start_at` or `start_in`, measured from
    /// `now`); `None` when it starts now, a `start_at` already past included.
    fn starts_at(&self, now: Time) -> Result<Option<Time>, ValidationError> {
        let at = self.start_at.as_ref().filter(|v| !v.is_null());
        let within = self.start_in.as_ref().filter(|v| !v.is_null());
        let (field, at) = match (at, within) {
            (Some(_), Some(_)) => {
                return Err(ValidationError::new(
                    "start_in",
                    "give start_at or start_in, not both",
                ))
            }
            (Some(v), None) => ("start_at", time_value("start_at", v)?),
            (None, Some(v)) => {
                let delay = crate::duration::parse_duration(v, crate::duration::DurationKind::Delay)
                    .map_err(|e| ValidationError::new("start_in", e.to_string()))?;
                let at = chrono::Duration::from_std(delay)
                    .ok()
                    .and_then(|d| now.checked_add_signed(d))
                    .ok_or_else(|| ValidationError::new("start_in", "too far in the future"))?;
                ("start_in", at)
            }
            (None, None) => return Ok(None),
        };
        if at - now > chrono::Duration::days(MAX_START_DELAY_DAYS) {
            return Err(ValidationError::new(
                field,
                format!("a flow's start may be put off by at most {MAX_START_DELAY_DAYS} days"),
            ));
        }
        Ok((at > now).then_some(at))
    }

    /// The flow's deadline and what it does, from `timeout` and `deadline_at`
    /// (the earlier wins when both are given). `now` is the start time.
    fn deadline(&self, now: Time) -> Result<(Option<Time>, Option<OnTimeout>), ValidationError> {
        let mut deadline: Option<Time> = None;
        let mut on_timeout = None;
        if let Some(v) = self.timeout.as_ref().filter(|v| !v.is_null()) {
            let (after_ms, on) = parse_flow_timeout(v)?;
            let after = chrono::Duration::milliseconds(i64::try_from(after_ms).unwrap_or(i64::MAX));
            let at = now
                .checked_add_signed(after)
                .ok_or_else(|| ValidationError::new("timeout", "too far in the future"))?;
            deadline = Some(at);
            on_timeout = Some(on);
        }
        if let Some(v) = self.deadline_at.as_ref().filter(|v| !v.is_null()) {
            let at = time_value("deadline_at", v)?;
            if at <= now {
                return Err(ValidationError::new(
                    "deadline_at",
                    format!("{v} is not after the flow's start (now, or its start_at or start_in)"),
                ));
            }
            deadline = Some(deadline.map_or(at, |d| d.min(at)));
        }
        Ok((deadline, on_timeout))
    }
}

/// An RFC 3339 time given as `field`.
pub(crate) fn time_value(field: &str, v: &serde_json::Value) -> Result<Time, ValidationError> {
    let text = v
        .as_str()
        .ok_or_else(|| ValidationError::new(field, "must be an RFC 3339 time string"))?;
    Ok(chrono::DateTime::parse_from_rfc3339(text)
        .map_err(|e| ValidationError::new(field, format!("invalid RFC 3339 time {text:?}: {e}")))?
        .with_timezone(&chrono::Utc))
}

impl PlanRequest {
    /// The request with its goals sanitised, the limits of a flow start
    /// checked: a preview takes what a start takes.
    pub fn parse(mut self) -> Result<PlanRequest, ValidationError> {
        self.goals = goals(self.goals)?;
        check_init(&self.init)?;
        Ok(self)
    }
}

/// Goal step ids, sanitised: 1 to [`MAX_GOALS`], each an id within the bound.
pub(crate) fn goals(goals: Vec<String>) -> Result<Vec<String>, ValidationError> {
    if goals.is_empty() {
        return Err(ValidationError::new(
            "goals",
            "at least one goal step is required",
        ));
    }
    if goals.len() > MAX_GOALS {
        return Err(ValidationError::new(
            "goals",
            format!("too many goals: maximum is {MAX_GOALS}"),
        ));
    }
    goals
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let id = sanitize_id(g);
            check_len(&format!("goals[{i}]"), &id)?;
            Ok(id)
        })
        .collect()
}

/// Initial inputs: at most [`MAX_INIT_KEYS`] attribute names, each within
/// the bound.
pub(crate) fn check_init(init: &InitArgs) -> Result<(), ValidationError> {
    if init.len() > MAX_INIT_KEYS {
        return Err(ValidationError::new(
            "init",
            format!("too many init keys: maximum is {MAX_INIT_KEYS}"),
        ));
    }
    init.keys().try_for_each(|name| check_key("init", name))
}

/// The labels of a filter (`{"key": "value"}`; a flow matches when it
/// carries every one): at most [`MAX_FILTER_LABELS`], keys and values not
/// empty and within [`MAX_ID_LEN`] bytes.
pub fn filter_labels(
    field: &str,
    labels: BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, ValidationError> {
    if labels.len() > MAX_FILTER_LABELS {
        return Err(ValidationError::new(
            field,
            format!(
                "{} labels, more than the {MAX_FILTER_LABELS} a filter may name",
                labels.len()
            ),
        ));
    }
    if labels.iter().any(|(k, v)| k.is_empty() || v.is_empty()) {
        return Err(ValidationError::new(field, "keys and values must not be empty"));
    }
    check_labels(field, &labels)?;
    Ok(labels.into_iter().collect())
}

/// The statuses of a filter (a flow matches when it is in any): at most
/// [`MAX_FILTER_STATUSES`], each one of `allowed`, repeats dropped.
/// `refused` says why a status that is not allowed is refused.
pub fn filter_statuses(
    field: &str,
    given: &[String],
    allowed: &[FlowStatus],
    refused: impl Fn(&str) -> String,
) -> Result<Vec<FlowStatus>, ValidationError> {
    if given.len() > MAX_FILTER_STATUSES {
        return Err(ValidationError::new(
            field,
            format!(
                "{} statuses, more than the {MAX_FILTER_STATUSES} a filter may list (each status once)",
                given.len()
            ),
        ));
    }
    let mut statuses = Vec::with_capacity(given.len());
    for text in given {
        match FlowStatus::parse(text) {
            Some(status) if allowed.contains(&status) => {
                if !statuses.contains(&status) {
                    statuses.push(status);
                }
            }
            _ => return Err(ValidationError::new(field, refused(&shown_key(text)))),
        }
    }
    Ok(statuses)
}

/// An id prefix of a filter, lower-cased: characters an id may carry, at
/// most [`MAX_ID_LEN`] bytes; empty is none.
pub fn filter_id_prefix(field: &str, prefix: &str) -> Result<Option<String>, ValidationError> {
    if !is_valid_id_prefix(prefix) {
        return Err(ValidationError::new(field, "invalid ID prefix"));
    }
    check_len(field, prefix)?;
    Ok((!prefix.is_empty()).then(|| prefix.to_lowercase()))
}

/// An id a filter names (a flow, a step), at most [`MAX_ID_LEN`] bytes;
/// empty is none.
pub fn filter_id(field: &str, id: Option<String>) -> Result<Option<String>, ValidationError> {
    match id.filter(|id| !id.is_empty()) {
        Some(id) => {
            check_len(field, &id)?;
            Ok(Some(id))
        }
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(body: serde_json::Value) -> Result<FlowStart, ValidationError> {
        let request: StartFlow =
            serde_json::from_value(body).map_err(|e| ValidationError::new("", e.to_string()))?;
        request.parse(chrono::Utc::now(), 1000)
    }

    fn field_of(result: Result<FlowStart, ValidationError>) -> String {
        match result {
            Ok(_) => "accepted".into(),
            Err(e) => e.field,
        }
    }

    #[test]
    fn every_identifier_of_a_start_is_bounded() {
        let at_most = "a".repeat(MAX_ID_LEN);
        let over = "a".repeat(MAX_ID_LEN + 1);
        let ok = serde_json::json!({"id": at_most, "goals": [at_most], "init": {at_most.clone(): [1]},
            "labels": {at_most.clone(): at_most}});
        assert_eq!(field_of(start(ok)), "accepted");
        for (body, field) in [
            (serde_json::json!({"id": over, "goals": ["g"]}), "id".to_string()),
            (
                serde_json::json!({"id": "f", "goals": ["g", over]}),
                "goals[1]".to_string(),
            ),
            (
                serde_json::json!({"id": "f", "goals": ["g"], "init": {over.clone(): [1]}}),
                format!("init.{}…", "a".repeat(32)),
            ),
            (
                serde_json::json!({"id": "f", "goals": ["g"], "labels": {over.clone(): "v"}}),
                format!("labels.{}…", "a".repeat(32)),
            ),
            (
                serde_json::json!({"id": "f", "goals": ["g"], "labels": {"team": over}}),
                "labels.team".to_string(),
            ),
        ] {
            assert_eq!(field_of(start(body)), field);
        }
    }

    #[test]
    fn a_plan_request_is_bounded_as_a_start() {
        let over = "a".repeat(MAX_ID_LEN + 1);
        let plan = |body: serde_json::Value| {
            serde_json::from_value::<PlanRequest>(body)
                .map_err(|e| ValidationError::new("", e.to_string()))
                .and_then(PlanRequest::parse)
                .map(|p| p.goals)
                .map_err(|e| e.field)
        };
        assert_eq!(
            plan(serde_json::json!({"goals": ["My Goal"]})),
            Ok(vec!["my-goal".to_string()])
        );
        assert_eq!(plan(serde_json::json!({"goals": []})), Err("goals".to_string()));
        assert_eq!(
            plan(serde_json::json!({"goals": [over]})),
            Err("goals[0]".to_string())
        );
        let goals: Vec<String> = (0..=MAX_GOALS).map(|i| format!("g{i}")).collect();
        assert_eq!(
            plan(serde_json::json!({"goals": goals})),
            Err("goals".to_string())
        );
    }

    #[test]
    fn filters_are_bounded_and_typed() {
        let labels: BTreeMap<String, String> = (0..=MAX_FILTER_LABELS)
            .map(|i| (format!("k{i}"), "v".to_string()))
            .collect();
        let e = filter_labels("labels", labels).err().map(|e| e.message);
        assert!(e.is_some_and(|m| m.contains("more than the 32")));
        let long: BTreeMap<String, String> = [("k".to_string(), "v".repeat(MAX_ID_LEN + 1))].into();
        assert_eq!(
            filter_labels("filter.labels", long).map_err(|e| e.field),
            Err("filter.labels.k".into())
        );
        let all = [FlowStatus::Active, FlowStatus::Failed];
        let named = |given: &[&str]| {
            let given: Vec<String> = given.iter().map(|s| s.to_string()).collect();
            filter_statuses("statuses", &given, &all, |s| format!("no {s}"))
        };
        assert_eq!(
            named(&["failed", "failed", "active"]),
            Ok(vec![FlowStatus::Failed, FlowStatus::Active])
        );
        assert_eq!(
            named(&["completed"]).map_err(|e| e.message),
            Err("no completed".into())
        );
        let many = named(&["active"; MAX_FILTER_STATUSES + 1]).map_err(|e| e.message);
        assert!(many.is_err_and(|m| m.contains("more than the 4")));
        assert_eq!(filter_id_prefix("id_prefix", "Ab-"), Ok(Some("ab-".into())));
        assert_eq!(filter_id_prefix("id_prefix", ""), Ok(None));
        assert!(filter_id_prefix("id_prefix", &"a".repeat(MAX_ID_LEN + 1)).is_err());
        assert_eq!(filter_id("step", Some(String::new())), Ok(None));
        assert!(filter_id("step", Some("s".repeat(MAX_ID_LEN + 1))).is_err());
    }
}
