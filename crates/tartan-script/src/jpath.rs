//! jpath: the JSONPath dialect of Argyll's scripts (language `jpath`, used
//! by predicates, `required.match` scripts and `mapping.script`), as the Go
//! library github.com/kode4food/jpath defines it.
//!
//! # The language
//!
//! RFC 9535 JSONPath, with these differences, each reproduced here:
//!
//! - **Top-level expressions.** The whole source is read as a filter
//!   expression. When that expression is a bare absolute query (`$.a.b`,
//!   also when parenthesised: `($.a)`), it is the query. Anything else is
//!   read as the filter selector `$[?SOURCE]`: `$.kind == "email"` selects
//!   every child of the document (array elements, or object member values)
//!   for which the expression holds, with `@` the child and `$` the
//!   document. So a true comparison matches every child of the root, a
//!   false one nothing, and one over a document without children (a
//!   scalar, `{}`, `[]`) matches nothing even when it holds.
//! - **Member order.** Wildcards, descendants and filters visit an object's
//!   members by key in byte order (Go maps have no order of their own), not
//!   in document order.
//! - **A looser expression grammar.** Comparisons chain (`@.a == 1 == true`
//!   compares the boolean of the first with `true`), operands of a
//!   comparison may be parenthesised or negated (`!@.a == false`), and
//!   function calls, literals and `!` may appear wherever an operand may.
//! - **Validation of one level only.** The RFC's type rules (literals and
//!   `length`/`count`/`value` must be compared, `match`/`search` must not,
//!   comparisons need singular queries, `count`/`value` need a query) are
//!   checked for the filters of the outermost query only. Filters nested
//!   in a query inside a filter are not checked and evaluate loosely:
//!   comparisons hold when any pair of the two node lists compares, a bare
//!   literal is true unless it is `null` or `false`, a function result is
//!   true unless it is nothing, `null` or `false`.
//! - **`$` inside a relative query.** In `@.a[?$.b == 1]`, `$` is the node
//!   the relative query started from (`@`), not the document.
//! - **Regular expressions** of `match` and `search` are Go's (RE2 syntax,
//!   ASCII-only `\d`, `\w`, `\s`, `\b`), with every `.` outside a bracket
//!   read as `[^\r\n]`. A pattern that does not compile makes the function
//!   return nothing (false), as in Go. Patterns are translated to the
//!   `regex` crate's syntax with the same meaning (module `goregex` below).
//!
//! Numbers compare as 64-bit floats (Go decodes JSON numbers so).
//!
//! # Why no JSONPath crate
//!
//! The maintained RFC 9535 crate, `serde_json_path` (0.7), was the
//! candidate, but jpath cannot be layered on it without wrong answers: it
//! visits object members in the map's order, where jpath sorts them (a
//! mapping that matches several values would come out in another order);
//! its `match`/`search` use the `regex` crate's Unicode-aware `\d`, `\w`,
//! `\s`, `\b` and its escape rules, not Go's, and compile the pattern again
//! for every node; its parser rejects jpath's own grammar inside brackets
//! (chained or parenthesised comparisons), so extending only the top level
//! would still leave filters unsupported; and a relative query's `$` binds
//! differently. A top-level parser that handed the path parts to the crate
//! would thus need its own grammar for everything inside brackets anyway,
//! plus a sorted copy of every document. jpath's whole evaluator is small
//! (selectors, slices, five functions), so it is written here, checked
//! against the JSONPath Compliance Test Suite (tests/jpath_cts.rs) and
//! against jpath's own tests and Argyll's (below).
//!
//! # Cost bounds
//!
//! - A source is at most [`MAX_SOURCE_BYTES`] long, and brackets,
//!   parentheses, `!` and function calls nest at most [`MAX_NESTING`] deep:
//!   parsing and evaluating recurse over that nesting, never over the
//!   document.
//! - Walking the document is iterative (descendants use a heap stack).
//!   Comparing two values for equality, cloning a match and dropping a
//!   value recurse over the values' nesting: documents are limited to 128
//!   levels of nesting before they reach a script (the engine enforces
//!   this elsewhere), which keeps those recursions shallow.
//! - One query spends at most `WORK_FLOOR + WORK_PER_DOC_NODE × (nodes in
//!   the document)` steps: a node visited, selected, tested by a filter or
//!   copied into the answer costs one, matching a regex costs by the length
//!   of its subject. Queries such as `$..*..*..*` grow as a power of the
//!   document's depth; past the limit [`JPath::try_query`] fails instead of
//!   exhausting memory or time.
//! - Regex patterns written in the source compile once, with the script.
//!   Patterns read from the document compile once per query each, at most
//!   `MAX_DOCUMENT_REGEXES` distinct ones (the query fails past that), each
//!   within `DOCUMENT_REGEX_SIZE_LIMIT`.
//!
//! # What is not supported
//!
//! A regex pattern that Go's regexp accepts but the `regex` crate cannot
//! compile within its size limit (such as `\pL{1000}`, whose automaton is
//! too large) is a compile error when written in the source, and makes
//! [`JPath::try_query`] fail when read from the document. Everything else
//! jpath accepts is supported.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use regex::Regex;
use serde_json::{Map, Value};

/// The longest source accepted, in bytes.
pub const MAX_SOURCE_BYTES: usize = 64 * 1024;

/// How deep brackets, parentheses, `!` and function calls may nest.
pub const MAX_NESTING: usize = 64;

/// Work any query may spend, whatever the document's size.
const WORK_FLOOR: u64 = 1_000_000;

/// Further work a query may spend for each node of its document.
const WORK_PER_DOC_NODE: u64 = 64;

/// The largest index or slice bound (2^53 - 1, as RFC 9535 and jpath).
const MAX_INT: i64 = 9_007_199_254_740_991;

/// Distinct regex patterns read from the document that one query may
/// compile (a pattern can take the `regex` crate milliseconds to compile).
const MAX_DOCUMENT_REGEXES: usize = 32;

/// Work charged for compiling a regex read from the document.
const REGEX_COMPILE_WORK: u64 = 10_000;

/// The `regex` crate's compiled-size limit for patterns read from the
/// document (bytes; written patterns get the crate's default, 10 MiB):
/// rejecting a pattern too large takes time in proportion to this.
const DOCUMENT_REGEX_SIZE_LIMIT: usize = 2 << 20;

/// A compiled jpath expression.
#[derive(Clone)]
pub struct JPath {
    inner: Arc<Compiled>,
}

struct Compiled {
    source: String,
    path: Path,
}

impl fmt::Debug for JPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("JPath").field(&self.inner.source).finish()
    }
}

impl JPath {
    /// Compile `source`. The error names what is wrong and the column (in
    /// characters, from 1) where it was found.
    pub fn compile(source: &str) -> Result<JPath, String> {
        if source.len() > MAX_SOURCE_BYTES {
            return Err(format!(
                "expression is {} bytes long, more than the limit of {MAX_SOURCE_BYTES}",
                source.len()
            ));
        }
        let path = Parser::new(source).parse_top().map_err(|e| e.to_string())?;
        Ok(JPath {
            inner: Arc::new(Compiled {
                source: source.to_string(),
                path,
            }),
        })
    }

    /// The source this was compiled from.
    pub fn source(&self) -> &str {
        &self.inner.source
    }

    /// Every value the expression matches in `doc`, in jpath's order. A
    /// query that fails (see [`JPath::try_query`]) matches nothing here.
    pub fn query(&self, doc: &Value) -> Vec<Value> {
        self.try_query(doc).unwrap_or_default()
    }

    /// As [`JPath::query`], failing when the query exceeds its work limit
    /// (see the module's documentation) or reads a regex pattern from the
    /// document that cannot be compiled here (see "What is not supported").
    pub fn try_query(&self, doc: &Value) -> Result<Vec<Value>, String> {
        let mut cx = Cx::new(doc);
        let result = eval_path(&self.inner.path, doc, &mut cx).and_then(|nodes| {
            let mut out = Vec::with_capacity(nodes.len());
            for node in nodes {
                cx.charge(count_nodes(node))?;
                out.push(node.clone());
            }
            Ok(out)
        });
        result.map_err(|abort| cx.message(abort))
    }

    /// Whether the expression matches at least one value in `doc` (an
    /// explicit `null` counts), without copying the matches; fails as
    /// [`JPath::try_query`] does.
    pub fn try_matches(&self, doc: &Value) -> Result<bool, String> {
        let mut cx = Cx::new(doc);
        match eval_path(&self.inner.path, doc, &mut cx) {
            Ok(nodes) => Ok(!nodes.is_empty()),
            Err(abort) => Err(cx.message(abort)),
        }
    }
}

// ---------------------------------------------------------------------------
// Syntax tree

#[derive(Debug)]
struct Path {
    segments: Vec<Segment>,
}

#[derive(Debug)]
struct Segment {
    descendant: bool,
    selectors: Vec<Selector>,
}

#[derive(Debug)]
enum Selector {
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
struct Expr {
    /// Where the expression starts (character index), for errors.
    pos: usize,
    kind: ExprKind,
}

#[derive(Debug)]
enum ExprKind {
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
enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug)]
enum Func {
    Length,
    Count,
    Value,
    Match(Pattern),
    Search(Pattern),
}

impl Func {
    fn name(&self) -> &'static str {
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
enum Pattern {
    /// Read from the document (or computed) at each call.
    Dynamic,
    /// A string literal, compiled once; `None` when Go's regexp rejects it
    /// (the call then returns nothing).
    Fixed(Option<Regex>),
}

// ---------------------------------------------------------------------------
// Parser

#[derive(Debug)]
struct ParseError {
    message: String,
    pos: usize,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at column {}", self.message, self.pos + 1)
    }
}

type PResult<T> = Result<T, ParseError>;

fn perr<T>(message: impl Into<String>, pos: usize) -> PResult<T> {
    Err(ParseError {
        message: message.into(),
        pos,
    })
}

const UNEXPECTED: &str = "unexpected token";

struct Parser {
    src: Vec<char>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn new(source: &str) -> Parser {
        Parser {
            src: source.chars().collect(),
            pos: 0,
            depth: 0,
        }
    }

    fn eof(&self) -> bool {
        self.pos >= self.src.len()
    }

    fn peek(&self) -> Option<char> {
        self.src.get(self.pos).copied()
    }

    fn peek_is(&self, f: impl Fn(char) -> bool) -> bool {
        self.peek().is_some_and(f)
    }

    fn consume(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn consume_str(&mut self, s: &str) -> bool {
        let mut at = self.pos;
        for c in s.chars() {
            if self.src.get(at) != Some(&c) {
                return false;
            }
            at += 1;
        }
        self.pos = at;
        true
    }

    /// Go's `unicode.IsSpace` is Unicode's White_Space, as `is_whitespace`.
    fn skip_ws(&mut self) {
        while self.peek_is(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return perr(
                format!("expression nested more than {MAX_NESTING} levels deep"),
                self.pos,
            );
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn parse_top(&mut self) -> PResult<Path> {
        let text: String = self.src.iter().collect();
        if text.is_empty() || text.trim() != text {
            return perr("expected root selector '$'", 0);
        }
        let expr = self.parse_expr()?;
        if !self.eof() {
            return perr(UNEXPECTED, self.pos);
        }
        let path = match expr.kind {
            ExprKind::Query { absolute: true, path } => path,
            kind => Path {
                segments: vec![Segment {
                    descendant: false,
                    selectors: vec![Selector::Filter(Expr { pos: expr.pos, kind })],
                }],
            },
        };
        validate_path(&path)?;
        Ok(path)
    }

    fn parse_expr(&mut self) -> PResult<Expr> {
        let first = self.parse_and()?;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if !self.consume_str("||") {
                break;
            }
            items.push(self.parse_and()?);
        }
        if items.is_empty() {
            return Ok(first);
        }
        let pos = first.pos;
        items.insert(0, first);
        Ok(Expr {
            pos,
            kind: ExprKind::Or(items),
        })
    }

    fn parse_and(&mut self) -> PResult<Expr> {
        let first = self.parse_compare()?;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if !self.consume_str("&&") {
                break;
            }
            items.push(self.parse_compare()?);
        }
        if items.is_empty() {
            return Ok(first);
        }
        let pos = first.pos;
        items.insert(0, first);
        Ok(Expr {
            pos,
            kind: ExprKind::And(items),
        })
    }

    fn parse_compare(&mut self) -> PResult<Expr> {
        let first = self.parse_unary()?;
        let mut rest = Vec::new();
        loop {
            self.skip_ws();
            let op = if self.consume_str("==") {
                CmpOp::Eq
            } else if self.consume_str("!=") {
                CmpOp::Ne
            } else if self.consume_str("<=") {
                CmpOp::Le
            } else if self.consume_str(">=") {
                CmpOp::Ge
            } else if self.consume('<') {
                CmpOp::Lt
            } else if self.consume('>') {
                CmpOp::Gt
            } else {
                break;
            };
            rest.push((op, self.parse_unary()?));
        }
        if rest.is_empty() {
            return Ok(first);
        }
        Ok(Expr {
            pos: first.pos,
            kind: ExprKind::Compare {
                first: Box::new(first),
                rest,
            },
        })
    }

    fn parse_unary(&mut self) -> PResult<Expr> {
        self.skip_ws();
        let pos = self.pos;
        if self.consume('!') {
            self.enter()?;
            let inner = self.parse_unary()?;
            self.leave();
            return Ok(Expr {
                pos,
                kind: ExprKind::Not(Box::new(inner)),
            });
        }
        self.parse_primary()
    }

    fn parse_primary(&mut self) -> PResult<Expr> {
        self.skip_ws();
        let pos = self.pos;
        let Some(c) = self.peek() else {
            return perr(UNEXPECTED, pos);
        };
        match c {
            '(' => {
                self.pos += 1;
                self.enter()?;
                let inner = self.parse_expr()?;
                self.skip_ws();
                if !self.consume(')') {
                    return perr(UNEXPECTED, self.pos);
                }
                self.leave();
                Ok(inner)
            }
            '\'' | '"' => Ok(Expr {
                pos,
                kind: ExprKind::Literal(Value::String(self.parse_string()?)),
            }),
            '$' | '@' => {
                self.pos += 1;
                let path = self.parse_relative_path()?;
                Ok(Expr {
                    pos,
                    kind: ExprKind::Query {
                        absolute: c == '$',
                        path,
                    },
                })
            }
            _ if c == '-' || c.is_ascii_digit() => match self.parse_number() {
                Some(n) => Ok(Expr {
                    pos,
                    kind: ExprKind::Literal(n),
                }),
                None => perr("invalid number", pos),
            },
            _ => {
                if self.consume_str("true") {
                    return Ok(Expr {
                        pos,
                        kind: ExprKind::Literal(Value::Bool(true)),
                    });
                }
                if self.consume_str("false") {
                    return Ok(Expr {
                        pos,
                        kind: ExprKind::Literal(Value::Bool(false)),
                    });
                }
                if self.consume_str("null") {
                    return Ok(Expr {
                        pos,
                        kind: ExprKind::Literal(Value::Null),
                    });
                }
                let Some(name) = self.parse_member_name() else {
                    return perr(UNEXPECTED, pos);
                };
                if !self.consume('(') {
                    return perr(UNEXPECTED, self.pos);
                }
                self.parse_call(name, pos)
            }
        }
    }

    fn parse_call(&mut self, name: String, pos: usize) -> PResult<Expr> {
        self.enter()?;
        let mut args = Vec::new();
        self.skip_ws();
        if !self.consume(')') {
            loop {
                args.push(self.parse_expr()?);
                self.skip_ws();
                if self.consume(')') {
                    break;
                }
                if !self.consume(',') {
                    return perr("invalid function call", self.pos);
                }
                self.skip_ws();
            }
        }
        self.leave();
        let func = match name.as_str() {
            "length" => Func::Length,
            "count" => Func::Count,
            "value" => Func::Value,
            "match" => Func::Match(fixed_pattern(&args, true)?),
            "search" => Func::Search(fixed_pattern(&args, false)?),
            _ => return perr(format!("unknown function: {name}"), pos),
        };
        Ok(Expr {
            pos,
            kind: ExprKind::Call { func, args },
        })
    }

    fn parse_relative_path(&mut self) -> PResult<Path> {
        let mut segments = Vec::new();
        loop {
            self.skip_ws();
            match self.parse_segment()? {
                Some(segment) => segments.push(segment),
                None => break,
            }
        }
        Ok(Path { segments })
    }

    fn parse_segment(&mut self) -> PResult<Option<Segment>> {
        match self.peek() {
            Some('.') => {
                self.pos += 1;
                if self.consume('.') {
                    let selectors = match self.peek() {
                        Some('*') => {
                            self.pos += 1;
                            vec![Selector::Wildcard]
                        }
                        Some('[') => self.parse_bracket()?,
                        _ => match self.parse_member_name() {
                            Some(name) => vec![Selector::Name(name)],
                            None => return perr(UNEXPECTED, self.pos),
                        },
                    };
                    return Ok(Some(Segment {
                        descendant: true,
                        selectors,
                    }));
                }
                let selector = if self.consume('*') {
                    Selector::Wildcard
                } else {
                    match self.parse_member_name() {
                        Some(name) => Selector::Name(name),
                        None => return perr(UNEXPECTED, self.pos),
                    }
                };
                Ok(Some(Segment {
                    descendant: false,
                    selectors: vec![selector],
                }))
            }
            Some('[') => Ok(Some(Segment {
                descendant: false,
                selectors: self.parse_bracket()?,
            })),
            _ => Ok(None),
        }
    }

    fn parse_bracket(&mut self) -> PResult<Vec<Selector>> {
        if !self.consume('[') {
            return perr(UNEXPECTED, self.pos);
        }
        self.skip_ws();
        let mut selectors = Vec::new();
        loop {
            selectors.push(self.parse_bracket_selector()?);
            self.skip_ws();
            if self.consume(']') {
                return Ok(selectors);
            }
            if !self.consume(',') {
                return perr(UNEXPECTED, self.pos);
            }
            self.skip_ws();
        }
    }

    fn parse_bracket_selector(&mut self) -> PResult<Selector> {
        match self.peek() {
            None => perr(UNEXPECTED, self.pos),
            Some('*') => {
                self.pos += 1;
                Ok(Selector::Wildcard)
            }
            Some('?') => {
                self.pos += 1;
                self.skip_ws();
                self.enter()?;
                let filter = self.parse_expr()?;
                self.leave();
                Ok(Selector::Filter(filter))
            }
            Some('\'' | '"') => Ok(Selector::Name(self.parse_string()?)),
            Some(_) => self.parse_index_or_slice(),
        }
    }

    fn parse_index_or_slice(&mut self) -> PResult<Selector> {
        self.skip_ws();
        let mut start = None;
        if self.peek() != Some(':') {
            match self.parse_int() {
                Some(n) => start = Some(n),
                None => return perr(UNEXPECTED, self.pos),
            }
        }
        self.skip_ws();
        if self.peek() != Some(':') {
            return match start {
                Some(n) => Ok(Selector::Index(n)),
                None => perr("invalid slice selector", self.pos),
            };
        }
        self.pos += 1;
        self.skip_ws();
        let mut end = None;
        if !self.eof() && !self.peek_is(|c| matches!(c, ':' | ',' | ']')) {
            match self.parse_int() {
                Some(n) => end = Some(n),
                None => return perr("invalid slice selector", self.pos),
            }
        }
        self.skip_ws();
        let mut step = 1;
        if self.consume(':') {
            self.skip_ws();
            if !self.eof() && !self.peek_is(|c| matches!(c, ',' | ']')) {
                match self.parse_int() {
                    Some(n) => step = n,
                    None => return perr("invalid slice selector", self.pos),
                }
            }
        }
        Ok(Selector::Slice { start, end, step })
    }

    /// `0` or a non-zero digit and digits (no leading zeros); the position
    /// is left after it, or restored to `start` when there is none.
    fn integer_part(&mut self, start: usize) -> bool {
        match self.peek() {
            Some('0') => {
                self.pos += 1;
                if self.peek_is(|c| c.is_ascii_digit()) {
                    self.pos = start;
                    return false;
                }
                true
            }
            Some(c) if c.is_ascii_digit() => {
                while self.peek_is(|c| c.is_ascii_digit()) {
                    self.pos += 1;
                }
                true
            }
            _ => {
                self.pos = start;
                false
            }
        }
    }

    fn digits(&mut self) -> bool {
        let from = self.pos;
        while self.peek_is(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        self.pos > from
    }

    /// An index or slice bound: an integer of at most ±(2^53 - 1), not `-0`.
    fn parse_int(&mut self) -> Option<i64> {
        let start = self.pos;
        let negative = self.consume('-');
        if !self.integer_part(start) {
            return None;
        }
        let text: String = self.src[start..self.pos].iter().collect();
        match text.parse::<i64>() {
            Ok(n) if !(negative && n == 0) && (-MAX_INT..=MAX_INT).contains(&n) => Some(n),
            _ => {
                self.pos = start;
                None
            }
        }
    }

    /// A number literal: JSON's number grammar, as a 64-bit float (too
    /// large a magnitude is an error, as Go's `ParseFloat` makes it).
    fn parse_number(&mut self) -> Option<Value> {
        let start = self.pos;
        self.consume('-');
        if !self.integer_part(start) {
            return None;
        }
        if self.consume('.') && !self.digits() {
            self.pos = start;
            return None;
        }
        if self.consume('e') || self.consume('E') {
            if !self.consume('+') {
                self.consume('-');
            }
            if !self.digits() {
                self.pos = start;
                return None;
            }
        }
        let text: String = self.src[start..self.pos].iter().collect();
        let number = text.parse::<f64>().ok().and_then(serde_json::Number::from_f64);
        if number.is_none() {
            self.pos = start;
        }
        number.map(Value::Number)
    }

    /// A dot-notation member name (also a function name): a letter, `_` or
    /// any non-ASCII character, then those or ASCII digits.
    fn parse_member_name(&mut self) -> Option<String> {
        let start = self.pos;
        if !self.peek_is(|c| c == '_' || c.is_ascii_alphabetic() || !c.is_ascii()) {
            return None;
        }
        self.pos += 1;
        while self.peek_is(|c| c == '_' || c.is_ascii_alphanumeric() || !c.is_ascii()) {
            self.pos += 1;
        }
        Some(self.src[start..self.pos].iter().collect())
    }

    fn parse_string(&mut self) -> PResult<String> {
        let Some(quote) = self.peek() else {
            return perr("unterminated string", self.pos);
        };
        self.pos += 1;
        let mut out = String::new();
        while let Some(c) = self.peek() {
            self.pos += 1;
            if c == quote {
                return Ok(out);
            }
            if (c as u32) < 0x20 {
                return perr("invalid escape sequence", self.pos);
            }
            if c != '\\' {
                out.push(c);
                continue;
            }
            let Some(esc) = self.peek() else {
                return perr("invalid escape sequence", self.pos);
            };
            self.pos += 1;
            match esc {
                '\\' | '/' => out.push(esc),
                '\'' | '"' if esc == quote => out.push(esc),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                'u' => out.push(self.parse_unicode_escape()?),
                _ => return perr("invalid escape sequence", self.pos),
            }
        }
        perr("unterminated string", self.pos)
    }

    fn hex4(&mut self) -> PResult<u32> {
        let mut value = 0;
        for _ in 0..4 {
            match self.peek().and_then(|c| c.to_digit(16)) {
                Some(d) => {
                    value = value * 16 + d;
                    self.pos += 1;
                }
                None => return perr("invalid escape sequence", self.pos),
            }
        }
        Ok(value)
    }

    /// After `\u`: four hex digits, a surrogate pair as two escapes.
    fn parse_unicode_escape(&mut self) -> PResult<char> {
        let high = self.hex4()?;
        let code = if (0xD800..=0xDBFF).contains(&high) {
            if !(self.consume('\\') && self.consume('u')) {
                return perr("invalid escape sequence", self.pos);
            }
            let low = self.hex4()?;
            if !(0xDC00..=0xDFFF).contains(&low) {
                return perr("invalid escape sequence", self.pos);
            }
            0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
        } else {
            high
        };
        match char::from_u32(code) {
            Some(c) => Ok(c),
            None => perr("invalid escape sequence", self.pos),
        }
    }
}

/// The regex of a `match`/`search` call whose pattern is a string literal,
/// compiled now; a literal whose meaning the translation cannot keep is a
/// compile error rather than a wrong answer later.
fn fixed_pattern(args: &[Expr], full: bool) -> PResult<Pattern> {
    let Some(Expr {
        pos,
        kind: ExprKind::Literal(Value::String(pattern)),
    }) = args.get(1)
    else {
        return Ok(Pattern::Dynamic);
    };
    match goregex::compile(pattern, full, None) {
        Ok(regex) => Ok(Pattern::Fixed(regex)),
        Err(feature) => perr(format!("regex pattern not supported: {feature}"), *pos),
    }
}

// ---------------------------------------------------------------------------
// Validation: jpath checks the filters of the outermost query only.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    Logical,
    Operand,
    Argument,
}

fn validate_path(path: &Path) -> PResult<()> {
    for segment in &path.segments {
        for selector in &segment.selectors {
            if let Selector::Filter(expr) = selector {
                validate_expr(expr, Use::Logical, false)?;
            }
        }
    }
    Ok(())
}

fn validate_expr(expr: &Expr, usage: Use, in_comparison: bool) -> PResult<()> {
    match &expr.kind {
        ExprKind::Literal(_) => {
            if usage == Use::Logical {
                return perr("literal must be compared", expr.pos);
            }
            Ok(())
        }
        ExprKind::Query { path, .. } => {
            if in_comparison && !is_singular(path) {
                return perr("comparison requires singular query", expr.pos);
            }
            Ok(())
        }
        ExprKind::Not(inner) => validate_expr(inner, Use::Logical, false),
        ExprKind::And(items) | ExprKind::Or(items) => items
            .iter()
            .try_for_each(|item| validate_expr(item, Use::Logical, false)),
        ExprKind::Compare { first, rest } => {
            validate_expr(first, Use::Operand, true)?;
            rest.iter()
                .try_for_each(|(_, item)| validate_expr(item, Use::Operand, true))
        }
        ExprKind::Call { func, args } => {
            validate_call(func, args, usage, in_comparison, expr.pos)?;
            args.iter()
                .try_for_each(|arg| validate_expr(arg, Use::Argument, false))
        }
    }
}

fn validate_call(func: &Func, args: &[Expr], usage: Use, in_comparison: bool, pos: usize) -> PResult<()> {
    let name = func.name();
    match func {
        Func::Match(_) | Func::Search(_) => {
            if args.len() != 2 {
                return perr("invalid function arity: match/search", pos);
            }
            if in_comparison {
                return perr("function result must not be compared: match/search", pos);
            }
            Ok(())
        }
        Func::Length | Func::Count | Func::Value => {
            let [arg] = args else {
                return perr(format!("invalid function arity: {name}"), pos);
            };
            if !in_comparison && usage == Use::Logical {
                return perr(format!("function result must be compared: {name}"), pos);
            }
            match (&arg.kind, func) {
                (ExprKind::Query { path, .. }, Func::Length) if !is_singular(path) => {
                    perr(format!("function requires singular query: {name}"), arg.pos)
                }
                (ExprKind::Query { .. }, _) | (_, Func::Length) => Ok(()),
                _ => perr(
                    format!("function requires query argument: {name} requires query argument"),
                    arg.pos,
                ),
            }
        }
    }
}

fn is_singular(path: &Path) -> bool {
    path.segments.iter().all(|segment| {
        !segment.descendant
            && matches!(
                segment.selectors.as_slice(),
                [Selector::Name(_) | Selector::Index(_)]
            )
    })
}

// ---------------------------------------------------------------------------
// Evaluation

/// Why a query stopped.
enum Abort {
    /// The work limit ran out.
    Exhausted,
    /// A regex pattern read from the document could not be used.
    Regex(String),
}

struct Cx {
    remaining: u64,
    limit: u64,
    regexes: HashMap<(bool, String), Option<Regex>>,
}

impl Cx {
    fn new(doc: &Value) -> Cx {
        let limit = WORK_FLOOR.saturating_add(WORK_PER_DOC_NODE.saturating_mul(count_nodes(doc)));
        Cx {
            remaining: limit,
            limit,
            regexes: HashMap::new(),
        }
    }

    fn charge(&mut self, work: u64) -> Result<(), Abort> {
        match self.remaining.checked_sub(work) {
            Some(left) => {
                self.remaining = left;
                Ok(())
            }
            None => {
                self.remaining = 0;
                Err(Abort::Exhausted)
            }
        }
    }

    fn message(&self, abort: Abort) -> String {
        match abort {
            Abort::Exhausted => {
                format!(
                    "jpath query exceeded its work limit of {} steps for this document",
                    self.limit
                )
            }
            Abort::Regex(message) => message,
        }
    }

    /// A regex read from the document, compiled once per query; `None`
    /// when Go would reject it (the call then returns nothing).
    fn regex(&mut self, pattern: &str, full: bool) -> Result<Option<Regex>, Abort> {
        let key = (full, pattern.to_string());
        if let Some(regex) = self.regexes.get(&key) {
            return Ok(regex.clone());
        }
        if self.regexes.len() >= MAX_DOCUMENT_REGEXES {
            return Err(Abort::Regex(format!(
                "jpath query reads more than {MAX_DOCUMENT_REGEXES} distinct regex patterns from the document"
            )));
        }
        self.charge(REGEX_COMPILE_WORK + pattern.len() as u64)?;
        let regex = goregex::compile(pattern, full, Some(DOCUMENT_REGEX_SIZE_LIMIT)).map_err(|why| {
            let name = if full { "match" } else { "search" };
            Abort::Regex(format!(
                "jpath {name}() pattern {pattern:?} from the document is not supported: {why}"
            ))
        })?;
        self.regexes.insert(key, regex.clone());
        Ok(regex)
    }
}

/// Nodes in a value (itself included), counted without recursion.
fn count_nodes(value: &Value) -> u64 {
    let mut count = 0u64;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        count += 1;
        match v {
            Value::Array(items) => stack.extend(items.iter()),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    count
}

/// An object's member values in key order (bytes), as jpath visits them.
fn sorted_values(map: &Map<String, Value>) -> Vec<&Value> {
    let mut members: Vec<(&String, &Value)> = map.iter().collect();
    members.sort_unstable_by(|a, b| a.0.cmp(b.0));
    members.into_iter().map(|(_, v)| v).collect()
}

/// Apply `path` from `start`; `start` is also the `$` of its filters.
fn eval_path<'a>(path: &'a Path, start: &'a Value, cx: &mut Cx) -> Result<Vec<&'a Value>, Abort> {
    let root = start;
    let mut nodes = vec![start];
    for segment in &path.segments {
        let mut out = Vec::new();
        for &node in &nodes {
            if !segment.descendant {
                for selector in &segment.selectors {
                    select(selector, node, root, &mut out, cx)?;
                }
                continue;
            }
            // The node and its descendants, each before its children,
            // children in order (object members by key).
            let mut stack = vec![node];
            while let Some(visit) = stack.pop() {
                cx.charge(1)?;
                for selector in &segment.selectors {
                    select(selector, visit, root, &mut out, cx)?;
                }
                match visit {
                    Value::Array(items) => stack.extend(items.iter().rev()),
                    Value::Object(map) => stack.extend(sorted_values(map).into_iter().rev()),
                    _ => {}
                }
            }
        }
        nodes = out;
    }
    Ok(nodes)
}

fn push<'a>(out: &mut Vec<&'a Value>, value: &'a Value, cx: &mut Cx) -> Result<(), Abort> {
    cx.charge(1)?;
    out.push(value);
    Ok(())
}

fn select<'a>(
    selector: &'a Selector,
    node: &'a Value,
    root: &'a Value,
    out: &mut Vec<&'a Value>,
    cx: &mut Cx,
) -> Result<(), Abort> {
    match selector {
        Selector::Name(name) => {
            if let Some(value) = node.as_object().and_then(|map| map.get(name)) {
                push(out, value, cx)?;
            }
        }
        Selector::Index(index) => {
            if let Value::Array(items) = node {
                let len = items.len() as i64;
                let at = if *index < 0 { index + len } else { *index };
                if (0..len).contains(&at) {
                    push(out, &items[at as usize], cx)?;
                }
            }
        }
        Selector::Wildcard => match node {
            Value::Array(items) => items.iter().try_for_each(|v| push(out, v, cx))?,
            Value::Object(map) => sorted_values(map)
                .into_iter()
                .try_for_each(|v| push(out, v, cx))?,
            _ => {}
        },
        Selector::Slice { start, end, step } => {
            if let Value::Array(items) = node {
                slice(items, *start, *end, *step, |v| push(out, v, cx))?;
            }
        }
        Selector::Filter(expr) => {
            let children: Vec<&Value> = match node {
                Value::Array(items) => items.iter().collect(),
                Value::Object(map) => sorted_values(map),
                _ => return Ok(()),
            };
            for child in children {
                cx.charge(1)?;
                if truthy(&eval_expr(expr, child, root, cx)?) {
                    push(out, child, cx)?;
                }
            }
        }
    }
    Ok(())
}

/// RFC 9535's array slice (section 2.3.4.2), calling `each` in order.
fn slice<'a>(
    items: &'a [Value],
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
    mut each: impl FnMut(&'a Value) -> Result<(), Abort>,
) -> Result<(), Abort> {
    let len = items.len() as i64;
    let normalize = |i: i64| if i >= 0 { i } else { len + i };
    if step > 0 {
        let lower = start.map_or(0, normalize).clamp(0, len);
        let upper = end.map_or(len, normalize).clamp(0, len);
        let mut i = lower;
        while i < upper {
            each(&items[i as usize])?;
            i += step;
        }
    } else if step < 0 {
        let upper = start.map_or(len - 1, normalize).clamp(-1, len - 1);
        let lower = end.map_or(-len - 1, normalize).clamp(-1, len - 1);
        let mut i = upper;
        while lower < i {
            each(&items[i as usize])?;
            i += step;
        }
    }
    Ok(())
}

/// A filter expression's value: a node list (from a query) or one scalar.
enum Val<'a> {
    Nodes(Vec<&'a Value>),
    Scalar(Sc<'a>),
}

#[derive(Clone, Copy)]
enum Sc<'a> {
    /// jpath's "nothing": a function's answer when it has none.
    Nothing,
    Json(&'a Value),
    Bool(bool),
    Num(f64),
}

/// A scalar or node seen as a Go value, for comparisons.
#[derive(Clone, Copy)]
enum View<'a> {
    Nothing,
    Null,
    Bool(bool),
    Num(f64),
    Str(&'a str),
    Arr(&'a [Value]),
    Obj(&'a Map<String, Value>),
}

fn json_view(value: &Value) -> View<'_> {
    match value {
        Value::Null => View::Null,
        Value::Bool(b) => View::Bool(*b),
        Value::Number(n) => View::Num(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => View::Str(s),
        Value::Array(items) => View::Arr(items),
        Value::Object(map) => View::Obj(map),
    }
}

fn view(sc: Sc<'_>) -> View<'_> {
    match sc {
        Sc::Nothing => View::Nothing,
        Sc::Json(value) => json_view(value),
        Sc::Bool(b) => View::Bool(b),
        Sc::Num(n) => View::Num(n),
    }
}

/// Go's `reflect.DeepEqual` over decoded JSON (numbers are floats).
/// Recurses over the values' nesting (bounded, see the module docs).
fn deep_eq(a: View<'_>, b: View<'_>) -> bool {
    match (a, b) {
        (View::Nothing, View::Nothing) | (View::Null, View::Null) => true,
        (View::Bool(x), View::Bool(y)) => x == y,
        (View::Num(x), View::Num(y)) => x == y,
        (View::Str(x), View::Str(y)) => x == y,
        (View::Arr(x), View::Arr(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| deep_eq(json_view(p), json_view(q)))
        }
        (View::Obj(x), View::Obj(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, p)| y.get(k).is_some_and(|q| deep_eq(json_view(p), json_view(q))))
        }
        _ => false,
    }
}

fn less(a: View<'_>, b: View<'_>) -> bool {
    match (a, b) {
        (View::Num(x), View::Num(y)) => x < y,
        (View::Str(x), View::Str(y)) => x < y,
        _ => false,
    }
}

fn truthy(value: &Val<'_>) -> bool {
    match value {
        Val::Nodes(nodes) => !nodes.is_empty(),
        Val::Scalar(Sc::Nothing | Sc::Json(Value::Null)) => false,
        Val::Scalar(Sc::Bool(b) | Sc::Json(Value::Bool(b))) => *b,
        Val::Scalar(_) => true,
    }
}

fn items<'v, 'a>(value: &'v Val<'a>) -> Box<dyn Iterator<Item = View<'a>> + 'v> {
    match value {
        Val::Nodes(nodes) => Box::new(nodes.iter().map(|n| json_view(n))),
        Val::Scalar(sc) => Box::new(std::iter::once(view(*sc))),
    }
}

fn count(value: &Val<'_>) -> usize {
    match value {
        Val::Nodes(nodes) => nodes.len(),
        Val::Scalar(_) => 1,
    }
}

fn is_nothing(value: &Val<'_>) -> bool {
    matches!(value, Val::Scalar(Sc::Nothing))
}

/// Whether some pair of items, one from each side, satisfies `test`.
fn any_pair(left: &Val<'_>, right: &Val<'_>, test: impl Fn(View<'_>, View<'_>) -> bool) -> bool {
    items(left).any(|l| items(right).any(|r| test(l, r)))
}

fn compare(op: CmpOp, left: &Val<'_>, right: &Val<'_>) -> bool {
    let empty = count(left) == 0 || count(right) == 0;
    match op {
        CmpOp::Eq | CmpOp::Ne if empty => {
            // Both empty, or one empty and the other nothing: equal.
            let equal = (count(left) == 0 && count(right) == 0)
                || (count(left) == 0 && is_nothing(right))
                || (count(right) == 0 && is_nothing(left));
            equal == (op == CmpOp::Eq)
        }
        _ if empty => false,
        CmpOp::Eq => any_pair(left, right, deep_eq),
        CmpOp::Ne => any_pair(left, right, |l, r| !deep_eq(l, r)),
        CmpOp::Lt => any_pair(left, right, less),
        CmpOp::Le => any_pair(left, right, |l, r| deep_eq(l, r) || less(l, r)),
        CmpOp::Gt => any_pair(left, right, |l, r| less(r, l)),
        CmpOp::Ge => any_pair(left, right, |l, r| deep_eq(l, r) || less(r, l)),
    }
}

fn eval_expr<'a>(expr: &'a Expr, current: &'a Value, root: &'a Value, cx: &mut Cx) -> Result<Val<'a>, Abort> {
    Ok(match &expr.kind {
        ExprKind::Literal(value) => Val::Scalar(Sc::Json(value)),
        ExprKind::Query { absolute, path } => {
            Val::Nodes(eval_path(path, if *absolute { root } else { current }, cx)?)
        }
        ExprKind::Not(inner) => Val::Scalar(Sc::Bool(!truthy(&eval_expr(inner, current, root, cx)?))),
        ExprKind::And(exprs) => {
            for item in exprs {
                if !truthy(&eval_expr(item, current, root, cx)?) {
                    return Ok(Val::Scalar(Sc::Bool(false)));
                }
            }
            Val::Scalar(Sc::Bool(true))
        }
        ExprKind::Or(exprs) => {
            for item in exprs {
                if truthy(&eval_expr(item, current, root, cx)?) {
                    return Ok(Val::Scalar(Sc::Bool(true)));
                }
            }
            Val::Scalar(Sc::Bool(false))
        }
        ExprKind::Compare { first, rest } => {
            let mut acc = eval_expr(first, current, root, cx)?;
            for (op, item) in rest {
                let right = eval_expr(item, current, root, cx)?;
                acc = Val::Scalar(Sc::Bool(compare(*op, &acc, &right)));
            }
            acc
        }
        ExprKind::Call { func, args } => {
            let mut values = Vec::with_capacity(args.len());
            for arg in args {
                values.push(eval_expr(arg, current, root, cx)?);
            }
            Val::Scalar(call(func, &values, cx)?)
        }
    })
}

/// A node list of exactly one node, or a scalar.
fn singular<'a>(value: &Val<'a>) -> Option<Sc<'a>> {
    match value {
        Val::Nodes(nodes) => match nodes.as_slice() {
            [only] => Some(Sc::Json(only)),
            _ => None,
        },
        Val::Scalar(sc) => Some(*sc),
    }
}

fn call<'a>(func: &'a Func, args: &[Val<'a>], cx: &mut Cx) -> Result<Sc<'a>, Abort> {
    Ok(match (func, args) {
        (Func::Length, [arg]) => match singular(arg).map(view) {
            Some(View::Str(s)) => Sc::Num(s.chars().count() as f64),
            Some(View::Arr(items)) => Sc::Num(items.len() as f64),
            Some(View::Obj(map)) => Sc::Num(map.len() as f64),
            _ => Sc::Nothing,
        },
        (Func::Count, [Val::Nodes(nodes)]) => Sc::Num(nodes.len() as f64),
        (Func::Value, [arg]) => singular(arg).unwrap_or(Sc::Nothing),
        (Func::Match(pattern) | Func::Search(pattern), [subject, regex]) => {
            let full = matches!(func, Func::Match(_));
            let (Some(View::Str(subject)), Some(View::Str(source))) =
                (singular(subject).map(view), singular(regex).map(view))
            else {
                return Ok(Sc::Nothing);
            };
            let dynamic;
            let regex = match pattern {
                Pattern::Fixed(regex) => regex.as_ref(),
                Pattern::Dynamic => {
                    dynamic = cx.regex(source, full)?;
                    dynamic.as_ref()
                }
            };
            match regex {
                Some(regex) => {
                    cx.charge(1 + subject.len() as u64 / 16)?;
                    Sc::Bool(regex.is_match(subject))
                }
                None => Sc::Nothing,
            }
        }
        _ => Sc::Nothing,
    })
}

// ---------------------------------------------------------------------------
// Go regular expressions

/// Go's `regexp` syntax (RE2, as `regexp.Compile` parses it), rewritten for
/// the `regex` crate with the same meaning. The crate and Go share most of
/// the syntax; where they differ the translation follows Go:
///
/// - `\d \s \w \b` (and negations) are ASCII-only in Go;
/// - `\123` is an octal escape, `\Q...\E` quotes, `{` that does not start
///   a valid repetition is a literal, `\<` is a literal `<`;
/// - inside brackets `[`, `&&`, `--` and `~~` are plain characters;
/// - `\pX` names are Go's exact category and script names, and `\p{C}` is
///   Go's `Cc|Cf|Co|Cs` (no unassigned code points);
/// - what Go rejects (stacked repetitions, counts over 1000, a repetition
///   of nothing, bad escapes or flags, ...) is rejected.
///
/// Every literal character is written as `\x{...}` (letters and digits as
/// themselves), so no character means anything else to the crate. Every
/// negated class is written as a difference from all characters
/// (`[\x{0}-\x{10FFFF}--[...]]`), never as `[^...]`: regex 1.13 negates a
/// class holding ranges that end at U+D7FF and resume at U+E000 into one
/// that matches both (`[^\p{Cn}\p{Co}]` matches U+E000); the difference is
/// computed correctly.
mod goregex {
    use regex::{Regex, RegexBuilder};

    /// Go's regexp rejects the pattern.
    struct Invalid;

    type TResult<T> = Result<T, Invalid>;

    /// jpath's pattern for `match` (`full`, anchored) or `search`:
    /// `Ok(Some)` compiled, `Ok(None)` rejected by Go (the function then
    /// returns nothing), `Err` a pattern Go accepts that the crate cannot
    /// compile (larger or more deeply nested than its limits), naming why.
    /// `size_limit` replaces the crate's default compiled-size limit.
    pub(super) fn compile(
        pattern: &str,
        full: bool,
        size_limit: Option<usize>,
    ) -> Result<Option<Regex>, &'static str> {
        let wrapped = if full {
            format!("^(?:{pattern})$")
        } else {
            pattern.to_string()
        };
        let Ok(translated) = translate(&normalize_dots(&wrapped)) else {
            return Ok(None);
        };
        let mut builder = RegexBuilder::new(&translated);
        if let Some(limit) = size_limit {
            builder.size_limit(limit);
        }
        match builder.build() {
            Ok(regex) => Ok(Some(regex)),
            Err(_) => Err("larger or more deeply nested than this regex engine allows"),
        }
    }

    /// jpath reads every `.` outside a bracket (as it tracks brackets: `[`
    /// opens, `]` closes, a backslash escapes the next character) as
    /// `[^\r\n]`.
    fn normalize_dots(pattern: &str) -> String {
        let mut out = String::with_capacity(pattern.len());
        let mut escaped = false;
        let mut in_class = false;
        for c in pattern.chars() {
            match c {
                _ if escaped => {
                    out.push(c);
                    escaped = false;
                }
                '\\' => {
                    out.push(c);
                    escaped = true;
                }
                '[' => {
                    out.push(c);
                    in_class = true;
                }
                ']' => {
                    out.push(c);
                    in_class = false;
                }
                '.' if !in_class => out.push_str("[^\\r\\n]"),
                _ => out.push(c),
            }
        }
        out
    }

    const CATEGORIES: &[&str] = &[
        "C", "Cc", "Cf", "Co", "Cs", "L", "Ll", "Lm", "Lo", "Lt", "Lu", "M", "Mc", "Me", "Mn", "N", "Nd",
        "Nl", "No", "P", "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "S", "Sc", "Sk", "Sm", "So", "Z", "Zl",
        "Zp", "Zs",
    ];

    /// Go's `unicode.Scripts` (Unicode 15.0).
    const SCRIPTS: &[&str] = &[
        "Adlam",
        "Ahom",
        "Anatolian_Hieroglyphs",
        "Arabic",
        "Armenian",
        "Avestan",
        "Balinese",
        "Bamum",
        "Bassa_Vah",
        "Batak",
        "Bengali",
        "Bhaiksuki",
        "Bopomofo",
        "Brahmi",
        "Braille",
        "Buginese",
        "Buhid",
        "Canadian_Aboriginal",
        "Carian",
        "Caucasian_Albanian",
        "Chakma",
        "Cham",
        "Cherokee",
        "Chorasmian",
        "Common",
        "Coptic",
        "Cuneiform",
        "Cypriot",
        "Cypro_Minoan",
        "Cyrillic",
        "Deseret",
        "Devanagari",
        "Dives_Akuru",
        "Dogra",
        "Duployan",
        "Egyptian_Hieroglyphs",
        "Elbasan",
        "Elymaic",
        "Ethiopic",
        "Georgian",
        "Glagolitic",
        "Gothic",
        "Grantha",
        "Greek",
        "Gujarati",
        "Gunjala_Gondi",
        "Gurmukhi",
        "Han",
        "Hangul",
        "Hanifi_Rohingya",
        "Hanunoo",
        "Hatran",
        "Hebrew",
        "Hiragana",
        "Imperial_Aramaic",
        "Inherited",
        "Inscriptional_Pahlavi",
        "Inscriptional_Parthian",
        "Javanese",
        "Kaithi",
        "Kannada",
        "Katakana",
        "Kawi",
        "Kayah_Li",
        "Kharoshthi",
        "Khitan_Small_Script",
        "Khmer",
        "Khojki",
        "Khudawadi",
        "Lao",
        "Latin",
        "Lepcha",
        "Limbu",
        "Linear_A",
        "Linear_B",
        "Lisu",
        "Lycian",
        "Lydian",
        "Mahajani",
        "Makasar",
        "Malayalam",
        "Mandaic",
        "Manichaean",
        "Marchen",
        "Masaram_Gondi",
        "Medefaidrin",
        "Meetei_Mayek",
        "Mende_Kikakui",
        "Meroitic_Cursive",
        "Meroitic_Hieroglyphs",
        "Miao",
        "Modi",
        "Mongolian",
        "Mro",
        "Multani",
        "Myanmar",
        "Nabataean",
        "Nag_Mundari",
        "Nandinagari",
        "New_Tai_Lue",
        "Newa",
        "Nko",
        "Nushu",
        "Nyiakeng_Puachue_Hmong",
        "Ogham",
        "Ol_Chiki",
        "Old_Hungarian",
        "Old_Italic",
        "Old_North_Arabian",
        "Old_Permic",
        "Old_Persian",
        "Old_Sogdian",
        "Old_South_Arabian",
        "Old_Turkic",
        "Old_Uyghur",
        "Oriya",
        "Osage",
        "Osmanya",
        "Pahawh_Hmong",
        "Palmyrene",
        "Pau_Cin_Hau",
        "Phags_Pa",
        "Phoenician",
        "Psalter_Pahlavi",
        "Rejang",
        "Runic",
        "Samaritan",
        "Saurashtra",
        "Sharada",
        "Shavian",
        "Siddham",
        "SignWriting",
        "Sinhala",
        "Sogdian",
        "Sora_Sompeng",
        "Soyombo",
        "Sundanese",
        "Syloti_Nagri",
        "Syriac",
        "Tagalog",
        "Tagbanwa",
        "Tai_Le",
        "Tai_Tham",
        "Tai_Viet",
        "Takri",
        "Tamil",
        "Tangsa",
        "Tangut",
        "Telugu",
        "Thaana",
        "Thai",
        "Tibetan",
        "Tifinagh",
        "Tirhuta",
        "Toto",
        "Ugaritic",
        "Vai",
        "Vithkuqi",
        "Wancho",
        "Warang_Citi",
        "Yezidi",
        "Yi",
        "Zanabazar_Square",
    ];

    const POSIX: &[&str] = &[
        "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space",
        "upper", "word", "xdigit",
    ];

    /// Matches no character / every character.
    const NOTHING: &str = "[^\\x{0}-\\x{10FFFF}]";
    const ANYTHING: &str = "[\\x{0}-\\x{10FFFF}]";

    /// The characters not in the class `body` (see above for why not `[^`).
    fn negated(body: &str) -> String {
        format!("[\\x{{0}}-\\x{{10FFFF}}--[{body}]]")
    }

    #[derive(Clone, Copy)]
    struct Flags {
        fold: bool,
        multi_line: bool,
        dot_nl: bool,
        ungreedy: bool,
    }

    impl Flags {
        /// The whole flag state, as the crate's `(?flags` prefix.
        fn render(self) -> String {
            let mut on = String::new();
            let mut off = String::new();
            for (set, letter) in [
                (self.fold, 'i'),
                (self.multi_line, 'm'),
                (self.dot_nl, 's'),
                (self.ungreedy, 'U'),
            ] {
                if set {
                    on.push(letter);
                } else {
                    off.push(letter);
                }
            }
            if off.is_empty() {
                format!("(?{on}")
            } else {
                format!("(?{on}-{off}")
            }
        }
    }

    struct Frame {
        /// The flags to restore at the group's end.
        saved: Flags,
        /// Where the group starts in the output.
        start: usize,
        /// The largest product of counted repetitions inside the group's
        /// finished items (Go caps it at 1000).
        product: u32,
    }

    /// What a repetition operator would apply to, as Go's parse stack.
    #[derive(Clone, Copy)]
    enum Top {
        /// Start of the pattern, a group or an alternative.
        Start,
        /// An item written at `start..end` of the output (a flag group may
        /// follow it); `repeated` when it is itself a repetition.
        Item {
            product: u32,
            start: usize,
            end: usize,
            repeated: bool,
        },
    }

    struct Translator {
        s: Vec<char>,
        i: usize,
        out: String,
        flags: Flags,
        frames: Vec<Frame>,
        top: Top,
        /// The previous token was a repetition (Go rejects `a**`).
        after_repeat: bool,
    }

    fn translate(pattern: &str) -> TResult<String> {
        let flags = Flags {
            fold: false,
            multi_line: false,
            dot_nl: false,
            ungreedy: false,
        };
        let mut t = Translator {
            s: pattern.chars().collect(),
            i: 0,
            out: String::with_capacity(pattern.len() * 2),
            flags,
            frames: vec![Frame {
                saved: flags,
                start: 0,
                product: 1,
            }],
            top: Top::Start,
            after_repeat: false,
        };
        t.run()?;
        Ok(t.out)
    }

    fn push_char(out: &mut String, c: u32) {
        match char::from_u32(c) {
            Some(ch) if ch.is_ascii_alphanumeric() => out.push(ch),
            _ => out.push_str(&format!("\\x{{{c:X}}}")),
        }
    }

    /// A class range. A surrogate cannot be written as an end, and
    /// matches nothing in a string anyway: an end that is one moves inward.
    fn push_range(out: &mut String, lo: u32, hi: u32) {
        let lo = if (0xD800..=0xDFFF).contains(&lo) {
            0xE000
        } else {
            lo
        };
        let hi = if (0xD800..=0xDFFF).contains(&hi) {
            0xD7FF
        } else {
            hi
        };
        if lo <= hi {
            push_char(out, lo);
            if hi > lo {
                out.push('-');
                push_char(out, hi);
            }
        }
    }

    fn is_octal(c: char) -> bool {
        ('0'..='7').contains(&c)
    }

    impl Translator {
        fn peek(&self, at: usize) -> Option<char> {
            self.s.get(at).copied()
        }

        fn frame(&mut self) -> &mut Frame {
            let last = self.frames.len() - 1;
            &mut self.frames[last]
        }

        /// Fold the top item into its group's product.
        fn settle(&mut self) {
            if let Top::Item { product, .. } = self.top {
                let frame = self.frame();
                frame.product = frame.product.max(product);
            }
        }

        /// Write an item (literal, class, assertion): it becomes the top.
        fn item(&mut self, text: &str) {
            self.settle();
            let start = self.out.len();
            self.out.push_str(text);
            self.top = Top::Item {
                product: 1,
                start,
                end: self.out.len(),
                repeated: false,
            };
            self.after_repeat = false;
        }

        fn literal(&mut self, c: u32) {
            let mut text = String::new();
            if char::from_u32(c).is_some() {
                push_char(&mut text, c);
            } else {
                text.push_str(NOTHING);
            }
            self.item(&text);
        }

        fn run(&mut self) -> TResult<()> {
            while let Some(c) = self.peek(self.i) {
                match c {
                    '(' => self.open()?,
                    '|' => {
                        self.settle();
                        self.top = Top::Start;
                        self.after_repeat = false;
                        self.out.push('|');
                        self.i += 1;
                    }
                    ')' => self.close()?,
                    '^' | '$' | '.' => {
                        self.item(&c.to_string());
                        self.i += 1;
                    }
                    '[' => {
                        let class = self.class()?;
                        self.item(&class);
                    }
                    '*' | '+' | '?' => {
                        self.i += 1;
                        self.repeat(&c.to_string(), None)?;
                    }
                    '{' => match self.counted() {
                        Some((min, max, next)) => {
                            if min > 1000 || max.is_some_and(|m| m > 1000 || min > m) {
                                return Err(Invalid);
                            }
                            let text: String = self.s[self.i..next].iter().collect();
                            self.i = next;
                            self.repeat(&text, Some((min, max)))?;
                        }
                        None => {
                            self.literal('{' as u32);
                            self.i += 1;
                        }
                    },
                    '\\' => self.escape()?,
                    _ => {
                        self.literal(c as u32);
                        self.i += 1;
                    }
                }
            }
            if self.frames.len() > 1 {
                return Err(Invalid);
            }
            Ok(())
        }

        /// A repetition operator (the text after it is at `self.i`).
        fn repeat(&mut self, op: &str, counted: Option<(u32, Option<u32>)>) -> TResult<()> {
            let lazy = self.peek(self.i) == Some('?');
            if lazy {
                self.i += 1;
            }
            if self.after_repeat {
                return Err(Invalid);
            }
            let Top::Item {
                product,
                start,
                end,
                repeated,
            } = self.top
            else {
                return Err(Invalid);
            };
            let product = match counted {
                Some((_, Some(0))) => 1,
                Some((min, max)) => {
                    let factor = max.unwrap_or(min).max(1);
                    let product = factor.saturating_mul(product);
                    if (min >= 2 || max.is_some_and(|m| m >= 2)) && product > 1000 {
                        return Err(Invalid);
                    }
                    product
                }
                None => product,
            };
            let mut operator = op.to_string();
            if lazy {
                operator.push('?');
            }
            // Go repeats the top item even when a flag group follows it
            // (`a(?i)*`) or when it is a repetition itself (`a*\Q\E*`):
            // group it and move what follows it after the operator.
            let end = if end != self.out.len() || repeated {
                let tail = self.out.split_off(end);
                let item = self.out.split_off(start);
                self.out.push_str(&format!("(?:{item}){operator}"));
                let end = self.out.len();
                self.out.push_str(&tail);
                end
            } else {
                self.out.push_str(&operator);
                self.out.len()
            };
            self.top = Top::Item {
                product,
                start,
                end,
                repeated: true,
            };
            self.after_repeat = true;
            Ok(())
        }

        /// `{min}`, `{min,}` or `{min,max}` at `self.i`, as Go reads them:
        /// (min, max, index after `}`); `None` when it is not one (then
        /// `{` is a literal). A number too large reads as more than 1000.
        fn counted(&self) -> Option<(u32, Option<u32>, usize)> {
            let mut at = self.i + 1;
            let min = self.int(&mut at)?;
            let max = match self.peek(at)? {
                ',' => {
                    at += 1;
                    if self.peek(at)? == '}' {
                        None
                    } else {
                        Some(self.int(&mut at)?)
                    }
                }
                _ => Some(min),
            };
            if self.peek(at)? != '}' {
                return None;
            }
            Some((min, max, at + 1))
        }

        /// Decimal digits without a leading zero, capped past 1000.
        fn int(&self, at: &mut usize) -> Option<u32> {
            let start = *at;
            while self.peek(*at).is_some_and(|c| c.is_ascii_digit()) {
                *at += 1;
            }
            let digits = &self.s[start..*at];
            if digits.is_empty() || (digits.len() > 1 && digits[0] == '0') {
                return None;
            }
            let text: String = digits.iter().collect();
            Some(text.parse::<u32>().unwrap_or(u32::MAX).min(100_000))
        }

        fn open(&mut self) -> TResult<()> {
            if self.peek(self.i + 1) != Some('?') {
                self.i += 1;
                self.push_group(self.flags);
                self.out.push_str("(?:");
                return Ok(());
            }
            let rest = self.s.len() - self.i;
            let named_p =
                rest > 4 && self.peek(self.i + 2) == Some('P') && self.peek(self.i + 3) == Some('<');
            let named = rest > 3 && self.peek(self.i + 2) == Some('<');
            if named_p || named {
                let name_start = self.i + if named_p { 4 } else { 3 };
                let Some(end) = self.s[self.i..]
                    .iter()
                    .position(|&c| c == '>')
                    .map(|p| p + self.i)
                else {
                    return Err(Invalid);
                };
                let name = &self.s[name_start.min(end)..end];
                if name.is_empty() || !name.iter().all(|c| *c == '_' || c.is_ascii_alphanumeric()) {
                    return Err(Invalid);
                }
                self.i = end + 1;
                self.push_group(self.flags);
                self.out.push_str("(?:");
                return Ok(());
            }
            // Flags: (?flags) or (?flags:re).
            let mut at = self.i + 2;
            let mut flags = self.flags;
            let mut negate = false;
            let mut saw_flag = false;
            loop {
                let Some(c) = self.peek(at) else {
                    return Err(Invalid);
                };
                at += 1;
                match c {
                    'i' => flags.fold = !negate,
                    'm' => flags.multi_line = !negate,
                    's' => flags.dot_nl = !negate,
                    'U' => flags.ungreedy = !negate,
                    '-' if !negate => {
                        negate = true;
                        saw_flag = false;
                        continue;
                    }
                    ':' | ')' => {
                        if negate && !saw_flag {
                            return Err(Invalid);
                        }
                        self.i = at;
                        let prefix = flags.render();
                        if c == ':' {
                            self.push_group(self.flags);
                            self.out.push_str(&prefix);
                            self.out.push(':');
                        } else {
                            self.out.push_str(&prefix);
                            self.out.push(')');
                            self.after_repeat = false;
                        }
                        self.flags = flags;
                        return Ok(());
                    }
                    _ => return Err(Invalid),
                }
                saw_flag = true;
            }
        }

        fn push_group(&mut self, saved: Flags) {
            self.settle();
            let start = self.out.len();
            self.frames.push(Frame {
                saved,
                start,
                product: 1,
            });
            self.top = Top::Start;
            self.after_repeat = false;
        }

        fn close(&mut self) -> TResult<()> {
            if self.frames.len() < 2 {
                return Err(Invalid);
            }
            self.settle();
            let Some(frame) = self.frames.pop() else {
                return Err(Invalid);
            };
            self.flags = frame.saved;
            self.out.push(')');
            self.i += 1;
            self.top = Top::Item {
                product: frame.product,
                start: frame.start,
                end: self.out.len(),
                repeated: false,
            };
            self.after_repeat = false;
            Ok(())
        }

        /// A backslash outside brackets.
        fn escape(&mut self) -> TResult<()> {
            let assertion = match self.peek(self.i + 1) {
                Some('A') => Some("\\A"),
                Some('z') => Some("\\z"),
                Some('b') => Some("(?-u:\\b)"),
                Some('B') => Some("(?-u:\\B)"),
                Some('C') => return Err(Invalid),
                Some('Q') => {
                    self.i += 2;
                    self.after_repeat = false;
                    while let Some(c) = self.peek(self.i) {
                        if c == '\\' && self.peek(self.i + 1) == Some('E') {
                            self.i += 2;
                            break;
                        }
                        self.literal(c as u32);
                        self.i += 1;
                    }
                    return Ok(());
                }
                _ => None,
            };
            if let Some(text) = assertion {
                self.item(text);
                self.i += 2;
                return Ok(());
            }
            if let Some(class) = self.unicode_class(false)? {
                self.item(&class);
                return Ok(());
            }
            if let Some(class) = self.perl_class(false) {
                self.item(&class);
                self.i += 2;
                return Ok(());
            }
            let c = self.escaped_char()?;
            self.literal(c);
            Ok(())
        }

        /// `\d \D \s \S \w \W` at `self.i`: standalone, or as items inside
        /// a bracket (`in_class`).
        fn perl_class(&self, in_class: bool) -> Option<String> {
            if self.peek(self.i) != Some('\\') {
                return None;
            }
            let c = self.peek(self.i + 1)?;
            let body = match c.to_ascii_lowercase() {
                'd' => "0-9",
                's' => "\\x{9}\\x{A}\\x{C}\\x{D}\\x{20}",
                'w' => "0-9A-Za-z_",
                _ => return None,
            };
            Some(match (c.is_ascii_uppercase(), in_class) {
                (true, _) => negated(body),
                (false, true) => body.to_string(),
                (false, false) => format!("[{body}]"),
            })
        }

        /// `\pX`, `\p{Name}`, `\PX`, `\P{Name}`, `\p{^Name}` at `self.i`;
        /// `None` when there is none there. Inside brackets a positive
        /// class is written as items, a negative one as a nested class.
        fn unicode_class(&mut self, in_class: bool) -> TResult<Option<String>> {
            if self.peek(self.i) != Some('\\') || !matches!(self.peek(self.i + 1), Some('p' | 'P')) {
                return Ok(None);
            }
            let mut positive = self.peek(self.i + 1) == Some('p');
            let (name, next): (String, usize) = match self.peek(self.i + 2) {
                None => return Err(Invalid),
                Some('{') => {
                    let Some(end) = self.s[self.i..]
                        .iter()
                        .position(|&c| c == '}')
                        .map(|p| p + self.i)
                    else {
                        return Err(Invalid);
                    };
                    (self.s[self.i + 3..end].iter().collect(), end + 1)
                }
                Some(c) => (c.to_string(), self.i + 3),
            };
            let name = match name.strip_prefix('^') {
                Some(rest) => {
                    positive = !positive;
                    rest.to_string()
                }
                None => name,
            };
            let n = name.as_str();
            if n != "Any" && !CATEGORIES.contains(&n) && !SCRIPTS.contains(&n) {
                return Err(Invalid);
            }
            self.i = next;
            // Go's C is Cc|Cf|Co|Cs, without the unassigned code points the
            // crate's C has; surrogates never occur in a string.
            let body = match n {
                "C" => "\\p{Cc}\\p{Cf}\\p{Co}".to_string(),
                "Cs" => String::new(),
                _ => format!("\\p{{{n}}}"),
            };
            Ok(Some(match (positive, in_class) {
                // Inside brackets an empty positive class adds nothing.
                (true, true) => body,
                (true, false) if body.is_empty() => NOTHING.to_string(),
                (true, false) => format!("[{body}]"),
                (false, _) if body.is_empty() => ANYTHING.to_string(),
                (false, _) => negated(&body),
            }))
        }

        /// An escape standing for one character, at `self.i` (a backslash);
        /// moves past it.
        fn escaped_char(&mut self) -> TResult<u32> {
            let Some(c) = self.peek(self.i + 1) else {
                return Err(Invalid);
            };
            let mut at = self.i + 2;
            let value = match c {
                '1'..='7' if !self.peek(at).is_some_and(is_octal) => return Err(Invalid),
                '0'..='7' => {
                    let mut value = c as u32 - '0' as u32;
                    for _ in 1..3 {
                        match self.peek(at) {
                            Some(d) if is_octal(d) => {
                                value = value * 8 + (d as u32 - '0' as u32);
                                at += 1;
                            }
                            _ => break,
                        }
                    }
                    value
                }
                'x' => {
                    let first = self.peek(at).ok_or(Invalid)?;
                    at += 1;
                    if first == '{' {
                        let mut value = 0u32;
                        let mut digits = 0;
                        loop {
                            let d = self.peek(at).ok_or(Invalid)?;
                            at += 1;
                            if d == '}' {
                                break;
                            }
                            value = value * 16 + d.to_digit(16).ok_or(Invalid)?;
                            if value > 0x10FFFF {
                                return Err(Invalid);
                            }
                            digits += 1;
                        }
                        if digits == 0 {
                            return Err(Invalid);
                        }
                        value
                    } else {
                        let high = first.to_digit(16).ok_or(Invalid)?;
                        let low = self.peek(at).and_then(|d| d.to_digit(16)).ok_or(Invalid)?;
                        at += 1;
                        high * 16 + low
                    }
                }
                'a' => 7,
                'f' => 12,
                'n' => 10,
                'r' => 13,
                't' => 9,
                'v' => 11,
                _ if c.is_ascii() && !c.is_ascii_alphanumeric() => c as u32,
                _ => return Err(Invalid),
            };
            self.i = at;
            Ok(value)
        }

        /// A bracket expression at `self.i`; moves past it.
        fn class(&mut self) -> TResult<String> {
            self.i += 1;
            let negate = self.peek(self.i) == Some('^');
            if negate {
                self.i += 1;
            }
            let mut body = String::new();
            let mut first = true;
            loop {
                let Some(c) = self.peek(self.i) else {
                    return Err(Invalid);
                };
                if c == ']' && !first {
                    break;
                }
                first = false;
                if c == '[' && self.peek(self.i + 1) == Some(':') && self.i + 2 < self.s.len() {
                    let close = (self.i + 2..self.s.len().saturating_sub(1))
                        .find(|&k| self.s[k] == ':' && self.s[k + 1] == ']');
                    if let Some(k) = close {
                        let name: String = self.s[self.i + 2..k].iter().collect();
                        match name.strip_prefix('^') {
                            Some(bare) if POSIX.contains(&bare) => {
                                body.push_str(&negated(&format!("[:{bare}:]")))
                            }
                            None if POSIX.contains(&name.as_str()) => body.push_str(&format!("[:{name}:]")),
                            _ => return Err(Invalid),
                        }
                        self.i = k + 2;
                        continue;
                    }
                }
                if let Some(class) = self.unicode_class(true)? {
                    body.push_str(&class);
                    continue;
                }
                if let Some(class) = self.perl_class(true) {
                    body.push_str(&class);
                    self.i += 2;
                    continue;
                }
                let lo = self.class_char()?;
                let mut hi = lo;
                if self.peek(self.i) == Some('-') && self.peek(self.i + 1).is_some_and(|n| n != ']') {
                    self.i += 1;
                    hi = self.class_char()?;
                    if hi < lo {
                        return Err(Invalid);
                    }
                }
                push_range(&mut body, lo, hi);
            }
            self.i += 1;
            Ok(match (body.is_empty(), negate) {
                (true, false) => NOTHING.to_string(),
                (true, true) => ANYTHING.to_string(),
                (false, false) => format!("[{body}]"),
                (false, true) => negated(&body),
            })
        }

        fn class_char(&mut self) -> TResult<u32> {
            match self.peek(self.i) {
                None => Err(Invalid),
                Some('\\') => self.escaped_char(),
                Some(c) => {
                    self.i += 1;
                    Ok(c as u32)
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each case: source, document, and the matches in order, or `None`
    /// when the source must not compile.
    fn check(cases: &[(&str, Value, Option<Value>)]) {
        for (source, doc, expected) in cases {
            match (JPath::compile(source), expected) {
                (Ok(path), Some(expected)) => {
                    let got = Value::Array(path.try_query(doc).unwrap());
                    assert_eq!(&got, expected, "{source} over {doc}");
                    let matched = path.try_matches(doc).unwrap();
                    assert_eq!(matched, got != json!([]), "{source} over {doc}: try_matches");
                }
                (Err(_), None) => {}
                (Ok(_), None) => panic!("{source} compiled, but jpath rejects it"),
                (Err(e), Some(_)) => panic!("{source} did not compile: {e}"),
            }
        }
    }

    fn compile_error(source: &str) -> String {
        match JPath::compile(source) {
            Ok(_) => panic!("{source} compiled"),
            Err(e) => e,
        }
    }

    #[test]
    fn is_send_sync_clone() {
        fn assert_traits<T: Send + Sync + Clone + fmt::Debug>() {}
        assert_traits::<JPath>();
        let path = JPath::compile("$.a").unwrap();
        assert_eq!(path.clone().source(), "$.a");
        assert_eq!(format!("{path:?}"), r#"JPath("$.a")"#);
    }

    #[test]
    fn errors_name_what_and_where() {
        assert_eq!(compile_error("$..["), "unexpected token at column 5");
        assert_eq!(compile_error(""), "expected root selector '$' at column 1");
        assert_eq!(compile_error(" $"), "expected root selector '$' at column 1");
        assert_eq!(compile_error("$[?(@ == 01)]"), "invalid number at column 10");
        assert_eq!(compile_error("$.a == 'x"), "unterminated string at column 10");
        assert_eq!(compile_error("$[?@.a == 1"), "unexpected token at column 12");
        assert_eq!(compile_error("$[1:x]"), "invalid slice selector at column 5");
        assert_eq!(compile_error("$.a == 1 $"), "unexpected token at column 10");
        assert_eq!(
            compile_error("$[?length(@.a, 1) == 1]"),
            "invalid function arity: length at column 4"
        );
        assert_eq!(
            compile_error("$[?@ == nope(@)]"),
            "unknown function: nope at column 9"
        );
        assert_eq!(compile_error("'x'"), "literal must be compared at column 1");
        assert_eq!(
            compile_error("$..a == 1"),
            "comparison requires singular query at column 1"
        );
        assert_eq!(
            compile_error("length($.a)"),
            "function result must be compared: length at column 1"
        );
        assert_eq!(
            compile_error("$[?match(@, 'a') == true]"),
            "function result must not be compared: match/search at column 4"
        );
        assert_eq!(
            compile_error("value(1) == 1"),
            "function requires query argument: value requires query argument at column 7"
        );
    }

    #[test]
    fn source_length_is_limited() {
        let at_limit = format!("${}", ".a".repeat((MAX_SOURCE_BYTES - 1) / 2));
        assert!(at_limit.len() <= MAX_SOURCE_BYTES);
        assert!(JPath::compile(&at_limit).is_ok());
        let over = format!("${}", ".a".repeat(MAX_SOURCE_BYTES / 2));
        let error = compile_error(&over);
        assert!(error.contains("more than the limit of 65536"), "{error}");
    }

    #[test]
    fn nesting_is_limited() {
        let nested = |n: usize| format!("{}$.a{} == 1", "(".repeat(n), ")".repeat(n));
        assert_eq!(
            JPath::compile(&nested(MAX_NESTING))
                .unwrap()
                .query(&json!({"a": 1})),
            vec![json!(1)]
        );
        let error = compile_error(&nested(MAX_NESTING + 1));
        assert!(error.contains("nested more than 64 levels deep"), "{error}");
        let filters = |n: usize| format!("${}", "[?@".repeat(n)) + &"]".repeat(n);
        assert!(JPath::compile(&filters(MAX_NESTING)).is_ok());
        assert!(compile_error(&filters(MAX_NESTING + 1)).contains("nested more than"));
        assert!(compile_error(&format!("{}$.a", "!".repeat(MAX_NESTING + 1))).contains("nested more than"));
        let calls = |n: usize| format!("{}@{} == 1", "value(".repeat(n), ")".repeat(n));
        assert!(compile_error(&calls(MAX_NESTING + 1)).contains("nested more than"));
        // Long chains of operators do not nest.
        let chain = vec!["@.a == 1"; 5000].join(" || ");
        assert_eq!(
            JPath::compile(&chain)
                .unwrap()
                .query(&json!([{"a": 1}, {"a": 2}])),
            vec![json!({"a": 1})]
        );
        let compare = format!("@{}", " == true".repeat(5000));
        assert!(JPath::compile(&compare).is_ok());
    }

    /// A chain of `depth` single-member objects ending in `leaf`.
    fn deep(depth: usize, leaf: Value) -> Value {
        (0..depth).fold(leaf, |inner, _| json!({ "x": inner }))
    }

    #[test]
    fn deep_documents_walk_without_recursion() {
        // Documents reach scripts with at most 128 levels of nesting.
        let doc = deep(128, json!("bottom"));
        let path = JPath::compile("$..*").unwrap();
        let all = path.try_query(&doc).unwrap();
        assert_eq!(all.len(), 128);
        assert_eq!(all.last(), Some(&json!("bottom")));
        let leaves = JPath::compile("$..[?@ == 'bottom']")
            .unwrap()
            .try_query(&doc)
            .unwrap();
        assert_eq!(leaves, vec![json!("bottom")]);
        assert!(JPath::compile("$..x..x").unwrap().try_matches(&doc).unwrap());
    }

    #[test]
    fn work_is_limited() {
        // Each `..*` multiplies the nodes by the depth.
        let doc = deep(100, json!(1));
        let path = JPath::compile("$..*..*..*..*..*").unwrap();
        let error = path.try_query(&doc).unwrap_err();
        assert!(error.contains("exceeded its work limit"), "{error}");
        assert!(path.try_matches(&doc).is_err());
        assert!(path.query(&doc).is_empty());
        // So does copying: 20,000 copies of a 1,001-node array.
        let doc = json!({ "a": vec![0; 1000] });
        let copies = format!("$[{}]", vec!["*"; 20_000].join(","));
        let path = JPath::compile(&copies).unwrap();
        assert!(path.try_matches(&doc).unwrap());
        assert!(path.try_query(&doc).unwrap_err().contains("work limit"));
        // A query within bounds on a larger document.
        let doc = json!({ "items": (0..50_000).map(|i| json!({ "n": i })).collect::<Vec<_>>() });
        let found = JPath::compile("$.items[?@.n >= 49998].n")
            .unwrap()
            .try_query(&doc)
            .unwrap();
        assert_eq!(found, vec![json!(49998), json!(49999)]);
    }

    #[test]
    fn named_groups_as_go_1_22() {
        check(&[
            (
                r"$[?match(@, '(?P<n>a)b')]",
                json!(["ab", "b"]),
                Some(json!(["ab"])),
            ),
            (
                r"$[?match(@, '(?<n>a)b')]",
                json!(["ab", "b"]),
                Some(json!(["ab"])),
            ),
            (r"$[?match(@, '(?<n-x>a)b')]", json!(["ab", "b"]), Some(json!([]))),
            (r"$[?match(@, '(?<=a)b')]", json!(["ab", "b"]), Some(json!([]))),
        ]);
    }

    #[test]
    fn regexes_beyond_the_crate_fail_rather_than_answer_wrongly() {
        // Go compiles `\pL{1000}`; the regex crate's automaton would be too large.
        let error = compile_error(r"$[?match(@, '\\pL{1000}')]");
        assert!(
            error.starts_with("regex pattern not supported: larger"),
            "{error}"
        );
        assert!(error.ends_with("at column 13"), "{error}");
        let path = JPath::compile("$[?match(@.s, @.p)]").unwrap();
        let doc = json!([{ "s": "a", "p": "\\pL{1000}" }]);
        let error = path.try_query(&doc).unwrap_err();
        assert!(
            error.contains(r#"match() pattern "\\pL{1000}" from the document is not supported"#),
            "{error}"
        );
        assert!(path.query(&doc).is_empty());
    }

    #[test]
    fn document_regexes_are_bounded() {
        let path = JPath::compile("$[?search(@.s, @.p)]").unwrap();
        let patterns = |n: usize| {
            Value::Array(
                (0..n)
                    .map(|i| json!({ "s": "x1", "p": format!("x{i}") }))
                    .collect(),
            )
        };
        // The same pattern many times compiles once.
        let same = Value::Array(vec![json!({ "s": "x1", "p": "x1" }); 1000]);
        assert_eq!(path.try_query(&same).unwrap().len(), 1000);
        // "x1" contains x0? no; x1: yes; x10 to x31: no.
        assert_eq!(path.try_query(&patterns(MAX_DOCUMENT_REGEXES)).unwrap().len(), 1);
        let error = path.try_query(&patterns(MAX_DOCUMENT_REGEXES + 1)).unwrap_err();
        assert!(error.contains("more than 32 distinct regex patterns"), "{error}");
    }

    #[test]
    fn argyll_predicate_and_mapping_semantics() {
        // engine/internal/engine/script/jpath.go: a predicate holds when
        // something matched (null too); a mapping of one input queries that
        // input's value.
        let predicate = JPath::compile("$.flag").unwrap();
        assert!(predicate.try_matches(&json!({ "flag": null })).unwrap());
        assert!(predicate.try_matches(&json!({ "flag": false })).unwrap());
        assert!(!predicate.try_matches(&json!({})).unwrap());
        let top = JPath::compile(r#"$.kind == "email""#).unwrap();
        assert!(top.try_matches(&json!({ "kind": "email" })).unwrap());
        assert!(!top.try_matches(&json!({ "kind": "postal" })).unwrap());
    }

    /// Cases from argyll engine/internal/engine/script/jpath_test.go; expected answers are kode4food/jpath's.
    #[test]
    fn argyll_script_jpath_test() {
        check(&[
            // TestJPathCompileAndValidate / TestJPathExecuteScriptSingleMatch (single input: its value is the document)
            (r#"$.foo"#, json!({"foo": "bar"}), Some(json!(["bar"]))),
            // TestJPathCompileInvalid
            (r#"$..["#, json!({}), None),
            // TestJPathEvaluatePredicate: true
            (r#"$.flag"#, json!({"flag": true}), Some(json!([true]))),
            // TestJPathEvaluatePredicate: false
            (r#"$.flag"#, json!({}), Some(json!([]))),
            // TestJPathPredicateTopLevel: true
            (
                r#"$.product_info.name == "Professional Laptop""#,
                json!({"product_info": {"name": "Professional Laptop", "sku": "123"}}),
                Some(json!([{"name": "Professional Laptop", "sku": "123"}])),
            ),
            // TestJPathPredicateTopLevel: false
            (
                r#"$.product_info.name == "Professional Laptop""#,
                json!({"product_info": {"name": "Basic Laptop", "sku": "123"}}),
                Some(json!([])),
            ),
            // TestJPathEvaluatePredicateNullMatch
            (r#"$.flag"#, json!({"flag": null}), Some(json!([null]))),
            // TestJPathEvaluateMatch: true
            (
                r#"$.kind == "email""#,
                json!({"kind": "email"}),
                Some(json!(["email"])),
            ),
            // TestJPathEvaluateMatch: false
            (r#"$.kind == "email""#, json!({"kind": "postal"}), Some(json!([]))),
            // TestJPathEvaluateMatchNullMatch
            (r#"$.optional"#, json!({"optional": null}), Some(json!([null]))),
            // TestJPathExecuteScriptMultiMatch (single input: its value)
            (
                r#"$..book"#,
                json!({"books": [{"book": "A"}, {"book": "B"}]}),
                Some(json!(["A", "B"])),
            ),
            // TestJPathExecuteScriptNoMatch
            (r#"$.missing"#, json!({"foo": "bar"}), Some(json!([]))),
        ]);
    }

    /// Cases from argyll engine/internal/engine/mapper_test.go; expected answers are kode4food/jpath's.
    #[test]
    fn argyll_mapper_test() {
        check(&[
            // returns no value when jpath finds nothing
            (r#"$.missing"#, json!({"foo": "bar"}), Some(json!([]))),
            // returns slice when jpath finds many values
            (
                r#"$..book"#,
                json!({"payload": {"sections": [{"book": "A"}, {"book": "B"}]}}),
                Some(json!(["A", "B"])),
            ),
            // TestMapperJPathMarshaling
            (
                r#"$.args.inner"#,
                json!({"args": {"inner": "value"}, "named": {"namedKey": "namedValue"}, "plain": {"plainKey": "plainValue"}, "list": [{"listNamed": "x"}, {"listArgs": "y"}, 123], "scalar": 42}),
                Some(json!(["value"])),
            ),
            // TestMapperJPathMarshaling
            (
                r#"$.named.namedKey"#,
                json!({"args": {"inner": "value"}, "named": {"namedKey": "namedValue"}, "plain": {"plainKey": "plainValue"}, "list": [{"listNamed": "x"}, {"listArgs": "y"}, 123], "scalar": 42}),
                Some(json!(["namedValue"])),
            ),
            // TestMapperJPathMarshaling
            (
                r#"$.plain.plainKey"#,
                json!({"args": {"inner": "value"}, "named": {"namedKey": "namedValue"}, "plain": {"plainKey": "plainValue"}, "list": [{"listNamed": "x"}, {"listArgs": "y"}, 123], "scalar": 42}),
                Some(json!(["plainValue"])),
            ),
            // TestMapperJPathMarshaling
            (
                r#"$.list[0].listNamed"#,
                json!({"args": {"inner": "value"}, "named": {"namedKey": "namedValue"}, "plain": {"plainKey": "plainValue"}, "list": [{"listNamed": "x"}, {"listArgs": "y"}, 123], "scalar": 42}),
                Some(json!(["x"])),
            ),
            // TestMapperJPathMarshaling
            (
                r#"$.list[1].listArgs"#,
                json!({"args": {"inner": "value"}, "named": {"namedKey": "namedValue"}, "plain": {"plainKey": "plainValue"}, "list": [{"listNamed": "x"}, {"listArgs": "y"}, 123], "scalar": 42}),
                Some(json!(["y"])),
            ),
            // TestMapperJPathMarshaling
            (
                r#"$.list[2]"#,
                json!({"args": {"inner": "value"}, "named": {"namedKey": "namedValue"}, "plain": {"plainKey": "plainValue"}, "list": [{"listNamed": "x"}, {"listArgs": "y"}, 123], "scalar": 42}),
                Some(json!([123])),
            ),
            // TestMapperJPathMarshaling
            (
                r#"$.scalar"#,
                json!({"args": {"inner": "value"}, "named": {"namedKey": "namedValue"}, "plain": {"plainKey": "plainValue"}, "list": [{"listNamed": "x"}, {"listArgs": "y"}, 123], "scalar": 42}),
                Some(json!([42])),
            ),
            // TestMapInput: maps value with jpath
            (r#"$.key"#, json!({"key": "mapped"}), Some(json!(["mapped"]))),
            // TestMapInput: returns original on failed mapping
            (r#"$.missing"#, json!({"key": "value"}), Some(json!([]))),
        ]);
    }

    /// Cases from argyll engine tests; expected answers are kode4food/jpath's.
    #[test]
    fn argyll_engine_tests() {
        check(&[
            // step-start_test.go TestJPathNullMatch (predicate over the inputs)
            (r#"$.flag"#, json!({"flag": null}), Some(json!([null]))),
            // step-stop_test.go output mapping
            (
                r#"$.payload.value"#,
                json!({"payload": {"value": 7}}),
                Some(json!([7])),
            ),
            // work-items_test.go descendant output mapping
            (
                r#"$..book"#,
                json!({"payload": {"sections": [{"book": "A"}, {"book": "B"}]}}),
                Some(json!(["A", "B"])),
            ),
            // policy/match_test.go required.match
            (r#"$.kind"#, json!({"kind": "email"}), Some(json!(["email"]))),
            // pkg/api/attribute_test.go: invalid mapping syntax
            (r#"$[?"#, json!({}), None),
            // pkg/api/attribute_test.go
            (r#"$.data.value"#, json!({"data": {"value": 1}}), Some(json!([1]))),
            // pkg/api/step_test.go
            (r#"$.input"#, json!({"input": "x"}), Some(json!(["x"]))),
        ]);
    }

    /// Cases from argyll docs and examples; expected answers are kode4food/jpath's.
    #[test]
    fn argyll_docs_and_examples() {
        check(&[
            // docs/guides/predicates.md (false still matches)
            (
                r#"$.customer.active"#,
                json!({"customer": {"active": false}}),
                Some(json!([false])),
            ),
            // docs/guides/predicates.md
            (
                r#"$.items[?(@.status=="ready")]"#,
                json!({"items": [{"status": "ready", "id": 1}, {"status": "new", "id": 2}]}),
                Some(json!([{"id": 1, "status": "ready"}])),
            ),
            // docs/concepts/steps.md
            (
                r#"$.data.order.total"#,
                json!({"data": {"order": {"total": 99.5}}}),
                Some(json!([99.5])),
            ),
            // docs/concepts/steps.md
            (r#"$.user.id"#, json!({"user": {"id": "u1"}}), Some(json!(["u1"]))),
            // docs/api/engine-api.yaml, mcp guidance
            (
                r#"$.response.data"#,
                json!({"response": {"data": {"a": 1}}}),
                Some(json!([{"a": 1}])),
            ),
            // docs/api/engine-api.yaml
            (
                r#"$.user.email"#,
                json!({"user": {"email": "a@b.c"}}),
                Some(json!(["a@b.c"])),
            ),
            // docs/api/engine-api.yaml
            (
                r#"$.data[0].value"#,
                json!({"data": [{"value": 3}, {"value": 4}]}),
                Some(json!([3])),
            ),
            // web i18n mapping placeholder
            (r#"$.value"#, json!({"value": 1}), Some(json!([1]))),
            // sdks/python tests
            (
                r#"$.product_type"#,
                json!({"product_type": "book"}),
                Some(json!(["book"])),
            ),
        ]);
    }

    /// Cases from kode4food/jpath jpath_test.go; expected answers are kode4food/jpath's.
    #[test]
    fn jpath_top_level_tests() {
        check(&[
            // TestTopLevelParseCompileQuery
            (r#"$[1]"#, json!([10, 20, 30]), Some(json!([20]))),
            // TestTopLevelWrappers
            (r#"$[0]"#, json!([9]), Some(json!([9]))),
            // TestTopLevelWrapperPanics: empty
            (r#""#, json!(null), None),
            // TestTopLevelFilterShorthand: explicit
            (
                r#"$[?($.product_info.name == "Professional Laptop")]"#,
                json!({"product_info": {"name": "Professional Laptop"}}),
                Some(json!([{"name": "Professional Laptop"}])),
            ),
            // TestTopLevelFilterShorthand: shorthand, same answer
            (
                r#"$.product_info.name == "Professional Laptop""#,
                json!({"product_info": {"name": "Professional Laptop"}}),
                Some(json!([{"name": "Professional Laptop"}])),
            ),
            // TestTopLevelFilterShorthand: explicit
            (
                r#"$[?($.product_info.name == "Professional Laptop")]"#,
                json!({"product_info": {"name": "Budget Laptop"}}),
                Some(json!([])),
            ),
            // TestTopLevelFilterShorthand: shorthand, same answer
            (
                r#"$.product_info.name == "Professional Laptop""#,
                json!({"product_info": {"name": "Budget Laptop"}}),
                Some(json!([])),
            ),
            // TestTopLevelFilterShorthandCurrentNode: explicit
            (
                r#"$[?@.name == "Professional Laptop"]"#,
                json!([{"name": "Professional Laptop"}, {"name": "Budget Laptop"}]),
                Some(json!([{"name": "Professional Laptop"}])),
            ),
            // TestTopLevelFilterShorthandCurrentNode: shorthand
            (
                r#"@.name == "Professional Laptop""#,
                json!([{"name": "Professional Laptop"}, {"name": "Budget Laptop"}]),
                Some(json!([{"name": "Professional Laptop"}])),
            ),
            // TestTopLevelFilterShorthandKeepsPathGrammar
            (
                r#"$.product_info.name"#,
                json!({"product_info": {"name": "Professional Laptop"}}),
                Some(json!(["Professional Laptop"])),
            ),
            // TestBadNumberError
            (r#"$[?(@ == 01)]"#, json!([1]), None),
        ]);
    }

    /// Cases from kode4food/jpath eval_test.go; expected answers are kode4food/jpath's.
    #[test]
    fn jpath_eval_tests() {
        check(&[
            // TestFilterPathValues
            (
                r#"$.items[?@.x[0] == 1]"#,
                json!({"x": [10, 20], "items": [{"x": [1, 2]}, {"x": [3, 4]}]}),
                Some(json!([{"x": [1, 2]}])),
            ),
            // TestFilterPathValues
            (
                r#"$.items[?$.x[0] == 10]"#,
                json!({"x": [10, 20], "items": [{"x": [1, 2]}, {"x": [3, 4]}]}),
                Some(json!([{"x": [1, 2]}, {"x": [3, 4]}])),
            ),
            // TestFilterBuiltinFunctions
            (
                r#"$[?length(@.name) == 4]"#,
                json!([{"name": "abcd", "vals": [1, 2]}, {"name": "xy", "vals": [9]}]),
                Some(json!([{"name": "abcd", "vals": [1, 2]}])),
            ),
            // TestFilterBuiltinFunctions
            (
                r#"$[?count(@.vals[*]) == 2]"#,
                json!([{"name": "abcd", "vals": [1, 2]}, {"name": "xy", "vals": [9]}]),
                Some(json!([{"name": "abcd", "vals": [1, 2]}])),
            ),
            // TestFilterBuiltinFunctions
            (
                r#"$[?value(@.name) == 'xy']"#,
                json!([{"name": "abcd", "vals": [1, 2]}, {"name": "xy", "vals": [9]}]),
                Some(json!([{"name": "xy", "vals": [9]}])),
            ),
            // TestFilterCompareOperators
            (r#"$[?@ < 2]"#, json!([1, 2, 3]), Some(json!([1]))),
            // TestFilterCompareOperators
            (r#"$[?@ <= 2]"#, json!([1, 2, 3]), Some(json!([1, 2]))),
            // TestFilterCompareOperators
            (r#"$[?@ > 2]"#, json!([1, 2, 3]), Some(json!([3]))),
            // TestFilterCompareOperators
            (r#"$[?@ >= 2]"#, json!([1, 2, 3]), Some(json!([2, 3]))),
            // TestFilterCompareOperators
            (r#"$[?@ != 2]"#, json!([1, 2, 3]), Some(json!([1, 3]))),
            // TestFilterMatchSearchEdgeCases
            (
                r#"$[?match(@.left[*], 'aa')]"#,
                json!([{"left": ["aa", "bb"], "right": ["xx", "yy"]}]),
                Some(json!([])),
            ),
            // TestFilterMatchSearchEdgeCases
            (
                r#"$[?match('aa', @.right[*])]"#,
                json!([{"left": ["aa", "bb"], "right": ["xx", "yy"]}]),
                Some(json!([])),
            ),
            // TestFilterMatchSearchEdgeCases: invalid regex is nothing
            (
                r#"$[?search('abc', '[')]"#,
                json!([{"left": ["aa", "bb"], "right": ["xx", "yy"]}]),
                Some(json!([])),
            ),
        ]);
    }

    /// Cases from kode4food/jpath slice_test.go, path_test.go, registry_test.go, validate_test.go; expected answers are kode4food/jpath's.
    #[test]
    fn jpath_slice_path_registry_validate_tests() {
        check(&[
            // TestPathSliceBounds / TestRegistrySliceSpecializations
            (r#"$[-9:2]"#, json!([0, 1, 2, 3, 4]), Some(json!([0, 1]))),
            // TestPathSliceBounds / TestRegistrySliceSpecializations
            (r#"$[9:]"#, json!([0, 1, 2, 3, 4]), Some(json!([]))),
            // TestPathSliceBounds / TestRegistrySliceSpecializations
            (r#"$[2:9]"#, json!([0, 1, 2, 3, 4]), Some(json!([2, 3, 4]))),
            // TestPathSliceBounds / TestRegistrySliceSpecializations
            (r#"$[:-9]"#, json!([0, 1, 2, 3, 4]), Some(json!([]))),
            // TestPathSliceBounds / TestRegistrySliceSpecializations
            (r#"$[-2::-1]"#, json!([0, 1, 2, 3, 4]), Some(json!([3, 2, 1, 0]))),
            // TestPathSliceBounds / TestRegistrySliceSpecializations
            (r#"$[-9::-1]"#, json!([0, 1, 2, 3, 4]), Some(json!([]))),
            // TestPathSliceBounds / TestRegistrySliceSpecializations
            (r#"$[:9:-1]"#, json!([0, 1, 2, 3, 4]), Some(json!([]))),
            // TestPathSliceBounds / TestRegistrySliceSpecializations
            (r#"$[9:1:-1]"#, json!([0, 1, 2, 3, 4]), Some(json!([4, 3, 2]))),
            // TestPathSliceBounds / TestRegistrySliceSpecializations
            (r#"$[:-1]"#, json!([0, 1, 2, 3, 4]), Some(json!([0, 1, 2, 3]))),
            // TestPathSliceBounds / TestRegistrySliceSpecializations
            (r#"$[:-3:-1]"#, json!([0, 1, 2, 3, 4]), Some(json!([4, 3]))),
            // TestPathSelectorMisses
            (r#"$.name"#, json!(1), Some(json!([]))),
            // TestPathSelectorMisses
            (r#"$.name"#, json!({}), Some(json!([]))),
            // TestPathSelectorMisses
            (r#"$[0]"#, json!({}), Some(json!([]))),
            // TestPathSelectorMisses
            (r#"$[*]"#, json!({}), Some(json!([]))),
            // TestPathSelectorMisses
            (r#"$[?@ == 1]"#, json!(1), Some(json!([]))),
            // TestFunctionValidationPaths: unknown function
            (r#"$[?missing()]"#, json!([1]), None),
            // TestValueRequiresQueryArgument
            (r#"$[?value(1) == 1]"#, json!([1]), None),
            // TestRegistryRegisterFunctionArityValidation (arity of a built-in)
            (r#"$[?length(@.name, 1) == 1]"#, json!([1]), None),
        ]);
    }

    /// Cases from jpath extensions (checked against kode4food/jpath); expected answers are kode4food/jpath's.
    #[test]
    fn jpath_extensions() {
        check(&[
            // object members come in key order, not document order
            (
                r#"$.*"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2, {"y": 25, "z": 26}])),
            ),
            // descendants: each node before its children, members by key
            (
                r#"$..*"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2, {"y": 25, "z": 26}, 25, 26])),
            ),
            // filters over an object visit members by key
            (
                r#"$[?@ > 0]"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2])),
            ),
            // a true top-level comparison matches every child of the root
            (
                r#"$.b == 2"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2, {"y": 25, "z": 26}])),
            ),
            // a false one matches nothing
            (
                r#"$.b == 3"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([])),
            ),
            // a true comparison over a document without children matches nothing
            (r#"1 == 1"#, json!({}), Some(json!([]))),
            // nor over a scalar document
            (r#"1 == 1"#, json!(5), Some(json!([]))),
            // an explicit null child counts
            (r#"1 == 1"#, json!([null]), Some(json!([null]))),
            // a parenthesised absolute query is the query
            (
                r#"($.c)"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([{"y": 25, "z": 26}])),
            ),
            (
                r#"(($.c.y))"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([25])),
            ),
            (
                r#"$"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([{"a": 1, "b": 2, "c": {"y": 25, "z": 26}}])),
            ),
            // a top-level relative query: children having y
            (r#"@.y"#, json!([{"y": 1}, {"x": 2}]), Some(json!([{"y": 1}]))),
            (r#"@ > 1"#, json!([1, 2, 3]), Some(json!([2, 3]))),
            // negation at the top level
            (
                r#"!$.missing"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2, {"y": 25, "z": 26}])),
            ),
            (
                r#"$.a && $.missing"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([])),
            ),
            (
                r#"$.a || $.missing"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2, {"y": 25, "z": 26}])),
            ),
            (
                r#"$.a == 1 && $.b == 2"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2, {"y": 25, "z": 26}])),
            ),
            // chained comparison: (a == 1) == true
            (
                r#"$.a == 1 == true"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2, {"y": 25, "z": 26}])),
            ),
            (
                r#"$.a == 1 == false"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([])),
            ),
            (
                r#"1 < 2 < 3"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([])),
            ),
            // a negated comparison operand: (!$.a) == false
            (
                r#"!$.a == false"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2, {"y": 25, "z": 26}])),
            ),
            // a parenthesised comparison operand
            (
                r#"(@) == 2"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([2])),
            ),
            // two empty node lists are equal
            (
                r#"$.missing == $.other"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2, {"y": 25, "z": 26}])),
            ),
            (
                r#"$.missing != 1"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2, {"y": 25, "z": 26}])),
            ),
            // an empty node list is not null
            (
                r#"$.missing == null"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([])),
            ),
            // numbers compare as floats
            (
                r#"$.a == 1.0"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2, {"y": 25, "z": 26}])),
            ),
            (
                r#"$.a == 1e0"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2, {"y": 25, "z": 26}])),
            ),
            (
                r#"length($.c) == 2"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2, {"y": 25, "z": 26}])),
            ),
            (
                r#"count($.*) == 3"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2, {"y": 25, "z": 26}])),
            ),
            (
                r#"value($.a) == 1"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1, 2, {"y": 25, "z": 26}])),
            ),
            // match() at the top level
            (
                r#"match($.s, 'a.c')"#,
                json!({"s": "abc", "t": "a\nc"}),
                Some(json!(["abc", "a\nc"])),
            ),
            // '.' never matches a line break
            (
                r#"search($.t, 'a.c')"#,
                json!({"s": "abc", "t": "a\nc"}),
                Some(json!([])),
            ),
            // validation: a bare literal must be compared
            (r#"1"#, json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}), None),
            (r#"'x'"#, json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}), None),
            // validation: length() must be compared
            (
                r#"length($.c)"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                None,
            ),
            // validation: comparisons need singular queries
            (
                r#"$..a == 1"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                None,
            ),
            (
                r#"$.c[*] == 1"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                None,
            ),
            // validation: length() needs a singular query
            (
                r#"length($..a) == 1"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                None,
            ),
            // validation: count() needs a query
            (
                r#"count(1) == 1"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                None,
            ),
            // validation: match() must not be compared
            (
                r#"match($.a, 'x') == true"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                None,
            ),
            // validation: arity
            (
                r#"match($.a)"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                None,
            ),
            // unknown function
            (
                r#"nope($.a)"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                None,
            ),
            // no space before a call's parenthesis
            (
                r#"length ($.a) == 1"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                None,
            ),
            // a nested filter
            (
                r#"$.items[?@.tags[?@ == 'z']]"#,
                json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
                Some(json!([{"n": 2, "tags": ["z"]}])),
            ),
            // nested filters are not validated: a bare literal is true...
            (
                r#"$.items[?@.tags[?1]]"#,
                json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
                Some(json!([{"n": 1, "tags": ["x", "y"]}, {"n": 2, "tags": ["z"]}])),
            ),
            // ...unless null or false
            (
                r#"$.items[?@.tags[?null]]"#,
                json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
                Some(json!([])),
            ),
            // an uncompared function result is true unless nothing
            (
                r#"$.items[?@.tags[?length(@)]]"#,
                json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
                Some(json!([{"n": 1, "tags": ["x", "y"]}, {"n": 2, "tags": ["z"]}])),
            ),
            // a non-singular comparison holds when any node compares
            (
                r#"$.items[?@[?@..* == 'y']]"#,
                json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
                Some(json!([{"n": 1, "tags": ["x", "y"]}])),
            ),
            // $ inside a relative query is where that query started (here each item)
            (
                r#"$.items[?@.tags[?$ == 'z']]"#,
                json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
                Some(json!([])),
            ),
            (
                r#"$.items[?@.tags[?$.want == 'z']]"#,
                json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
                Some(json!([])),
            ),
            // $ in an outermost filter is the document
            (
                r#"$.items[?$.n == @.n]"#,
                json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
                Some(json!([{"n": 2, "tags": ["z"]}])),
            ),
            // chained comparisons in brackets
            (
                r#"$.items[?@.n > 1 == true]"#,
                json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
                Some(json!([{"n": 2, "tags": ["z"]}, {"n": 3, "tags": []}])),
            ),
            // parenthesised operands in brackets
            (
                r#"$.items[?(@.n) > 1]"#,
                json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
                Some(json!([{"n": 2, "tags": ["z"]}, {"n": 3, "tags": []}])),
            ),
            (
                r#"$.items[?!@.n == false]"#,
                json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
                Some(json!([{"n": 1, "tags": ["x", "y"]}, {"n": 2, "tags": ["z"]}, {"n": 3, "tags": []}])),
            ),
            (
                r#"$.items[?!(@.n > 1)]"#,
                json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
                Some(json!([{"n": 1, "tags": ["x", "y"]}])),
            ),
            // a number literal too large is an error
            (r#"$[?@ == 1e400]"#, json!([1]), None),
            // -0 is a number literal...
            (r#"$[?@ == -0]"#, json!([0]), Some(json!([0]))),
            // ...but not an index
            (r#"$[-0]"#, json!([0]), None),
            // indexes are at most 2^53 - 1
            (r#"$[9007199254740992]"#, json!([0]), None),
            // no leading or trailing white space
            (r#" $.a"#, json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}), None),
            (r#"$.a "#, json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}), None),
            // white space before a segment
            (
                r#"$ .a"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                Some(json!([1])),
            ),
            (r#"$[ 0 , 1 ]"#, json!([5, 6]), Some(json!([5, 6]))),
            (
                r#"$.a $.b"#,
                json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
                None,
            ),
            // string escapes
            (r#"$['\u00e9']"#, json!({"é": 1}), Some(json!([1]))),
            // non-ASCII member names
            (r#"$.é"#, json!({"é": 1}), Some(json!([1]))),
            (
                r#"$[?@.n == 'a"b']"#,
                json!([{"n": "a\"b"}]),
                Some(json!([{"n": "a\"b"}])),
            ),
            // \' is not an escape in a double-quoted string
            (r#"$[?@ == "\'"]"#, json!(["'"]), None),
            (r#"$[?true]"#, json!([1]), None),
            (r#"$[?true == true]"#, json!([1, 2]), Some(json!([1, 2]))),
            // a zero step selects nothing
            (r#"$[::0]"#, json!([1, 2]), Some(json!([]))),
            (r#"$[::-1]"#, json!([1, 2, 3]), Some(json!([3, 2, 1]))),
            // a filter over a scalar selects nothing
            (r#"$.a[?@ > 1]"#, json!({"a": 5}), Some(json!([]))),
        ]);
    }

    /// Cases from Go regular expressions in match() and search(); expected answers are kode4food/jpath's.
    #[test]
    fn go_regular_expressions() {
        check(&[
            // \d is ASCII only
            (
                r#"$[?match(@, 'a\\d')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["a1"])),
            ),
            // \w is ASCII only
            (
                r#"$[?match(@, '\\w')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["k", "K", "_"])),
            ),
            // \s is ASCII only
            (
                r#"$[?match(@, 'x\\sy')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["x y"])),
            ),
            // \b is an ASCII word boundary
            (
                r#"$[?search(@, '\\bé')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!([])),
            ),
            // case folding includes the Kelvin sign
            (
                r#"$[?match(@, '(?i)k')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["k", "K", "\u{212a}"])),
            ),
            // (?i)\W excludes what folds to a word character
            (
                r#"$[?match(@, '(?i)\\W')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["é", "Ω"])),
            ),
            // Go's script names
            (
                r#"$[?match(@, '\\p{Greek}')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["Ω"])),
            ),
            // exactly: Go rejects other spellings (nothing)
            (
                r#"$[?match(@, '\\p{greek}')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!([])),
            ),
            // octal, hex, \Q...\E
            (
                r#"$[?match(@, '\\141\\x62|\\x{61}\\Q.\\E.')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["ab"])),
            ),
            // { that starts no repetition is a literal
            (
                r#"$[?match(@, '{2.')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["{2}"])),
            ),
            // a repetition of nothing: Go rejects the pattern
            (
                r#"$[?match(@, '{2}')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!([])),
            ),
            (
                r#"$[?match(@, 'a{2}')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["aa"])),
            ),
            // counts over 1000: Go rejects the pattern
            (
                r#"$[?match(@, 'a{1001}')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!([])),
            ),
            // stacked repetitions: rejected
            (
                r#"$[?match(@, 'a**')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!([])),
            ),
            // a repetition after a flag group repeats the item before it
            (
                r#"$[?match(@, 'a(?i)*')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["aa"])),
            ),
            // [ inside brackets is a character
            (
                r#"$[?match(@, '[a[<]b')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["ab"])),
            ),
            // && inside brackets is two characters
            (
                r#"$[?match(@, '[a&&b]b')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["ab"])),
            ),
            // \< is a literal <
            (
                r#"$[?match(@, 'a\\<b')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["a<b"])),
            ),
            // a negated class
            (
                r#"$[?match(@, '[^\\x{0}-\\x{7f}]!?')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["\u{212a}", "é", "Ω", "é!"])),
            ),
            // . is [^\r\n]
            (
                r#"$[?match(@, 'a.c')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["a.c"])),
            ),
            // match() anchors as ^(?:pattern)$
            (
                r#"$[?match(@, 'a)|(a')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["a1", "a\u{661}", "a.c", "a\nc", "aa", "ab", "a<b"])),
            ),
            // POSIX classes
            (
                r#"$[?search(@, '[[:upper:]]')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!(["K"])),
            ),
            (
                r#"$[?search(@, '\\pL\\PL')]"#,
                json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                    "{2}", "aa", "ab", "a<b", "é!"
                ]),
                Some(json!([
                    "a1", "a\u{661}", "x y", "x\u{a0}y", "a.c", "a\nc", "a<b", "é!"
                ])),
            ),
            // patterns read from the document
            (
                r#"$[?match(@.s, @.p)]"#,
                json!([{"s": "ab", "p": "a."}, {"s": "ab", "p": "a("}, {"s": "a1", "p": "a\\d"}, {"s": 1, "p": "1"}]),
                Some(json!([{"p": "a.", "s": "ab"}, {"p": "a\\d", "s": "a1"}])),
            ),
            // a negation the regex crate gets wrong as [^...]
            (
                r#"$[?match(@, '[^\\p{Cn}\\p{Co}]')]"#,
                json!(["\u{e000}", "\u{d7ff}", "a"]),
                Some(json!([])),
            ),
        ]);
    }
}
