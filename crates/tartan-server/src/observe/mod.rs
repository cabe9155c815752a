//! What the API tells operators about itself (docs/operating.md): a log line
//! per request, tied to a request id.

mod request_log;

pub(crate) use request_log::log_request;
