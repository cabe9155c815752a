//! `/engine/work` and `/engine/flow/{id}/work`: the work-item projection;
//! `/engine/flow/{id}/work/{token}/retry`: an item's retry started now.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use tartan_core::flow::WorkStatus;
use tartan_core::request::filter_id;
use tartan_engine::reads::WorkQuery;
use tartan_engine::Engine;

use crate::api::answers::{WorkItem, WorkList, WorkRetried};
use crate::api::lanes::LaneWaitShown;
use crate::error::{ApiError, Problem};
use crate::extract::{Path, Query};

const MAX_LIMIT: usize = 1000;

/// The item, with the lane its call waits in when this engine holds it.
fn with_lane(engine: &Engine, w: &tartan_engine::reads::WorkView) -> WorkItem {
    let mut item = WorkItem::from(w);
    if item.status == WorkStatus::Active {
        item.lane = engine
            .lanes()
            .lane_wait(&item.token)
            .as_ref()
            .map(LaneWaitShown::of);
    }
    item
}

/// Every work item of a flow, flat.
///
/// Each item as the flow's state shows it, without its inputs and outputs,
/// with `flow_id`, `step_id`, `token`, `attempt` and `last_error` added,
/// and the lane its call waits in when it waits for one. Not paged.
#[utoipa::path(get, path = "/engine/flow/{id}/work", tag = "work", operation_id = "listFlowWork",
    params(("id" = String, Path, description = "Flow id")),
    responses(
        (status = 200, description = "The flow's work items", body = WorkList),
        (status = 404, description = "No such flow", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn flow_work(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<Json<WorkList>, ApiError> {
    // 404 for an unknown flow, not an empty list (its status alone: the
    // whole state may be 64 MiB).
    engine.flows().flow_status(&id).await?;
    let mut items = Vec::new();
    let mut cursor = None;
    loop {
        let page = engine
            .work_page(&WorkQuery {
                flow_id: Some(id.clone()),
                limit: MAX_LIMIT,
                cursor,
                ..WorkQuery::default()
            })
            .await?;
        items.extend(page.items.iter().map(|w| with_lane(&engine, w)));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok(Json(WorkList {
        count: items.len(),
        work_items: items,
        next_cursor: None,
    }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct WorkParams {
    /// Only items in this status.
    #[param(value_type = Option<WorkStatus>)]
    status: Option<String>,
    /// Only items of this step.
    step: Option<String>,
    /// Only items of this flow.
    flow_id: Option<String>,
    /// Items per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// Work items across flows, a page at a time.
///
/// Filtered by `status`, `step` and `flow_id` (an empty parameter is none;
/// ids at most 256 bytes); `limit` 1 to 1000 (default 100), and `cursor`,
/// the previous page's `next_cursor`, absent on the last page.
#[utoipa::path(get, path = "/engine/work", tag = "work", operation_id = "listWork", params(WorkParams),
    responses(
        (status = 200, description = "A page of work items", body = WorkList),
        (status = 400, description = "A bad filter, limit or cursor", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn list(
    State(engine): State<Engine>,
    Query(p): Query<WorkParams>,
) -> Result<Json<WorkList>, ApiError> {
    let status = match p.status.as_deref() {
        None | Some("") => None,
        Some(s) => Some(
            WorkStatus::parse(s)
                .ok_or_else(|| ApiError::bad_request(format!("status: unknown work status {s:?}")))?,
        ),
    };
    let limit = p.limit.unwrap_or(100);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ApiError::bad_request(format!(
            "limit: must be between 1 and {MAX_LIMIT}"
        )));
    }
    let query = WorkQuery {
        flow_id: filter_id("flow_id", p.flow_id)?,
        step_id: filter_id("step", p.step)?,
        status,
        limit,
        cursor: super::flows::cursor_of(p.cursor, |c| tartan_engine::reads::decode_cursor(c).is_some())?,
    };
    let page = engine.work_page(&query).await?;
    let items: Vec<WorkItem> = page.items.iter().map(|w| with_lane(&engine, w)).collect();
    Ok(Json(WorkList {
        count: items.len(),
        work_items: items,
        next_cursor: page.next_cursor,
    }))
}

/// Start a work item's retry now.
///
/// For an item waiting for a retry that is not yet due (a long backoff, a
/// far `Retry-After`) when waiting is pointless: the step was fixed, the
/// outage is over. Its next attempt starts at once, as it would have when
/// due: the predicate and its step's health are judged as then, and the
/// attempt counts against its retries. The flow's events record it
/// (`work_retry_hastened`, with the time the retry was due), and the
/// attempt whose wait was cut short shows `hastened_at`. A `409` when the
/// flow is not active or the item is not waiting for a retry (running,
/// finished, parked, or waiting for its step's health); no body is read.
#[utoipa::path(post, path = "/engine/flow/{id}/work/{token}/retry", tag = "work", operation_id = "retryWorkNow",
    params(("id" = String, Path, description = "Flow id"),
           ("token" = String, Path, description = "The work item's token")),
    responses(
        (status = 202, description = "Its next attempt started", body = WorkRetried),
        (status = 404, description = "No such flow, or no such item in it", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The flow is not active, or the item does not wait for a retry", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn retry_now(
    State(engine): State<Engine>,
    Path((id, token)): Path<(String, String)>,
) -> Result<(StatusCode, Json<WorkRetried>), ApiError> {
    let hastened = engine.flows().retry_work_now(&id, &token).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(WorkRetried {
            message: "Retry started".into(),
            flow_id: id,
            step_id: hastened.step_id,
            token,
            status: hastened.status.into(),
            attempt: hastened.attempt,
            was_due_at: hastened.was_due_at,
        }),
    ))
}
