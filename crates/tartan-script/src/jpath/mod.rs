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
//!   `regex` crate's syntax with the same meaning (submodule `goregex`).
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
//! against jpath's own tests and Argyll's (tests/jpath_*.rs).
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
//!
//! # Layout
//!
//! - `ast`: the syntax tree a source compiles to;
//! - `parser`: the grammar (`parser::lexer` reads characters, numbers,
//!   names and strings; `parser::validate` applies jpath's type rules);
//! - `eval`: applying a path to a document (`eval::values` holds the
//!   comparison semantics, `eval::functions` the five functions);
//! - `limits`: the work budget and the cache of document regexes;
//! - `goregex`: Go regular expressions, translated for the `regex` crate.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

mod ast;
mod eval;
mod goregex;
mod limits;
mod parser;
#[cfg(test)]
mod test_support;

use ast::Path;
use eval::eval_path;
use limits::{count_nodes, Cx};

/// The longest source accepted, in bytes.
pub const MAX_SOURCE_BYTES: usize = 64 * 1024;

/// How deep brackets, parentheses, `!` and function calls may nest.
pub const MAX_NESTING: usize = 64;

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
        let path = parser::parse(source)?;
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::test_support::compile_error;
    use super::*;

    #[test]
    fn is_send_sync_clone() {
        fn assert_traits<T: Send + Sync + Clone + fmt::Debug>() {}
        assert_traits::<JPath>();
        let path = JPath::compile("$.a").unwrap();
        assert_eq!(path.clone().source(), "$.a");
        assert_eq!(format!("{path:?}"), r#"JPath("$.a")"#);
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
}
