//! Registering a service's steps with the engine at start: `POST
//! /engine/step`, and `PUT /engine/step/{id}` when the id holds another
//! definition (`409`), as Argyll's SDKs do; waiting, within bounds, for an
//! engine that is not up yet.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode, Url};
use serde_json::Value;

use crate::ctx::detail;
use crate::step::Step;

/// How long registration waits for an engine that does not answer (or
/// answers 5xx) by default: long enough for an engine started beside the
/// service, short enough that a wrong URL is reported.
pub const DEFAULT_PATIENCE: Duration = Duration::from_secs(30);

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const FIRST_PAUSE: Duration = Duration::from_millis(250);
const LONGEST_PAUSE: Duration = Duration::from_secs(2);

/// Why a step is not registered.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error("the engine URL {url:?} is not an http(s) URL")]
    EngineUrl { url: String },
    #[error("step {step}: the engine did not take it within {waited:?}: {last}")]
    Unreachable {
        step: String,
        waited: Duration,
        last: String,
    },
    #[error("step {step}: refused by the engine: HTTP {status}: {detail}")]
    Refused {
        step: String,
        status: u16,
        detail: String,
    },
}

/// Where the engine is, and where it reaches this service.
#[derive(Clone, Debug)]
pub struct Registration {
    engine_url: String,
    public_url: String,
    token: Option<String>,
    patience: Duration,
}

impl Registration {
    /// `engine_url` is the engine's API (`http://localhost:8080`);
    /// `public_url` this service's URL as the engine reaches it, under
    /// which each step's path, its compensation and `/health` are named.
    pub fn new(engine_url: impl Into<String>, public_url: impl Into<String>) -> Registration {
        Registration {
            engine_url: engine_url.into(),
            public_url: public_url.into(),
            token: None,
            patience: DEFAULT_PATIENCE,
        }
    }

    /// A bearer token allowed to write (docs/security.md, "Bearer tokens").
    pub fn token(mut self, token: impl Into<String>) -> Registration {
        self.token = Some(token.into());
        self
    }

    /// How long to keep trying while the engine cannot be reached or
    /// answers 5xx ([`DEFAULT_PATIENCE`]).
    pub fn patience(mut self, patience: Duration) -> Registration {
        self.patience = patience;
        self
    }

    /// Register `steps`, in order; the first that fails stops the rest.
    pub(crate) async fn register(&self, steps: &[Step]) -> Result<(), RegisterError> {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        for step in steps {
            let definition = step.definition(&self.public_url);
            self.one(&client, step.id(), &definition).await?;
        }
        Ok(())
    }

    fn url(&self, id: Option<&str>) -> Result<Url, RegisterError> {
        let bad = || RegisterError::EngineUrl {
            url: self.engine_url.clone(),
        };
        let mut url = Url::parse(&self.engine_url).map_err(|_| bad())?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad());
        }
        {
            let mut path = url.path_segments_mut().map_err(|_| bad())?;
            path.pop_if_empty().extend(["engine", "step"]);
            if let Some(id) = id {
                path.push(id);
            }
        }
        Ok(url)
    }

    async fn one(&self, client: &reqwest::Client, id: &str, definition: &Value) -> Result<(), RegisterError> {
        let started = Instant::now();
        let mut pause = FIRST_PAUSE;
        let mut update = false;
        loop {
            let (method, url) = if update {
                (Method::PUT, self.url(Some(id))?)
            } else {
                (Method::POST, self.url(None)?)
            };
            let mut request = client.request(method, url).json(definition);
            if let Some(token) = &self.token {
                request = request.bearer_auth(token);
            }
            let last = match request.send().await {
                Ok(response) if response.status().is_success() => {
                    let done = if update { "updated" } else { "registered" };
                    tracing::info!(step = id, "step {done}");
                    return Ok(());
                }
                // Another definition under the id: this one replaces it.
                Ok(response) if response.status() == StatusCode::CONFLICT && !update => {
                    update = true;
                    continue;
                }
                // Removed between the two: register it anew, after a pause.
                Ok(response) if response.status() == StatusCode::NOT_FOUND && update => {
                    update = false;
                    format!("HTTP 404: {}", detail(response).await)
                }
                Ok(response) if response.status().is_server_error() => {
                    let status = response.status().as_u16();
                    format!("HTTP {status}: {}", detail(response).await)
                }
                Ok(response) => {
                    return Err(RegisterError::Refused {
                        step: id.to_string(),
                        status: response.status().as_u16(),
                        detail: detail(response).await,
                    });
                }
                Err(e) => e.to_string(),
            };
            if started.elapsed() + pause > self.patience {
                return Err(RegisterError::Unreachable {
                    step: id.to_string(),
                    waited: started.elapsed(),
                    last,
                });
            }
            tracing::debug!(
                step = id,
                "the engine is not ready ({last}): trying again in {pause:?}"
            );
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_routes_are_under_the_engines_url() {
        let url = |engine: &str, id| Registration::new(engine, "").url(id).map(|u| u.to_string());
        assert_eq!(
            url("http://e:8080", None).ok().as_deref(),
            Some("http://e:8080/engine/step")
        );
        assert_eq!(
            url("http://e:8080/", Some("a b")).ok().as_deref(),
            Some("http://e:8080/engine/step/a%20b")
        );
        assert_eq!(
            url("https://e/tartan/", Some("x")).ok().as_deref(),
            Some("https://e/tartan/engine/step/x")
        );
        assert!(url("e:8080", None).is_err());
        assert!(url("ftp://e", None).is_err());
    }
}
