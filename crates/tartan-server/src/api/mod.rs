//! The API's bodies as public types (docs/api.md): the answers the
//! handlers send (`answers`) and the requests they read with serde
//! (`requests`). The server, its OpenAPI document and the `tartan` CLI all
//! use these, so a field renamed in one place is renamed in all three.
//! Requests with rules of their own (a flow start, a step, a bulk job) are
//! parsed by the core into its domain types instead.

pub mod answers;
pub mod health;
pub mod lanes;
pub mod requests;
pub mod schedules;
pub mod turns;
