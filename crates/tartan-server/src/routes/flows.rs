//! `/engine/flow` and `/engine/plan`: start, preview, read and query flows.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde::Deserialize;
use tartan_core::duration::{parse_duration_str, DurationKind};
use tartan_core::filter::{FilterText, FlowFilter};
use tartan_core::flow::{FlowState, FlowStatus};
use tartan_core::ids::sanitize_id;
use tartan_core::plan::{build_plan, ExecutionPlan, PlanMode};
use tartan_core::request::{PlanRequest, StartFlow, MAX_CURSOR_LEN};
use tartan_engine::reads::{FlowQuery, SortOrder};
use tartan_engine::{Engine, EngineError};

use super::history::{PageParams, PAGE_BYTES};
use crate::api::answers::{
    EventList, FlowAnswer, FlowCancelled, FlowPage, FlowResumed, FlowRetried, FlowStatusAnswer, FlowSummary,
};
use crate::api::requests::{QueryRequest, ResumeBody, RetryBody};
use crate::error::{ApiError, Problem};
use crate::extract::{self, Path, Query};

/// Most flows one query returns.
const MAX_QUERY_LIMIT: usize = 1000;
const DEFAULT_QUERY_LIMIT: usize = 100;

/// `POST /engine/flow`; a refusal is counted by its reason
/// (docs/operating.md, "Metrics"), a body that could not be read included.
#[utoipa::path(post, path = "/engine/flow", tag = "flows", request_body = StartFlow,
    params(("traceparent" = Option<String>, Header, description = "W3C trace context the flow joins")),
    responses(
        (status = 201, description = "Started (or an identical start repeated); `message` is empty", body = FlowAnswer),
        (status = 400, description = "The start is not valid, or inputs are missing", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "A goal step is not registered", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The id holds a different start", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Too many active flows, or the engine is stopping", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ))]
pub(crate) async fn start(
    State(engine): State<Engine>,
    headers: HeaderMap,
    request: Result<extract::Json<StartFlow>, ApiError>,
) -> Result<(StatusCode, Json<FlowAnswer>), ApiError> {
    let started = async {
        let extract::Json(request) = request?;
        let id = sanitize_id(&request.id);
        // The caller's trace (docs/operating.md, "Traces"): one `traceparent`
        // header, else none; the engine ignores one that is not valid.
        let mut given = headers.get_all("traceparent").iter();
        let traceparent = match (given.next(), given.next()) {
            (Some(one), None) => one.to_str().ok(),
            _ => None,
        };
        engine.start_flow_traced(request, traceparent).await?;
        Ok((
            StatusCode::CREATED,
            Json(FlowAnswer {
                message: "".into(),
                flow_id: id,
            }),
        ))
    };
    started.await.inspect_err(|e| {
        engine
            .metrics()
            .start_refused(crate::observe::metrics::start_refusal(e))
    })
}

/// Preview the plan for goals and inputs; nothing is started.
#[utoipa::path(post, path = "/engine/plan", tag = "flows", request_body = PlanRequest,
    responses(
        (status = 200, description = "The plan", body = ExecutionPlan),
        (status = 400, description = "No goals, or a cycle", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "A goal step is not registered", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn plan(
    State(engine): State<Engine>,
    extract::Json(request): extract::Json<PlanRequest>,
) -> Result<Json<ExecutionPlan>, ApiError> {
    let request = request.parse()?;
    let view = engine.catalog_for(&request.goals).await?;
    let plan = build_plan(&view.catalog, &request.goals, &request.init, PlanMode::Preview)
        .map_err(EngineError::from)?;
    Ok(Json(plan))
}

/// The flow's whole state.
#[utoipa::path(get, path = "/engine/flow/{id}", tag = "flows",
    params(("id" = String, Path, description = "Flow id")),
    responses(
        (status = 200, description = "The flow's state", body = FlowState),
        (status = 404, description = "No such flow", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn get_one(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<axum::response::Response, ApiError> {
    let state = engine.flow(&id).await?;
    // A large flow is sent as it is encoded (docs/api.md, "Large flows").
    if state.data_bytes > STREAMED_FLOW_BYTES {
        return Ok(super::streamed::json(state));
    }
    Ok(axum::response::IntoResponse::into_response(Json(state)))
}

/// A flow holding more bytes of inputs and outputs than this is sent as it
/// is encoded rather than built whole first.
const STREAMED_FLOW_BYTES: u64 = 1024 * 1024;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct CancelParams {
    /// `false`: kill the flow, no compensation (docs/api.md, "Retry and kill").
    #[param(value_type = Option<bool>)]
    compensate: Option<String>,
}

/// `POST /engine/flow/{id}/cancel[?compensate=false]`: 202 once the flow is
/// cancelled.
#[utoipa::path(post, path = "/engine/flow/{id}/cancel", tag = "flows",
    params(("id" = String, Path, description = "Flow id"), CancelParams),
    responses(
        (status = 202, description = "Cancelled", body = FlowCancelled),
        (status = 400, description = "`compensate` is not `true` or `false`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such flow", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The flow is over", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn cancel(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    Query(params): Query<CancelParams>,
) -> Result<(StatusCode, Json<FlowCancelled>), ApiError> {
    let compensate = match params.compensate.as_deref() {
        None | Some("true") => true,
        Some("false") => false,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "compensate: {other:?} is not true or false"
            )))
        }
    };
    engine.cancel_flow_with(&id, compensate).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(FlowCancelled {
            message: "Flow cancelled".into(),
            flow_id: id,
            compensate,
        }),
    ))
}

/// Largest body a retry takes: it has one optional flag.
const RETRY_BODY_LIMIT: usize = 4 * 1024;

/// `POST /engine/flow/{id}/retry`: 202 once a failed or cancelled flow runs
/// again from where it stopped (docs/api.md, "Retry and kill").
#[utoipa::path(post, path = "/engine/flow/{id}/retry", tag = "flows",
    params(("id" = String, Path, description = "Flow id")),
    request_body(content = Option<RetryBody>, description = "Optional; absent or `{}` resets attempts"),
    responses(
        (status = 202, description = "Running again", body = FlowRetried),
        (status = 404, description = "No such flow", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The flow is active, completed, or still deactivating", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn retry(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    request: axum::extract::Request,
) -> Result<(StatusCode, Json<FlowRetried>), ApiError> {
    let body: RetryBody = crate::extract::optional_object(request, RETRY_BODY_LIMIT).await?;
    engine.retry_flow(&id, body.reset_attempts, None).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(FlowRetried {
            message: "Flow retried".into(),
            flow_id: id,
            reset_attempts: body.reset_attempts,
        }),
    ))
}

/// `POST /engine/flow/{id}/resume`: 202 once an active flow's parked work
/// items are pending again (docs/retries.md, "Parking").
#[utoipa::path(post, path = "/engine/flow/{id}/resume", tag = "flows",
    params(("id" = String, Path, description = "Flow id")),
    request_body(content = Option<ResumeBody>, description = "Optional; absent or `{}` keeps the attempts counted"),
    responses(
        (status = 202, description = "Its parked work is pending again", body = FlowResumed),
        (status = 400, description = "A bad body", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such flow", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The flow is not active, or has no parked work", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn resume(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    request: axum::extract::Request,
) -> Result<(StatusCode, Json<FlowResumed>), ApiError> {
    let body: ResumeBody = crate::extract::optional_object(request, RETRY_BODY_LIMIT).await?;
    let resumed = engine.resume_flow(&id, body.reset_attempts, None).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(FlowResumed {
            message: "Flow resumed".into(),
            flow_id: id,
            resumed,
            reset_attempts: body.reset_attempts,
        }),
    ))
}

/// Longest `wait` a status request may ask for.
const MAX_STATUS_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct StatusParams {
    /// Answer once the flow is no longer active, or after this long
    /// (milliseconds, or any duration format; at most 60 s).
    #[param(example = "30s")]
    wait: Option<String>,
}

/// `GET /engine/flow/{id}/status[?wait=D]`: the flow's status from its row
/// alone; with `wait`, as soon as the flow finishes (docs/api.md, "Flows").
#[utoipa::path(get, path = "/engine/flow/{id}/status", tag = "flows",
    params(("id" = String, Path, description = "Flow id"), StatusParams),
    responses(
        (status = 200, description = "The flow's status", body = FlowStatusAnswer),
        (status = 400, description = "A bad `wait`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such flow", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Too many waiting requests", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn status(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    Query(params): Query<StatusParams>,
) -> Result<Json<FlowStatusAnswer>, ApiError> {
    let status = match params.wait.as_deref().map(status_wait).transpose()? {
        Some(wait) => engine.wait_for_flow(&id, wait).await?,
        None => engine.flow_status(&id).await?,
    };
    Ok(Json(FlowStatusAnswer { id, status }))
}

fn status_wait(text: &str) -> Result<std::time::Duration, ApiError> {
    let wait = match text.trim().parse::<u64>() {
        Ok(ms) => std::time::Duration::from_millis(ms),
        Err(_) => parse_duration_str(text, DurationKind::Delay)
            .map_err(|e| ApiError::bad_request(format!("wait: {e}")))?,
    };
    if wait > MAX_STATUS_WAIT {
        return Err(ApiError::bad_request(format!(
            "wait: at most {} s, got {text:?}",
            MAX_STATUS_WAIT.as_secs()
        )));
    }
    Ok(wait)
}

/// `GET /engine/flow/{id}/events[?after=SEQ&limit=N]` (docs/api.md,
/// "Event histories").
#[utoipa::path(get, path = "/engine/flow/{id}/events", tag = "flows",
    params(("id" = String, Path, description = "Flow id"), PageParams),
    responses(
        (status = 200, description = "The flow's events in sequence order", body = EventList),
        (status = 400, description = "A bad `after` or `limit`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such flow", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn events(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    Query(params): Query<PageParams>,
) -> Result<Json<EventList>, ApiError> {
    let request = params.request()?;
    let page = engine
        .flow_events_page(&id, request.after, request.limit, PAGE_BYTES)
        .await?;
    // Every flow has events from its start: none from the first means no
    // such flow; none after a sequence may be the end of one that exists.
    if page.events.is_empty() && (request.after == 0 || !engine.flow_exists(&id).await?) {
        return Err(ApiError::not_found(format!("flow not found: {id}")));
    }
    Ok(Json(EventList::of(&page, request.paged)))
}

/// `GET /engine/flow`: the most recent flows, as a bare array (Argyll).
#[utoipa::path(get, path = "/engine/flow", tag = "flows",
    responses((status = 200, description = "Up to 1000 flows, newest first", body = Vec<FlowSummary>)))]
pub(crate) async fn list(State(engine): State<Engine>) -> Result<Json<Vec<FlowSummary>>, ApiError> {
    let page = engine
        .flows_page(&FlowQuery {
            filter: FlowFilter::default(),
            limit: MAX_QUERY_LIMIT,
            cursor: None,
            sort: SortOrder::RecentFirst,
        })
        .await?;
    Ok(Json(page.flows.iter().map(FlowSummary::bare).collect()))
}

/// A query's criterion: empty is none, as an empty `id_prefix` always was.
fn given(text: &Option<String>) -> Option<&str> {
    text.as_deref().filter(|t| !t.is_empty())
}

/// Every status a query may name.
const ALL_STATUSES: [FlowStatus; 4] = [
    FlowStatus::Active,
    FlowStatus::Completed,
    FlowStatus::Failed,
    FlowStatus::Cancelled,
];

/// A page's `cursor`: absent or empty is the first page; anything else
/// must be a cursor the server gave (`next_cursor`).
pub(crate) fn cursor_of(cursor: Option<String>) -> Result<Option<String>, ApiError> {
    match cursor.filter(|c| !c.is_empty()) {
        Some(c) if c.len() <= MAX_CURSOR_LEN && tartan_engine::reads::decode_cursor(&c).is_some() => {
            Ok(Some(c))
        }
        Some(_) => Err(ApiError::bad_request("cursor: invalid cursor")),
        None => Ok(None),
    }
}

/// Filter flows, a page at a time.
#[utoipa::path(post, path = "/engine/flow/query", tag = "flows", request_body = QueryRequest,
    responses(
        (status = 200, description = "A page of flows", body = FlowPage),
        (status = 400, description = "A bad criterion, limit, sort or cursor", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn query(
    State(engine): State<Engine>,
    extract::Json(q): extract::Json<QueryRequest>,
) -> Result<Json<FlowPage>, ApiError> {
    if q.limit < 0 || q.limit > MAX_QUERY_LIMIT as i64 {
        return Err(ApiError::bad_request(format!(
            "limit: must be between 0 and {MAX_QUERY_LIMIT}"
        )));
    }
    let sort = match q.sort.as_str() {
        "" | "recent_desc" => SortOrder::RecentFirst,
        "recent_asc" => SortOrder::OldestFirst,
        other => {
            return Err(ApiError::bad_request(format!(
                "sort: must be recent_desc or recent_asc, got {other:?}"
            )))
        }
    };
    // An empty criterion is none, as an empty `id_prefix` always was.
    let mut filter = FilterText {
        id_prefix: &q.id_prefix,
        labels: &q.labels,
        statuses: &q.statuses,
        failed_step: given(&q.failed_step),
        error_class: given(&q.error_class),
        created_after: given(&q.created_after),
        created_before: given(&q.created_before),
    }
    .parse("", &ALL_STATUSES, |s| {
        format!("unknown status {s:?} (active, completed, failed or cancelled)")
    })?;
    filter.children = q.children;
    let cursor = cursor_of(Some(q.cursor))?;
    let limit = if q.limit == 0 {
        DEFAULT_QUERY_LIMIT
    } else {
        q.limit as usize
    };
    let page = engine
        .flows_page(&FlowQuery {
            filter,
            limit,
            cursor,
            sort,
        })
        .await?;
    let flows: Vec<FlowSummary> = page.flows.iter().map(FlowSummary::full).collect();
    Ok(Json(FlowPage {
        count: flows.len(),
        flows,
        has_more: page.next_cursor.is_some(),
        next_cursor: page.next_cursor,
    }))
}
