//! Step scripts in Argyll's three languages (Ale, jpath, Lua): compiled once
//! when a step is registered, evaluated in a sandbox with bounds on
//! instructions, memory and wall time (docs/steps.md, "Scripts").
//!
//! The crate knows languages, not steps: callers say which names a script
//! is given (`params`) and read its answer as a value or as a truth.

use std::cell::Cell;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

mod cancel;
pub mod jpath;
mod lua;

pub use cancel::{under, Cancel, CancelOnDrop};

/// A script language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    Ale,
    JPath,
    Lua,
}

impl Language {
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Ale => "ale",
            Language::JPath => "jpath",
            Language::Lua => "lua",
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Language {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ale" => Ok(Language::Ale),
            "jpath" => Ok(Language::JPath),
            "lua" => Ok(Language::Lua),
            other => Err(format!(
                "invalid script language: {other:?} (must be ale, jpath or lua)"
            )),
        }
    }
}

/// What one evaluation may spend. Every evaluation gets the whole budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Luau safepoints (function calls, loop iterations, pattern-matching
    /// steps), or Ale evaluation steps.
    pub instructions: u64,
    /// Bytes the evaluation may allocate.
    pub memory_bytes: usize,
    /// Wall-clock time.
    pub wall: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            instructions: 10_000_000,
            memory_bytes: 32 * 1024 * 1024,
            wall: Duration::from_secs(1),
        }
    }
}

thread_local! {
    /// Evaluations on this thread that ran out of instructions or time.
    static LIMITS_HIT: Cell<u64> = const { Cell::new(0) };
}

/// How many evaluations on this thread have run out of instructions or
/// time so far. A caller that evaluates with a small budget first (so that
/// the common, tiny script costs nothing more) reads it before and after,
/// and evaluates again with the whole budget when it moved.
pub fn limits_hit() -> u64 {
    LIMITS_HIT.with(Cell::get)
}

/// Count an evaluation that ran out of instructions or time.
fn noted<T>(result: Result<T, ScriptError>) -> Result<T, ScriptError> {
    if let Err(ScriptError::Limit {
        limit: Limit::Instructions(_) | Limit::Time(_),
        ..
    }) = &result
    {
        LIMITS_HIT.with(|hits| hits.set(hits.get().wrapping_add(1)));
    }
    result
}

/// A jpath mapping that matched nothing.
const NO_MATCHES: &str = "jpath produced no matches";

/// The name a `required.match` script sees its candidate by.
pub const MATCH_VALUE: &str = "value";

/// The longest script source accepted (bytes).
pub const MAX_SOURCE: usize = 64 * 1024;

/// A script that does not compile: the compiler's message, with the line
/// and column where the compiler gives them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CompileError {
    pub message: String,
}

/// An evaluation that failed: the script's own error or a limit it hit.
/// Either way the step fails permanently (calling it again would fail again).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    #[error("{language} script failed: {message}")]
    Failed { language: Language, message: String },
    #[error("{language} script exceeded its {limit}")]
    Limit { language: Language, limit: Limit },
    /// Ended from outside (see [`Cancel`]): nobody waits for the answer.
    #[error("{language} script was cancelled")]
    Cancelled { language: Language },
}

/// Which bound of the sandbox an evaluation hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Instructions(u64),
    Memory(usize),
    Time(Duration),
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Instructions(n) => write!(f, "limit of {n} instructions"),
            Limit::Memory(bytes) => write!(f, "memory limit of {bytes} bytes"),
            Limit::Time(d) => write!(f, "time limit of {} ms", d.as_millis()),
        }
    }
}

impl ScriptError {
    /// Whether a jpath matched nothing (an absent value, not a fault).
    pub fn is_no_match(&self) -> bool {
        matches!(self, ScriptError::Failed { language: Language::JPath, message } if message == NO_MATCHES)
    }

    /// Whether the evaluation ran out of time (not of instructions or memory).
    pub fn is_time_limit(&self) -> bool {
        matches!(
            self,
            ScriptError::Limit {
                limit: Limit::Time(_),
                ..
            }
        )
    }
}

/// A compiled script, ready to evaluate any number of times from any thread.
#[derive(Clone)]
pub struct Script {
    language: Language,
    params: Arc<[String]>,
    compiled: Compiled,
}

#[derive(Clone)]
enum Compiled {
    Ale(tartan_ale::Program),
    JPath(jpath::JPath),
    Lua(lua::Chunk),
}

impl fmt::Debug for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Script")
            .field("language", &self.language)
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

impl Script {
    /// Compile `source`, to be given the values of `params` by name (Ale
    /// and Lua; jpath reads them as one document).
    pub fn compile(language: Language, source: &str, params: &[String]) -> Result<Script, CompileError> {
        if source.trim().is_empty() {
            return Err(CompileError {
                message: "script empty".into(),
            });
        }
        if source.len() > MAX_SOURCE {
            return Err(CompileError {
                message: format!(
                    "script is {} bytes, more than the limit of {MAX_SOURCE}",
                    source.len()
                ),
            });
        }
        let mut params: Vec<String> = params.to_vec();
        params.sort();
        params.dedup();
        let compiled = match language {
            Language::Ale => {
                let names: Vec<&str> = params.iter().map(String::as_str).collect();
                let program = tartan_ale::compile_lambda(&names, source).map_err(|e| CompileError {
                    message: e.to_string(),
                })?;
                Compiled::Ale(program)
            }
            Language::JPath => {
                Compiled::JPath(jpath::JPath::compile(source).map_err(|message| CompileError { message })?)
            }
            Language::Lua => Compiled::Lua(lua::Chunk::compile(source)?),
        };
        Ok(Script {
            language,
            params: params.into(),
            compiled,
        })
    }

    pub fn language(&self) -> Language {
        self.language
    }

    /// Evaluate and return the script's value. jpath answers the one value
    /// it matched, or an array of several, and fails when nothing matched;
    /// its document is the one argument's value when there is one, else
    /// the object of all arguments.
    pub fn value(&self, args: &Map<String, Value>, limits: &Limits) -> Result<Value, ScriptError> {
        noted(self.evaluate(args, limits))
    }

    fn evaluate(&self, args: &Map<String, Value>, limits: &Limits) -> Result<Value, ScriptError> {
        match &self.compiled {
            Compiled::Ale(program) => program
                .call(&self.ordered(args), &ale_limits(limits))
                .map(whole_numbers)
                .map_err(|e| ale_error(e, limits)),
            Compiled::JPath(path) => {
                let doc = jpath_document(args);
                let mut matches = path.try_query(&doc).map_err(jpath_failed)?;
                match matches.len() {
                    0 => Err(ScriptError::Failed {
                        language: Language::JPath,
                        message: NO_MATCHES.into(),
                    }),
                    1 => Ok(matches.remove(0)),
                    _ => Ok(Value::Array(matches)),
                }
            }
            Compiled::Lua(chunk) => chunk.value(args, limits),
        }
    }

    /// Evaluate as a predicate: Ale's answer is true unless it is `false`,
    /// Lua's by Lua's truth (neither `nil` nor `false`), jpath's when the
    /// query matched at least one value (an explicit `null` counts).
    pub fn truth(&self, args: &Map<String, Value>, limits: &Limits) -> Result<bool, ScriptError> {
        noted(self.judge(args, limits))
    }

    fn judge(&self, args: &Map<String, Value>, limits: &Limits) -> Result<bool, ScriptError> {
        match &self.compiled {
            Compiled::Ale(program) => program
                .call_truth(&self.ordered(args), &ale_limits(limits))
                .map_err(|e| ale_error(e, limits)),
            Compiled::JPath(path) => path
                .try_matches(&Value::Object(args.clone()))
                .map_err(jpath_failed),
            Compiled::Lua(chunk) => chunk.truth(args, limits),
        }
    }

    /// Evaluate as a `required.match`: is `candidate` acceptable? Ale and
    /// Lua see it as `value` (compile with that one parameter); jpath
    /// queries it as the document.
    pub fn accepts(&self, candidate: &Value, limits: &Limits) -> Result<bool, ScriptError> {
        match &self.compiled {
            Compiled::JPath(path) => path.try_matches(candidate).map_err(jpath_failed),
            _ => {
                let mut args = Map::new();
                args.insert(MATCH_VALUE.to_string(), candidate.clone());
                self.truth(&args, limits)
            }
        }
    }

    /// The arguments in parameter order; a missing one is `null`. Every
    /// number is a float, as Argyll decodes JSON numbers for Ale: `(/ x 2)`
    /// of 5 is 2.5 there, and must be here.
    fn ordered(&self, args: &Map<String, Value>) -> Vec<Value> {
        self.params
            .iter()
            .map(|name| args.get(name).map(as_floats).unwrap_or(Value::Null))
            .collect()
    }
}

/// `value` with every number a float. Documents are at most 128 levels
/// deep (the API refuses deeper JSON), so the recursion is bounded.
fn as_floats(value: &Value) -> Value {
    match value {
        Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(|| value.clone(), Value::Number),
        Value::Array(items) => Value::Array(items.iter().map(as_floats).collect()),
        Value::Object(fields) => {
            Value::Object(fields.iter().map(|(k, v)| (k.clone(), as_floats(v))).collect())
        }
        other => other.clone(),
    }
}

/// A whole float written as an integer, as Argyll's JSON encoding writes
/// it (`10`, not `10.0`).
fn whole_numbers(value: Value) -> Value {
    match value {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(whole_numbers).collect()),
        Value::Object(fields) => {
            Value::Object(fields.into_iter().map(|(k, v)| (k, whole_numbers(v))).collect())
        }
        other => other,
    }
}

fn jpath_failed(message: String) -> ScriptError {
    ScriptError::Failed {
        language: Language::JPath,
        message,
    }
}

fn jpath_document(args: &Map<String, Value>) -> Value {
    let mut values = args.values();
    match (values.next(), values.next()) {
        (Some(only), None) => only.clone(),
        _ => Value::Object(args.clone()),
    }
}

fn ale_limits(limits: &Limits) -> tartan_ale::Limits {
    tartan_ale::Limits {
        max_steps: limits.instructions,
        max_memory_bytes: limits.memory_bytes,
        max_duration: limits.wall,
    }
}

fn ale_error(e: tartan_ale::EvalError, limits: &Limits) -> ScriptError {
    let limit = match e {
        tartan_ale::EvalError::Runtime(message) => {
            return ScriptError::Failed {
                language: Language::Ale,
                message,
            }
        }
        tartan_ale::EvalError::StepLimit(_) => Limit::Instructions(limits.instructions),
        tartan_ale::EvalError::MemoryLimit(_) => Limit::Memory(limits.memory_bytes),
        tartan_ale::EvalError::Timeout(_) => Limit::Time(limits.wall),
    };
    ScriptError::Limit {
        language: Language::Ale,
        limit,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn compile(language: Language, source: &str, params: &[&str]) -> Script {
        let params: Vec<String> = params.iter().map(|p| p.to_string()).collect();
        Script::compile(language, source, &params).unwrap()
    }

    #[test]
    fn ale_sees_numbers_as_argyll_does() {
        let limits = Limits::default();
        let half = compile(Language::Ale, "(/ x 2)", &["x"]);
        assert_eq!(half.value(&args(json!({"x": 5})), &limits).unwrap(), json!(2.5));
        let double = compile(Language::Ale, "(* amount 2)", &["amount"]);
        assert_eq!(
            double.value(&args(json!({"amount": 5})), &limits).unwrap(),
            json!(10)
        );
        let object = compile(Language::Ale, r#"{:total (+ a b) :tag "t"}"#, &["a", "b"]);
        assert_eq!(
            object.value(&args(json!({"a": 1, "b": 2.5})), &limits).unwrap(),
            json!({"total": 3.5, "tag": "t"})
        );
    }

    #[test]
    fn truth_in_each_language() {
        let limits = Limits::default();
        let ale = compile(Language::Ale, "x", &["x"]);
        assert!(
            ale.truth(&args(json!({"x": null})), &limits).unwrap(),
            "Ale: null is not false"
        );
        assert!(!ale.truth(&args(json!({"x": false})), &limits).unwrap());
        let lua = compile(Language::Lua, "return x", &["x"]);
        assert!(
            !lua.truth(&args(json!({"x": null})), &limits).unwrap(),
            "Lua: nil is false"
        );
        let jpath = compile(Language::JPath, "$.flag", &[]);
        assert!(
            jpath.truth(&args(json!({"flag": null})), &limits).unwrap(),
            "jpath: a null match counts"
        );
        assert!(!jpath.truth(&args(json!({"other": 1})), &limits).unwrap());
        let top = compile(Language::JPath, "$.amount > 100", &[]);
        assert!(top.truth(&args(json!({"amount": 500})), &limits).unwrap());
        assert!(!top.truth(&args(json!({"amount": 5})), &limits).unwrap());
    }

    #[test]
    fn a_match_judges_one_candidate() {
        let limits = Limits::default();
        let params = [MATCH_VALUE];
        let ale = compile(Language::Ale, r#"(eq (:kind value) "email")"#, &params);
        assert!(ale.accepts(&json!({"kind": "email"}), &limits).unwrap());
        assert!(!ale.accepts(&json!({"kind": "postal"}), &limits).unwrap());
        let jpath = compile(Language::JPath, "$.optional", &[]);
        assert!(jpath.accepts(&json!({"optional": null}), &limits).unwrap());
    }

    #[test]
    fn a_jpath_value_is_its_one_match_an_array_of_several_or_none() {
        let limits = Limits::default();
        let one = compile(Language::JPath, "$.foo", &[]);
        assert_eq!(
            one.value(&args(json!({"in": {"foo": "v"}})), &limits).unwrap(),
            json!("v")
        );
        let many = compile(Language::JPath, "$..book", &[]);
        let doc = json!({"in": {"a": {"book": "A"}, "b": {"book": "B"}}});
        assert_eq!(many.value(&args(doc), &limits).unwrap(), json!(["A", "B"]));
        let none = one.value(&args(json!({"in": {"bar": 1}})), &limits).unwrap_err();
        assert!(none.is_no_match(), "{none}");
    }

    #[test]
    fn sources_are_bounded_and_named() {
        assert!(Script::compile(Language::Lua, " ", &[]).is_err());
        let long = "x".repeat(MAX_SOURCE + 1);
        let e = Script::compile(Language::Lua, &long, &[]).unwrap_err();
        assert!(e.message.contains("limit"), "{e}");
        assert_eq!("jpath".parse::<Language>(), Ok(Language::JPath));
        assert!("python".parse::<Language>().is_err());
    }
}
