//! What each finished flow's stored state says (per-call overhead, retry
//! lateness), the summary line and the open loop's memory trend.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use tartan_bench::Histogram;
use tartan_core::flow::FlowEvent;
use tartan_engine::Engine;

use super::{Cli, Run, Server, Watch, REJECTED};

// ---------------------------------------------------------------------------
// What each finished flow's stored state says.

#[derive(Default)]
pub(super) struct Samples {
    pub(super) latency: Histogram,
    pub(super) overhead: Histogram,
    pub(super) before_call: Histogram,
    pub(super) after_call: Histogram,
    pub(super) server: Histogram,
    pub(super) retry_decision_late: Histogram,
    pub(super) retry_arrival_late: Histogram,
    /// Attempts with an end but no call recorded by the step server.
    pub(super) unmatched: u64,
    /// Flows whose state could not be read.
    pub(super) unreadable: u64,
}

pub(super) fn us(d: chrono::Duration) -> i64 {
    d.num_microseconds().unwrap_or(i64::MAX)
}

/// Per-call overhead and retry lateness of one finished flow; takes its
/// calls out of the step server's records.
pub(super) async fn analyse(engine: &Engine, server: &Server, id: &str, samples: &Mutex<Samples>) {
    let lock = || samples.lock().unwrap_or_else(|p| p.into_inner());
    let state = match engine.flows().flow(id).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("analyse {id}: {e}");
            lock().unreadable += 1;
            return;
        }
    };
    let items = || state.executions.values().flat_map(|e| e.work_items.iter());
    // When each retry was due: the `next_retry_at` scheduled before it.
    let mut due: HashMap<(String, u32), DateTime<Utc>> = HashMap::new();
    if items().any(|(_, w)| w.attempts.len() > 1) {
        let events = engine
            .store()
            .flow_events(id)
            .await
            .unwrap_or_else(|e| panic!("events of {id}: {e}"));
        let mut scheduled: HashMap<String, DateTime<Utc>> = HashMap::new();
        for stored in &events {
            match tartan_store::event_of(stored) {
                Ok(FlowEvent::WorkRetryScheduled {
                    token, next_retry_at, ..
                }) => {
                    scheduled.insert(token, next_retry_at);
                }
                Ok(FlowEvent::WorkStarted { token, attempt, .. }) => {
                    if let Some(at) = scheduled.remove(&token) {
                        due.insert((token, attempt), at);
                    }
                }
                _ => {}
            }
        }
    }
    let mut calls = Vec::new();
    {
        let mut seen = server.calls();
        for (token, _) in items() {
            calls.push(seen.remove(token).unwrap_or_default());
        }
    }
    let mut s = lock();
    for ((token, w), seen) in items().zip(calls) {
        for a in &w.attempts {
            let Some(ended) = a.ended_at else { continue };
            let Some(call) = seen.iter().find(|c| c.attempt == a.number) else {
                s.unmatched += 1;
                continue;
            };
            let total = us(ended - a.started_at);
            let before = us(call.arrived - a.started_at);
            s.overhead.record(total - call.handler_us);
            s.before_call.record(before);
            s.after_call.record(total - call.handler_us - before);
            s.server.record(call.handler_us);
            if let Some(at) = due.get(&(token.clone(), a.number)) {
                s.retry_decision_late.record(us(a.started_at - *at));
                s.retry_arrival_late.record(us(call.arrived - *at));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Reporting.

pub(super) fn ms(us: i64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// `name_p50=.. name_p95=..` for the given quantiles, `na` when empty.
pub(super) fn quantiles(name: &str, h: &Histogram, which: &[(&str, f64)]) -> String {
    which
        .iter()
        .map(|(label, p)| {
            let v = if h.is_empty() {
                "na".to_string()
            } else if *label == "max" {
                ms(h.max())
            } else if *label == "min" {
                ms(h.min())
            } else {
                ms(h.quantile(*p))
            };
            format!("{name}_{label}={v}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) const P50_95_99: [(&str, f64); 3] = [("p50", 0.5), ("p95", 0.95), ("p99", 0.99)];
pub(super) const P50_99_MAX: [(&str, f64); 3] = [("p50", 0.5), ("p99", 0.99), ("max", 1.0)];

pub(super) fn summary(cli: &Cli, mode: &str, run: &Run, s: &Samples, watch: &Watch, calls: u64) -> String {
    let secs = run.wall.as_secs_f64().max(1e-9);
    let mut line = format!(
        "load store={} shape={} mode={mode} completed={} failed={} unfinished={} rejected={} lagged={} via_store={} \
         wall_s={:.3} flows_per_s={:.1} steps_per_s={:.1} calls_per_s={:.1} {} latency_ms_max={} {} \
         overhead_before_call_ms_p50={} overhead_after_call_ms_p50={} server_ms_p50={} \
         server_delay_ms={} unmatched_calls={} retries={} {} {} peak_rss_mib={:.1}",
        cli.store.name(),
        cli.shape.name(),
        run.completed,
        run.failed,
        run.unfinished,
        REJECTED.load(Ordering::Relaxed),
        watch.lagged.load(Ordering::Relaxed),
        watch.via_store.load(Ordering::Relaxed),
        secs,
        run.completed as f64 / secs,
        (run.completed * cli.shape.steps_per_flow()) as f64 / secs,
        calls as f64 / secs,
        quantiles("latency_ms", &s.latency, &P50_95_99),
        ms(s.latency.max()),
        quantiles("overhead_ms", &s.overhead, &P50_95_99),
        ms(s.before_call.quantile(0.5)),
        ms(s.after_call.quantile(0.5)),
        ms(s.server.quantile(0.5)),
        cli.server_delay_ms,
        s.unmatched,
        s.retry_decision_late.len(),
        quantiles("retry_decision_late_ms", &s.retry_decision_late, &P50_99_MAX),
        quantiles("retry_arrival_late_ms", &s.retry_arrival_late, &P50_99_MAX),
        run.peak_rss_mib,
    );
    if s.unreadable > 0 {
        line.push_str(&format!(" unreadable_flows={}", s.unreadable));
    }
    line
}

/// RSS samples of the open loop: (seconds since start, MiB).
pub(super) struct RssTrend {
    pub(super) first: (f64, f64),
    pub(super) last: (f64, f64),
    pub(super) max: f64,
    pub(super) slope_per_min: f64,
}

pub(super) fn rss_trend(samples: &[(f64, f64)], warmup: f64) -> Option<RssTrend> {
    let after: Vec<(f64, f64)> = samples.iter().copied().filter(|(t, _)| *t >= warmup).collect();
    let kept = if after.is_empty() {
        samples.last().copied().into_iter().collect()
    } else {
        after
    };
    let first = *kept.first()?;
    let last = *kept.last()?;
    let n = kept.len() as f64;
    let (mt, mr) = (
        kept.iter().map(|s| s.0).sum::<f64>() / n,
        kept.iter().map(|s| s.1).sum::<f64>() / n,
    );
    let var: f64 = kept.iter().map(|s| (s.0 - mt).powi(2)).sum();
    let cov: f64 = kept.iter().map(|s| (s.0 - mt) * (s.1 - mr)).sum();
    Some(RssTrend {
        first,
        last,
        max: kept.iter().map(|s| s.1).fold(0.0, f64::max),
        slope_per_min: if var > 0.0 { 60.0 * cov / var } else { 0.0 },
    })
}
