//! Event histories a page at a time (docs/api.md, "Event histories"):
//! `?after=SEQ&limit=N`, and the answer's `next`. Without either parameter
//! the answer is the whole history, as Argyll clients read it, as long as
//! it is at most [`UNPAGED_LIMIT`] events and [`PAGE_BYTES`] of data; a
//! longer one is answered with its first page and a `next`, never loaded
//! whole. Every page stops at [`PAGE_BYTES`] too, so that a page of large
//! events (a step's outputs are up to 8 MiB) stays a page.

use serde::Deserialize;

use crate::error::ApiError;

/// Events of a page when `limit` is not given.
pub(crate) const DEFAULT_LIMIT: usize = 100;
/// Most events of one page.
pub(crate) const MAX_LIMIT: usize = 1000;
/// Most events of an answer without parameters.
pub(crate) const UNPAGED_LIMIT: usize = 1000;
/// Most bytes of event data (as stored) in one answer, paged or not; an
/// event larger than this comes alone.
pub(crate) const PAGE_BYTES: usize = 4 * 1024 * 1024;

/// The query of an event history: text, so that a bad value is answered
/// naming its parameter.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct PageParams {
    /// The events after this sequence: the `next` of the previous page.
    #[param(value_type = Option<i64>, minimum = 0)]
    after: Option<String>,
    /// Events per page, 1 to 1000 (100 when `after` is given alone).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
}

/// Which events an answer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageRequest {
    /// The events after this sequence (0: from the first).
    pub(crate) after: i64,
    pub(crate) limit: usize,
    /// A parameter was given: `next` is always in the answer.
    pub(crate) paged: bool,
}

impl PageParams {
    pub(crate) fn request(&self) -> Result<PageRequest, ApiError> {
        let after = match self.after.as_deref() {
            None => 0,
            Some(text) => text
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|a| *a >= 0)
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "after: must be an event sequence, an integer of 0 or more (the `next` of the \
                     previous page), got {text:?}"
                    ))
                })?,
        };
        let limit = match self.limit.as_deref() {
            None => None,
            Some(text) => Some(
                text.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|l| (1..=MAX_LIMIT).contains(l))
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "limit: must be an integer from 1 to {MAX_LIMIT}, got {text:?}"
                        ))
                    })?,
            ),
        };
        let paged = self.after.is_some() || self.limit.is_some();
        Ok(PageRequest {
            after,
            limit: limit.unwrap_or(if paged { DEFAULT_LIMIT } else { UNPAGED_LIMIT }),
            paged,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(after: Option<&str>, limit: Option<&str>) -> Result<PageRequest, ApiError> {
        PageParams {
            after: after.map(String::from),
            limit: limit.map(String::from),
        }
        .request()
    }

    #[test]
    fn without_parameters_the_whole_history_up_to_the_bound() {
        assert_eq!(
            request(None, None).ok(),
            Some(PageRequest {
                after: 0,
                limit: UNPAGED_LIMIT,
                paged: false
            })
        );
    }

    #[test]
    fn either_parameter_pages() {
        assert_eq!(
            request(Some("7"), None).ok(),
            Some(PageRequest {
                after: 7,
                limit: DEFAULT_LIMIT,
                paged: true
            })
        );
        assert_eq!(
            request(None, Some("1000")).ok(),
            Some(PageRequest {
                after: 0,
                limit: 1000,
                paged: true
            })
        );
    }

    #[test]
    fn bad_values_name_their_parameter() {
        for (after, limit, named) in [
            (None, Some("0"), "limit"),
            (None, Some("1001"), "limit"),
            (None, Some("ten"), "limit"),
            (None, Some("-1"), "limit"),
            (None, Some(""), "limit"),
            (Some("-1"), None, "after"),
            (Some("1.5"), None, "after"),
            (Some(""), None, "after"),
            (Some("99999999999999999999"), None, "after"),
        ] {
            let Err(e) = request(after, limit) else {
                panic!("{after:?} {limit:?} was accepted");
            };
            assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
            assert!(e.detail.starts_with(named), "{}", e.detail);
        }
    }
}
