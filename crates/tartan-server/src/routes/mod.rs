//! Route table. Handlers live beside the resource they serve.

pub(crate) mod bulk;
pub(crate) mod cluster;
pub(crate) mod engine;
pub(crate) mod flows;
mod history;
pub(crate) mod lanes;
pub(crate) mod probes;
pub(crate) mod schedules;
pub(crate) mod session;
pub(crate) mod steps;
mod streamed;
pub(crate) mod streams;
pub(crate) mod webhooks;
pub(crate) mod work;
pub(crate) mod ws;

use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Router;
use tartan_engine::Engine;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Every route and its OpenAPI operation, from one list: each handler's
/// `#[utoipa::path]` names its method and path once, for both. Handlers of
/// one path are listed together.
fn api() -> OpenApiRouter<Engine> {
    OpenApiRouter::with_openapi(crate::openapi::ApiDoc::openapi())
        .routes(routes!(probes::health))
        .routes(routes!(probes::ready))
        .routes(routes!(crate::observe::metrics::render))
        .routes(routes!(document_route))
        .routes(routes!(engine::engine_state))
        .routes(routes!(engine::engine_state_slash))
        .routes(routes!(engine::catalog))
        .routes(routes!(engine::catalog_events))
        .routes(routes!(session::session))
        .routes(routes!(cluster::health))
        .routes(routes!(cluster::step_health))
        .routes(routes!(cluster::cluster))
        .routes(routes!(cluster::cluster_events))
        .routes(routes!(steps::list, steps::register))
        .routes(routes!(steps::get_one, steps::update, steps::unregister))
        .routes(routes!(flows::plan))
        .routes(routes!(flows::list, flows::start))
        .routes(routes!(flows::query))
        .routes(routes!(flows::get_one))
        .routes(routes!(flows::status))
        .routes(routes!(flows::turn))
        .routes(routes!(flows::events))
        .routes(routes!(streams::flow_stream))
        .routes(routes!(streams::events_stream))
        .routes(routes!(flows::cancel))
        .routes(routes!(flows::retry))
        .routes(routes!(flows::resume))
        .routes(routes!(work::flow_work))
        .routes(routes!(work::retry_now))
        .routes(routes!(work::list))
        .routes(routes!(ws::engine_ws))
        .routes(routes!(lanes::list))
        .routes(routes!(lanes::pause))
        .routes(routes!(lanes::resume))
        .routes(routes!(schedules::list, schedules::create))
        .routes(routes!(schedules::get_one, schedules::replace, schedules::delete))
        .routes(routes!(schedules::pause))
        .routes(routes!(schedules::resume))
        .routes(routes!(schedules::trigger))
        .routes(routes!(bulk::list))
        .routes(routes!(bulk::retry))
        .routes(routes!(bulk::cancel))
        .routes(routes!(bulk::resume))
        .routes(routes!(bulk::get_one))
        .routes(routes!(bulk::cancel_job))
        // The URL without its signature (Argyll's form) is refused with 403;
        // `.../{token}/heartbeat` lands on `{signature}` and fails the check.
        .routes(routes!(webhooks::unsigned))
        .routes(routes!(webhooks::deliver))
        .routes(routes!(webhooks::heartbeat))
}

/// The route table; the dashboard's routes only when `ui`.
pub(crate) fn routes(ui: bool) -> Router<Engine> {
    let routes = api().split_for_parts().0;
    match ui {
        true => routes.merge(crate::ui::routes()),
        false => routes,
    }
}

/// The OpenAPI 3.1 document of every route, built once. The dashboard's
/// routes are in it too, turned on or not.
pub fn document() -> &'static utoipa::openapi::OpenApi {
    static DOC: OnceLock<utoipa::openapi::OpenApi> = OnceLock::new();
    DOC.get_or_init(|| crate::openapi::finish(api().merge(crate::ui::documented()).split_for_parts().1))
}

/// This document, OpenAPI 3.1.
///
/// Every route with its parameters, request body, answers and the
/// problem+json refusals it can give, generated from the code. Behind the
/// API's tokens; a read token may fetch it. `clients/` holds clients
/// generated from it.
#[utoipa::path(get, path = "/openapi.json", tag = "health", operation_id = "getOpenApiDocument",
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", body = Object)))]
pub(crate) async fn document_route() -> Response {
    static TEXT: OnceLock<String> = OnceLock::new();
    let text = TEXT.get_or_init(|| document().to_json().unwrap_or_default());
    ([(header::CONTENT_TYPE, "application/json")], text.as_str()).into_response()
}
