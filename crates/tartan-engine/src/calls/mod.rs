//! The calls of this process (docs/architecture.md, "Calls"): made from a
//! decision's `Call` effects once it is committed, sent through their
//! lanes, admitted to the call slots, their exchange made, and their end
//! handed back to the flows to be recorded.
//!
//! - `run`: a call's way from its lanes to its end.
//! - `in_flight`: the calls until their result is recorded, by receipt token.
//! - `slots`: how many run at once, overall and per step, and the queues.
//! - `budget`: the bytes of request and response bodies held at once.
//! - `dispatch`: the HTTP exchange and what it answers.
//! - `outbound`: the client: the step host policy on every address.
//! - `scripts`: what script steps may spend, and where they run.

pub(crate) mod budget;
pub(crate) mod dispatch;
pub(crate) mod in_flight;
pub(crate) mod outbound;
mod run;
pub(crate) mod scripts;
pub(crate) mod slots;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tartan_core::machine::{AttemptResult, LaneWaited};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use slots::CallCounts;

use crate::config::EngineConfig;
use crate::lanes::Lanes;
use crate::memo::Memo;
use crate::metrics::Metrics;
use dispatch::Call;
use in_flight::InFlight;

/// A call's end being recorded.
pub(crate) type Recording<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// What the calls ask of the flows: to record how a call ended (its
/// result, how long it waited in its lanes). Done when it is recorded.
pub(crate) trait Ended: Send + Sync {
    fn conclude<'a>(
        &'a self,
        call: &'a Call,
        result: AttemptResult,
        waited: Option<LaneWaited>,
    ) -> Recording<'a>;
}

/// The calls of this process and what they go through.
pub struct Calls {
    in_flight: InFlight,
    lanes: Arc<Lanes>,
    memo: Arc<Memo>,
    config: Arc<EngineConfig>,
    metrics: Arc<Metrics>,
    ended: Arc<dyn Ended>,
    stopping: CancellationToken,
    /// The calls running, awaited on shutdown.
    tasks: TaskTracker,
}

/// What the calls are made with.
pub(crate) struct CallsParts {
    pub http: reqwest::Client,
    pub lanes: Arc<Lanes>,
    pub memo: Arc<Memo>,
    pub config: Arc<EngineConfig>,
    pub metrics: Arc<Metrics>,
    pub ended: Arc<dyn Ended>,
    pub stopping: CancellationToken,
    pub tasks: TaskTracker,
}

impl Calls {
    pub(crate) fn new(parts: CallsParts) -> Calls {
        let config = &parts.config;
        Calls {
            in_flight: InFlight::new(
                slots::CallSlots::new(
                    config.max_calls,
                    config.max_calls_per_step,
                    config.max_queued_calls,
                    config.max_inflight_bytes,
                ),
                parts.http,
                scripts::Scripts::new(config.script_limits, config.max_scripts),
            ),
            lanes: parts.lanes,
            memo: parts.memo,
            config: parts.config,
            metrics: parts.metrics,
            ended: parts.ended,
            stopping: parts.stopping,
            tasks: parts.tasks,
        }
    }

    /// What scripts may spend, and where the long ones run: decisions that
    /// evaluate scripts share it with script steps.
    pub(crate) fn scripts(&self) -> &scripts::Scripts {
        &self.in_flight.scripts
    }

    /// Held while a decision aborts calls: a call that ends meanwhile
    /// cannot give its slot to a waiting call being aborted too.
    pub(crate) fn hold_slots(&self) -> impl Drop + '_ {
        self.in_flight.slots.hold()
    }

    /// Abort the running calls whose lease was not renewed; their tokens.
    pub(crate) fn abort_unrenewed(&self, calls: Vec<(String, u64)>, renewed: &[String]) -> Vec<String> {
        self.in_flight.abort_unrenewed(calls, renewed)
    }

    /// List a call made elsewhere (a flow step's child flow) in flight, so
    /// that its lease is renewed and an abort finds it: its number and
    /// what aborts it.
    pub(crate) fn list(&self, token: &str) -> (u64, CancellationToken) {
        self.in_flight.list(token)
    }

    /// A call listed with `list` ended.
    pub(crate) fn forget(&self, token: &str, id: u64) {
        self.in_flight.forget(token, id)
    }

    /// A call was left to its lease: there was no room for it.
    pub(crate) fn defer(&self) {
        self.in_flight.defer()
    }
}
