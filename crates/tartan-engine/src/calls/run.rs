//! Running a call: through its lanes, into a call slot, the exchange,
//! and its end handed to the flows (`Ended::conclude`); aborted when a
//! decision or a lost lease says so.

use std::sync::Arc;

use tartan_core::machine::AttemptResult;
use tartan_core::outcome::{classify, is_rate_limited, FailureCause, FailureClass};
use tokio_util::sync::CancellationToken;

use super::dispatch::{self, Call};
use super::slots::{Admission, Admitted};
use super::Calls;
use crate::lanes::{Lane, Passage};

impl Calls {
    /// Send a call through its lanes (docs/lanes.md), if it is in any,
    /// then admit it to the call slots.
    pub(crate) fn send(self: &Arc<Self>, call: Call) {
        if self.stopping.is_cancelled() {
            // Left active under this node's lease, which `shutdown` hands
            // back: another process (or the next start) calls it.
            return;
        }
        let (id, cancel) = self.in_flight.list(&call.spec.token);
        let lanes = self.lanes_of(&call);
        if lanes.is_empty() {
            return self.admit(Admitted {
                call,
                id,
                cancel,
                passage: Passage::default(),
            });
        }
        self.wait_in_lanes(lanes, call, id, cancel, Passage::default());
    }

    /// Go through the lanes (at once where this process holds what the
    /// call needs, else waiting in a task), then take a call slot; `so_far`
    /// is the call's passage until now (a call sent again after a pause).
    fn wait_in_lanes(
        self: &Arc<Self>,
        lanes: Vec<Arc<Lane>>,
        call: Call,
        id: u64,
        cancel: CancellationToken,
        mut so_far: Passage,
    ) {
        // Through unsaturated lanes at once, from memory: no task, no wait.
        while let Some(lane) = lanes.get(so_far.permits.len()) {
            let Some(permit) = lane.try_admit() else {
                break;
            };
            so_far.permits.push(permit);
        }
        if so_far.permits.len() == lanes.len() {
            return self.admit(Admitted {
                call,
                id,
                cancel,
                passage: so_far,
            });
        }
        let calls = Arc::clone(self);
        self.tasks.spawn(async move {
            let rest = &lanes[so_far.permits.len()..];
            match calls.pass_lanes(rest, &call, &cancel).await {
                Some(passage) => {
                    so_far.permits.extend(passage.permits);
                    so_far.waited += passage.waited;
                    calls.admit(Admitted {
                        call,
                        id,
                        cancel,
                        passage: so_far,
                    });
                }
                None => calls.in_flight.forget(&call.spec.token, id),
            }
        });
    }

    /// The lanes a call goes through: its step's, its host's.
    fn lanes_of(&self, call: &Call) -> Vec<Arc<Lane>> {
        if call.spec.step.is_script() || call.spec.is_compensation() {
            return Vec::new();
        }
        let lanes = &self.lanes;
        let url = lanes
            .by_host()
            .then(|| {
                dispatch::expand_endpoint(
                    &call.spec.endpoint,
                    &call.spec.placeholders,
                    &self.config.step_hosts,
                )
                .ok()
            })
            .flatten();
        lanes.of(&call.spec.step, url.as_ref())
    }

    /// Wait in each of `lanes` in turn for a permit; `None` when the call
    /// was aborted meanwhile or a lane's queue was full (the call is then
    /// left to its lease, as with a full call queue).
    async fn pass_lanes(
        &self,
        lanes: &[Arc<Lane>],
        call: &Call,
        cancel: &CancellationToken,
    ) -> Option<Passage> {
        let registry = &self.lanes;
        let token = &call.spec.token;
        let since = std::time::Instant::now();
        let mut permits = Vec::with_capacity(lanes.len());
        for lane in lanes {
            let Ok(wait) = lane.enter(&call.spec.flow_id, call.spec.priority) else {
                self.in_flight.defer();
                self.metrics.call_deferred();
                tracing::warn!(flow_id = %call.spec.flow_id, step_id = %call.spec.step.id, %token, lane = %lane.id,
                    "lane queue full (TARTAN_MAX_QUEUED_CALLS); the call is made when its lease runs out");
                return None;
            };
            registry.note_waiting(token, Some(&lane.id));
            let entered = std::time::Instant::now();
            let permit = tokio::select! {
                p = wait => p.ok(),
                _ = cancel.cancelled() => None,
            };
            registry.note_waiting(token, None);
            self.metrics
                .lanes
                .waited(&lane.id, entered.elapsed().as_secs_f64());
            permits.push(permit?);
        }
        Some(Passage {
            permits,
            waited: since.elapsed(),
            resent: 0,
        })
    }

    /// Admit a call to the call slots (`slots.rs`): it runs now, or waits
    /// for a slot listed in flight (so its lease is renewed and an abort
    /// finds it). When the queue is full it is left active under this
    /// node's lease, not called: when that lease runs out the sweep takes
    /// it over like the call of a dead node (docs/durability.md, "Call slots").
    fn admit(self: &Arc<Self>, admitted: Admitted) {
        match self.in_flight.slots.admit(admitted) {
            Admission::Run(admitted) => self.run_call(admitted),
            Admission::Queued => {}
            Admission::Full(Admitted { call, id, .. }) => {
                self.in_flight.forget(&call.spec.token, id);
                self.in_flight.defer();
                self.metrics.call_deferred();
                tracing::warn!(flow_id = %call.spec.flow_id, step_id = %call.spec.step.id, token = %call.spec.token,
                    "call queue full (TARTAN_MAX_QUEUED_CALLS); the call is made when its lease runs out");
            }
        }
    }

    /// Make a call that holds a slot; the slot is given back (and the next
    /// waiting calls started) as soon as the exchange ends or is aborted.
    fn run_call(self: &Arc<Self>, admitted: Admitted) {
        let calls = Arc::clone(self);
        self.tasks.spawn(async move {
            let Admitted {
                call,
                id,
                cancel,
                mut passage,
            } = admitted;
            let lanes: Vec<Arc<Lane>> = passage.permits.iter().map(|p| Arc::clone(p.lane())).collect();
            let slot = SlotHeld {
                calls: &calls,
                step_id: &call.spec.step.id,
            };
            let started = std::time::Instant::now();
            let outcome = tokio::select! {
                r = async {
                    // Not started when the process stops: handed back (see
                    // `Engine::shutdown`).
                    if !calls.in_flight.mark_started(&call.spec.token, id, &calls.stopping) {
                        return None;
                    }
                    let config = &calls.config;
                    let limits = dispatch::Limits {
                        max_response_bytes: config.max_response_bytes,
                        budget: calls.in_flight.slots.bytes(),
                        max_retry_after_ms: u64::try_from(config.max_retry_after.as_millis())
                            .unwrap_or(u64::MAX),
                        clock: &config.clock,
                        scripts: &calls.in_flight.scripts,
                    };
                    let tracer = config.tracer.as_ref();
                    // A memoizable step's identical call answered before:
                    // no call (docs/steps.md, "Memoization").
                    if let Some(outputs) = match &call.spec.memo {
                        Some(memo) => calls.memo.lookup(memo).await,
                        None => None,
                    } {
                        return Some(Ended::Done(AttemptResult::Memoized { outputs }, None));
                    }
                    let (result, held) =
                        dispatch::perform(&calls.in_flight.http, &config.step_hosts, limits, tracer, &call).await;
                    calls.metrics.call_ended(&call.spec, &result, started.elapsed());
                    // The endpoint asked its lane to slow down: every call
                    // of the lane waits, and this one goes back to wait too,
                    // its slot given back, to be sent again when the lane
                    // reopens, with no attempt counted.
                    if let Some(wait) = lane_pause(&call, &result).filter(|_| !lanes.is_empty() && passage.resent < MAX_RESENDS) {
                        let reason = pause_reason(&result);
                        for lane in &lanes {
                            lane.pause_for(wait, reason.clone());
                            calls.metrics.lanes.paused(&lane.id);
                        }
                        return Some(Ended::Again);
                    }
                    let verdict = breaker_verdict(&call, &result);
                    for permit in passage.permits.drain(..) {
                        permit.finish(verdict).await;
                    }
                    Some(Ended::Done(result, held))
                } => r,
                // The flow was cancelled or timed out: dropping the request
                // closes its connection; the decision is already recorded.
                _ = cancel.cancelled() => {
                    calls.metrics.call_aborted(&call.spec);
                    None
                }
            };
            drop(slot);
            // The lanes' slots go back with the exchange, not the record.
            passage.permits.clear();
            if let Some(Ended::Again) = outcome {
                passage.resent += 1;
                return calls.wait_in_lanes(lanes, call, id, cancel, passage);
            }
            // The call stays listed in flight (its lease renewed) until its
            // result is recorded, which may wait out a database outage. Its
            // token is cancelled now that it answered: there is nothing left
            // to abort, and a renewal that finds the row already recorded
            // must not take it for a lost lease.
            if let Some(Ended::Done(result, held)) = outcome {
                cancel.cancel();
                calls.ended.conclude(&call, result, passage.waited(&lanes)).await;
                // The body's bytes are given back once its result is
                // recorded (docs/durability.md, "Bytes in flight").
                drop(held);
            }
            calls.in_flight.forget(&call.spec.token, id);
        });
    }

    /// Calls holding a slot and waiting for one; calls left to their lease
    /// because the queue was full, since start.
    pub fn counts(&self) -> (super::CallCounts, u64) {
        (self.in_flight.slots.counts(), self.in_flight.deferred())
    }

    /// The receipt tokens of the calls that went out and are still running.
    pub(crate) fn started(&self) -> Vec<String> {
        self.in_flight.started()
    }

    /// This process's calls in flight: receipt token and call number.
    pub(crate) fn in_flight(&self) -> Vec<(String, u64)> {
        self.in_flight.all()
    }

    /// Whether this process has a call in flight for `token`.
    pub(crate) fn is_in_flight(&self, token: &str) -> bool {
        self.in_flight.contains(token)
    }

    /// Abort the calls other processes announce they cancelled (Postgres
    /// `NOTIFY`); without it, lease renewal finds them within `TARTAN_LEASE / 3`.
    pub(crate) fn spawn_abort_listener(
        self: &Arc<Self>,
        notices: Option<tokio::sync::mpsc::Receiver<Vec<String>>>,
    ) {
        let calls = Arc::clone(self);
        crate::notices::on_notices(notices, self.stopping.clone(), move |tokens: Vec<String>| {
            for token in tokens {
                if calls.abort(&token) {
                    tracing::info!(%token, "call aborted: its flow was cancelled by another process");
                }
            }
            std::future::ready(())
        });
    }

    /// Abort the call in flight for `token`, if this process has one;
    /// whether it had.
    pub(crate) fn abort(&self, token: &str) -> bool {
        self.in_flight.abort(token)
    }
}

/// A call's slot, given back when dropped (the call ended, was aborted, or
/// its task panicked); the calls that get a slot then are started, unless
/// the engine is stopping (they stay leased; the next start resumes them).
struct SlotHeld<'a> {
    calls: &'a Arc<Calls>,
    step_id: &'a str,
}

impl Drop for SlotHeld<'_> {
    fn drop(&mut self) {
        for next in self.calls.in_flight.slots.release(self.step_id) {
            if self.calls.stopping.is_cancelled() {
                self.calls.in_flight.forget(&next.call.spec.token, next.id);
                continue;
            }
            self.calls.run_call(next);
        }
    }
}

/// How a call's exchange ended.
enum Ended {
    Done(AttemptResult, Option<super::budget::Held>),
    /// Its lane was paused for it: it waits in the lane again.
    Again,
}

/// How many times in a row one attempt is sent again after its lane was
/// paused for it; past it, the rate limit is recorded as the attempt's
/// failure (docs/lanes.md, "Rate limits pause the lane").
const MAX_RESENDS: u32 = 16;

/// The pause a response asks of its lane: a 429 or 503 with `Retry-After`,
/// or a status the step declared `rate_limited` with one (already cut to
/// `TARTAN_MAX_RETRY_AFTER`).
fn lane_pause(call: &Call, result: &AttemptResult) -> Option<std::time::Duration> {
    let AttemptResult::Failure {
        cause: cause @ FailureCause::Status(status),
        retry_after_ms: Some(ms),
        ..
    } = result
    else {
        return None;
    };
    let limited = matches!(status, 429 | 503)
        || call
            .spec
            .step
            .policies()
            .is_some_and(|p| is_rate_limited(*cause, p));
    limited.then(|| std::time::Duration::from_millis(*ms))
}

fn pause_reason(result: &AttemptResult) -> String {
    match result {
        AttemptResult::Failure {
            cause: FailureCause::Status(status),
            retry_after_ms: Some(ms),
            ..
        } => format!("HTTP {status} with Retry-After of {ms} ms"),
        _ => "rate limited".to_string(),
    }
}

/// What a call's end says of its endpoint, for its lanes' breakers: a
/// success, a retryable failure, or nothing (a permanent failure is the
/// request's fault, not the endpoint's).
fn breaker_verdict(call: &Call, result: &AttemptResult) -> Option<bool> {
    match result {
        AttemptResult::Success { .. } | AttemptResult::Memoized { .. } => Some(true),
        AttemptResult::TimedOut { .. } => Some(false),
        AttemptResult::Failure { cause, .. } => {
            let retryable = call
                .spec
                .step
                .policies()
                .is_none_or(|p| classify(*cause, p) != FailureClass::Permanent);
            retryable.then_some(false)
        }
        #[allow(unreachable_patterns)]
        _ => None,
    }
}
