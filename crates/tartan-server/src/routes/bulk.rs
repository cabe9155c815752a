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
        let matched = engine.bulk().count(&spec.filter).await?;
        return Ok(Json(BulkDryRun {
            dry_run: true,
            kind: spec.action.kind().into(),
            matched,
        })
        .into_response());
    }
    match engine.bulk().create(spec).await? {
        BulkCreated::Created(job) => {
            Ok((StatusCode::ACCEPTED, Json(BulkJobView::of(&job, Vec::new()))).into_response())
        }
        BulkCreated::TooMany(n) => Err(ApiError::bad_request(format!(
            "filter: matches {n} flows, more than the {} one bulk job may act on; narrow it",
            engine.config().max_bulk_flows
        ))),
    }
}

/// Retry every failed or cancelled flow a filter matches, as a job.
///
/// Answers `202` with the job, `queued`; the server retries the flows that
/// match now, fixed when the job is created, at `rate` flows a second
/// (1 to 1000, default 50). The filter must name at least one criterion;
/// more flows than `TARTAN_MAX_BULK_FLOWS` is a `400`. `dry_run: true`
/// answers `200` with how many flows match and creates nothing. At most
/// 512 KiB of body.
#[utoipa::path(post, path = "/engine/bulk/retry", tag = "bulk", operation_id = "bulkRetryFlows",
    request_body(content = BulkRetryRequest, description = "The filter and how to retry",
        example = json!({"filter": {"statuses": ["failed"], "failed_step": "greet"}, "reset_attempts": true, "rate": 50})),
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

/// Cancel every active flow a filter matches, as a job.
///
/// Answers `202` with the job, `queued`; the server cancels the flows that
/// match now, fixed when the job is created, at `rate` flows a second
/// (1 to 1000, default 50); `compensate: false` kills them instead. The
/// filter must name at least one criterion; more flows than
/// `TARTAN_MAX_BULK_FLOWS` is a `400`. `dry_run: true` answers `200` with
/// how many flows match and creates nothing. At most 512 KiB of body.
#[utoipa::path(post, path = "/engine/bulk/cancel", tag = "bulk", operation_id = "bulkCancelFlows",
    request_body(content = BulkCancelRequest, description = "The filter and how to cancel",
        example = json!({"filter": {"id_prefix": "hello-"}, "compensate": true, "dry_run": true})),
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

/// Resume the parked work of every active flow a filter matches, as a job.
///
/// Answers `202` with the job, `queued`; the server resumes the flows that
/// match now at `rate` flows a second (1 to 1000, default 50), skipping
/// those with nothing parked. `reset_attempts` (default `false`) gives the
/// resumed items a fresh retry budget. `dry_run: true` answers `200` with
/// how many flows match and creates nothing. At most 512 KiB of body.
#[utoipa::path(post, path = "/engine/bulk/resume", tag = "bulk", operation_id = "bulkResumeFlows",
    request_body(content = BulkResumeRequest, description = "The filter and how to resume",
        example = json!({"filter": {"labels": {"customer": "acme"}}, "reset_attempts": false})),
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

/// Bulk jobs, the most recent first.
///
/// Each job with its progress (`total`, `done`, `skipped`, `failed`,
/// `remaining`); `limit` 1 to 1000 (default 100). Finished jobs are deleted
/// by the retention sweep with their flows.
#[utoipa::path(get, path = "/engine/bulk", tag = "bulk", operation_id = "listBulkJobs", params(ListParams),
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
    let jobs = engine.bulk().jobs(limit).await?;
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
        engine.bulk().job(id).await?
    };
    job.ok_or_else(|| ApiError::not_found(format!("bulk job not found: {id}")))
}

/// A bulk job's progress, with up to 20 of the flows it failed on.
///
/// `status` is `queued`, `running`, `completed`, `cancelled` or `failed`;
/// `failures` lists, in order, up to 20 flows whose retry or cancel was
/// refused or failed, each with why.
#[utoipa::path(get, path = "/engine/bulk/{job}", tag = "bulk", operation_id = "getBulkJob",
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
            .bulk()
            .failures(&job.id, FAILURE_SAMPLE)
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

/// Stop a bulk job: it acts on no more flows.
///
/// Answers `202` with the job, `cancelled` (a cancelled job again too); the
/// flows it acted on stay as they are. A job that had completed or failed
/// is a `409`. No body; send `Content-Type: application/json` all the
/// same, as on every `POST`.
#[utoipa::path(post, path = "/engine/bulk/{job}/cancel", tag = "bulk", operation_id = "cancelBulkJob",
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
        .bulk()
        .cancel(&id)
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
