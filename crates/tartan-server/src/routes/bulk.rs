//! `/engine/bulk`: retry or cancel many flows at once, as a job the engine
//! runs in the background at a bounded rate (docs/api.md, "Bulk operations").

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use tartan_core::error::check_len;
use tartan_core::flow::FlowStatus;
use tartan_core::ids::sanitize_id;
use tartan_core::request::{filter_id, filter_id_prefix, filter_labels, filter_statuses};
use tartan_engine::{BulkAction, Engine, DEFAULT_BULK_RATE, MAX_BULK_RATE};
use tartan_store::{BulkCreated, BulkFilter};

use super::bodies::{BulkDryRun, BulkFailure, BulkJobList, BulkJobView};
use crate::error::{ApiError, Problem};
use crate::extract::{self, Path, Query};

/// Largest bulk request body: a filter of up to `MAX_IDS` ids.
const BULK_BODY_LIMIT: usize = 512 * 1024;
/// Most ids one filter may list.
const MAX_IDS: usize = 1000;
/// Failed flows shown with a job.
const FAILURE_SAMPLE: usize = 20;
/// Jobs one listing shows at most.
const MAX_LIST: usize = 1000;
const DEFAULT_LIST: usize = 100;
/// The classes `error_class` may name: how a failed item's last attempt ended.
const ERROR_CLASSES: [&str; 5] = ["retryable", "permanent", "timeout", "cancelled", "abandoned"];

/// Which flows a bulk job acts on: every part given must match, and at
/// least one must be given.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BulkFilterBody {
    /// These flows (at most 1000).
    #[serde(default)]
    ids: Vec<String>,
    /// Flows whose id starts with this.
    #[serde(default)]
    #[schema(max_length = 256)]
    id_prefix: Option<String>,
    /// Flows carrying every one of these labels (at most 32; keys and
    /// values at most 256 bytes).
    #[serde(default)]
    labels: BTreeMap<String, String>,
    /// Flows in any of these statuses: `failed` or `cancelled` for a retry,
    /// `active` for a cancel (the default: all of those).
    #[serde(default)]
    #[schema(value_type = Vec<FlowStatus>, max_items = 4)]
    statuses: Vec<String>,
    /// Flows with a failed work item of this step.
    #[serde(default)]
    failed_step: Option<String>,
    /// Flows with a failed work item whose last attempt ended so:
    /// `retryable`, `permanent`, `timeout`, `cancelled` or `abandoned`.
    #[serde(default)]
    error_class: Option<String>,
    /// Flows created at or after this (RFC 3339).
    #[serde(default)]
    #[schema(format = DateTime)]
    created_after: Option<String>,
    /// Flows created before this (RFC 3339).
    #[serde(default)]
    #[schema(format = DateTime)]
    created_before: Option<String>,
}

/// `POST /engine/bulk/retry`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BulkRetryBody {
    filter: BulkFilterBody,
    /// Restarted work items count attempts from 1 again (the default).
    #[serde(default = "yes")]
    reset_attempts: bool,
    /// Flows retried per second, 1 to 1000 (default 50).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1000)]
    rate: Option<u32>,
    /// Only count the flows that match; no job is created.
    #[serde(default)]
    dry_run: bool,
}

/// `POST /engine/bulk/cancel`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BulkCancelBody {
    filter: BulkFilterBody,
    /// `false`: kill the flows, no compensation (docs/api.md, "Retry and kill").
    #[serde(default = "yes")]
    compensate: bool,
    /// Flows cancelled per second, 1 to 1000 (default 50).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1000)]
    rate: Option<u32>,
    /// Only count the flows that match; no job is created.
    #[serde(default)]
    dry_run: bool,
}

fn yes() -> bool {
    true
}

/// Check a filter and turn it into the store's.
fn filter_of(action: BulkAction, f: &BulkFilterBody) -> Result<BulkFilter, ApiError> {
    let empty = f.ids.is_empty()
        && f.id_prefix.is_none()
        && f.labels.is_empty()
        && f.statuses.is_empty()
        && f.failed_step.is_none()
        && f.error_class.is_none()
        && f.created_after.is_none()
        && f.created_before.is_none();
    if empty {
        return Err(ApiError::bad_request(
            "filter: empty; give at least one of ids, id_prefix, labels, statuses, failed_step, \
             error_class, created_after, created_before (an empty filter would match every flow)",
        ));
    }
    if f.ids.len() > MAX_IDS {
        return Err(ApiError::bad_request(format!(
            "filter.ids: {} ids, more than the {MAX_IDS} a filter may list",
            f.ids.len()
        )));
    }
    let mut ids = Vec::with_capacity(f.ids.len());
    for (i, id) in f.ids.iter().enumerate() {
        let id = sanitize_id(id);
        check_len(&format!("filter.ids[{i}]"), &id)?;
        ids.push(id);
    }
    let id_prefix = match f.id_prefix.as_deref() {
        Some("") => return Err(ApiError::bad_request("filter.id_prefix: empty")),
        Some(p) => filter_id_prefix("filter.id_prefix", p)?,
        None => None,
    };
    let labels = filter_labels("filter.labels", f.labels.clone())?;
    let allowed = action.statuses();
    let statuses = filter_statuses("filter.statuses", &f.statuses, allowed, |s| {
        let names: Vec<&str> = allowed.iter().map(|s| s.as_str()).collect();
        format!(
            "{s:?}; a bulk {} acts on {} flows only",
            action.kind(),
            names.join(" or ")
        )
    })?;
    let failed_step = match &f.failed_step {
        Some(s) if sanitize_id(s).is_empty() => {
            return Err(ApiError::bad_request("filter.failed_step: not a step id"))
        }
        Some(s) => filter_id("filter.failed_step", Some(sanitize_id(s)))?,
        None => None,
    };
    let error_class = match &f.error_class {
        Some(c) if ERROR_CLASSES.contains(&c.as_str()) => Some(c.clone()),
        Some(c) => {
            return Err(ApiError::bad_request(format!(
                "filter.error_class: {c:?}; one of {}",
                ERROR_CLASSES.join(", ")
            )))
        }
        None => None,
    };
    let time = |name: &str, text: &Option<String>| -> Result<_, ApiError> {
        text.as_deref()
            .map(|t| {
                chrono::DateTime::parse_from_rfc3339(t)
                    .map(|t| t.with_timezone(&chrono::Utc))
                    .map_err(|e| {
                        ApiError::bad_request(format!("filter.{name}: {t:?} is not an RFC 3339 time ({e})"))
                    })
            })
            .transpose()
    };
    Ok(BulkFilter {
        ids,
        id_prefix,
        labels,
        statuses,
        failed_step,
        error_class,
        created_after: time("created_after", &f.created_after)?,
        created_before: time("created_before", &f.created_before)?,
    })
}

fn rate_of(rate: Option<u32>) -> Result<u32, ApiError> {
    match rate {
        None => Ok(DEFAULT_BULK_RATE),
        Some(r) if (1..=MAX_BULK_RATE).contains(&r) => Ok(r),
        Some(r) => Err(ApiError::bad_request(format!(
            "rate: {r}; flows per second, 1 to {MAX_BULK_RATE}"
        ))),
    }
}

/// Create the job (or count, for a dry run): 202 with the job, 200 with the count.
async fn create(
    engine: &Engine,
    action: BulkAction,
    filter: &BulkFilterBody,
    rate: Option<u32>,
    dry_run: bool,
    filter_json: serde_json::Value,
) -> Result<Response, ApiError> {
    let parsed = filter_of(action, filter)?;
    let rate = rate_of(rate)?;
    if dry_run {
        let matched = engine.count_bulk(action, parsed).await?;
        return Ok(Json(BulkDryRun {
            dry_run: true,
            kind: action.kind(),
            matched,
        })
        .into_response());
    }
    match engine.create_bulk_job(action, filter_json, parsed, rate).await? {
        BulkCreated::Created(job) => {
            Ok((StatusCode::ACCEPTED, Json(BulkJobView::of(&job, Vec::new()))).into_response())
        }
        BulkCreated::TooMany(n) => Err(ApiError::bad_request(format!(
            "filter: matches {n} flows, more than the {} one bulk job may act on; narrow it",
            engine.config().max_bulk_flows
        ))),
    }
}

/// The filter as given, to show back with the job.
fn filter_json(f: &BulkFilterBody) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    if !f.ids.is_empty() {
        m.insert("ids".into(), serde_json::json!(f.ids));
    }
    let mut put = |k: &str, v: &Option<String>| {
        if let Some(v) = v {
            m.insert(k.into(), serde_json::json!(v));
        }
    };
    put("id_prefix", &f.id_prefix);
    put("failed_step", &f.failed_step);
    put("error_class", &f.error_class);
    put("created_after", &f.created_after);
    put("created_before", &f.created_before);
    if !f.labels.is_empty() {
        m.insert("labels".into(), serde_json::json!(f.labels));
    }
    if !f.statuses.is_empty() {
        m.insert("statuses".into(), serde_json::json!(f.statuses));
    }
    serde_json::Value::Object(m)
}

/// `POST /engine/bulk/retry`: 202 with the job, which retries every failed
/// or cancelled flow the filter matches now.
#[utoipa::path(post, path = "/engine/bulk/retry", tag = "bulk", request_body = BulkRetryBody,
    responses(
        (status = 202, description = "The job, queued", body = BulkJobView),
        (status = 200, description = "A dry run: how many flows match", body = BulkDryRun),
        (status = 400, description = "An empty or bad filter, a bad rate, or more flows matched than a job may act on", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn retry(
    State(engine): State<Engine>,
    extract::Json(body): extract::Json<BulkRetryBody, BULK_BODY_LIMIT>,
) -> Result<Response, ApiError> {
    let action = BulkAction::Retry {
        reset_attempts: body.reset_attempts,
    };
    let json = filter_json(&body.filter);
    create(&engine, action, &body.filter, body.rate, body.dry_run, json).await
}

/// `POST /engine/bulk/cancel`: 202 with the job, which cancels every active
/// flow the filter matches now.
#[utoipa::path(post, path = "/engine/bulk/cancel", tag = "bulk", request_body = BulkCancelBody,
    responses(
        (status = 202, description = "The job, queued", body = BulkJobView),
        (status = 200, description = "A dry run: how many flows match", body = BulkDryRun),
        (status = 400, description = "An empty or bad filter, a bad rate, or more flows matched than a job may act on", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn cancel(
    State(engine): State<Engine>,
    extract::Json(body): extract::Json<BulkCancelBody, BULK_BODY_LIMIT>,
) -> Result<Response, ApiError> {
    let action = BulkAction::Cancel {
        compensate: body.compensate,
    };
    let json = filter_json(&body.filter);
    create(&engine, action, &body.filter, body.rate, body.dry_run, json).await
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListParams {
    /// Jobs to show, 1 to 1000 (default 100), the most recent first.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
}

/// `GET /engine/bulk`: the most recent jobs first.
#[utoipa::path(get, path = "/engine/bulk", tag = "bulk", params(ListParams),
    responses(
        (status = 200, description = "The jobs", body = BulkJobList),
        (status = 400, description = "A bad `limit`", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn list(
    State(engine): State<Engine>,
    Query(params): Query<ListParams>,
) -> Result<Json<BulkJobList>, ApiError> {
    let limit = match params.limit.as_deref() {
        None => DEFAULT_LIST,
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=MAX_LIST).contains(&n) => n,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "limit: {text:?}; a number from 1 to {MAX_LIST}"
                )))
            }
        },
    };
    let jobs = engine.store().bulk_jobs(limit).await?;
    let jobs: Vec<BulkJobView> = jobs.iter().map(|j| BulkJobView::of(j, Vec::new())).collect();
    Ok(Json(BulkJobList {
        count: jobs.len(),
        jobs,
    }))
}

/// A job by id, or 404.
async fn job_or_404(engine: &Engine, id: &str) -> Result<tartan_store::BulkJob, ApiError> {
    let job = if id.len() > 64 {
        None
    } else {
        engine.store().bulk_job(id).await?
    };
    job.ok_or_else(|| ApiError::not_found(format!("bulk job not found: {id}")))
}

/// `GET /engine/bulk/{job}`: the job's progress, with up to 20 of the
/// flows it failed on.
#[utoipa::path(get, path = "/engine/bulk/{job}", tag = "bulk",
    params(("job" = String, Path, description = "Bulk job id")),
    responses(
        (status = 200, description = "The job", body = BulkJobView),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn get_one(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<Json<BulkJobView>, ApiError> {
    let job = job_or_404(&engine, &id).await?;
    let failures = if job.failed > 0 {
        engine
            .store()
            .bulk_items(&job.id, "failed", FAILURE_SAMPLE)
            .await?
            .into_iter()
            .map(|i| BulkFailure {
                flow_id: i.flow_id,
                detail: i.detail.unwrap_or_default(),
                at: i.at,
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(Json(BulkJobView::of(&job, failures)))
}

/// `POST /engine/bulk/{job}/cancel`: the job acts on no more flows; those
/// it acted on stay as they are.
#[utoipa::path(post, path = "/engine/bulk/{job}/cancel", tag = "bulk",
    params(("job" = String, Path, description = "Bulk job id")),
    responses(
        (status = 202, description = "The job, cancelled", body = BulkJobView),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The job had finished", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn cancel_job(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<BulkJobView>), ApiError> {
    job_or_404(&engine, &id).await?;
    let job = engine
        .cancel_bulk_job(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("bulk job not found: {id}")))?;
    if job.status != "cancelled" {
        return Err(ApiError::conflict(format!(
            "bulk job {id} is {}: it cannot be cancelled",
            job.status
        )));
    }
    Ok((StatusCode::ACCEPTED, Json(BulkJobView::of(&job, Vec::new()))))
}
