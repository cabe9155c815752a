//! The schedules' metrics (docs/schedules.md, "Operating"): fires by what
//! they came to, and how late they were made.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// The outcomes a fire has (its label's values).
const OUTCOMES: [&str; 5] = ["started", "skipped", "buffered", "missed", "failed"];

pub(crate) struct ScheduleMetrics {
    fires: Family<OutcomeLabel, Counter>,
    lateness: Histogram,
}

impl ScheduleMetrics {
    pub(super) fn new() -> Self {
        let fires = Family::<OutcomeLabel, Counter>::default();
        // Every series from the start: a rate over them needs no first fire.
        for outcome in OUTCOMES {
            let _ = fires.get_or_create(&OutcomeLabel { outcome });
        }
        Self {
            fires,
            lateness: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
        }
    }

    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "tartan_schedule_fires",
            "Fires of schedules made by this process, by what they came to",
            self.fires.clone(),
        );
        r.register(
            "tartan_schedule_fire_lateness_seconds",
            "How long after its time (and jitter) a schedule's fire was made by this process",
            self.lateness.clone(),
        );
    }

    /// A fire made `late` after its time; `outcome` one of [`OUTCOMES`].
    pub(crate) fn fired(&self, outcome: &'static str, late: std::time::Duration) {
        let outcome = OUTCOMES.into_iter().find(|o| *o == outcome).unwrap_or("failed");
        self.fires.get_or_create(&OutcomeLabel { outcome }).inc();
        if outcome != "missed" {
            self.lateness.observe(late.as_secs_f64());
        }
    }
}
