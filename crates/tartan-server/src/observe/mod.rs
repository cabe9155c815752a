//! What the API tells operators about itself (docs/operating.md): a log line
//! per request, tied to a request id, and the metrics.

pub(crate) mod metrics;
mod requests;
mod trace;

pub(crate) use requests::observe_request;
pub(crate) use trace::RequestTrace;
