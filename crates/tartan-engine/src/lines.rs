//! Concurrency keys (docs/concurrency.md): letting a key's next flows in.
//!
//! A flow's row in its key's line is written by its own commits (it joins
//! when it starts or is retried, runs once its `flow_admitted` commits,
//! leaves when it ends). What is left is to let the next flows in when
//! there is room: after a commit that joined or left a line, this process
//! asks the database which of the key's flows may run now (one decision
//! per key across engines, `LineStore::line_admit`) and decides `Admit` on
//! each. A process that dies between the two leaves rows the sweep finds
//! (`sweep`): keys with room and flows waiting, and flows let in whose
//! decision never committed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tartan_core::machine::Command;
use tartan_store::{Admitted, LinePlace, LineStore};
use tokio_util::sync::CancellationToken;

use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::metrics::Metrics;
use crate::timers::Decide;

/// A flow's place in its concurrency key's line (`GET /engine/flow/{id}/turn`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowTurn {
    pub key: String,
    pub limit: i64,
    /// `waiting` for its turn, or `running` (let in).
    pub state: &'static str,
    /// Among the key's waiting flows, 1 for the next to run; 0 once running.
    pub place: i64,
    /// The key's flows running now, and waiting.
    pub running: i64,
    pub waiting: i64,
}

impl From<LinePlace> for FlowTurn {
    fn from(p: LinePlace) -> Self {
        FlowTurn {
            state: if p.state == "waiting" {
                "waiting"
            } else {
                "running"
            },
            key: p.key,
            limit: p.limit,
            place: p.place,
            running: p.running,
            waiting: p.waiting,
        }
    }
}

/// The lines of this process's engine.
pub(crate) struct Lines {
    store: Arc<dyn LineStore>,
    decide: Arc<dyn Decide>,
    config: Arc<EngineConfig>,
    metrics: Arc<Metrics>,
    stopping: CancellationToken,
    /// Keys being let in now, each with whether it was nudged again since
    /// (then it is looked at once more): one task per key, however many
    /// of its flows end at once.
    busy: Mutex<HashMap<String, bool>>,
}

/// What the lines are kept with.
pub(crate) struct LinesParts {
    pub store: Arc<dyn LineStore>,
    pub decide: Arc<dyn Decide>,
    pub config: Arc<EngineConfig>,
    pub metrics: Arc<Metrics>,
    pub stopping: CancellationToken,
}

impl Lines {
    pub(crate) fn new(parts: LinesParts) -> Lines {
        Lines {
            store: parts.store,
            decide: parts.decide,
            config: parts.config,
            metrics: parts.metrics,
            stopping: parts.stopping,
            busy: Mutex::default(),
        }
    }

    /// A flow of `key` joined or left its line: let in whom the room allows.
    pub(crate) fn nudge(self: &Arc<Self>, key: &str) {
        {
            let mut busy = crate::sync::lock(&self.busy);
            if let Some(again) = busy.get_mut(key) {
                *again = true;
                return;
            }
            busy.insert(key.to_owned(), false);
        }
        let lines = Arc::clone(self);
        let key = key.to_owned();
        tokio::spawn(async move {
            loop {
                if lines.stopping.is_cancelled() {
                    crate::sync::lock(&lines.busy).remove(&key);
                    return;
                }
                if let Err(e) = lines.admit(&key).await {
                    // The sweep lets them in later.
                    tracing::warn!(key, "letting a concurrency key's flows in failed: {e}");
                }
                let mut busy = crate::sync::lock(&lines.busy);
                match busy.get_mut(&key) {
                    Some(again) if *again => *again = false,
                    _ => {
                        busy.remove(&key);
                        return;
                    }
                }
            }
        });
    }

    /// Let in `key`'s flows the room allows, and decide their turn.
    async fn admit(&self, key: &str) -> Result<(), EngineError> {
        let now = self.config.clock.now().timestamp_micros();
        for admitted in self.store.line_admit(key, now).await? {
            self.let_in(&admitted).await;
        }
        Ok(())
    }

    /// Decide a flow's turn: `flow_admitted`, committed with its row. The
    /// turn is for the place it held when let in: a flow ended and retried
    /// since waits in its new place (`Command::Admit`).
    async fn let_in(&self, admitted: &Admitted) {
        let flow_id = admitted.flow_id.as_str();
        let command = Command::Admit {
            joined_us: admitted.joined_us,
        };
        match self.decide.decide(flow_id, command).await {
            Ok(()) | Err(EngineError::FlowNotFound(_)) => {}
            Err(e) => tracing::warn!(flow_id, "letting a flow in on its turn failed: {e}"),
        }
    }

    /// A flow's place in its line (`None`: no key, or it ended).
    pub(crate) async fn place(&self, flow_id: &str) -> Result<Option<FlowTurn>, EngineError> {
        Ok(self.store.line_place(flow_id).await?.map(FlowTurn::from))
    }

    /// The sweep's part: what a dead process left undone (module docs),
    /// and the lines' counts for the metrics.
    pub(crate) async fn sweep(self: &Arc<Self>) -> Result<(), EngineError> {
        // A flow let in a lease ago whose decision has not committed: its
        // engine died, or the decision failed.
        let lease = chrono::Duration::from_std(self.config.lease).unwrap_or(chrono::Duration::MAX);
        let before = self.config.clock.now() - lease;
        let stalled = self.store.lines_stalled(before.timestamp_micros()).await?;
        for admitted in &stalled.admitting {
            self.let_in(admitted).await;
        }
        for key in &stalled.keys {
            self.nudge(key);
        }
        let (waiting, running) = self.store.line_counts().await?;
        self.metrics.lines.counted(waiting, running);
        Ok(())
    }
}
