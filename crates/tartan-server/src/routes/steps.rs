//! `/engine/step`: register, read, update and remove steps.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};
use tartan_core::ids::sanitize_id;
use tartan_core::step::Step;
use tartan_engine::Engine;

use crate::error::ApiError;
use crate::extract::{self, Path, STEP_BODY_LIMIT};

type StepBody = extract::Json<Step, STEP_BODY_LIMIT>;

pub(crate) async fn list(State(engine): State<Engine>) -> Json<Value> {
    let view = engine.catalog().await;
    let steps: Vec<&Step> = view.catalog.steps().values().map(|s| &**s).collect();
    Json(json!({ "count": steps.len(), "steps": steps }))
}

pub(crate) async fn register(
    State(engine): State<Engine>,
    extract::Json(step): StepBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let stored = engine.register_step(step).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "step": stored, "message": "Step registered" })),
    ))
}

pub(crate) async fn get_one(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<Json<Step>, ApiError> {
    let view = engine.catalog().await;
    match view.catalog.get(&sanitize_id(&id)) {
        Some(step) => Ok(Json(step.clone())),
        None => Err(ApiError::not_found(format!("step not found: {id}"))),
    }
}

pub(crate) async fn update(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    extract::Json(step): StepBody,
) -> Result<Json<Value>, ApiError> {
    if sanitize_id(&step.id) != sanitize_id(&id) {
        return Err(ApiError::bad_request(
            "id: step ID in URL does not match step ID in body",
        ));
    }
    let stored = engine.update_step(step).await?;
    Ok(Json(json!({ "step": stored, "message": "Step updated" })))
}

pub(crate) async fn unregister(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    engine.unregister_step(&sanitize_id(&id)).await?;
    Ok(Json(json!({ "message": "Step unregistered" })))
}
