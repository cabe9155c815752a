//! `GET /engine/session`: what the caller's token may do, so that a client
//! (the dashboard) can offer only what it may do. The answer depends on the
//! token alone; it names neither the token nor anything else of the server.

use axum::Extension;
use axum::Json;

use crate::api::answers::Session;
use crate::security::Access;

/// What the request's token may do.
///
/// `full`, `read` (reads only: `GET` routes, plan previews and flow
/// queries), or `open` (no tokens are configured), so that a client can
/// offer only what it may do. The answer names neither the token nor
/// anything else of the server.
#[utoipa::path(get, path = "/engine/session", tag = "engine", operation_id = "getSession",
    responses((status = 200, description = "What the caller's token may do", body = Session)))]
pub(crate) async fn session(access: Option<Extension<Access>>) -> Json<Session> {
    // The token layer sets it on every request it lets through here; were
    // it missing, the least is claimed.
    let access = access.map_or(Access::Read, |Extension(a)| a);
    Json(Session {
        access: access.as_str().into(),
    })
}
