//! What the engines still hold in memory once every flow is over: the gauge
//! `tartan_flows_active` of each engine's `/metrics` (flows held with work
//! in progress) must come down to 0. An engine compares the flows idle in
//! its memory with the database at every sweep (every `min(30 s,
//! TARTAN_LEASE)`) and lets go of those the database lost or moved away
//! from (docs/durability.md, "Failover"), so a wait of a few sweeps is
//! given before a flow still held counts.

use std::time::{Duration, Instant};

use crate::load::Load;
use crate::{Mode, REQUEST_TIMEOUT};

/// How long each engine is given to show 0.
pub const MEMORY_WAIT: Duration = Duration::from_secs(20);
const GAUGE: &str = "tartan_flows_active";

/// One engine's `tartan_flows_active` over the wait.
pub struct Held {
    pub engine: String,
    /// At the first read, and at the last (`None`: not read).
    pub first: Option<f64>,
    pub last: Option<f64>,
    /// When it was first read as 0, from the start of the wait.
    pub zero_after: Option<Duration>,
}

/// Read every engine's gauge every half second until each has shown 0, or
/// `wait` passes.
pub async fn flows_held(load: &Load, wait: Duration) -> Vec<Held> {
    let started = Instant::now();
    let mut held: Vec<Held> = load
        .engines
        .iter()
        .map(|engine| Held {
            engine: engine.clone(),
            first: None,
            last: None,
            zero_after: None,
        })
        .collect();
    loop {
        for h in held.iter_mut().filter(|h| h.zero_after.is_none()) {
            let value = gauge(load, &h.engine).await;
            if h.first.is_none() {
                h.first = value;
            }
            h.last = value;
            if value == Some(0.0) {
                h.zero_after = Some(started.elapsed());
            }
        }
        if held.iter().all(|h| h.zero_after.is_some()) || started.elapsed() >= wait {
            return held;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The gauge's value on one engine (summed over its series, if it had
/// labels), `None` when `/metrics` did not answer or did not show it.
async fn gauge(load: &Load, engine: &str) -> Option<f64> {
    let answer = load
        .client
        .get(format!("{engine}/metrics"))
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await
        .ok()?;
    if !answer.status().is_success() {
        return None;
    }
    let text = answer.text().await.ok()?;
    let mut total = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let mut parts = line.split_whitespace();
        let (Some(name), Some(value)) = (parts.next(), parts.next()) else {
            continue;
        };
        let labelled = name.strip_prefix(GAUGE).is_some_and(|rest| rest.starts_with('{'));
        if name != GAUGE && !labelled {
            continue;
        }
        if let Ok(value) = value.parse::<f64>() {
            total = Some(total.unwrap_or(0.0) + value);
        }
    }
    total
}

/// The engines that still held flows after the wait, or could not be read.
pub fn still_held(held: &[Held]) -> Vec<&Held> {
    held.iter().filter(|h| h.zero_after.is_none()).collect()
}

/// Whether what the engines held breaks the promise of `mode`: in sync
/// mode (nothing lost, every flow over) no flow may stay in memory; in
/// async mode it is reported.
pub fn fails(held: &[Held], mode: Mode) -> bool {
    mode == Mode::Sync && !still_held(held).is_empty()
}
