//! The database as the engine sees it (docs/operating.md, "Metrics"): its
//! connection pools, read from the store at each scrape, the commits that
//! failed for the database's sake, and its outages: from the first commit
//! or readiness check it could not serve (unreachable, or taking no
//! writes) to the next it served, each logged when it begins and when it
//! ends, with its length (docs/durability.md, "When the database goes
//! away").

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tartan_store::{PoolReading, StoreError};

use super::Present;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabel {
    pool: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolStateLabels {
    pool: &'static str,
    /// `idle` or `in_use`.
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

pub(crate) struct DbMetrics {
    connections: Family<PoolStateLabels, Gauge>,
    max: Family<PoolLabel, Gauge>,
    waits: Family<PoolLabel, Counter>,
    wait_seconds: Family<PoolLabel, Counter<f64, AtomicU64>>,
    /// The store's totals at the last scrape: its counters only grow, and
    /// each scrape adds what they grew by.
    seen: Mutex<HashMap<&'static str, (u64, f64)>>,
    commit_errors: Family<KindLabel, Counter>,
    unavailable: Gauge,
    outages: Counter,
    outage_seconds: Counter<f64, AtomicU64>,
    /// Whether an outage is under way: read without the lock on every
    /// commit batch, which mostly finds none.
    out: AtomicBool,
    /// When the outage under way began.
    since: Mutex<Option<Instant>>,
    /// The looks `/health` asks for (`look_due`).
    look: Mutex<Look>,
    flows_lost: Counter,
}

/// `/health`'s looks at the database: when the last began, and whether
/// one is under way (one at a time, however many probes ask).
#[derive(Default)]
struct Look {
    last: Option<Instant>,
    under_way: bool,
}

/// The kinds of `tartan_commit_errors_total`, at zero from the start.
const ERROR_KINDS: [&str; 3] = ["unavailable", "database", "corrupt"];

impl DbMetrics {
    pub(super) fn new() -> Self {
        let m = Self {
            connections: Family::default(),
            max: Family::default(),
            waits: Family::default(),
            wait_seconds: Family::default(),
            seen: Mutex::default(),
            commit_errors: Family::default(),
            unavailable: Gauge::default(),
            outages: Counter::default(),
            outage_seconds: Counter::default(),
            out: AtomicBool::new(false),
            since: Mutex::new(None),
            look: Mutex::default(),
            flows_lost: Counter::default(),
        };
        for kind in ERROR_KINDS {
            m.commit_errors.get_or_create(&KindLabel { kind }).inc_by(0);
        }
        m
    }

    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "tartan_db_pool_connections",
            "Connections of a database pool, idle or in use",
            Present(self.connections.clone()),
        );
        r.register(
            "tartan_db_pool_max_connections",
            "The most connections a database pool may open",
            Present(self.max.clone()),
        );
        r.register(
            "tartan_db_pool_waits",
            "Times the engine waited for a pool's connection: commits for theirs, API reads for a turn",
            Present(self.waits.clone()),
        );
        r.register(
            "tartan_db_pool_wait_seconds",
            "How long those waits took, in all",
            Present(self.wait_seconds.clone()),
        );
        r.register(
            "tartan_commit_errors",
            "Decisions whose commit failed for the database's sake, by kind: unreachable, a failed statement, data that could not be read back",
            Present(self.commit_errors.clone()),
        );
        r.register(
            "tartan_database_unavailable",
            "1 while the database cannot be written (unreachable, or a standby), else 0",
            self.unavailable.clone(),
        );
        r.register(
            "tartan_database_outages",
            "Outages of the database this engine lived through: spells it could not be written",
            self.outages.clone(),
        );
        r.register(
            "tartan_database_outage_seconds",
            "How long those outages lasted, in all (one under way counts once it ends)",
            self.outage_seconds.clone(),
        );
        r.register(
            "tartan_flows_lost",
            "Flows this engine held that the database no longer had: commits it acknowledged were lost, as in a failover to a standby that had not received them",
            self.flows_lost.clone(),
        );
    }

    /// A flow this engine held in flight is gone from the database: the
    /// database lost commits it had acknowledged (asynchronous replication
    /// and a failover), the flow's start among them. Said loudly, since the
    /// client was answered 201 for it (docs/durability.md, "Failover").
    pub(crate) fn flow_lost(&self, flow_id: &str) {
        self.flows_lost.inc();
        tracing::error!(
            %flow_id,
            "flow lost by the database: this engine held it in flight, but its start is no longer stored (a \
             failover to a standby that had not received it?); start it again with the same id"
        );
    }

    /// The database could not serve a commit or a readiness check, for
    /// `cause`: an outage begins, unless one is under way.
    pub(crate) fn unavailable(&self, cause: &str) {
        if self.out.load(Ordering::Acquire) {
            return;
        }
        let mut since = crate::sync::lock(&self.since);
        if since.is_none() {
            *since = Some(Instant::now());
            self.out.store(true, Ordering::Release);
            self.unavailable.set(1);
            self.outages.inc();
            tracing::warn!(
                "database outage began: {cause}; results are kept and writes wait until it can be written again"
            );
        }
    }

    /// The database served a commit or a readiness check: the outage under
    /// way, if any, ends.
    pub(crate) fn available(&self) {
        if !self.out.load(Ordering::Acquire) {
            return;
        }
        let mut since = crate::sync::lock(&self.since);
        if let Some(began) = since.take() {
            let took = began.elapsed().as_secs_f64();
            self.out.store(false, Ordering::Release);
            self.unavailable.set(0);
            self.outage_seconds.inc_by(took);
            tracing::warn!(outage_seconds = took, "database outage ended after {took:.1} s");
        }
    }

    /// Whether the database took the last write or readiness check this
    /// engine made: no outage under way.
    pub(crate) fn writable(&self) -> bool {
        !self.out.load(Ordering::Acquire)
    }

    /// Whether a look at the database's readiness is due: none under way,
    /// and none begun within `every`. When it is, it counts as begun; the
    /// caller makes it and says when it ended (`looked`).
    pub(crate) fn look_due(&self, every: Duration) -> bool {
        let mut look = crate::sync::lock(&self.look);
        if look.under_way || look.last.is_some_and(|t| t.elapsed() < every) {
            return false;
        }
        *look = Look {
            last: Some(Instant::now()),
            under_way: true,
        };
        true
    }

    /// The look `look_due` allowed ended.
    pub(crate) fn looked(&self) {
        crate::sync::lock(&self.look).under_way = false;
    }

    /// The pools as the store reads them now (a scrape).
    pub(super) fn read(&self, pools: &[PoolReading]) {
        let mut seen = crate::sync::lock(&self.seen);
        for p in pools {
            let pool = PoolLabel { pool: p.pool };
            let idle = p.idle.min(p.size);
            for (state, n) in [("idle", idle), ("in_use", p.size - idle)] {
                self.connections
                    .get_or_create(&PoolStateLabels { pool: p.pool, state })
                    .set(i64::from(n));
            }
            self.max.get_or_create(&pool).set(i64::from(p.max));
            let (waits, seconds) = seen.entry(p.pool).or_default();
            self.waits
                .get_or_create(&pool)
                .inc_by(p.waits.saturating_sub(*waits));
            self.wait_seconds
                .get_or_create(&pool)
                .inc_by((p.wait_seconds - *seconds).max(0.0));
            *waits = p.waits.max(*waits);
            *seconds = p.wait_seconds.max(*seconds);
        }
    }

    /// A decision's commit failed with `error`; conflicts and taken ids are
    /// answers, not failures, and are not counted.
    pub(crate) fn commit_failed(&self, error: &StoreError) {
        let kind = if let Some(cause) = error.unavailable() {
            self.unavailable(cause);
            "unavailable"
        } else {
            match error {
                StoreError::Database(_) => "database",
                StoreError::Corrupt(_) => "corrupt",
                _ => return,
            }
        };
        self.commit_errors.get_or_create(&KindLabel { kind }).inc();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn reading(waits: u64, wait_seconds: f64) -> PoolReading {
        PoolReading {
            pool: "engine",
            size: 5,
            idle: 2,
            max: 16,
            waits,
            wait_seconds,
        }
    }

    #[test]
    fn pools_show_their_connections_and_their_waits_add_up() {
        let m = DbMetrics::new();
        let mut r = Registry::default();
        m.register(&mut r);
        m.read(&[reading(3, 0.5)]);
        m.read(&[reading(10, 2.0)]);
        m.commit_failed(&StoreError::Unavailable("down".into()));
        m.commit_failed(&StoreError::Conflict("f".into()));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
        for line in [
            r#"tartan_db_pool_connections{pool="engine",state="idle"} 2"#,
            r#"tartan_db_pool_connections{pool="engine",state="in_use"} 3"#,
            r#"tartan_db_pool_max_connections{pool="engine"} 16"#,
            r#"tartan_db_pool_waits_total{pool="engine"} 10"#,
            r#"tartan_db_pool_wait_seconds_total{pool="engine"} 2.0"#,
            r#"tartan_commit_errors_total{kind="unavailable"} 1"#,
            r#"tartan_commit_errors_total{kind="database"} 0"#,
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }
}
