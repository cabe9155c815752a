//! `/engine/lanes`: every lane's limits and state; pausing and resuming
//! one (docs/lanes.md, "Operating").

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use tartan_core::duration::{parse_duration, DurationKind};
use tartan_engine::Engine;

use crate::api::lanes::{LaneList, LanePause, LaneShown};
use crate::error::{ApiError, Problem};
use crate::extract::Path;

/// A pause's body is a duration at most.
const PAUSE_BODY_LIMIT: usize = 1024;
/// The longest timed pause; longer is a pause until resumed.
const MAX_PAUSE: std::time::Duration = std::time::Duration::from_secs(366 * 86_400);

/// Every lane, with its limits and state.
///
/// Lanes declared by a step (`limits`), configured for a host (`lanes`),
/// or known to the database from earlier calls: their limits, the slots
/// held across engines, their pause and breaker, and the lane in this
/// engine.
#[utoipa::path(get, path = "/engine/lanes", tag = "lanes", operation_id = "listLanes",
    responses((status = 200, description = "Every lane", body = LaneList)))]
pub(crate) async fn list(State(engine): State<Engine>) -> Result<Json<LaneList>, ApiError> {
    let lanes: Vec<LaneShown> = engine.lanes().list().await?.iter().map(LaneShown::of).collect();
    Ok(Json(LaneList {
        count: lanes.len(),
        lanes,
    }))
}

/// Pause a lane in every engine.
///
/// No call of the lane starts, in any engine, until the time given passes
/// or it is resumed; calls already sent finish. `{"for": "30s"}` pauses
/// for that long (at most 366 days); no body, or no `for`, until resumed.
#[utoipa::path(post, path = "/engine/lanes/{id}/pause", tag = "lanes", operation_id = "pauseLane",
    params(("id" = String, Path, description = "Lane id: `step:<id>` or `host:<host[:port]>`")),
    request_body(content = Option<LanePause>, description = "Optional: `{\"for\": \"30s\"}`; absent: until resumed",
        example = json!({"for": "30s"})),
    responses(
        (status = 200, description = "The lane, paused", body = LaneShown),
        (status = 400, description = "A bad body or duration", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such lane", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn pause(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    request: axum::extract::Request,
) -> Result<(StatusCode, Json<LaneShown>), ApiError> {
    let body: LanePause = crate::extract::optional_object(request, PAUSE_BODY_LIMIT).await?;
    let wait = match body.for_.filter(|v| !v.is_null()) {
        None => None,
        Some(v) => {
            let d = parse_duration(&v, DurationKind::Timeout)
                .map_err(|e| ApiError::bad_request(format!("for: {e}")))?;
            if d > MAX_PAUSE {
                return Err(ApiError::bad_request(
                    "for: at most 366 days; for longer, pause without `for` (until resumed)",
                ));
            }
            Some(d)
        }
    };
    let lane = engine.lanes().pause_lane(&id, wait).await?;
    Ok((StatusCode::OK, Json(LaneShown::of(&lane))))
}

/// Resume a lane: end its pause and close its breaker.
///
/// In every engine, as a pause is. An unknown lane is a `404`. No body;
/// send `Content-Type: application/json` all the same, as on every `POST`.
#[utoipa::path(post, path = "/engine/lanes/{id}/resume", tag = "lanes", operation_id = "resumeLane",
    params(("id" = String, Path, description = "Lane id")),
    responses(
        (status = 200, description = "The lane, resumed", body = LaneShown),
        (status = 404, description = "No such lane", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn resume(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<LaneShown>), ApiError> {
    let lane = engine.lanes().resume_lane(&id).await?;
    Ok((StatusCode::OK, Json(LaneShown::of(&lane))))
}
