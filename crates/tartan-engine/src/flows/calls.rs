//! The calls of this process: made from a decision's `Call` effects once it
//! is committed, admitted to the call slots, their ends recorded as
//! decisions, aborted when a decision or a lost lease says so. What is in
//! flight is kept by `crate::in_flight`.

use tartan_core::machine::{AttemptResult, Dispatch, Transition};

use std::sync::Arc;

use tartan_core::outcome::{classify, is_rate_limited, FailureCause, FailureClass};
use tokio_util::sync::CancellationToken;

use crate::dispatch::{self, Call};
use crate::lanes::{Lane, Passage};
use crate::slots::{Admission, Admitted};
use crate::traces::Decision;
use crate::Engine;
use tartan_core::machine::LaneWaited;

use super::slot::{Concluded, Unrecorded};

impl Engine {
    /// Record how a call of this process ended: its result, or for an async
    /// step its acceptance. Tried again while the database is unreachable (a
    /// restart, a failover), for as long as this node's lease on the call
    /// holds: a result the step already produced is worth more than a new
    /// call. A commit that did land before its connection dropped is found on
    /// reload and not repeated.
    pub(super) async fn conclude(&self, call: &Call, result: AttemptResult, waited: Option<LaneWaited>) {
        let accepted = call.spec.expects_webhook && matches!(result, AttemptResult::Success { .. });
        let give_up = tokio::time::Instant::now() + self.lease_length().to_std().unwrap_or_default();
        let mut pause = std::time::Duration::from_millis(50);
        loop {
            let (reply, answer) = tokio::sync::oneshot::channel();
            let slot = self.inner.flows.slot(&call.spec.flow_id);
            crate::sync::lock(&slot.pending).push(Concluded {
                step_id: call.spec.step.id.clone(),
                token: call.spec.token.clone(),
                attempt: call.spec.attempt,
                kind: call.spec.kind,
                result: (!accepted).then(|| result.clone()),
                waited: waited.clone(),
                reply,
            });
            let about = Decision {
                command: match (call.spec.is_compensation(), accepted) {
                    (true, _) => "record_compensation",
                    (false, true) => "accept",
                    (false, false) => "record",
                },
                step_id: Some(&call.spec.step.id),
                token: Some(&call.spec.token),
                attempt: Some(call.spec.attempt),
            };
            self.decide_pending(&slot, &call.spec.flow_id, about).await;
            // Recorded by this decision, or by one that took it along.
            let error = match answer.await {
                Ok(Ok(())) => return,
                Ok(Err(Unrecorded::Unavailable(e)))
                    if tokio::time::Instant::now() + pause < give_up
                        && !self.inner.stopping.is_cancelled() =>
                {
                    tracing::warn!(flow_id = %call.spec.flow_id, "database unavailable, trying again in {pause:?}: {e}");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_secs(2));
                    continue;
                }
                Ok(Err(Unrecorded::Unavailable(e) | Unrecorded::Failed(e))) => e,
                Err(_) => "the deciding task went away".to_string(),
            };
            // The item stays active under this node's lease; when the lease
            // expires the sweep calls it again. Nothing is lost.
            tracing::error!(flow_id = %call.spec.flow_id, step_id = %call.spec.step.id, token = %call.spec.token, "recording the call's end failed: {error}");
            return;
        }
    }

    /// Make a call a committed decision started (`Effect::Call`): the
    /// core builds it whole (`tartan_core::machine::Call`); here its
    /// webhook URL is signed, and it is admitted to a slot and sent.
    /// `decision`: the span of the decision that made the call, its
    /// span's parent (docs/operating.md, "Traces").
    pub(super) fn make_call(&self, tx: &Transition, d: &Dispatch, decision: Option<&crate::traces::Span>) {
        let default_ms = tartan_core::duration::as_millis_u64(self.inner.config.step_timeout);
        let Some(mut spec) = tartan_core::machine::Call::of(&tx.state, d, tx.now, default_ms) else {
            return;
        };
        let webhook_url = spec
            .expects_webhook
            .then(|| self.webhook_url(&spec.flow_id, &spec.step.id, &spec.token, spec.attempt));
        if let Some(url) = &webhook_url {
            spec.hand_webhook(url);
        }
        let kept = tx.state.trace.as_deref();
        let call = Call {
            spec,
            webhook_url,
            trace: kept
                .and_then(crate::traces::FlowIds::of)
                .map(|ids| ids.under(decision)),
            tracestate: kept.and_then(|t| t.state.as_deref()).map(std::sync::Arc::from),
        };
        if call.spec.step.is_flow() {
            return self.spawn_child_call(tx, call);
        }
        self.spawn_call(call);
    }

    /// Send a call through its lanes (docs/lanes.md), if it is in any,
    /// then admit it to the call slots.
    fn spawn_call(&self, call: Call) {
        if self.inner.stopping.is_cancelled() {
            // Left active under this node's lease, which `shutdown` hands
            // back: another process (or the next start) calls it.
            return;
        }
        let (id, cancel) = self.inner.calls.list(&call.spec.token);
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
        &self,
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
        let engine = self.clone();
        self.inner.tasks.spawn(async move {
            let rest = &lanes[so_far.permits.len()..];
            match engine.pass_lanes(rest, &call, &cancel).await {
                Some(passage) => {
                    so_far.permits.extend(passage.permits);
                    so_far.waited += passage.waited;
                    engine.admit(Admitted {
                        call,
                        id,
                        cancel,
                        passage: so_far,
                    });
                }
                None => engine.inner.calls.forget(&call.spec.token, id),
            }
        });
    }

    /// The lanes a call goes through: its step's, its host's.
    fn lanes_of(&self, call: &Call) -> Vec<Arc<Lane>> {
        if call.spec.step.is_script() || call.spec.is_compensation() {
            return Vec::new();
        }
        let lanes = &self.inner.lanes;
        let url = lanes
            .by_host()
            .then(|| {
                dispatch::expand_endpoint(
                    &call.spec.endpoint,
                    &call.spec.placeholders,
                    &self.inner.config.step_hosts,
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
        let registry = &self.inner.lanes;
        let token = &call.spec.token;
        let since = std::time::Instant::now();
        let mut permits = Vec::with_capacity(lanes.len());
        for lane in lanes {
            let Ok(wait) = lane.enter(&call.spec.flow_id) else {
                self.inner.calls.defer();
                self.inner.metrics.call_deferred();
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
            self.inner
                .metrics
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
    fn admit(&self, admitted: Admitted) {
        match self.inner.calls.slots.admit(admitted) {
            Admission::Run(admitted) => self.run_call(admitted),
            Admission::Queued => {}
            Admission::Full(Admitted { call, id, .. }) => {
                self.inner.calls.forget(&call.spec.token, id);
                self.inner.calls.defer();
                self.inner.metrics.call_deferred();
                tracing::warn!(flow_id = %call.spec.flow_id, step_id = %call.spec.step.id, token = %call.spec.token,
                    "call queue full (TARTAN_MAX_QUEUED_CALLS); the call is made when its lease runs out");
            }
        }
    }

    /// Make a call that holds a slot; the slot is given back (and the next
    /// waiting calls started) as soon as the exchange ends or is aborted.
    fn run_call(&self, admitted: Admitted) {
        let engine = self.clone();
        self.inner.tasks.spawn(async move {
            let Admitted {
                call,
                id,
                cancel,
                mut passage,
            } = admitted;
            let lanes: Vec<Arc<Lane>> = passage.permits.iter().map(|p| Arc::clone(p.lane())).collect();
            let slot = SlotHeld {
                engine: &engine,
                step_id: &call.spec.step.id,
            };
            let started = std::time::Instant::now();
            let outcome = tokio::select! {
                r = async {
                    // Not started when the process stops: handed back (see
                    // `Engine::shutdown`).
                    if !engine.inner.calls.mark_started(&call.spec.token, id, &engine.inner.stopping) {
                        return None;
                    }
                    let config = &engine.inner.config;
                    let limits = dispatch::Limits {
                        max_response_bytes: config.max_response_bytes,
                        budget: engine.inner.calls.slots.bytes(),
                        max_retry_after_ms: u64::try_from(config.max_retry_after.as_millis())
                            .unwrap_or(u64::MAX),
                        clock: &config.clock,
                        scripts: &engine.inner.calls.scripts,
                    };
                    let tracer = config.tracer.as_ref();
                    // A memoizable step's identical call answered before:
                    // no call (docs/steps.md, "Memoization").
                    if let Some(outputs) = match &call.spec.memo {
                        Some(memo) => engine.inner.memo.lookup(memo).await,
                        None => None,
                    } {
                        return Some(Ended::Done(AttemptResult::Memoized { outputs }, None));
                    }
                    let (result, held) =
                        dispatch::perform(&engine.inner.calls.http, &config.step_hosts, limits, tracer, &call).await;
                    engine.inner.metrics.call_ended(&call, &result, started.elapsed());
                    // The endpoint asked its lane to slow down: every call
                    // of the lane waits, and this one goes back to wait too,
                    // its slot given back, to be sent again when the lane
                    // reopens, with no attempt counted.
                    if let Some(wait) = lane_pause(&call, &result).filter(|_| !lanes.is_empty() && passage.resent < MAX_RESENDS) {
                        let reason = pause_reason(&result);
                        for lane in &lanes {
                            lane.pause_for(wait, reason.clone());
                            engine.inner.metrics.lanes.paused(&lane.id);
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
                    engine.inner.metrics.call_aborted(&call);
                    None
                }
            };
            drop(slot);
            // The lanes' slots go back with the exchange, not the record.
            passage.permits.clear();
            if let Some(Ended::Again) = outcome {
                passage.resent += 1;
                return engine.wait_in_lanes(lanes, call, id, cancel, passage);
            }
            // The call stays listed in flight (its lease renewed) until its
            // result is recorded, which may wait out a database outage. Its
            // token is cancelled now that it answered: there is nothing left
            // to abort, and a renewal that finds the row already recorded
            // must not take it for a lost lease.
            if let Some(Ended::Done(result, held)) = outcome {
                cancel.cancel();
                engine.conclude(&call, result, passage.waited(&lanes)).await;
                // The body's bytes are given back once its result is
                // recorded (docs/durability.md, "Bytes in flight").
                drop(held);
            }
            engine.inner.calls.forget(&call.spec.token, id);
        });
    }

    /// Calls holding a slot and waiting for one; calls left to their lease
    /// because the queue was full, since start.
    pub fn call_counts(&self) -> (crate::CallCounts, u64) {
        (self.inner.calls.slots.counts(), self.inner.calls.deferred())
    }

    /// The receipt tokens of the calls that went out and are still running.
    pub(crate) fn started_calls(&self) -> Vec<String> {
        self.inner.calls.started()
    }

    /// This process's calls in flight: receipt token and call number.
    pub(crate) fn calls_in_flight(&self) -> Vec<(String, u64)> {
        self.inner.calls.all()
    }

    /// Whether this process has a call in flight for `token`.
    pub(crate) fn is_in_flight(&self, token: &str) -> bool {
        self.inner.calls.contains(token)
    }

    /// Abort the calls other processes announce they cancelled (Postgres
    /// `NOTIFY`); without it, lease renewal finds them within `TARTAN_LEASE / 3`.
    pub(crate) fn spawn_abort_listener(&self, notices: Option<tokio::sync::mpsc::Receiver<Vec<String>>>) {
        let engine = self.clone();
        crate::notices::on_notices(
            notices,
            self.inner.stopping.clone(),
            move |tokens: Vec<String>| {
                for token in tokens {
                    if engine.abort_call(&token) {
                        tracing::info!(%token, "call aborted: its flow was cancelled by another process");
                    }
                }
                std::future::ready(())
            },
        );
    }

    /// Abort the call in flight for `token`, if this process has one;
    /// whether it had.
    pub(crate) fn abort_call(&self, token: &str) -> bool {
        self.inner.calls.abort(token)
    }
}

/// A call's slot, given back when dropped (the call ended, was aborted, or
/// its task panicked); the calls that get a slot then are started, unless
/// the engine is stopping (they stay leased; the next start resumes them).
struct SlotHeld<'a> {
    engine: &'a Engine,
    step_id: &'a str,
}

impl Drop for SlotHeld<'_> {
    fn drop(&mut self) {
        for next in self.engine.inner.calls.slots.release(self.step_id) {
            if self.engine.inner.stopping.is_cancelled() {
                self.engine.inner.calls.forget(&next.call.spec.token, next.id);
                continue;
            }
            self.engine.run_call(next);
        }
    }
}

/// How a call's exchange ended.
enum Ended {
    Done(AttemptResult, Option<crate::budget::Held>),
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
