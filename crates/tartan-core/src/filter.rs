//! Which flows a query or a bulk job names (docs/api.md, "Flows" and "Bulk
//! operations"): one set of criteria, checked once, so that the flows page
//! of the dashboard, `POST /engine/flow/query` and a bulk job's dry run
//! count the same flows for the same filter.

use std::collections::BTreeMap;

use crate::error::ValidationError;
use crate::flow::{FlowStatus, Time};
use crate::ids::sanitize_id;
use crate::outcome::AttemptOutcome;
use crate::request::{filter_id, filter_id_prefix, filter_labels, filter_statuses};

/// How a failed item's last attempt may have ended, as a filter names it.
const ERROR_CLASSES: [AttemptOutcome; 5] = [
    AttemptOutcome::Retryable,
    AttemptOutcome::Permanent,
    AttemptOutcome::Timeout,
    AttemptOutcome::Cancelled,
    AttemptOutcome::Abandoned,
];

/// Which flows, checked: every part given must match.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowFilter {
    /// These flows (a bulk job's list; a query names none).
    pub ids: Vec<String>,
    pub id_prefix: Option<String>,
    pub labels: Vec<(String, String)>,
    /// Empty: any status.
    pub statuses: Vec<FlowStatus>,
    /// A work item of this step failed.
    pub failed_step: Option<String>,
    /// A failed work item's last attempt ended so.
    pub error_class: Option<AttemptOutcome>,
    /// Created at or after this.
    pub created_after: Option<Time>,
    /// Created before this.
    pub created_before: Option<Time>,
    /// Include child flows (ids with a `:`, docs/steps.md "Sub-flows");
    /// a bulk job never does: it acts on a child through its parent.
    pub children: bool,
}

/// The criteria as a request gives them, before checking.
#[derive(Debug, Clone, Copy)]
pub struct FilterText<'a> {
    /// Empty is none; for the rest, `None` is none.
    pub id_prefix: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub statuses: &'a [String],
    pub failed_step: Option<&'a str>,
    pub error_class: Option<&'a str>,
    pub created_after: Option<&'a str>,
    pub created_before: Option<&'a str>,
}

impl FilterText<'_> {
    /// Check each criterion; a refusal names the field as `{path}{name}`
    /// (`filter.` inside a bulk request, nothing in a query). `allowed`
    /// are the statuses the caller may name, `refused` says why another is
    /// not.
    pub fn parse(
        &self,
        path: &str,
        allowed: &[FlowStatus],
        refused: impl Fn(&str) -> String,
    ) -> Result<FlowFilter, ValidationError> {
        let field = |name: &str| format!("{path}{name}");
        let failed_step = match self.failed_step {
            Some(s) if sanitize_id(s).is_empty() => {
                return Err(ValidationError::new(field("failed_step"), "not a step id"))
            }
            Some(s) => filter_id(&field("failed_step"), Some(sanitize_id(s)))?,
            None => None,
        };
        let error_class = match self.error_class {
            None => None,
            Some(c) => match ERROR_CLASSES.iter().find(|class| class.as_str() == c) {
                Some(class) => Some(*class),
                None => {
                    let names: Vec<&str> = ERROR_CLASSES.iter().map(|c| c.as_str()).collect();
                    return Err(ValidationError::new(
                        field("error_class"),
                        format!("{c:?}; one of {}", names.join(", ")),
                    ));
                }
            },
        };
        Ok(FlowFilter {
            ids: Vec::new(),
            id_prefix: filter_id_prefix(&field("id_prefix"), self.id_prefix)?,
            labels: filter_labels(&field("labels"), self.labels.clone())?,
            statuses: filter_statuses(&field("statuses"), self.statuses, allowed, refused)?,
            failed_step,
            error_class,
            created_after: time(&field("created_after"), self.created_after)?,
            created_before: time(&field("created_before"), self.created_before)?,
            children: false,
        })
    }
}

/// An RFC 3339 time.
fn time(field: &str, text: Option<&str>) -> Result<Option<Time>, ValidationError> {
    text.map(|t| {
        chrono::DateTime::parse_from_rfc3339(t)
            .map(|t| t.with_timezone(&chrono::Utc))
            .map_err(|e| ValidationError::new(field, format!("{t:?} is not an RFC 3339 time ({e})")))
    })
    .transpose()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn text<'a>(labels: &'a BTreeMap<String, String>, statuses: &'a [String]) -> FilterText<'a> {
        FilterText {
            id_prefix: "",
            labels,
            statuses,
            failed_step: None,
            error_class: None,
            created_after: None,
            created_before: None,
        }
    }

    const ALL: [FlowStatus; 4] = [
        FlowStatus::Active,
        FlowStatus::Completed,
        FlowStatus::Failed,
        FlowStatus::Cancelled,
    ];

    #[test]
    fn no_criteria_is_every_flow() {
        let labels = BTreeMap::new();
        let f = text(&labels, &[]).parse("", &ALL, |s| s.to_string()).unwrap();
        assert_eq!(f, FlowFilter::default());
    }

    #[test]
    fn refusals_name_the_field_under_its_path() {
        let labels = BTreeMap::new();
        let bad_class = FilterText {
            error_class: Some("flaky"),
            ..text(&labels, &[])
        };
        let e = bad_class.parse("filter.", &ALL, |s| s.to_string()).unwrap_err();
        assert_eq!(e.field, "filter.error_class");
        assert!(e.to_string().contains("retryable, permanent, timeout"), "{e}");
        let bad_time = FilterText {
            created_before: Some("yesterday"),
            ..text(&labels, &[])
        };
        let e = bad_time.parse("", &ALL, |s| s.to_string()).unwrap_err();
        assert_eq!(e.field, "created_before");
        let bad_step = FilterText {
            failed_step: Some("///"),
            ..text(&labels, &[])
        };
        let e = bad_step.parse("", &ALL, |s| s.to_string()).unwrap_err();
        assert_eq!(e.field, "failed_step");
    }

    #[test]
    fn criteria_are_typed() {
        let labels = BTreeMap::from([("team".to_string(), "web".to_string())]);
        let statuses = ["failed".to_string()];
        let f = FilterText {
            id_prefix: "Order-",
            failed_step: Some("Charge Card"),
            error_class: Some("timeout"),
            created_after: Some("2026-11-27T10:00:00+01:00"),
            ..text(&labels, &statuses)
        }
        .parse("", &ALL, |s| s.to_string())
        .unwrap();
        assert_eq!(f.id_prefix.as_deref(), Some("order-"));
        assert_eq!(f.labels, vec![("team".to_string(), "web".to_string())]);
        assert_eq!(f.statuses, vec![FlowStatus::Failed]);
        assert_eq!(f.failed_step.as_deref(), Some("charge-card"));
        assert_eq!(f.error_class, Some(AttemptOutcome::Timeout));
        assert_eq!(
            f.created_after.map(|t| t.to_rfc3339()),
            Some("2026-11-27T09:00:00+00:00".to_string())
        );
    }
}
