//! The errors of the pure domain. Each names the field or thing at fault so
//! the server can turn it into a problem+json a person can act on.

use thiserror::Error;

/// A definition (step, flow request, policy) that is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    /// Dotted path of the offending field, e.g. `work_config.backoff_type`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl ValidationError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Why a plan could not be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlanError {
    #[error("at least one goal step is required")]
    NoGoals,
    #[error("step not found: {}", .0.join(", "))]
    UnknownGoals(Vec<String>),
    #[error("required inputs not provided: {}", .0.join(", "))]
    MissingInputs(Vec<String>),
    #[error("circular dependency detected: step {0}")]
    Cycle(String),
}

/// A catalog change that would break the catalog as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CatalogError {
    #[error("{0}")]
    Invalid(#[from] ValidationError),
    #[error("step exists with a different definition: {0}")]
    Exists(String),
    #[error("step not found: {0}")]
    NotFound(String),
}
