//! `/engine/flow` and `/engine/plan`: start, preview, read and query flows.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use tartan_core::duration::{parse_duration_str, DurationKind};
use tartan_core::flow::FlowStatus;
use tartan_core::ids::{is_valid_id_prefix, sanitize_id};
use tartan_core::plan::{build_plan, PlanMode};
use tartan_core::request::{PlanRequest, StartFlow};
use tartan_engine::{Engine, EngineError};
use tartan_store::{FlowQuery, FlowSummary, SortOrder};

use super::history::{page_json, PageParams};
use crate::error::ApiError;
use crate::extract::{self, Path, Query};

/// Most flows one query returns.
const MAX_QUERY_LIMIT: usize = 1000;
const DEFAULT_QUERY_LIMIT: usize = 100;

/// `POST /engine/flow`; a refusal is counted by its reason
/// (docs/operating.md, "Metrics"), a body that could not be read included.
pub(crate) async fn start(
    State(engine): State<Engine>,
    headers: HeaderMap,
    request: Result<extract::Json<StartFlow>, ApiError>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
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
        Ok((StatusCode::CREATED, Json(json!({ "message": "", "flow_id": id }))))
    };
    started.await.inspect_err(|e| {
        engine
            .metrics()
            .start_refused(crate::observe::metrics::start_refusal(e))
    })
}

pub(crate) async fn plan(
    State(engine): State<Engine>,
    extract::Json(request): extract::Json<PlanRequest>,
) -> Result<Json<Value>, ApiError> {
    let goals: Vec<String> = request.goals.iter().map(|g| sanitize_id(g)).collect();
    if goals.is_empty() {
        return Err(ApiError::bad_request("goals: at least one goal step is required"));
    }
    let mut view = engine.catalog().await;
    if goals.iter().any(|g| !view.catalog.contains(g)) {
        view = engine.refresh_catalog().await?;
    }
    let plan =
        build_plan(&view.catalog, &goals, &request.init, PlanMode::Preview).map_err(EngineError::from)?;
    Ok(Json(json!(plan)))
}

pub(crate) async fn get_one(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let state = engine.flow(&id).await?;
    Ok(Json(json!(state)))
}

#[derive(Deserialize)]
pub(crate) struct CancelParams {
    /// `false`: kill the flow, no compensation (docs/api.md, "Retry and kill").
    compensate: Option<String>,
}

/// `POST /engine/flow/{id}/cancel[?compensate=false]`: 202 once the flow is
/// cancelled.
pub(crate) async fn cancel(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    Query(params): Query<CancelParams>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
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
        Json(json!({ "message": "Flow cancelled", "flow_id": id, "compensate": compensate })),
    ))
}

/// Largest body a retry takes: it has one optional flag.
const RETRY_BODY_LIMIT: usize = 4 * 1024;

/// A retry's optional body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryBody {
    #[serde(default = "yes")]
    reset_attempts: bool,
}

fn yes() -> bool {
    true
}

/// `POST /engine/flow/{id}/retry`: 202 once a failed or cancelled flow runs
/// again from where it stopped (docs/api.md, "Retry and kill").
pub(crate) async fn retry(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    request: axum::extract::Request,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let bytes = crate::extract::read_body(request, RETRY_BODY_LIMIT).await?;
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    let body = match first {
        None => RetryBody { reset_attempts: true },
        // serde would take `[true]` for the struct: only an object is one.
        Some(b'{') => crate::extract::parse_json::<RetryBody>(&bytes)?,
        Some(_) => {
            return Err(ApiError::bad_request(
                "the body must be a JSON object (or absent)",
            ))
        }
    };
    engine.retry_flow(&id, body.reset_attempts, None).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "message": "Flow retried", "flow_id": id, "reset_attempts": body.reset_attempts })),
    ))
}

/// Longest `wait` a status request may ask for.
const MAX_STATUS_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Deserialize)]
pub(crate) struct StatusParams {
    /// Answer once the flow is no longer active, or after this long
    /// (milliseconds, or any duration format; at most 60 s).
    wait: Option<String>,
}

/// `GET /engine/flow/{id}/status[?wait=D]`: the flow's status from its row
/// alone; with `wait`, as soon as the flow finishes (docs/api.md, "Flows").
pub(crate) async fn status(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    Query(params): Query<StatusParams>,
) -> Result<Json<Value>, ApiError> {
    let status = match params.wait.as_deref().map(status_wait).transpose()? {
        Some(wait) => engine.wait_for_flow(&id, wait).await?,
        None => engine.flow_status(&id).await?,
    };
    Ok(Json(json!({ "id": id, "status": status })))
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
pub(crate) async fn events(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    Query(params): Query<PageParams>,
) -> Result<Json<Value>, ApiError> {
    let request = params.request()?;
    let page = engine
        .store()
        .flow_events_page(&id, request.after, request.limit)
        .await?;
    // Every flow has events from its start: none from the first means no
    // such flow; none after a sequence may be the end of one that exists.
    if page.events.is_empty() && (request.after == 0 || engine.store().flow_status(&id).await?.is_none()) {
        return Err(ApiError::not_found(format!("flow not found: {id}")));
    }
    Ok(Json(page_json(&page, request)))
}

/// `GET /engine/flow`: the most recent flows, as a bare array (Argyll).
pub(crate) async fn list(State(engine): State<Engine>) -> Result<Json<Value>, ApiError> {
    let page = engine
        .store()
        .query_flows(&FlowQuery {
            id_prefix: None,
            labels: Vec::new(),
            statuses: Vec::new(),
            limit: MAX_QUERY_LIMIT,
            cursor: None,
            sort: SortOrder::RecentFirst,
        })
        .await?;
    let list: Vec<Value> = page
        .flows
        .iter()
        .map(|f| json!({ "id": f.id, "status": f.status, "timestamp": f.created_at }))
        .collect();
    Ok(Json(Value::Array(list)))
}

#[derive(Deserialize)]
pub(crate) struct QueryRequest {
    #[serde(default)]
    id_prefix: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    statuses: Vec<String>,
    #[serde(default)]
    limit: i64,
    #[serde(default)]
    cursor: String,
    #[serde(default)]
    sort: String,
}

fn summary_json(f: &FlowSummary) -> Value {
    let mut v = json!({ "id": f.id, "status": f.status, "timestamp": f.created_at });
    if !f.labels.is_empty() {
        v["labels"] = json!(f.labels);
    }
    if let Some(e) = &f.error {
        v["error"] = json!(e);
    }
    v
}

pub(crate) async fn query(
    State(engine): State<Engine>,
    extract::Json(q): extract::Json<QueryRequest>,
) -> Result<Json<Value>, ApiError> {
    if !is_valid_id_prefix(&q.id_prefix) {
        return Err(ApiError::bad_request("id_prefix: invalid ID prefix"));
    }
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
    if q.labels.iter().any(|(k, v)| k.is_empty() || v.is_empty()) {
        return Err(ApiError::bad_request("labels: keys and values must not be empty"));
    }
    let mut statuses = Vec::new();
    for s in &q.statuses {
        match FlowStatus::parse(s) {
            Some(st) => statuses.push(st),
            None => {
                return Err(ApiError::bad_request(format!(
                    "statuses: unknown status {s:?} (active, completed, failed or cancelled)"
                )))
            }
        }
    }
    let cursor = (!q.cursor.is_empty()).then(|| q.cursor.clone());
    if let Some(c) = &cursor {
        if tartan_store::decode_cursor(c).is_none() {
            return Err(ApiError::bad_request("cursor: invalid cursor"));
        }
    }
    let limit = if q.limit == 0 {
        DEFAULT_QUERY_LIMIT
    } else {
        q.limit as usize
    };
    let page = engine
        .store()
        .query_flows(&FlowQuery {
            id_prefix: (!q.id_prefix.is_empty()).then(|| q.id_prefix.to_lowercase()),
            labels: q.labels.into_iter().collect(),
            statuses,
            limit,
            cursor,
            sort,
        })
        .await?;
    let flows: Vec<Value> = page.flows.iter().map(summary_json).collect();
    let mut body = json!({ "flows": flows, "count": flows.len() });
    if let Some(next) = page.next_cursor {
        body["has_more"] = json!(true);
        body["next_cursor"] = json!(next);
    }
    Ok(Json(body))
}
