//! `/engine/work` and `/engine/flow/{id}/work`: the work-item projection.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use tartan_core::flow::WorkStatus;
use tartan_engine::Engine;
use tartan_store::{WorkQuery, WorkView};

use crate::error::ApiError;
use crate::extract::{Path, Query};

const MAX_LIMIT: usize = 1000;

/// A work item, flat, with where it belongs.
fn work_json(w: &WorkView) -> Value {
    let mut v = json!(w.detail);
    v["flow_id"] = json!(w.flow_id);
    v["step_id"] = json!(w.step_id);
    v["token"] = json!(w.token);
    v["attempt"] = json!(w.attempt);
    v["last_error"] = json!(w.detail.error);
    v
}

pub(crate) async fn flow_work(
    State(engine): State<Engine>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    // 404 for an unknown flow, not an empty list.
    engine.flow(&id).await?;
    let mut items = Vec::new();
    let mut cursor = None;
    loop {
        let page = engine
            .store()
            .query_work(&WorkQuery {
                flow_id: Some(id.clone()),
                limit: MAX_LIMIT,
                cursor,
                ..WorkQuery::default()
            })
            .await?;
        items.extend(page.items.iter().map(work_json));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok(Json(json!({ "count": items.len(), "work_items": items })))
}

#[derive(Deserialize)]
pub(crate) struct WorkParams {
    status: Option<String>,
    step: Option<String>,
    flow_id: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

pub(crate) async fn list(
    State(engine): State<Engine>,
    Query(p): Query<WorkParams>,
) -> Result<Json<Value>, ApiError> {
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
    if let Some(c) = &p.cursor {
        if tartan_store::decode_cursor(c).is_none() {
            return Err(ApiError::bad_request("cursor: invalid cursor"));
        }
    }
    let page = engine
        .store()
        .query_work(&WorkQuery {
            flow_id: p.flow_id.filter(|s| !s.is_empty()),
            step_id: p.step.filter(|s| !s.is_empty()),
            status,
            limit,
            cursor: p.cursor.filter(|s| !s.is_empty()),
        })
        .await?;
    let items: Vec<Value> = page.items.iter().map(work_json).collect();
    let mut body = json!({ "count": items.len(), "work_items": items });
    if let Some(next) = page.next_cursor {
        body["next_cursor"] = json!(next);
    }
    Ok(Json(body))
}
