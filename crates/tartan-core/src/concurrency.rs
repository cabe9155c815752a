//! Concurrency keys and priority (docs/concurrency.md): the rules, typed.
//!
//! A flow started with `concurrency: {"key", "limit"}` joins its key's
//! line in the commit that starts it and runs no step until its turn
//! comes: at most `limit` flows of one key run at once, across every
//! engine on the database; the others wait in turn order. A flow leaves
//! the line in the commit that ends it (any way it ends), and the next in
//! turn is let in.
//!
//! Turn order is one rule wherever flows or their calls wait — the calls
//! waiting for a slot or a lane, the flows waiting for their key: the
//! earliest *turn time* goes first, where a wait's turn time is when it
//! began, moved earlier by [`PRIORITY_STEP`] per point of priority. So a
//! higher priority goes first, yet never for ever: a wait of priority 0
//! is overtaken only by one of priority `p` that began less than `p`
//! seconds after it, and is served before anything that arrives later.

use serde::{Deserialize, Serialize};

use crate::error::ValidationError;
use crate::flow::Time;

/// The longest concurrency key, in bytes: a key is a customer, an order
/// or a tenant id, kept in an index.
pub const MAX_KEY_LEN: usize = 256;
/// The largest `limit`: a line of more flows than this running at once is
/// no limit on one customer's work.
pub const MAX_LIMIT: u32 = 10_000;
/// The priority range (`priority`, default 0).
pub const MIN_PRIORITY: i32 = -1000;
pub const MAX_PRIORITY: i32 = 1000;
/// What one point of priority is worth in waiting time (module docs).
pub const PRIORITY_STEP: std::time::Duration = std::time::Duration::from_secs(1);

/// A flow's concurrency key and how many of its flows may run at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Concurrency {
    /// Flows with the same key take turns (a customer, an order, a tenant).
    #[cfg_attr(feature = "openapi", schema(max_length = 256, min_length = 1))]
    pub key: String,
    /// How many flows of the key may run at once, at least 1.
    #[serde(default = "one")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10000))]
    pub limit: u32,
}

fn one() -> u32 {
    1
}

impl Concurrency {
    /// Checked as a client sent it: the error names the field.
    pub fn check(&self) -> Result<(), ValidationError> {
        if self.key.is_empty() {
            return Err(ValidationError::new("concurrency.key", "must not be empty"));
        }
        if self.key.len() > MAX_KEY_LEN {
            return Err(ValidationError::new(
                "concurrency.key",
                format!("is {} bytes long: at most {MAX_KEY_LEN}", self.key.len()),
            ));
        }
        if self.key.chars().any(char::is_control) {
            return Err(ValidationError::new(
                "concurrency.key",
                "must not hold control characters",
            ));
        }
        if !(1..=MAX_LIMIT).contains(&self.limit) {
            return Err(ValidationError::new(
                "concurrency.limit",
                format!("{} is out of range: 1 to {MAX_LIMIT}", self.limit),
            ));
        }
        Ok(())
    }
}

/// Whether `priority` is the default (0): not written out.
pub fn is_default_priority(priority: &i32) -> bool {
    *priority == 0
}

/// Refuse a priority outside [`MIN_PRIORITY`]..=[`MAX_PRIORITY`].
pub fn check_priority(priority: i32) -> Result<(), ValidationError> {
    if !(MIN_PRIORITY..=MAX_PRIORITY).contains(&priority) {
        return Err(ValidationError::new(
            "priority",
            format!("{priority} is out of range: {MIN_PRIORITY} to {MAX_PRIORITY}"),
        ));
    }
    Ok(())
}

/// A wait's turn time, in microseconds since the epoch: when it began,
/// moved earlier by [`PRIORITY_STEP`] per point of `priority`. Waits are
/// served earliest turn time first (module docs).
pub fn turn_us(began_us: i64, priority: i32) -> i64 {
    let step = PRIORITY_STEP.as_micros() as i64;
    began_us.saturating_sub(i64::from(priority).saturating_mul(step))
}

/// [`turn_us`] of a wait that began at `began`.
pub fn turn_at(began: Time, priority: i32) -> i64 {
    turn_us(began.timestamp_micros(), priority)
}

/// What a transition changes in its flow's place in its key's line: the
/// engine writes it with the flow's commit and lets the next in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineChange {
    /// The flow joined its key's line (started, or retried).
    Join,
    /// Its turn came and it runs.
    Admitted,
    /// It ended and leaves the line.
    Leave,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_moves_the_turn_by_seconds() {
        assert_eq!(turn_us(10_000_000, 0), 10_000_000);
        assert_eq!(turn_us(10_000_000, 3), 7_000_000);
        assert_eq!(turn_us(10_000_000, -2), 12_000_000);
        // A high priority that arrives 5 s later than a priority-0 wait
        // with priority 3 does not overtake it; with 6 it does.
        assert!(turn_us(0, 0) < turn_us(5_000_000, 3));
        assert!(turn_us(0, 0) > turn_us(5_000_000, 6));
    }

    #[test]
    fn bad_keys_and_limits_name_their_field() {
        let bad = |key: &str, limit| {
            Concurrency {
                key: key.into(),
                limit,
            }
            .check()
            .err()
            .map(|e| e.field)
        };
        assert_eq!(bad("", 1).as_deref(), Some("concurrency.key"));
        assert_eq!(bad(&"k".repeat(257), 1).as_deref(), Some("concurrency.key"));
        assert_eq!(bad("a\nb", 1).as_deref(), Some("concurrency.key"));
        assert_eq!(bad("customer-1", 0).as_deref(), Some("concurrency.limit"));
        assert_eq!(
            bad("customer-1", MAX_LIMIT + 1).as_deref(),
            Some("concurrency.limit")
        );
        assert_eq!(bad("customer-1", 1), None);
        assert!(check_priority(1001).is_err());
        assert!(check_priority(-1000).is_ok());
    }
}
