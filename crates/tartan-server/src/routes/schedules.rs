//! `/engine/schedule`: flows started on a clock (docs/schedules.md).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use tartan_core::schedule::ScheduleRequest;
use tartan_engine::Engine;

use crate::api::schedules::{ScheduleList, ScheduleShown, TriggerAnswer};
use crate::error::{ApiError, Problem};
use crate::extract::{self, Path};

/// Create a schedule.
///
/// One of `cron` (five fields, six with seconds, or `@hourly`-style names),
/// `every` (at least 1 s) or `at` (RFC 3339), read in `timezone` (IANA,
/// default UTC); `flow` is what each fire starts (its goals must be
/// plannable now). Each fire starts at most one flow whatever the number
/// of engines, with the id `<schedule>-<fire time>` and the labels
/// `schedule` and `scheduled_at`. A bad field is a `400` naming it; a taken
/// id a `409`.
#[utoipa::path(post, path = "/engine/schedule", tag = "schedules", operation_id = "createSchedule",
    request_body(content = ScheduleRequest, description = "The schedule",
        example = json!({"id": "nightly-report", "cron": "0 3 * * *", "timezone": "Europe/Berlin",
            "flow": {"goals": ["report"], "init": {"day": ["yesterday"]}}})),
    responses(
        (status = 201, description = "Created", body = ScheduleShown),
        (status = 400, description = "A field is not valid, or the goals cannot be planned", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The id is taken, or there are as many schedules as a database holds", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn create(
    State(engine): State<Engine>,
    request: Result<extract::Json<ScheduleRequest>, ApiError>,
) -> Result<(StatusCode, Json<ScheduleShown>), ApiError> {
    let extract::Json(request) = request?;
    let view = engine.schedules().create(request).await?;
    Ok((StatusCode::CREATED, Json(ScheduleShown::of(view))))
}

/// Every schedule, by id.
///
/// Each with its spec, whether it is paused, its next five fire times, its
/// last fire with the flow it started and that flow's status. At most
/// 10,000 schedules exist.
#[utoipa::path(get, path = "/engine/schedule", tag = "schedules", operation_id = "listSchedules",
    responses((status = 200, description = "Every schedule", body = ScheduleList)))]
pub(crate) async fn list(State(engine): State<Engine>) -> Result<Json<ScheduleList>, ApiError> {
    let schedules: Vec<ScheduleShown> = engine
        .schedules()
        .list()
        .await?
        .into_iter()
        .map(ScheduleShown::of)
        .collect();
    Ok(Json(ScheduleList {
        count: schedules.len(),
        schedules,
    }))
}

/// One schedule.
///
/// As listed, with its latest 20 fires, newest first: what each came to
/// (`started`, `skipped`, `buffered`, `missed`, `failed`), its flow, and why.
#[utoipa::path(get, path = "/engine/schedule/{id}", tag = "schedules", operation_id = "getSchedule",
    params(("id" = String, Path, description = "Schedule id")),
    responses(
        (status = 200, description = "The schedule", body = ScheduleShown),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn get_one(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<Json<ScheduleShown>, ApiError> {
    Ok(Json(ScheduleShown::of(engine.schedules().get(&id).await?)))
}

/// Replace a schedule.
///
/// Its history and its flows stay; `every` still counts from its creation.
/// A kept `buffer_one` fire is dropped.
#[utoipa::path(put, path = "/engine/schedule/{id}", tag = "schedules", operation_id = "replaceSchedule",
    params(("id" = String, Path, description = "Schedule id")),
    request_body(content = ScheduleRequest, description = "The schedule; `id` may be left out",
        example = json!({"every": "15m", "flow": {"goals": ["report"]}})),
    responses(
        (status = 200, description = "Replaced", body = ScheduleShown),
        (status = 400, description = "A field is not valid", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn replace(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    request: Result<extract::Json<ScheduleRequest>, ApiError>,
) -> Result<Json<ScheduleShown>, ApiError> {
    let extract::Json(request) = request?;
    Ok(Json(ScheduleShown::of(
        engine.schedules().replace(&id, request).await?,
    )))
}

/// Delete a schedule.
///
/// Its history goes with it; the flows it started stay (find them with
/// the label `schedule`).
#[utoipa::path(delete, path = "/engine/schedule/{id}", tag = "schedules", operation_id = "deleteSchedule",
    params(("id" = String, Path, description = "Schedule id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn delete(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    engine.schedules().delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Pause a schedule.
///
/// Nothing fires, in any engine, until it is resumed; a fire kept by
/// `buffer_one` is dropped. No body.
#[utoipa::path(post, path = "/engine/schedule/{id}/pause", tag = "schedules", operation_id = "pauseSchedule",
    params(("id" = String, Path, description = "Schedule id")),
    responses(
        (status = 200, description = "Paused", body = ScheduleShown),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn pause(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<Json<ScheduleShown>, ApiError> {
    Ok(Json(ScheduleShown::of(
        engine.schedules().set_paused(&id, true).await?,
    )))
}

/// Resume a schedule.
///
/// It fires from its next time after now: the times passed while it was
/// paused are not made up for. No body.
#[utoipa::path(post, path = "/engine/schedule/{id}/resume", tag = "schedules", operation_id = "resumeSchedule",
    params(("id" = String, Path, description = "Schedule id")),
    responses(
        (status = 200, description = "Resumed", body = ScheduleShown),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn resume(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<Json<ScheduleShown>, ApiError> {
    Ok(Json(ScheduleShown::of(
        engine.schedules().set_paused(&id, false).await?,
    )))
}

/// Fire a schedule now.
///
/// A fire at this instant, under the schedule's `overlap` rule (paused or
/// not); its next time stays. Answers what it came to.
#[utoipa::path(post, path = "/engine/schedule/{id}/trigger", tag = "schedules", operation_id = "triggerSchedule",
    params(("id" = String, Path, description = "Schedule id")),
    responses(
        (status = 200, description = "What the fire came to", body = TriggerAnswer),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn trigger(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<Json<TriggerAnswer>, ApiError> {
    let done = engine.schedules().trigger(&id).await?;
    Ok(Json(TriggerAnswer::of(&id, done)))
}
