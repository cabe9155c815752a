//! The errors of the pure domain. Each names the field or thing at fault so
//! the server can turn it into a problem+json a person can act on.

use thiserror::Error;

use crate::ids::{shown_key, MAX_ID_LEN};

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

    /// `value` at `field` is longer than [`MAX_ID_LEN`] bytes.
    pub fn too_long(field: impl Into<String>, value: &str) -> Self {
        Self::new(
            field,
            format!(
                "too long: {} bytes, more than the {MAX_ID_LEN} an identifier, name or label may have",
                value.len()
            ),
        )
    }
}

/// Refuse `value` at `field` when it is longer than [`MAX_ID_LEN`] bytes.
pub fn check_len(field: &str, value: &str) -> Result<(), ValidationError> {
    if value.len() > MAX_ID_LEN {
        return Err(ValidationError::too_long(field, value));
    }
    Ok(())
}

/// Refuse a client's key in the map at `field` (`attributes`, `labels`,
/// `init`) when it is longer than [`MAX_ID_LEN`] bytes; the error names it
/// cut short (`labels.aaaa…`).
pub fn check_key(field: &str, key: &str) -> Result<(), ValidationError> {
    if key.len() > MAX_ID_LEN {
        return Err(ValidationError::too_long(
            format!("{field}.{}", shown_key(key)),
            key,
        ));
    }
    Ok(())
}

/// Refuse the labels at `field` whose key or value is longer than
/// [`MAX_ID_LEN`] bytes.
pub fn check_labels<'a>(
    field: &str,
    labels: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<(), ValidationError> {
    for (key, value) in labels {
        check_key(field, key)?;
        check_len(&format!("{field}.{key}"), value)?;
    }
    Ok(())
}

/// Why a plan could not be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlanError {
    #[error("at least one goal step is required")]
    NoGoals,
    #[error("step not found: {}", crate::suggest::listed(.0))]
    UnknownGoals(Vec<crate::suggest::Missing>),
    #[error("required inputs not provided: {}", .0.join(", "))]
    MissingInputs(Vec<String>),
    #[error("circular dependency detected: step {0}")]
    Cycle(String),
    #[error("sub-flows nested too deep or too many at step {step}: a plan holds at most {max_plans} sub-flow plans, {max_depth} deep")]
    TooDeep {
        step: String,
        max_depth: usize,
        max_plans: usize,
    },
    #[error("required inputs not provided: {} (the sub-flow of step {step} needs them and the step does not pass them)", .names.join(", "))]
    SubflowInputs { step: String, names: Vec<String> },
}

/// A catalog change that would break the catalog as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CatalogError {
    #[error("{0}")]
    Invalid(#[from] ValidationError),
    #[error("step exists with a different definition: {0}")]
    Exists(String),
    #[error("step not found: {0}")]
    NotFound(crate::suggest::Missing),
}
