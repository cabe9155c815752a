//! Every family in every scrape, from the first: `prometheus-client` leaves
//! a labelled family out of the exposition until one of its series exists,
//! so a family whose labels are not known at start (a step, a lane, a
//! route) would appear only once something was counted. Dashboards and
//! alerts then cannot tell "none yet" from "not exported"; with its
//! `# HELP` and `# TYPE` always written, the family is there with no
//! series. Families whose label values are known at start are given their
//! series at zero besides (`Metrics::zeros`).

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;

/// A metric that is never left out for having no series.
#[derive(Debug)]
pub struct Present<M>(pub M);

impl<M: EncodeMetric> EncodeMetric for Present<M> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }

    fn is_empty(&self) -> bool {
        false
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::registry::Registry;

    use super::*;

    #[test]
    fn an_empty_family_is_still_described() {
        let mut r = Registry::default();
        let family: Family<Vec<(String, String)>, Counter> = Family::default();
        r.register("kept", "A family with no series", Present(family.clone()));
        r.register("dropped", "Left out when empty", family);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
        assert!(text.contains("# TYPE kept counter"), "{text}");
        assert!(!text.contains("dropped"), "{text}");
    }
}
