//! Timeouts and cancellation end to end.

pub(crate) mod end_to_end;
