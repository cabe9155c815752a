//! `/engine/step`: register, read, update and remove steps.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use tartan_core::ids::sanitize_id;
use tartan_core::step::Step;
use tartan_engine::Engine;

use crate::api::answers::{step_shown, Message, StepList, StepSaved};
use crate::error::{ApiError, Problem};
use crate::extract::{self, Path, STEP_BODY_LIMIT};

type StepBody = extract::Json<Step, STEP_BODY_LIMIT>;

/// Every registered step.
///
/// Each step as stored, defaults filled in (as `GET /engine/step/{id}`
/// shows it), and their `count`.
#[utoipa::path(get, path = "/engine/step", tag = "steps", operation_id = "listSteps",
    responses((status = 200, description = "Every registered step", body = StepList)))]
pub(crate) async fn list(State(engine): State<Engine>) -> Json<StepList> {
    let view = engine.catalog().view().await;
    let steps: Vec<_> = view
        .catalog
        .steps()
        .values()
        .map(|s| std::sync::Arc::new(step_shown(s)))
        .collect();
    Json(StepList {
        count: steps.len(),
        steps,
    })
}

/// Register a step; an identical repeat is a 201 too.
///
/// `id`, `name` and `type` are required (`sync`, `async`, `script` or
/// `flow`), with `http.endpoint` for `sync` and `async` steps. Every
/// problem is a `400` naming its field; an id that already holds a
/// different definition is a `409` (replace it with `PUT`). The answer is
/// the step as stored: the id sanitised, the defaults filled in, and
/// `effective_retry` and `effective_timeouts`. At most 512 KiB of body.
#[utoipa::path(post, path = "/engine/step", tag = "steps", operation_id = "registerStep",
    request_body(content = Step, description = "The step's definition (Argyll's)",
        example = greet_example),
    responses(
        (status = 201, description = "Registered, as stored", body = StepSaved),
        (status = 400, description = "The step is not valid", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The id holds a different definition", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn register(
    State(engine): State<Engine>,
    extract::Json(step): StepBody,
) -> Result<(StatusCode, super::flows::IdNote, Json<StepSaved>), ApiError> {
    let given = step.id.clone();
    let step = engine.catalog().register_step(step).await?;
    Ok((
        StatusCode::CREATED,
        super::flows::IdNote::of("step", &given, &step.id),
        Json(StepSaved {
            step: step_shown(&step),
            message: "Step registered".into(),
        }),
    ))
}

/// The stored step, defaults filled in.
///
/// As registered, with the id sanitised, `http.method`, the retry defaults
/// and Argyll's duration fields in milliseconds filled in; posting it back
/// registers the same step.
#[utoipa::path(get, path = "/engine/step/{id}", tag = "steps", operation_id = "getStep",
    params(("id" = String, Path, description = "Step id")),
    responses(
        (status = 200, description = "The step", body = Step),
        (status = 404, description = "No such step", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn get_one(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<Json<Step>, ApiError> {
    let view = engine.catalog().view().await;
    match view.catalog.get(&sanitize_id(&id)) {
        Some(step) => Ok(Json(step_shown(step))),
        None => Err(ApiError::not_found(format!(
            "step not found: {}",
            view.catalog.missing(&sanitize_id(&id))
        ))),
    }
}

/// Replace a step; the id in the URL and in the body must name the same step.
///
/// Validated as a registration is; flows already running keep the copy of
/// the step in their plan, new flows get the new one. A step that is not
/// registered is a `404` (register it with `POST /engine/step`). At most
/// 512 KiB of body.
#[utoipa::path(put, path = "/engine/step/{id}", tag = "steps", operation_id = "updateStep",
    request_body(content = Step, description = "The step's new definition; its `id` is the URL's",
        example = greet_example),
    params(("id" = String, Path, description = "Step id")),
    responses(
        (status = 200, description = "Updated, as stored", body = StepSaved),
        (status = 400, description = "The step is not valid, or its id is not the URL's", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such step", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn update(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    extract::Json(step): StepBody,
) -> Result<Json<StepSaved>, ApiError> {
    if sanitize_id(&step.id) != sanitize_id(&id) {
        return Err(ApiError::bad_request(
            "id: step ID in URL does not match step ID in body",
        ));
    }
    let step = engine.catalog().update_step(step).await?;
    Ok(Json(StepSaved {
        step: step_shown(&step),
        message: "Step updated".into(),
    }))
}

/// Remove a step; running flows keep the copy in their plan.
///
/// New flows can no longer name it as a goal or plan it in; flows already
/// running go on with the copy in their plan.
#[utoipa::path(delete, path = "/engine/step/{id}", tag = "steps", operation_id = "unregisterStep",
    params(("id" = String, Path, description = "Step id")),
    responses(
        (status = 200, description = "Removed", body = Message),
        (status = 404, description = "No such step", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn unregister(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<Json<Message>, ApiError> {
    engine.catalog().unregister_step(&sanitize_id(&id)).await?;
    Ok(Json(Message {
        message: "Step unregistered".into(),
    }))
}

/// The request example of a step's registration and update: the README's
/// `greet` (examples/steps/greet.json).
fn greet_example() -> serde_json::Value {
    serde_json::json!({
        "id": "greet", "name": "Greet", "type": "sync",
        "http": {"endpoint": "http://127.0.0.1:8081/greet", "timeout": "5s"},
        "attributes": {
            "name": {"role": "required", "type": "string"},
            "greeting": {"role": "output", "type": "string"}
        }
    })
}
