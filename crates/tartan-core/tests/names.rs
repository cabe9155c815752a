//! The names the core's enums give with `as_str` (and read with `parse`)
//! are serde's: the store's columns, metric labels and log fields say what
//! the API says.

use serde::Serialize;
use strum::IntoEnumIterator;
use tartan_core::flow::{FlowStatus, StepStatus, WorkStatus};
use tartan_core::health::HealthStatus;
use tartan_core::outcome::{AttemptOutcome, FailureClass};
use tartan_core::retry::{BackoffType, Jitter, RetryState};
use tartan_core::timeouts::{OnTimeout, TimeoutScope};

/// Every variant of `E`: its `name` is its serde name.
fn names_are_serdes<E: IntoEnumIterator + Serialize + Copy + std::fmt::Debug>(
    name: impl Fn(E) -> &'static str,
) {
    let mut seen = 0;
    for v in E::iter() {
        assert_eq!(serde_json::json!(v), serde_json::json!(name(v)), "{v:?}");
        seen += 1;
    }
    assert!(seen >= 2, "{seen} variants");
}

#[test]
fn every_as_str_is_the_serde_name() {
    names_are_serdes(FlowStatus::as_str);
    names_are_serdes(StepStatus::as_str);
    names_are_serdes(WorkStatus::as_str);
    names_are_serdes(HealthStatus::as_str);
    names_are_serdes(OnTimeout::as_str);
    names_are_serdes(TimeoutScope::as_str);
    names_are_serdes(BackoffType::as_str);
    names_are_serdes(Jitter::as_str);
    names_are_serdes(RetryState::as_str);
    names_are_serdes(FailureClass::as_str);
    names_are_serdes(AttemptOutcome::as_str);
}

#[test]
fn parse_reads_what_as_str_writes_and_nothing_else() {
    for v in FlowStatus::iter() {
        assert_eq!(FlowStatus::parse(v.as_str()), Some(v));
    }
    for v in WorkStatus::iter() {
        assert_eq!(WorkStatus::parse(v.as_str()), Some(v));
    }
    for v in HealthStatus::iter() {
        assert_eq!(HealthStatus::parse(v.as_str()), Some(v));
    }
    assert_eq!(FlowStatus::parse("Active"), None);
    assert_eq!(WorkStatus::parse("notcompleted"), None);
    assert_eq!(HealthStatus::parse(""), None);
}
