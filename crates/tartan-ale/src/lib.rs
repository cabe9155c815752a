//! A bounded interpreter of Ale (github.com/kode4food/ale), the Lisp that
//! Argyll's script steps, predicates, matches and mappings are written in.
//!
//! Argyll wraps a script as `(lambda (<sorted arg names>) <script>)`, calls it
//! with the step's inputs converted from JSON, and converts the result back
//! (engine/internal/engine/script/ale.go). [`compile_lambda`] and
//! [`Program::call`] do the same. Everything this interpreter does not
//! implement is refused at compile time, and every evaluation is bounded in
//! steps, memory, time and depth.
//!
//! Implemented, under Ale's names and semantics:
//! - forms and macros: `quote` `'`, `if`, `begin`, `let`, `let*`, `let-rec`,
//!   `lambda`/`λ` (multi-case, rest args), `lambda-rec`, `label`, `thunk`,
//!   `and`, `or`, `!and`, `!or`, `when`, `when-not`, `unless`, `cond`, `case`,
//!   `if-let`, `when-let`, `->`, `->>`, `some->`, `some->>`, `comp`, `lazy-seq`;
//! - procedures: see `builtins` (numbers, comparisons, `eq`, predicates,
//!   lists, vectors, objects, strings, lazy sequences, higher-order);
//! - data: integers, floats, ratios, strings, keywords, symbols, lists,
//!   vectors, objects (scalar keys), cons pairs, procedures, lazy sequences.
//!
//! Where Ale would give an unpredictable answer (printing a lazy sequence or
//! a procedure shows a memory address) or leave 64-bit integers, evaluation
//! fails instead. Objects iterate in key order (Ale's order is unspecified).

mod builtins;
mod compile;
mod convert;
mod equal;
mod eval;
mod forms;
mod lazy;
mod limits;
mod node;
mod number;
mod print;
mod reader;
mod seq;
mod value;

use std::sync::Arc;
use std::time::Duration;

use crate::compile::Compiler;
use crate::limits::{Ctx, EVAL_STACK_BYTES};
use crate::node::N;
use crate::reader::{read_all, Datum, Pos};
use crate::value::Value;

/// A compiled script: `(lambda (params...) body)`.
#[derive(Clone)]
pub struct Program {
    inner: Arc<Compiled>,
}

struct Compiled {
    params: usize,
    body: N,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("params", &self.inner.params)
            .finish_non_exhaustive()
    }
}

/// A script that does not compile, with the position (1-based, in the
/// script body) of the offending form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct CompileError {
    pub message: String,
    pub line: usize,
    pub column: usize,
}

/// Bounds on one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Evaluation steps (each evaluated form, call and loop iteration).
    pub max_steps: u64,
    /// Live bytes of the values the evaluation builds (approximate).
    pub max_memory_bytes: usize,
    /// Wall-clock time.
    pub max_duration: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: 1_000_000,
            max_memory_bytes: 64 * 1024 * 1024,
            max_duration: Duration::from_secs(1),
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    #[error("script error: {0}")]
    Runtime(String),
    #[error("script exceeded its step limit of {0}")]
    StepLimit(u64),
    #[error("script exceeded its memory limit of {0} bytes")]
    MemoryLimit(usize),
    #[error("script exceeded its time limit of {0:?}")]
    Timeout(Duration),
}

/// Compiles `(lambda (params...) body)`. `params` are the argument names in
/// the order [`Program::call`] receives values (Argyll sorts them).
pub fn compile_lambda(params: &[&str], body: &str) -> Result<Program, CompileError> {
    // Reading and compiling recurse once per nesting level (bounded), which
    // unoptimised builds make costly: use a stack of known size.
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("ale-compile".to_string())
            .stack_size(COMPILE_STACK_BYTES)
            .spawn_scoped(s, || compile_here(params, body))
            .map_err(|e| CompileError {
                message: format!("cannot start the compiler thread: {e}"),
                line: 1,
                column: 1,
            })?;
        handle.join().unwrap_or_else(|_| {
            Err(CompileError {
                message: "internal error: the compiler panicked".into(),
                line: 1,
                column: 1,
            })
        })
    })
}

const COMPILE_STACK_BYTES: usize = 16 * 1024 * 1024;

fn compile_here(params: &[&str], body: &str) -> Result<Program, CompileError> {
    let mut names = Vec::with_capacity(params.len());
    for p in params {
        names.push(check_param(p)?);
    }
    let forms = read_all(body)?;
    if forms.is_empty() {
        return reader::err(Pos { line: 1, column: 1 }, "script is empty");
    }
    for (i, n) in names.iter().enumerate() {
        if names.iter().skip(i + 1).any(|m| m == n) {
            return reader::err(
                Pos { line: 1, column: 1 },
                format!("duplicate argument name: {n}"),
            );
        }
    }
    let mut c = Compiler::new(names);
    let body = c.body(&forms)?;
    Ok(Program {
        inner: Arc::new(Compiled {
            params: params.len(),
            body,
        }),
    })
}

/// A parameter must read as exactly one plain symbol, or Ale's
/// `(lambda (...) ...)` would mean something else.
fn check_param(p: &str) -> Result<String, CompileError> {
    let bad = || {
        reader::err(
            Pos { line: 1, column: 1 },
            format!("invalid argument name: {p:?}"),
        )
    };
    match read_all(p) {
        Ok(forms) => match forms.as_slice() {
            [f] => match &f.datum {
                Datum::Symbol(s) if s == p && (!s.contains('/') || s == "/") => Ok(s.clone()),
                _ => bad(),
            },
            _ => bad(),
        },
        Err(_) => bad(),
    }
}

impl Program {
    /// Calls the script with one JSON value per parameter and converts the
    /// result to JSON as Argyll's `aleToJSON` does.
    pub fn call(&self, args: &[serde_json::Value], limits: &Limits) -> Result<serde_json::Value, EvalError> {
        self.run(args, limits, |ctx, v| convert::value_to_json(ctx, &v))
    }

    /// Argyll's predicate and match truth: the result is anything but `#f`.
    pub fn call_truth(&self, args: &[serde_json::Value], limits: &Limits) -> Result<bool, EvalError> {
        self.run(args, limits, |_, v| Ok(!v.is_false()))
    }

    /// Evaluates on a thread of its own, whose stack size is known, so that
    /// the depth checks hold whatever the caller's stack is.
    fn run<T: Send>(
        &self,
        args: &[serde_json::Value],
        limits: &Limits,
        finish: impl FnOnce(&mut Ctx, Value) -> Result<T, EvalError> + Send,
    ) -> Result<T, EvalError> {
        if args.len() != self.inner.params {
            return Err(EvalError::Runtime(format!(
                "expected {} arguments, got {}",
                self.inner.params,
                args.len()
            )));
        }
        let job = || {
            let mut ctx = Ctx::new(limits);
            let mut vals = Vec::with_capacity(args.len());
            for a in args {
                vals.push(convert::json_to_value(&mut ctx, a)?);
            }
            let frame = ctx.new_frame(vals, None)?;
            let result = eval::eval(&mut ctx, &self.inner.body, &Some(frame))?;
            finish(&mut ctx, result)
        };
        std::thread::scope(|s| {
            let handle = std::thread::Builder::new()
                .name("ale-eval".to_string())
                .stack_size(EVAL_STACK_BYTES)
                .spawn_scoped(s, job)
                .map_err(|e| EvalError::Runtime(format!("cannot start the evaluation thread: {e}")))?;
            handle
                .join()
                .unwrap_or_else(|_| Err(EvalError::Runtime("internal error: evaluation panicked".into())))
        })
    }
}
