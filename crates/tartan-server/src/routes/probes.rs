//! `/health` and `/ready`: the process's own probes, for load balancers and
//! orchestrators (a step's health is the cluster's, `cluster.rs`).

use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::Json;
use tartan_engine::{Engine, Readiness};

use crate::api::answers::{Health, HealthBackend, HealthDetails, HealthStreams, Ready};

/// The header Argyll's `/health` names its Raft role in, which its HAProxy
/// configuration sends writes by (docs/argyll.md, "Several engines behind
/// a proxy").
const RAFT_STATE: HeaderName = HeaderName::from_static("x-argyll-raft-state");
use crate::error::{kind, ApiError, Problem};

/// Liveness, with the version, store, node id and call counts.
///
/// `200` whenever the process serves requests, without waiting on the
/// database (for that, `GET /ready`). `details` has the version, the store,
/// the node id, the active flows and timers, the calls in flight, queued
/// and deferred against their limits, and, as Argyll's does, the backend
/// and the streams open. `X-Argyll-Raft-State` is `leader` while the
/// engine takes writes (as last found, looked at again in the background
/// at most once a second), else `follower`: Argyll's HAProxy configuration
/// sends writes by it. Open: no token needed.
#[utoipa::path(get, path = "/health", tag = "health", operation_id = "getHealth", security(()),
    responses((status = 200, description = "The process is alive", body = Health,
        headers(("X-Argyll-Raft-State" = String, description = "`leader` while this engine takes writes, else `follower`")))))]
pub(crate) async fn health(State(engine): State<Engine>) -> ([(HeaderName, HeaderValue); 1], Json<Health>) {
    let (calls, deferred) = engine.calls().counts();
    let config = engine.config();
    let state = if engine.takes_writes() {
        "leader"
    } else {
        "follower"
    };
    let health = Json(Health {
        status: "healthy".into(),
        service: "tartan".into(),
        details: HealthDetails {
            version: env!("CARGO_PKG_VERSION").into(),
            store: engine.backend().into(),
            node_id: config.node_id.clone(),
            active_flows: engine.flows().active(),
            max_active_flows: config.max_active_flows,
            timers: engine.timers(),
            // docs/durability.md, "Call slots".
            calls_in_flight: calls.running,
            max_calls: config.max_calls,
            max_calls_per_step: config.max_calls_per_step(),
            calls_queued: calls.queued,
            max_queued_calls: config.max_queued_calls,
            calls_deferred: deferred,
            // docs/durability.md, "Bytes in flight".
            response_bytes_held: calls.response_bytes,
            max_inflight_bytes: config.max_inflight_bytes,
            backend: HealthBackend {
                store: engine.backend().into(),
                state: state.into(),
            },
            websocket: HealthStreams {
                clients: engine.open_streams(),
            },
        },
    });
    ([(RAFT_STATE, HeaderValue::from_static(state))], health)
}

/// Ready when the database answers and takes writes.
///
/// For load balancers and readiness probes: `200` once the database
/// answers, has the migrations applied and takes writes, else a `503` problem: it does not answer, or
/// it is a standby or read-only (as during a failover).
#[utoipa::path(get, path = "/ready", tag = "health", operation_id = "getReady", security(()),
    responses(
        (status = 200, description = "Ready", body = Ready),
        (status = 503, description = "The database does not answer, or takes no writes", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn ready(State(engine): State<Engine>) -> Result<Json<Ready>, ApiError> {
    let detail = match engine.database_ready().await {
        Ok(Readiness::Ready) => {
            return Ok(Json(Ready {
                status: "ready".into(),
            }))
        }
        Ok(Readiness::ReadOnly) => {
            "the database takes no writes: it is a standby or read-only (a failover under way?)"
        }
        Err(e) => {
            tracing::warn!("not ready: {e}");
            "the database is not reachable"
        }
    };
    Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, kind::UNAVAILABLE, detail).retry_after(5))
}
