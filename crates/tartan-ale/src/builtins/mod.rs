//! The procedures of Ale's bootstrapped environment that this interpreter
//! implements, under Ale's names.

pub mod higher;
pub mod misc;
pub mod numeric;
pub mod preds;
pub mod seqs;

use crate::limits::{Ctx, R};
use crate::value::Value;

pub type BuiltinFn = fn(&mut Ctx, &[Value]) -> R<Value>;

pub struct Builtin {
    pub name: &'static str,
    pub min: usize,
    /// `None`: any number of arguments from `min` on.
    pub max: Option<usize>,
    pub f: BuiltinFn,
}

impl Builtin {
    /// Ale's wording of the arity, e.g. "2", "1 or more", "2-3".
    pub fn arity_text(&self) -> String {
        match self.max {
            None => format!("{} or more", self.min),
            Some(m) if m == self.min => format!("{m}"),
            Some(m) => format!("{}-{m}", self.min),
        }
    }

    pub fn accepts(&self, argc: usize) -> bool {
        argc >= self.min && self.max.is_none_or(|m| argc <= m)
    }
}

/// Shorthand for table entries.
pub(crate) const fn b(name: &'static str, min: usize, max: Option<usize>, f: BuiltinFn) -> Builtin {
    Builtin { name, min, max, f }
}

pub fn call_builtin(ctx: &mut Ctx, b: &'static Builtin, args: &[Value]) -> R<Value> {
    (b.f)(ctx, args)
}

fn tables() -> [&'static [Builtin]; 5] {
    [
        numeric::TABLE,
        seqs::TABLE,
        higher::TABLE,
        preds::TABLE,
        misc::TABLE,
    ]
}

/// Names Ale binds to the same procedure as another name.
const ALIASES: &[(&str, &str)] = &[
    ("first", "car"),
    ("rest", "cdr"),
    ("modulo", "mod"),
    ("foldl", "fold-left"),
    ("reduce", "fold-left"),
    ("foldr", "fold-right"),
    ("promise-forced?", "resolved?"),
    ("!promise-forced?", "!resolved?"),
];

pub fn lookup(name: &str) -> Option<&'static Builtin> {
    let name = ALIASES.iter().find(|(a, _)| *a == name).map_or(name, |(_, c)| *c);
    if let Some(b) = tables()
        .into_iter()
        .flat_map(|t| t.iter())
        .find(|b| b.name == name)
    {
        return Some(b);
    }
    seqs::cxr(name)
}

/// Global constants of Ale's core.
pub fn constant(name: &str) -> Option<Value> {
    Some(match name {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" => Value::Null,
        "+inf" | "*pos-inf*" => Value::Float(f64::INFINITY),
        "-inf" | "*neg-inf*" => Value::Float(f64::NEG_INFINITY),
        // (- +inf +inf)
        "nan" => Value::Float(f64::NAN),
        "*space*" => Value::str_const(" "),
        "*newline*" => Value::str_const("\n"),
        _ => return None,
    })
}

/// Globals of Ale's bootstrapped environment that are not implemented here:
/// using one is a compile error that says so.
pub const UNSUPPORTED_ALE_NAMES: &[&str] = &[
    "asm",
    "assert-args",
    "assert-type",
    "bytes",
    "cartesian-product",
    "chan",
    "cond->",
    "cond->>",
    "cons*",
    "current-time",
    "declare",
    "declared",
    "define",
    "define-lambda",
    "define-macro",
    "define-namespace",
    "delay",
    "delay-force",
    "eval",
    "fold-right!",
    "for",
    "for-each",
    "force",
    "force!",
    "future",
    "generate",
    "gensym",
    "go",
    "go!",
    "go-with-monitor",
    "import",
    "lazy",
    "let->",
    "letfn",
    "macro",
    "macroexpand",
    "macroexpand-1",
    "map!",
    "pr",
    "print",
    "println",
    "prn",
    "private",
    "read",
    "recover",
    "seq->set",
    "set",
    "spawn",
    "special",
    "sym",
    "syntax-quote",
    "time",
    "try",
    "unquote",
    "unquote-splicing",
    "with-open",
    ":",
    "%define",
    "%public",
    "%private",
    "%defer",
    "%delay",
    "%go",
    "%is-a",
    "%lazy-seq",
    "%mk-ns",
    "%type-of",
    "*in*",
    "*out*",
    "*err*",
    "*env*",
    "*args*",
];
