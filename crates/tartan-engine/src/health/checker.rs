//! The rounds: every interval each engine writes its heartbeat, reads which
//! engines are alive, and checks the steps that fall to it
//! (`tartan_core::health::checker_of`), its checks spread over the round
//! as Argyll spreads them. Each result is recorded with the engine that
//! made it; a change appends `step_health_changed`. A check goes out as a
//! step call does: through the step host policy, with no proxy and no
//! redirect to another origin, bounded by `TARTAN_HEALTH_TIMEOUT`.

use std::time::Duration;

use futures::StreamExt;
use tartan_core::health::{checker_of, HealthState};
use tartan_store::HealthRecord;

use super::Health;
use std::sync::Arc;

/// The round of heartbeats when checks are off.
const HEARTBEAT_ONLY: Duration = Duration::from_secs(30);

/// Health checks of one engine running at once at most.
const MAX_CHECKS_AT_ONCE: usize = 32;

/// How long one round lasts under `config`.
pub(crate) fn round_of(config: &crate::config::EngineConfig) -> Duration {
    let interval = config.health.interval;
    if interval.is_zero() {
        HEARTBEAT_ONLY
    } else {
        interval
    }
}

impl Health {
    /// How long one round lasts: the checks' interval, or the heartbeat's
    /// alone when checks are off.
    pub(crate) fn health_round(&self) -> Duration {
        round_of(&self.config)
    }

    /// Run the rounds until the engine stops.
    pub(crate) fn spawn_checks(self: &Arc<Self>) {
        let health = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                let round = health.health_round();
                let started = tokio::time::Instant::now();
                health.round().await;
                let next = started + round;
                tokio::select! {
                    _ = tokio::time::sleep_until(next) => {}
                    _ = health.stopping.cancelled() => return,
                }
            }
        });
    }

    /// One round: the heartbeat, then this engine's share of the checks.
    async fn round(&self) {
        let store = &self.store;
        let me = self.config.node_id.clone();
        let now = self.config.clock.now();
        if let Err(e) = store.heartbeat(&me, now).await {
            tracing::warn!("writing this engine's heartbeat failed: {e}");
            return;
        }
        self.catalog.sweep().await;
        self.note_others().await;
        // With checks off, nothing is gated: no check of this engine's
        // would ever open the gate again.
        if self.config.health.interval.is_zero() {
            return;
        }
        // The gate as the checks left it; deferred work its steps' health
        // allows is started (that of an engine that stopped included).
        self.changed(true).await;
        // The cluster as the last round left it: the metrics show its
        // health, whoever checked, and its live engines share the checks.
        let cluster = match self.cluster().await {
            Ok(cluster) => cluster,
            Err(e) => {
                tracing::warn!("reading the cluster failed: {e}");
                return;
            }
        };
        for (id, view) in &cluster.steps {
            self.metrics.step_health(id, view.health.status);
        }
        let mut alive: Vec<String> = cluster.nodes.into_keys().collect();
        if !alive.contains(&me) {
            alive.push(me.clone());
        }
        let view = self.catalog.view().await;
        let mine: Vec<(String, String)> = view
            .catalog
            .steps()
            .values()
            .filter_map(|s| {
                let url = s
                    .http
                    .as_ref()
                    .map(|h| h.health_check.clone())
                    .filter(|u| !u.is_empty())?;
                (checker_of(&s.id, &alive) == Some(me.as_str())).then(|| (s.id.clone(), url))
            })
            .collect();
        if mine.is_empty() {
            return;
        }
        // Spread over the round, so that a thousand steps are not checked
        // in one burst (Argyll does the same), and side by side, at most
        // MAX_CHECKS_AT_ONCE at a time: a slow check costs its own step
        // only, not the steps after it (twenty checks that took their whole
        // timeout one after another kept a healthy step unchecked for 40 s).
        let gap = self.health_round() / u32::try_from(mine.len()).unwrap_or(u32::MAX);
        let begun = tokio::time::Instant::now();
        let me = me.as_str();
        let checks = futures::stream::iter(mine.into_iter().enumerate())
            .map(|(i, (step_id, url))| {
                let at = begun + gap.saturating_mul(u32::try_from(i).unwrap_or(u32::MAX));
                async move {
                    tokio::time::sleep_until(at).await;
                    self.check_and_record(step_id, &url, me).await;
                }
            })
            .buffer_unordered(MAX_CHECKS_AT_ONCE)
            .for_each(|()| async {});
        tokio::select! {
            _ = checks => {}
            _ = self.stopping.cancelled() => {}
        }
    }

    /// Check one step and record what was found; a change is announced.
    async fn check_and_record(&self, step_id: String, url: &str, me: &str) {
        let health = self.check(url).await;
        if health.status == tartan_core::health::HealthStatus::Unhealthy {
            self.close_gate(&step_id, health.error.as_deref().unwrap_or("unhealthy"));
        }
        let record = HealthRecord {
            step_id,
            health,
            node: me.to_string(),
            checked_at: self.config.clock.now(),
            changed_at: self.config.clock.now(),
        };
        match self.store.record_health(&record).await {
            Ok(true) => {
                tracing::info!(step_id = %record.step_id, status = record.health.status.as_str(),
                    error = record.health.error.as_deref().unwrap_or(""), "step health changed");
                self.announce_change().await;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(step_id = %record.step_id, "recording a health check failed: {e}"),
        }
    }

    /// GET the health check URL: a status below 400 is healthy; any other
    /// status, a refusal by the host policy or no answer is unhealthy.
    async fn check(&self, url: &str) -> HealthState {
        let hosts = &self.config.step_hosts;
        let url = match crate::calls::dispatch::expand_endpoint(url, &Default::default(), hosts) {
            Ok(url) => url,
            Err(e) => return HealthState::failed(e),
        };
        let request = self.http.get(url).timeout(self.config.health.timeout).send();
        match request.await {
            Ok(response) => HealthState::of_status(response.status().as_u16()),
            Err(e) if e.is_timeout() => HealthState::failed(format!(
                "no answer within {} ms",
                self.config.health.timeout.as_millis()
            )),
            Err(e) => HealthState::failed(crate::calls::dispatch::transport_text(&e)),
        }
    }
}
