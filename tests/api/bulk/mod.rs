//! Bulk retry and cancel jobs.

mod jobs;
