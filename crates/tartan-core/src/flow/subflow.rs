//! Sub-flows: a flow step's work item runs a flow of its own, its child.
//! The child names its parent in Argyll's metadata keys, and its id says
//! where it belongs (docs/steps.md, "Sub-flows").

use serde::{Deserialize, Serialize};

/// The work item a child flow runs for, as Argyll's metadata names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ParentLink {
    pub parent_flow_id: String,
    pub parent_step_id: String,
    pub parent_work_item_token: String,
}

/// The id of the `run`th child flow (counting from 1) of a work item:
/// `<parent>:<step>:<token>`, as Argyll names it, for the first; a retry
/// of the item runs a new child, `<parent>:<step>:<token>:<run>`. No flow
/// a client starts has a `:` in its id (ids are sanitised), so a child's
/// id is never a client's.
pub fn child_flow_id(parent: &str, step_id: &str, token: &str, run: usize) -> String {
    if run <= 1 {
        format!("{parent}:{step_id}:{token}")
    } else {
        format!("{parent}:{step_id}:{token}:{run}")
    }
}

/// Whether `flow_id` names a child flow.
pub fn is_child_id(flow_id: &str) -> bool {
    flow_id.contains(':')
}
