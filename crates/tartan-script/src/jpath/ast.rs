//! jpath's syntax tree: what a source compiles to.

use regex::Regex;
use serde_json::Value;

#[derive(Debug)]
pub(super) struct Path {
    pub(super) segments: Vec<Segment>,
}

#[derive(Debug)]
pub(super) struct Segment {
    pub(super) descendant: bool,
    pub(super) selectors: Vec<Selector>,
}

#[derive(Debug)]
pub(super) enum Selector {
    Name(String),
    Index(i64),
    Wildcard,
    Slice {
        start: Option<i64>,
        end: Option<i64>,
        step: i64,
    },
    Filter(Expr),
}

#[derive(Debug)]
pub(super) struct Expr {
    /// Where the expression starts (character index), for errors.
    pub(super) pos: usize,
    pub(super) kind: ExprKind,
}

#[derive(Debug)]
pub(super) enum ExprKind {
    Literal(Value),
    Query {
        absolute: bool,
        path: Path,
    },
    Not(Box<Expr>),
    /// `a && b && ...`: jpath's left-nested pairs, flattened (same answers,
    /// no recursion over a long chain).
    And(Vec<Expr>),
    Or(Vec<Expr>),
    /// `first op1 e1 op2 e2 ...`, evaluated left to right: each comparison's
    /// boolean is the left operand of the next.
    Compare {
        first: Box<Expr>,
        rest: Vec<(CmpOp, Expr)>,
    },
    Call {
        func: Func,
        args: Vec<Expr>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug)]
pub(super) enum Func {
    Length,
    Count,
    Value,
    Match(Pattern),
    Search(Pattern),
}

impl Func {
    pub(super) fn name(&self) -> &'static str {
        match self {
            Func::Length => "length",
            Func::Count => "count",
            Func::Value => "value",
            Func::Match(_) => "match",
            Func::Search(_) => "search",
        }
    }
}

/// The regex of a `match` or `search` call.
#[derive(Debug)]
pub(super) enum Pattern {
    /// Read from the document (or computed) at each call.
    Dynamic,
    /// A string literal, compiled once; `None` when Go's regexp rejects it
    /// (the call then returns nothing).
    Fixed(Option<Regex>),
}
