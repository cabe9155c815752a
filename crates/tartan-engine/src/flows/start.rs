//! Starting a flow: the request checked and planned, its start decided and
//! committed with the request's digest, a repeat told from another start.

use std::sync::Arc;

use tartan_core::flow::ApplyError;
use tartan_core::flow::FlowState;
use tartan_core::machine::{self, Command};
use tartan_core::plan::start_plan;
use tartan_core::request::{FlowStart, StartFlow};
use tartan_store::StoreError;

use super::admission::Released;
use super::slot::Cached;
use super::{Committed, Flows, StartOutcome};
use crate::error::EngineError;
use crate::traces;

impl Flows {
    /// Start a flow. An identical repeat of an earlier start is accepted; a
    /// different request under the same id is `FlowExists`.
    pub async fn start_flow(self: &Arc<Self>, request: StartFlow) -> Result<StartOutcome, EngineError> {
        self.start_flow_traced(request, traces::CallerTrace::default())
            .await
    }

    /// `start_flow`, continuing the caller's trace when its `traceparent`
    /// is a valid W3C one (with its `tracestate`); else (and when absent)
    /// the flow gets a trace of its own. Kept with the flow
    /// (docs/operating.md, "Traces").
    pub async fn start_flow_traced(
        self: &Arc<Self>,
        request: StartFlow,
        caller: traces::CallerTrace<'_>,
    ) -> Result<StartOutcome, EngineError> {
        if self.stopping.is_cancelled() {
            return Err(EngineError::ShuttingDown);
        }
        // The flow starts at this instant: its deadline is measured from it.
        let started = self.config.clock.now();
        let mut start = request.parse(started, self.config.max_step_attempts)?;
        let mut trace = traces::new_flow_trace(caller);
        // The request's log lines name the flow's trace (docs/operating.md,
        // "Logs"), its own when the caller sent none.
        let request = tracing::Span::current();
        request.record("trace_id", trace.trace_id.as_str());
        request.record("span_id", trace.span_id.as_str());
        // Ended when dropped, once the start is done (or refused).
        let _span = self
            .config
            .tracer
            .as_ref()
            .and_then(|tracer| traces::start_span(tracer, &start.id, &mut trace));
        start.options.trace = Some(Arc::new(trace));
        let active = self.locks.len();
        if active >= self.config.max_active_flows {
            return Err(EngineError::Overloaded(active));
        }
        // A repeated id is found by the commit (the flow row exists): no
        // read before every start to look for one.
        let view = self.catalog.for_goals(&start.goals).await?;
        let plan = start_plan(&view.catalog, &start.goals, &start.init)?;
        machine::check_fan_out(&plan, &start.init)?;
        let init_bytes = tartan_core::json::json_len(&start.init);
        let max_bytes = self.config.max_flow_bytes;
        if init_bytes > max_bytes {
            return Err(tartan_core::error::ValidationError::new(
                "init",
                format!(
                    "the initial inputs take {init_bytes} bytes of JSON, more than a flow may hold \
                     ({max_bytes} bytes, TARTAN_MAX_FLOW_BYTES)"
                ),
            )
            .into());
        }
        let FlowStart {
            id,
            init,
            options,
            text,
            ..
        } = start;
        let command = Command::Start {
            flow_id: id.clone(),
            plan,
            init,
            options,
        };
        match self
            .commit_start(&id, command, started, Some(request_digest(&text)), None)
            .await?
        {
            Committed::Started => Ok(StartOutcome::Started),
            // (A client's start has no call to be aborted.)
            Committed::Exists | Committed::Aborted => {
                let existing = self.store.flow_request(&id).await?.unwrap_or_default();
                same_request(&id, &existing, &text)
            }
        }
    }

    /// Decide a flow's start (`command`, at `started`), commit it with the
    /// request's digest and carry it out. A client's start (with its
    /// `request`) takes a place in `max_active_flows` if one is free, else
    /// is `Overloaded`; a child's start holds one already
    /// (`admission::Place`), and is given up if its call is `aborted` by
    /// then.
    pub(super) async fn commit_start(
        self: &Arc<Self>,
        id: &str,
        command: Command,
        started: chrono::DateTime<chrono::Utc>,
        request: Option<String>,
        aborted: Option<&tokio_util::sync::CancellationToken>,
    ) -> Result<Committed, EngineError> {
        let slot = match &request {
            Some(_) => self.locks.admit(id).map_err(EngineError::Overloaded)?,
            None => self.locks.slot(id),
        };
        // Declared before the lock's guard, so dropped after it.
        let _release = Released::on_exit(&self.locks, id, &slot);
        let mut guard = slot.cached.lock().await;
        // Looked at under the child's lock, which stopping the child takes
        // too (`stop_child`): either that stop finds the child, or the child
        // never starts and the stop says so to its parent.
        if aborted.is_some_and(|a| a.is_cancelled()) {
            return Ok(Committed::Aborted);
        }
        let scripted = matches!(&command, Command::Start { plan, .. } if plan.is_scripted());
        // A scripted start may be decided twice (`decision_context`): only
        // then is the command kept for the second time.
        let spare = scripted.then(|| command.clone());
        let mut command = Some(command);
        let mut tx = self.decision_context(started, scripted, |ctx| {
            let command = command
                .take()
                .or_else(|| spare.clone())
                .ok_or(ApplyError::AlreadyStarted)?;
            machine::apply(FlowState::default(), command, ctx)
        })?;
        let sequence = tx.events.len() as i64;
        let commit = self.commit_for(&mut tx, 0, request);
        let state = Arc::clone(&commit.state);
        match self.writer.commit(commit).await {
            Ok(()) => {}
            Err(StoreError::FlowExists(_)) => return Ok(Committed::Exists),
            Err(e) => return Err(e.into()),
        }
        let busy = tx.state.has_active_work();
        *guard = busy.then_some(Cached { state, sequence });
        drop(guard);
        self.carry_out(&tx, None);
        Ok(Committed::Started)
    }
}

fn same_request(flow_id: &str, existing: &str, new: &str) -> Result<StartOutcome, EngineError> {
    // Flows started before requests were kept as digests kept the text.
    if existing == request_digest(new) || existing == new {
        Ok(StartOutcome::AlreadyStarted)
    } else {
        Err(EngineError::FlowExists(flow_id.to_string()))
    }
}

/// What a flow keeps of its start request, to tell a repeat from another
/// start under the same id: its digest, not the text. Kept whole, a 1 MB
/// start was stored again beside the events that hold its inputs.
fn request_digest(text: &str) -> String {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(text.as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}
