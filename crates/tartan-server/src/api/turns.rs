//! A flow's place in its concurrency key's line (docs/concurrency.md).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /engine/flow/{id}/turn`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FlowTurnAnswer {
    pub id: String,
    /// The flow's concurrency key.
    pub key: String,
    /// How many of the key's flows may run at once.
    pub limit: i64,
    /// `waiting` for its turn, or `running`.
    #[schema(example = "waiting")]
    pub state: String,
    /// Among the key's waiting flows, 1 for the next to run; 0 once running.
    pub place: i64,
    /// The key's flows running now.
    pub running: i64,
    /// The key's flows waiting now.
    pub waiting: i64,
}

impl FlowTurnAnswer {
    pub fn of(id: String, turn: tartan_engine::FlowTurn) -> Self {
        FlowTurnAnswer {
            id,
            key: turn.key,
            limit: turn.limit,
            state: turn.state.to_string(),
            place: turn.place,
            running: turn.running,
            waiting: turn.waiting,
        }
    }
}
