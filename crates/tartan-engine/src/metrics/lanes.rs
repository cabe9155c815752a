//! The lanes' metrics (docs/lanes.md, "Operating"), by lane id. Lane ids
//! are step ids and configured hosts, interned and capped as step ids are.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{Interned, Present, MAX_STEP_LABELS, OTHER_STEPS};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LaneLabel {
    lane: Arc<str>,
}

pub(crate) struct LaneMetrics {
    waiting: Family<LaneLabel, Gauge>,
    in_flight: Family<LaneLabel, Gauge>,
    breaker_open: Family<LaneLabel, Gauge>,
    waited: Family<LaneLabel, Counter<f64, std::sync::atomic::AtomicU64>>,
    pauses: Family<LaneLabel, Counter>,
    lanes: Interned,
}

impl LaneMetrics {
    pub(super) fn new() -> Self {
        Self {
            waiting: Family::default(),
            in_flight: Family::default(),
            breaker_open: Family::default(),
            waited: Family::default(),
            pauses: Family::default(),
            lanes: Interned::new(MAX_STEP_LABELS, OTHER_STEPS),
        }
    }

    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "tartan_lane_waiting",
            "Calls waiting in a lane in this process",
            Present(self.waiting.clone()),
        );
        r.register(
            "tartan_lane_in_flight",
            "Calls going through a lane in this process",
            Present(self.in_flight.clone()),
        );
        r.register(
            "tartan_lane_breaker_open",
            "1 while a lane's circuit breaker is open or half open, as this process last saw it",
            Present(self.breaker_open.clone()),
        );
        r.register(
            "tartan_lane_waited_seconds",
            "Time calls of this process waited in a lane",
            Present(self.waited.clone()),
        );
        r.register(
            "tartan_lane_pauses",
            "Pauses of a lane its endpoint asked for (429 or 503 with Retry-After)",
            Present(self.pauses.clone()),
        );
    }

    fn label(&self, lane: &str) -> LaneLabel {
        LaneLabel {
            lane: self.lanes.get(lane),
        }
    }

    /// A lane's state in this process, read when the metrics are rendered.
    pub(crate) fn state(&self, lane: &str, waiting: usize, in_flight: u32, breaker_open: bool) {
        let label = self.label(lane);
        self.waiting
            .get_or_create(&label)
            .set(i64::try_from(waiting).unwrap_or(i64::MAX));
        self.in_flight.get_or_create(&label).set(i64::from(in_flight));
        self.breaker_open
            .get_or_create(&label)
            .set(i64::from(breaker_open));
    }

    /// A call waited `seconds` in `lane`.
    pub(crate) fn waited(&self, lane: &str, seconds: f64) {
        self.waited.get_or_create(&self.label(lane)).inc_by(seconds);
    }

    /// The endpoint asked `lane` to pause.
    pub(crate) fn paused(&self, lane: &str) {
        self.pauses.get_or_create(&self.label(lane)).inc();
    }
}
