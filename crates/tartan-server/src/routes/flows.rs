//! `/engine/flow` and `/engine/plan`: start, preview, read and query flows.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Extension;
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
use crate::api::turns::FlowTurnAnswer;
use crate::error::{ApiError, Problem};
use crate::extract::{self, Path, Query};
use crate::observe::RequestTrace;

/// Most flows one query returns.
const MAX_QUERY_LIMIT: usize = 1000;
const DEFAULT_QUERY_LIMIT: usize = 100;

/// Start a flow towards goal steps.
///
/// Plans the smallest set of steps that provides the goals' required inputs
/// from `init` and from each other, records the start durably and answers
/// `201`; the steps then run in the background: wait for the end with
/// `GET /engine/flow/{id}/status?wait=30s`. `id` (sanitised, at most 256
/// bytes) and `goals` (1 to 64 step ids) are required. The same start
/// under the same id again is a `201` and changes nothing; a different one
/// is a `409`. A goal that is not registered is a `404`, required inputs
/// that nothing provides a `400` naming them. At most 1 MiB of body; a
/// `503` with `Retry-After` when the engine is at `TARTAN_MAX_ACTIVE_FLOWS`
/// or stopping. A `traceparent` header puts the flow in the caller's trace.
// A refusal is counted by its reason (docs/operating.md, "Metrics"), a body
// that could not be read included.
#[utoipa::path(post, path = "/engine/flow", tag = "flows", operation_id = "startFlow",
    request_body(content = StartFlow, description = "The flow to start: its id, goal steps and initial inputs",
        example = json!({"id": "hello-1", "goals": ["shout"], "init": {"name": ["Ada"]}})),
    params(("traceparent" = Option<String>, Header, description = "W3C trace context the flow joins"),
        ("tracestate" = Option<String>, Header, description = "W3C vendor trace data, kept with the flow and sent with its calls (at most 512 characters)")),
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
    trace: Option<Extension<RequestTrace>>,
    request: Result<extract::Json<StartFlow>, ApiError>,
) -> Result<(StatusCode, IdNote, Json<FlowAnswer>), ApiError> {
    let started = async {
        let extract::Json(request) = request?;
        let id = sanitize_id(&request.id);
        let note = IdNote::of("flow", &request.id, &id);
        // Under the request's span, in the caller's trace (docs/operating.md,
        // "Traces").
        let trace = trace.map(|Extension(t)| t).unwrap_or_default();
        engine.flows().start_flow_traced(request, trace.caller()).await?;
        Ok((
            StatusCode::CREATED,
            note,
            Json(FlowAnswer {
                message: String::new(),
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
///
/// Answers the plan a start with these `goals` and `init` would run: the
/// goals, the inputs the caller must give (`required`), the steps as
/// stored, who provides and consumes each attribute, the steps left out and
/// why, and each sub-flow's plan. Bounded as a start is. A read: a read
/// token may call it.
#[utoipa::path(post, path = "/engine/plan", tag = "flows", operation_id = "previewPlan",
    request_body(content = PlanRequest, description = "Goal steps and the inputs there would be",
        example = json!({"goals": ["shout"], "init": {"name": ["Ada"]}})),
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
    let view = engine.catalog().for_goals(&request.goals).await?;
    let plan = build_plan(&view.catalog, &request.goals, &request.init, PlanMode::Preview)
        .map_err(EngineError::from)?;
    Ok(Json(plan))
}

/// What a start or registration says when the id given is not the id
/// stored (docs/api.md: `a:b` and `ab` name the same flow): the header
/// `Tartan-Id-Rewritten`, and a log line. A header, as the answer's body is
/// Argyll's to the letter.
pub(crate) struct IdNote(Option<axum::http::HeaderValue>);

impl IdNote {
    pub(crate) fn of(what: &str, given: &str, stored: &str) -> IdNote {
        if given == stored {
            return IdNote(None);
        }
        tracing::info!(given, stored, "{what} id rewritten");
        // Header text is visible ASCII: the given id escaped, and cut.
        let shown: String = given.chars().take(64).flat_map(char::escape_default).collect();
        let note = format!("{what} id \"{shown}\" is stored as \"{stored}\"");
        IdNote(axum::http::HeaderValue::from_str(&note).ok())
    }
}

impl axum::response::IntoResponseParts for IdNote {
    type Error = std::convert::Infallible;

    fn into_response_parts(
        self,
        mut parts: axum::response::ResponseParts,
    ) -> Result<axum::response::ResponseParts, Self::Error> {
        if let Some(note) = self.0 {
            parts.headers_mut().insert("tartan-id-rewritten", note);
        }
        Ok(parts)
    }
}

/// The flow's whole state.
///
/// Its status, plan, every attribute value set (`attributes`, each value
/// with when and by which step), every step's execution with its work
/// items and their attempts, labels, trace and timeouts. A flow holding
/// more than 1 MiB of inputs and outputs is sent as it is encoded (chunked,
/// no `Content-Length`); for less than the whole state, read `/status` or
/// the work-item listings.
#[utoipa::path(get, path = "/engine/flow/{id}", tag = "flows", operation_id = "getFlow",
    params(("id" = String, Path, description = "Flow id")),
    responses(
        (status = 200, description = "The flow's state", body = FlowState),
        (status = 404, description = "No such flow", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn get_one(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<axum::response::Response, ApiError> {
    let state = super::streamed::loading(engine.flows().flow(&id)).await?;
    // A large flow is sent as it is encoded (docs/api.md, "Large flows"),
    // within the server's budget for such answers.
    if state.data_bytes > STREAMED_FLOW_BYTES {
        let bytes = state.data_bytes;
        if let Some(share) = super::streamed::Share::now(bytes) {
            return Ok(super::streamed::json(state, share));
        }
        // Not held while waiting for room: read again once there is.
        drop(state);
        let Some(share) = super::streamed::Share::wait(bytes).await else {
            return Err(ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                crate::error::kind::OVERLOADED,
                "the server is sending as many large flows as it holds at once (128 MiB); try again",
            )
            .retry_after(5));
        };
        let state = super::streamed::loading(engine.flows().flow(&id)).await?;
        return Ok(super::streamed::json(state, share));
    }
    Ok(axum::response::IntoResponse::into_response(Json(state)))
}

/// The flow's place in its concurrency key's line.
///
/// For a flow started with `concurrency: {"key", "limit"}`: whether it
/// waits for its turn or runs, its place among the key's waiting flows
/// (1: the next to run) and how many of the key's flows run and wait
/// (docs/concurrency.md). `404` for a flow without a key, or one that
/// ended (it left its line).
#[utoipa::path(get, path = "/engine/flow/{id}/turn", tag = "flows", operation_id = "getFlowTurn",
    params(("id" = String, Path, description = "Flow id")),
    responses(
        (status = 200, description = "Its place in its key's line", body = FlowTurnAnswer),
        (status = 404, description = "No such flow in a line", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn turn(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<Json<FlowTurnAnswer>, ApiError> {
    match engine.flows().turn(&id).await? {
        Some(turn) => Ok(Json(FlowTurnAnswer::of(id, turn))),
        None => Err(ApiError::new(
            axum::http::StatusCode::NOT_FOUND,
            crate::error::kind::NOT_FOUND,
            format!(
                "flow {id} is not in a concurrency key's line (it has no key, has ended or does not exist)"
            ),
        )),
    }
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

/// Cancel an active flow.
///
/// Answers `202` once the flow is cancelled: pending work items are
/// cancelled, calls in flight aborted wherever they run, and the succeeded
/// items of running steps compensated. `?compensate=false` kills the flow
/// instead: nothing is compensated. A flow that is over is a `409`. No
/// body; send `Content-Type: application/json` all the same, as on every
/// `POST`.
#[utoipa::path(post, path = "/engine/flow/{id}/cancel", tag = "flows", operation_id = "cancelFlow",
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
    engine.flows().cancel_flow(&id, compensate, None).await?;
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

/// Run a failed or cancelled flow again from where it stopped.
///
/// Answers `202` once the flow is active again under the same id: work
/// items that did not succeed start over, succeeded ones keep their outputs,
/// and the flow's timeout counts again from now. `reset_attempts` (default
/// `true`) counts the restarted items' attempts from 1 again. A flow that
/// is active, completed or still deactivating is a `409`, and so is a
/// sub-flow (retry its parent). The body is optional, at most 4 KiB.
#[utoipa::path(post, path = "/engine/flow/{id}/retry", tag = "flows", operation_id = "retryFlow",
    params(("id" = String, Path, description = "Flow id")),
    request_body(content = Option<RetryBody>, description = "Optional; absent or `{}` resets attempts",
        example = json!({"reset_attempts": true})),
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
    engine.flows().retry_flow(&id, body.reset_attempts, None).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(FlowRetried {
            message: "Flow retried".into(),
            flow_id: id,
            reset_attempts: body.reset_attempts,
        }),
    ))
}

/// Resume an active flow's parked work items.
///
/// Answers `202` once the items that ran out of retries and were parked
/// (`work_config.on_exhausted: "park"`) are pending again; `resumed` counts
/// them. `reset_attempts` (default `false`) gives them a fresh retry
/// budget. A flow that is not active, or has nothing parked, is a `409`.
/// The body is optional, at most 4 KiB.
#[utoipa::path(post, path = "/engine/flow/{id}/resume", tag = "flows", operation_id = "resumeFlow",
    params(("id" = String, Path, description = "Flow id")),
    request_body(content = Option<ResumeBody>, description = "Optional; absent or `{}` keeps the attempts counted",
        example = json!({"reset_attempts": false})),
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
    let resumed = engine.flows().resume_flow(&id, body.reset_attempts, None).await?;
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

/// The flow's status alone; with `wait`, once the flow finishes.
///
/// Without `wait`, the status from the flow's row, at once. With
/// `?wait=30s` (milliseconds or any duration, at most 60 s) the answer
/// comes as soon as the flow is no longer `active`, or after the wait with
/// `"status": "active"` if it still is: one request instead of polling.
/// At most 10,000 requests wait at once per process; more are a `503`.
#[utoipa::path(get, path = "/engine/flow/{id}/status", tag = "flows", operation_id = "getFlowStatus",
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
        Some(wait) => engine.flows().wait_for_flow(&id, wait).await?,
        None => engine.flows().flow_status(&id).await?,
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

/// The flow's events in sequence order, a page at a time.
///
/// Without parameters, the whole history up to 1000 events and 4 MiB of
/// data (a longer one gets its first page and a `next`). With `after`
/// and/or `limit` (1 to 1000), a page, and `next`: the `after` of the
/// following page, `null` on the last one. A page stops at 4 MiB of event
/// data, but always holds one event when one follows.
#[utoipa::path(get, path = "/engine/flow/{id}/events", tag = "flows", operation_id = "listFlowEvents",
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

/// The flows, running ones first, as a bare array.
///
/// As Argyll lists them: the running flows, most recently started first,
/// then the ended ones, most recently ended first; each `{"id", "status",
/// "timestamp"}` (its end, or its start while it runs). Up to 1000 flows;
/// sub-flows of flow steps are not listed. To filter, page, count or see
/// more of each flow, use `POST /engine/flow/query`.
#[utoipa::path(get, path = "/engine/flow", tag = "flows", operation_id = "listFlows",
    responses((status = 200, description = "Up to 1000 flows, running ones first, each group newest first", body = Vec<FlowSummary>)))]
pub(crate) async fn list(State(engine): State<Engine>) -> Result<Json<Vec<FlowSummary>>, ApiError> {
    let page = engine
        .flows_page(&FlowQuery {
            filter: FlowFilter::default(),
            limit: MAX_QUERY_LIMIT,
            cursor: None,
            sort: SortOrder::RecentFirst,
            total: false,
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
/// must be a cursor the server gave (`next_cursor`), which `valid` knows.
pub(crate) fn cursor_of(cursor: Option<String>, valid: fn(&str) -> bool) -> Result<Option<String>, ApiError> {
    match cursor.filter(|c| !c.is_empty()) {
        Some(c) if c.len() <= MAX_CURSOR_LEN && valid(&c) => Ok(Some(c)),
        Some(_) => Err(ApiError::bad_request("cursor: invalid cursor")),
        None => Ok(None),
    }
}

/// Filter flows, a page at a time.
///
/// Every criterion is optional and an empty string is none: `id_prefix`,
/// `labels` (all must match), `statuses`, `failed_step`, `error_class`,
/// `created_after`/`created_before`, and sub-flows only with `children`.
/// `limit` 1 to 1000 (0 or absent: 100), `sort` `recent_asc` (the
/// default) or `recent_desc`, and `cursor`, the previous page's
/// `next_cursor`. Running flows come first, by start, then ended ones, by
/// end, as Argyll lists them; `total` counts every match (unless the
/// query says `"total": false`). It
/// matches exactly the flows a bulk job with the same filter would. A read:
/// a read token may call it.
#[utoipa::path(post, path = "/engine/flow/query", tag = "flows", operation_id = "queryFlows",
    request_body(content = QueryRequest, description = "The criteria, all optional",
        example = json!({"statuses": ["failed"], "labels": {"customer": "acme"}, "limit": 20})),
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
    // Argyll's default: oldest first, within each group.
    let sort = match q.sort.as_str() {
        "recent_desc" => SortOrder::RecentFirst,
        "" | "recent_asc" => SortOrder::OldestFirst,
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
    let cursor = cursor_of(Some(q.cursor), |c| {
        tartan_engine::reads::decode_flow_cursor(c).is_some()
    })?;
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
            total: q.total != Some(false),
        })
        .await?;
    let flows: Vec<FlowSummary> = page.flows.iter().map(FlowSummary::full).collect();
    Ok(Json(FlowPage {
        count: flows.len(),
        total: page.total,
        flows,
        has_more: page.next_cursor.is_some(),
        next_cursor: page.next_cursor,
    }))
}
