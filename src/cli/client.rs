//! The HTTP client of the CLI: one request helper that turns every answer
//! that is not a success into a `CliError` carrying the server's problem
//! (docs/errors.md), and every transport failure into a message naming the
//! server.

use std::time::Duration;

use futures::StreamExt;
use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// The most of one answer the CLI reads: the server bounds its own lists
/// (1000 flows, 1000 events a page), so more means something is wrong.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// Exit codes (docs/cli.md, "Exit codes").
pub mod exit {
    pub const OK: u8 = 0;
    /// The server refused the request, a local input is wrong, or the
    /// thing asked about is not well (not ready, a bulk job with failures).
    pub const ERROR: u8 = 1;
    /// The server could not be reached or answered something that is not
    /// its API.
    pub const UNREACHABLE: u8 = 3;
    /// A watched flow failed (a timeout that fails it included).
    pub const FLOW_FAILED: u8 = 4;
    /// A watched flow was cancelled (by a client or a timeout).
    pub const FLOW_CANCELLED: u8 = 5;
    /// Interrupted by Ctrl-C.
    pub const INTERRUPTED: u8 = 130;
}

/// Why a command did not do what it was asked.
#[derive(Debug)]
pub enum CliError {
    /// The server answered with an error: the problem+json's members.
    Problem {
        status: u16,
        title: String,
        detail: String,
    },
    /// No answer from the server at all.
    Unreachable { server: String, reason: String },
    /// Something local: a file, a flag's value.
    Local(String),
}

impl CliError {
    pub fn local(msg: impl Into<String>) -> Self {
        CliError::Local(msg.into())
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Problem { .. } | CliError::Local(_) => exit::ERROR,
            CliError::Unreachable { .. } => exit::UNREACHABLE,
        }
    }

    /// What stderr shows: what the server said escaped, as every line
    /// for people is (`output::escape`).
    pub fn message(&self) -> String {
        use super::output::escape;
        match self {
            CliError::Problem {
                status,
                title,
                detail,
            } => {
                format!("error: {}\n  ({status} {})", escape(detail), escape(title))
            }
            CliError::Unreachable { server, reason } => {
                format!(
                    "error: cannot reach the Tartan server at {}: {}\n  (set --server or TARTAN_SERVER)",
                    escape(server),
                    escape(reason)
                )
            }
            CliError::Local(msg) => format!("error: {}", escape(msg)),
        }
    }
}

/// How to reach the server.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    token: Option<String>,
}

impl Client {
    pub fn new(server: &str, token: Option<String>) -> Result<Client, CliError> {
        let mut base = Url::parse(server)
            .map_err(|e| CliError::local(format!("--server {server:?} is not a URL: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(CliError::local(format!(
                "--server {server:?} must be an http:// or https:// URL"
            )));
        }
        // A base with a path prefix (behind a proxy) keeps it: joined paths go under it.
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let token = token.filter(|t| !t.is_empty());
        if let Some(t) = &token {
            if reqwest::header::HeaderValue::from_str(&format!("Bearer {t}")).is_err() {
                return Err(CliError::local("--token holds characters a header cannot carry"));
            }
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| CliError::local(format!("building the HTTP client: {e}")))?;
        Ok(Client { http, base, token })
    }

    pub fn server(&self) -> String {
        self.base.as_str().trim_end_matches('/').to_string()
    }

    /// The URL of `segments` under the server, each segment encoded (an id
    /// holding `/` or `?` stays one segment).
    pub fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    fn unreachable(&self, e: &reqwest::Error) -> CliError {
        let mut reason = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            reason = format!("{reason}: {s}");
            source = s.source();
        }
        CliError::Unreachable {
            server: self.server(),
            reason,
        }
    }

    /// A request builder with the token; writes carry a JSON content type
    /// (the API takes JSON only on writes, docs/security.md).
    pub fn builder(&self, method: Method, url: Url) -> reqwest::RequestBuilder {
        let writes = method != Method::GET;
        let mut req = self.http.request(method, url);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if writes {
            req = req.header(reqwest::header::CONTENT_TYPE, "application/json");
        }
        req
    }

    /// Send and read the answer whatever its status: (status, JSON body or
    /// Null). Transport errors are `Unreachable`.
    pub async fn send_raw(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<(StatusCode, Value), CliError> {
        let mut req = self.builder(method, url).timeout(timeout);
        if let Some(b) = body {
            req = req.body(b.to_string());
        }
        let resp = req.send().await.map_err(|e| self.unreachable(&e))?;
        let status = resp.status();
        let mut bytes = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.unreachable(&e))?;
            if bytes.len() + chunk.len() > MAX_BODY {
                return Err(CliError::Unreachable {
                    server: self.server(),
                    reason: format!("an answer longer than {MAX_BODY} bytes"),
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        Ok((status, body))
    }

    /// Send; a success answers its body, anything else is an error.
    pub async fn send(&self, method: Method, url: Url, body: Option<&Value>) -> Result<Value, CliError> {
        let (status, body) = self.send_raw(method, url, body, Duration::from_secs(60)).await?;
        if status.is_success() {
            Ok(body)
        } else {
            Err(problem(status, &body))
        }
    }

    pub async fn get(&self, segments: &[&str]) -> Result<Value, CliError> {
        self.send(Method::GET, self.url(segments), None).await
    }

    pub async fn post(&self, segments: &[&str], body: &Value) -> Result<Value, CliError> {
        self.send(Method::POST, self.url(segments), Some(body)).await
    }

    /// `GET`, the answer read as the API's type for it
    /// (`tartan_server::api`).
    pub async fn get_as<T: DeserializeOwned>(&self, url: Url) -> Result<T, CliError> {
        let body = self.send(Method::GET, url, None).await?;
        self.typed(body)
    }

    /// `POST` a request of the API's types; the answer read as its type.
    pub async fn post_as<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        body: &impl Serialize,
    ) -> Result<T, CliError> {
        let body = serde_json::to_value(body).map_err(|e| CliError::local(format!("request: {e}")))?;
        let answer = self.send(Method::POST, self.url(segments), Some(&body)).await?;
        self.typed(answer)
    }

    /// A success's body read as the API's type for it. One that is not
    /// (the server is not Tartan, or not this version of it) is an error
    /// naming where it differs, as for a server that cannot be reached.
    pub fn typed<T: DeserializeOwned>(&self, body: Value) -> Result<T, CliError> {
        serde_path_to_error::deserialize(body).map_err(|e| {
            let at = e.path().to_string();
            if at == "." {
                self.not_this_api(e.inner())
            } else {
                self.not_this_api(format!("at {at}: {}", e.inner()))
            }
        })
    }

    /// A success that is not the API's answer, and why.
    pub fn not_this_api(&self, why: impl std::fmt::Display) -> CliError {
        CliError::Unreachable {
            server: self.server(),
            reason: format!("an answer that is not this API's ({why})"),
        }
    }
}

/// What the CLI reads of an error's body: a problem (docs/errors.md), or
/// Argyll's `{"error"}`. Any member may be absent or not a string (a
/// proxy's JSON): then it is as absent, and the rest is still read.
#[derive(Debug, Default, serde::Deserialize)]
pub struct ProblemText {
    #[serde(default, deserialize_with = "text")]
    pub title: Option<String>,
    #[serde(default, deserialize_with = "text")]
    pub detail: Option<String>,
    #[serde(default, deserialize_with = "text")]
    pub error: Option<String>,
}

impl ProblemText {
    /// The body's problem members; none when it is not a JSON object.
    pub fn of(body: &Value) -> ProblemText {
        if !body.is_object() {
            return ProblemText::default();
        }
        serde::Deserialize::deserialize(body).unwrap_or_default()
    }
}

/// A member that is a string, else none.
fn text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let value: Value = serde::Deserialize::deserialize(d)?;
    Ok(match value {
        Value::String(s) => Some(s),
        _ => None,
    })
}

/// The error an answer that is not a success stands for: its problem+json
/// (`detail`, else Argyll's `error`), else the start of its text.
pub fn problem(status: StatusCode, body: &Value) -> CliError {
    let text = ProblemText::of(body);
    let title = text
        .title
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("").to_string());
    let detail = text.detail.or(text.error).unwrap_or_else(|| match body {
        Value::Null => format!("the server answered {status} with no body"),
        Value::String(s) => format!("the server answered {status}: {}", shorten(s, 200)),
        other => format!(
            "the server answered {status}: {}",
            shorten(&other.to_string(), 200)
        ),
    });
    CliError::Problem {
        status: status.as_u16(),
        title,
        detail,
    }
}

/// At most `max` characters of `s`, marked when cut.
pub fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let cut: String = s.chars().take(max).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_of_another_shape_is_an_error_naming_where() {
        let Ok(client) = Client::new("http://127.0.0.1:1", None) else {
            panic!("a client");
        };
        let body = json!({"count": 1, "events": [{"type": "flow_started", "sequence": "one"}]});
        let Err(e) = client.typed::<tartan_server::api::answers::EventList>(body) else {
            panic!("not an event list");
        };
        let message = e.message();
        assert!(
            message.contains("an answer that is not this API's (at events[0]"),
            "{message}"
        );
        assert_eq!(e.exit_code(), exit::UNREACHABLE);
    }

    #[test]
    fn a_problem_is_read_member_by_member() {
        let status = StatusCode::BAD_GATEWAY;
        let detail = |e: CliError| match e {
            CliError::Problem { title, detail, .. } => (title, detail),
            other => panic!("{other:?}"),
        };
        let read = |body: Value| detail(problem(status, &body));
        assert_eq!(
            read(json!({"title": "Bad Request", "detail": "no such step"})),
            ("Bad Request".into(), "no such step".into())
        );
        // Argyll's `error`; a member that is not a string is as absent.
        assert_eq!(
            read(json!({"title": 5, "error": "refused"})),
            ("Bad Gateway".into(), "refused".into())
        );
        assert_eq!(
            read(json!(["not", "a", "problem"])).1,
            "the server answered 502 Bad Gateway: [\"not\",\"a\",\"problem\"]"
        );
        assert_eq!(
            read(Value::Null).1,
            "the server answered 502 Bad Gateway with no body"
        );
    }
}
