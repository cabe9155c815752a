use tartan_core::error::{CatalogError, PlanError, ValidationError};
use tartan_store::StoreError;
use thiserror::Error;

/// What an engine operation can answer.
#[derive(Debug, Error)]
pub enum EngineError {
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("step exists with a different definition: {0}")]
    StepExists(String),
    #[error("step not found: {0}")]
    StepNotFound(tartan_core::suggest::Missing),
    #[error("flow exists with a different definition: {0}")]
    FlowExists(String),
    #[error("flow not found: {0}")]
    FlowNotFound(String),
    #[error("lane not found: {0}")]
    LaneNotFound(String),
    #[error("schedule exists: {0}")]
    ScheduleExists(String),
    #[error("schedule not found: {0}")]
    ScheduleNotFound(String),
    #[error("{0} schedules exist, the most a database holds; delete one first")]
    TooManySchedules(usize),
    #[error("flow {0} is {1}, not active")]
    FlowTerminal(String, &'static str),
    /// A retry of a flow that cannot be retried now: the detail says why.
    #[error("flow {0} cannot be retried: {1}")]
    NotRetryable(String, String),
    /// A resume of a flow with nothing to resume: the detail says why.
    #[error("flow {0} cannot be resumed: {1}")]
    NotResumable(String, String),
    #[error("flow {0} has no work item {1}")]
    WorkNotFound(String, String),
    /// A "retry now" of an item not waiting for a retry: the detail says why.
    #[error("work item {0} cannot be retried now: {1}")]
    NotWaitingForRetry(String, String),
    #[error("the engine is shutting down")]
    ShuttingDown,
    #[error("this engine has {0} flows in progress, its limit (TARTAN_MAX_ACTIVE_FLOWS); retry later")]
    Overloaded(usize),
    #[error("{0} clients already wait for flows to finish; retry later")]
    TooManyWaiters(usize),
    #[error("this process already serves {0} event streams, its limit; retry later")]
    TooManyStreams(usize),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The state machine refused a command on the state this process holds.
    #[error("state machine: {0}")]
    StateMachine(#[from] tartan_core::flow::ApplyError),
    /// Other processes kept changing what this request changes, past the
    /// tries it gets: trying again later may succeed.
    #[error("{0} kept changing under this request; retry")]
    Contended(String),
    /// The catalog could not be read again after another process changed it.
    #[error("reading the catalog again: {0}")]
    CatalogReload(String),
    /// The client for step calls could not be built (its TLS settings).
    #[error("HTTP client: {0}")]
    HttpClient(String),
    /// The task doing the work stopped without answering.
    #[error("{0} ended without an answer")]
    Abandoned(&'static str),
}

impl From<CatalogError> for EngineError {
    fn from(e: CatalogError) -> Self {
        match e {
            CatalogError::Invalid(v) => EngineError::Invalid(v),
            CatalogError::Exists(id) => EngineError::StepExists(id),
            CatalogError::NotFound(id) => EngineError::StepNotFound(id),
        }
    }
}

impl EngineError {
    /// Why the database could not answer, when that is what went wrong: a
    /// client may try again later (the API answers 503).
    pub fn database_unavailable(&self) -> Option<&str> {
        match self {
            EngineError::Store(StoreError::Database(cause)) => Some(cause),
            _ => self.database_unreachable(),
        }
    }

    /// Why the database could not be reached or written (down, failing
    /// over, a standby), when that rather than a statement failing is what
    /// went wrong: an outage, marked once by the engine, not at each
    /// request it refuses.
    pub fn database_unreachable(&self) -> Option<&str> {
        match self {
            EngineError::Store(e) => e.unavailable(),
            _ => None,
        }
    }
}
