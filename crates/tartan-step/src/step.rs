//! A step: its handler, typed at the edges, and the definition the engine
//! is given for it (docs/api.md, "Steps").

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::Method;
use futures::future::BoxFuture;
use futures::FutureExt;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::ctx::Ctx;
use crate::error::StepError;

/// A handler's work once its input is read: the outputs as a JSON object.
pub(crate) type Work = BoxFuture<'static, Result<Value, StepError>>;

/// A handler with its types erased: the body read as its input (or the
/// `400` saying why not), then the work.
pub(crate) type Run = Arc<dyn Fn(&[u8], Ctx) -> Result<Work, StepError> + Send + Sync>;

/// How the engine calls a step: `sync` (the answer is the result) or
/// `async` (the answer accepts; the result comes by webhook).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sync,
    Async,
}

/// An attribute's type, as the engine checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    String,
    Number,
    Boolean,
    Object,
    Array,
    Null,
    Any,
}

impl Type {
    fn as_str(self) -> &'static str {
        match self {
            Type::String => "string",
            Type::Number => "number",
            Type::Boolean => "boolean",
            Type::Object => "object",
            Type::Array => "array",
            Type::Null => "null",
            Type::Any => "any",
        }
    }
}

/// What a compensation call carries (docs/work-items.md, "Compensation"):
/// the succeeded item's inputs and outputs.
#[derive(Clone, Debug, Deserialize)]
pub struct Compensation<I, O> {
    pub input: I,
    pub output: O,
}

/// One step of a service: its handler, route and definition.
pub struct Step {
    pub(crate) id: String,
    name: Option<String>,
    pub(crate) kind: Kind,
    pub(crate) path: String,
    pub(crate) method: Method,
    attributes: Map<String, Value>,
    timeout: Option<Duration>,
    inactivity: Option<Duration>,
    total: Option<Duration>,
    work_config: Map<String, Value>,
    extra: Map<String, Value>,
    heartbeat_every: Option<Duration>,
    pub(crate) run: Run,
    pub(crate) compensate: Option<(String, Run)>,
}

impl Step {
    /// A sync step: the handler's outputs are the call's answer, its error
    /// the failure. Served at `/{id}` unless [`Step::path`] says otherwise.
    pub fn sync<T, O, F, Fut>(id: impl Into<String>, handler: F) -> Step
    where
        T: DeserializeOwned,
        O: Serialize,
        F: Fn(T, Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, StepError>> + Send + 'static,
    {
        Step::with(id.into(), Kind::Sync, erase(handler))
    }

    /// An async step: the call is answered `202` once its input is read,
    /// the handler runs after, and its outputs or error are posted to the
    /// attempt's webhook (with heartbeats meanwhile: [`Step::heartbeat_every`]).
    pub fn asynchronous<T, O, F, Fut>(id: impl Into<String>, handler: F) -> Step
    where
        T: DeserializeOwned,
        O: Serialize,
        F: Fn(T, Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, StepError>> + Send + 'static,
    {
        Step::with(id.into(), Kind::Async, erase(handler))
    }

    fn with(id: String, kind: Kind, run: Run) -> Step {
        Step {
            path: format!("/{id}"),
            id,
            name: None,
            kind,
            method: Method::POST,
            attributes: Map::new(),
            timeout: None,
            inactivity: None,
            total: None,
            work_config: Map::new(),
            extra: Map::new(),
            heartbeat_every: None,
            run,
            compensate: None,
        }
    }

    /// The step's name (its id when not given).
    pub fn name(mut self, name: impl Into<String>) -> Step {
        self.name = Some(name.into());
        self
    }

    /// Where the step is served, below the service's URL; `{name}`
    /// placeholders name required inputs, filled in by the engine and read
    /// with [`Ctx::param`].
    pub fn path(mut self, path: impl Into<String>) -> Step {
        self.path = path.into();
        self
    }

    /// The method the engine calls with: `POST` (the default), `PUT` and
    /// `DELETE` carry the inputs as a body, `GET` only in the path.
    pub fn method(mut self, method: Method) -> Step {
        self.method = method;
        self
    }

    /// An input the step needs: it runs once the flow has it.
    pub fn required(self, name: impl Into<String>, ty: Type) -> Step {
        self.attribute(name, json!({"role": "required", "type": ty.as_str()}))
    }

    /// An input the step takes when there is one.
    pub fn optional(self, name: impl Into<String>, ty: Type) -> Step {
        self.attribute(name, json!({"role": "optional", "type": ty.as_str()}))
    }

    /// An optional input with the value it takes when the flow has none.
    pub fn optional_default(self, name: impl Into<String>, ty: Type, default: Value) -> Step {
        let attribute = json!({"role": "optional", "type": ty.as_str(),
                               "optional": {"default": default.to_string()}});
        self.attribute(name, attribute)
    }

    /// A required array input: one work item (one call) per element, which
    /// the call carries in place of the array (docs/work-items.md).
    pub fn for_each(self, name: impl Into<String>) -> Step {
        let attribute = json!({"role": "required", "type": "array", "required": {"for_each": true}});
        self.attribute(name, attribute)
    }

    /// An output: a member of the handler's answer.
    pub fn output(self, name: impl Into<String>, ty: Type) -> Step {
        self.attribute(name, json!({"role": "output", "type": ty.as_str()}))
    }

    /// Any attribute, as docs/api.md spells it (`const`, `meta`, mappings).
    pub fn attribute(mut self, name: impl Into<String>, attribute: Value) -> Step {
        self.attributes.insert(name.into(), attribute);
        self
    }

    /// The attempt timeout (`http.timeout`): one call's limit.
    pub fn timeout(mut self, timeout: Duration) -> Step {
        self.timeout = Some(timeout);
        self
    }

    /// An async step's inactivity window (`timeouts.inactivity`): the
    /// attempt times out after this long without a heartbeat or result.
    /// Heartbeats go out every third of it unless
    /// [`Step::heartbeat_every`] says otherwise.
    pub fn inactivity(mut self, window: Duration) -> Step {
        self.inactivity = Some(window);
        self
    }

    /// Every attempt and wait of one work item (`timeouts.total`).
    pub fn total_timeout(mut self, total: Duration) -> Step {
        self.total = Some(total);
        self
    }

    /// Attempts in all, the first included (`work_config.max_attempts`).
    pub fn max_attempts(mut self, attempts: u32) -> Step {
        self.work_config.insert("max_attempts".into(), attempts.into());
        self
    }

    /// The first wait before a retry and the largest one
    /// (`work_config.init_backoff`, `max_backoff`).
    pub fn backoff(mut self, first: Duration, largest: Duration) -> Step {
        self.work_config
            .insert("init_backoff".into(), millis(first).into());
        self.work_config
            .insert("max_backoff".into(), millis(largest).into());
        self
    }

    /// How many work items of the step may run at once
    /// (`work_config.parallelism`).
    pub fn parallelism(mut self, items: u32) -> Step {
        self.work_config.insert("parallelism".into(), items.into());
        self
    }

    /// Any other member of the definition (`labels`, `limits`, `retry`,
    /// `memoizable`, ...), set last: it replaces what the methods above
    /// wrote under the same name.
    pub fn set(mut self, member: impl Into<String>, value: Value) -> Step {
        self.extra.insert(member.into(), value);
        self
    }

    /// How often an async step's handler heartbeats while it runs; without
    /// it, a third of [`Step::inactivity`], or never when that is unset.
    pub fn heartbeat_every(mut self, every: Duration) -> Step {
        self.heartbeat_every = Some(every);
        self
    }

    /// Undo a succeeded work item when the flow unwinds: the engine POSTs
    /// `{"input", "output"}` ([`Compensation`]) to `path` (placeholders may
    /// name inputs and outputs). A failure is retried as the step's calls.
    pub fn compensate<T, O, F, Fut>(mut self, path: impl Into<String>, handler: F) -> Step
    where
        T: DeserializeOwned,
        O: Serialize,
        F: Fn(T, Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, StepError>> + Send + 'static,
    {
        self.compensate = Some((path.into(), erase(handler)));
        self
    }

    /// The step's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// How the engine calls it.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// When the SDK heartbeats for an async handler.
    pub(crate) fn beat(&self) -> Option<Duration> {
        self.heartbeat_every
            .or(self.inactivity.map(|w| w / 3))
            .filter(|every| !every.is_zero())
    }

    /// The definition the engine registers, for a service reachable at
    /// `base_url`: the endpoint, its health check and compensation under it.
    pub fn definition(&self, base_url: &str) -> Value {
        let base = base_url.trim_end_matches('/');
        let mut http = Map::new();
        http.insert("endpoint".into(), format!("{base}{}", self.path).into());
        http.insert("method".into(), self.method.as_str().into());
        if let Some(timeout) = self.timeout {
            http.insert("timeout".into(), millis(timeout).into());
        }
        http.insert("health_check".into(), format!("{base}/health").into());
        if let Some((path, _)) = &self.compensate {
            http.insert("compensate".into(), format!("{base}{path}").into());
        }
        let mut step = Map::new();
        step.insert("id".into(), self.id.clone().into());
        step.insert(
            "name".into(),
            self.name.clone().unwrap_or_else(|| self.id.clone()).into(),
        );
        let kind = match self.kind {
            Kind::Sync => "sync",
            Kind::Async => "async",
        };
        step.insert("type".into(), kind.into());
        step.insert("http".into(), http.into());
        step.insert("attributes".into(), self.attributes.clone().into());
        let mut timeouts = Map::new();
        if let Some(window) = self.inactivity {
            timeouts.insert("inactivity".into(), millis(window).into());
        }
        if let Some(total) = self.total {
            timeouts.insert("total".into(), millis(total).into());
        }
        if !timeouts.is_empty() {
            step.insert("timeouts".into(), timeouts.into());
        }
        if !self.work_config.is_empty() {
            step.insert("work_config".into(), self.work_config.clone().into());
        }
        for (member, value) in &self.extra {
            step.insert(member.clone(), value.clone());
        }
        Value::Object(step)
    }
}

/// Milliseconds, as Argyll's duration fields take them.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The handler behind one signature: its input read from the body, its
/// outputs made a JSON object.
fn erase<T, O, F, Fut>(handler: F) -> Run
where
    T: DeserializeOwned,
    O: Serialize,
    F: Fn(T, Ctx) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, StepError>> + Send + 'static,
{
    Arc::new(move |body: &[u8], ctx: Ctx| {
        let input = read_input::<T>(body)?;
        let work = handler(input, ctx);
        Ok(async move { outputs(work.await?) }.boxed())
    })
}

/// The call's body as `T`: a body that is not JSON of that shape is a
/// `400` naming the member at fault. A call without a body (a `GET`, or
/// a step without inputs) reads as `{}`.
pub(crate) fn read_input<T: DeserializeOwned>(body: &[u8]) -> Result<T, StepError> {
    let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        body
    };
    let mut reader = serde_json::Deserializer::from_slice(body);
    let input = serde_path_to_error::deserialize(&mut reader).map_err(|e| {
        let at = e.path().to_string();
        let why = e.into_inner();
        // A member of the wrong type is named by its path; where it sits
        // in the body's text says nothing more.
        let why = match why.classify() {
            serde_json::error::Category::Data => {
                let full = why.to_string();
                let position = format!(" at line {} column {}", why.line(), why.column());
                full.strip_suffix(&position).unwrap_or(&full).to_string()
            }
            _ => why.to_string(),
        };
        if at == "." {
            StepError::bad_input(format!("invalid input: {why}"))
        } else {
            StepError::bad_input(format!("invalid input {at}: {why}"))
        }
    })?;
    reader
        .end()
        .map_err(|e| StepError::bad_input(format!("invalid input: {e}")))?;
    Ok(input)
}

/// The handler's outputs as the engine takes them: a JSON object (`()` or
/// `None` as no outputs). Anything else would fail the attempt for good
/// on the engine's side; here it says why.
fn outputs(outputs: impl Serialize) -> Result<Value, StepError> {
    match serde_json::to_value(outputs) {
        Ok(Value::Null) => Ok(Value::Object(Map::new())),
        Ok(object @ Value::Object(_)) => Ok(object),
        Ok(other) => Err(StepError::permanent(format!(
            "the step's outputs must be a JSON object, not {}",
            kind_of(&other)
        ))),
        Err(e) => Err(StepError::permanent(format!(
            "the step's outputs are not JSON: {e}"
        ))),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Order {
        #[allow(dead_code)]
        id: String,
        #[allow(dead_code)]
        lines: Vec<Line>,
    }

    #[derive(Debug, Deserialize)]
    struct Line {
        #[allow(dead_code)]
        qty: u32,
    }

    fn refusal(body: &str) -> String {
        match read_input::<Order>(body.as_bytes()) {
            Ok(order) => format!("read {order:?}"),
            Err(e) => format!("{} {}", e.http_status().as_u16(), e.detail()),
        }
    }

    #[test]
    fn a_bad_input_is_a_400_naming_where() {
        assert!(refusal(r#"{"id": "a", "lines": [{"qty": 1}]}"#).starts_with("read"));
        assert!(refusal(r#"{"id": "a", "lines": [{"qty": "x"}]}"#)
            .starts_with("400 invalid input lines[0].qty: invalid type"));
        assert!(refusal(r#"{"lines": []}"#).starts_with("400 invalid input: missing field `id`"));
        assert!(refusal("<order/>").starts_with("400 invalid input: expected value"));
        assert!(
            refusal(r#"{"id": "a", "lines": []} {}"#).starts_with("400 invalid input: trailing characters")
        );
        assert!(refusal("").starts_with("400 invalid input: missing field `id`"));
    }

    #[test]
    fn outputs_are_an_object() {
        assert_eq!(outputs(()), Ok(json!({})));
        assert_eq!(outputs(json!({"a": 1})), Ok(json!({"a": 1})));
        let refused = outputs(vec![1]).err().map(|e| e.detail().to_string());
        assert_eq!(
            refused.as_deref(),
            Some("the step's outputs must be a JSON object, not an array")
        );
    }

    #[test]
    fn the_definition_is_the_engines_step() {
        let step = Step::asynchronous("render", |_: Value, _: Ctx| async { Ok(json!({})) })
            .name("Render")
            .required("title", Type::String)
            .optional_default("format", Type::String, json!("pdf"))
            .output("url", Type::String)
            .timeout(Duration::from_secs(5))
            .inactivity(Duration::from_millis(900))
            .max_attempts(3)
            .set("labels", json!({"team": "reports"}));
        assert_eq!(step.beat(), Some(Duration::from_millis(300)));
        assert_eq!(
            step.definition("http://10.0.0.5:8081/"),
            json!({
                "id": "render", "name": "Render", "type": "async",
                "http": {"endpoint": "http://10.0.0.5:8081/render", "method": "POST", "timeout": 5000,
                         "health_check": "http://10.0.0.5:8081/health"},
                "attributes": {
                    "title": {"role": "required", "type": "string"},
                    "format": {"role": "optional", "type": "string", "optional": {"default": "\"pdf\""}},
                    "url": {"role": "output", "type": "string"}},
                "timeouts": {"inactivity": 900},
                "work_config": {"max_attempts": 3},
                "labels": {"team": "reports"}
            })
        );
    }
}
