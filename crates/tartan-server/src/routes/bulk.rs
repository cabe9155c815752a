//! `/engine/bulk`: retry or cancel many flows at once, as a job the engine
//! runs in the background at a bounded rate (docs/api.md, "Bulk operations").

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use tartan_core::bulk::{BulkCancelRequest, BulkResumeRequest, BulkRetryRequest, BulkSpec, BulkStatus};
use tartan_engine::reads::BulkCreated;
use tartan_engine::Engine;

use crate::api::answers::{BulkDryRun, BulkFailure, BulkJobList, BulkJobView};
use crate::error::{ApiError, Problem};
use crate::extract::{self, Path, Query};

/// Largest bulk request body: a filter of up to 1000 ids.
const BULK_BODY_LIMIT: usize = 512 * 1024;
/// Failed flows shown with a job.
const FAILURE_SAMPLE: usize = 20;
/// Jobs one listing shows at most.
const MAX_LIST: usize = 1000;
const DEFAULT_LIST: usize = 100;

/// Create the job (or count, for a dry run): 202 with the job, 200 with the count.
async fn create(engine: &Engine, spec: BulkSpec) -> Result<Response, ApiError> {
    if spec.dry_run {
        let matched = engine.count_bulk(&spec.filter).await?;
        return Ok(Json(BulkDryRun {
            dry_run: true,
            kind: spec.action.kind().into(),
            matched,
        })
        .into_response());
    }
    match engine.create_bulk_job(spec).await? {
        BulkCreated::Created(job) => {
            Ok((StatusCode::ACCEPTED, Json(BulkJobView::of(&job, Vec::new()))).into_response())
        }
        BulkCreated::TooMany(n) => Err(ApiError::bad_request(format!(
            "filter: matches {n} flows, more than the {} one bulk job may act on; narrow it",
            engine.config().max_bulk_flows
        ))),
    }
}

/// `POST /engine/bulk/retry`: 202 with the job, which retries every failed
/// or cancelled flow the filter matches now.
#[utoipa::path(post, path = "/engine/bulk/retry", tag = "bulk", request_body = BulkRetryRequest,
    responses(
        (status = 202, description = "The job, queued", body = BulkJobView),
        (status = 200, description = "A dry run: how many flows match", body = BulkDryRun),
        (status = 400, description = "An empty or bad filter, a bad rate, or more flows matched than a job may act on", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn retry(
    State(engine): State<Engine>,
    extract::Json(body): extract::Json<BulkRetryRequest, BULK_BODY_LIMIT>,
) -> Result<Response, ApiError> {
    create(&engine, body.parse()?).await
}

/// `POST /engine/bulk/cancel`: 202 with the job, which cancels every active
/// flow the filter matches now.
#[utoipa::path(post, path = "/engine/bulk/cancel", tag = "bulk", request_body = BulkCancelRequest,
    responses(
        (status = 202, description = "The job, queued", body = BulkJobView),
        (status = 200, description = "A dry run: how many flows match", body = BulkDryRun),
        (status = 400, description = "An empty or bad filter, a bad rate, or more flows matched than a job may act on", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn cancel(
    State(engine): State<Engine>,
    extract::Json(body): extract::Json<BulkCancelRequest, BULK_BODY_LIMIT>,
) -> Result<Response, ApiError> {
    create(&engine, body.parse()?).await
}

/// `POST /engine/bulk/resume`: 202 with the job, which resumes the parked
/// work of every active flow the filter matches now (docs/retries.md,
/// "Parking"); flows with none are skipped.
#[utoipa::path(post, path = "/engine/bulk/resume", tag = "bulk", request_body = BulkResumeRequest,
    responses(
        (status = 202, description = "The job, queued", body = BulkJobView),
        (status = 200, description = "A dry run: how many flows match", body = BulkDryRun),
        (status = 400, description = "An empty or bad filter, a bad rate, or more flows matched than a job may act on", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn resume(
    State(engine): State<Engine>,
    extract::Json(body): extract::Json<BulkResumeRequest, BULK_BODY_LIMIT>,
) -> Result<Response, ApiError> {
    create(&engine, body.parse()?).await
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
    let jobs = engine.bulk_jobs(limit).await?;
    let jobs: Vec<BulkJobView> = jobs.iter().map(|j| BulkJobView::of(j, Vec::new())).collect();
    Ok(Json(BulkJobList {
        count: jobs.len(),
        jobs,
    }))
}

/// A job by id, or 404.
async fn job_or_404(engine: &Engine, id: &str) -> Result<tartan_engine::reads::BulkJob, ApiError> {
    let job = if id.len() > 64 {
        None
    } else {
        engine.bulk_job(id).await?
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
            .bulk_failures(&job.id, FAILURE_SAMPLE)
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
    if job.status != BulkStatus::Cancelled {
        return Err(ApiError::conflict(format!(
            "bulk job {id} is {}: it cannot be cancelled",
            job.status.as_str()
        )));
    }
    Ok((StatusCode::ACCEPTED, Json(BulkJobView::of(&job, Vec::new()))))
}
