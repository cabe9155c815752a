//! The cost bounds of a query (see the module docs of `jpath`): the work
//! budget, and the regex patterns read from the document.

use std::collections::HashMap;

use regex::Regex;
use serde_json::Value;

use super::goregex;

/// Work any query may spend, whatever the document's size.
const WORK_FLOOR: u64 = 1_000_000;

/// Further work a query may spend for each node of its document.
const WORK_PER_DOC_NODE: u64 = 64;

/// Distinct regex patterns read from the document that one query may
/// compile (a pattern can take the `regex` crate milliseconds to compile).
const MAX_DOCUMENT_REGEXES: usize = 32;

/// Work charged for compiling a regex read from the document.
const REGEX_COMPILE_WORK: u64 = 10_000;

/// The `regex` crate's compiled-size limit for patterns read from the
/// document (bytes; written patterns get the crate's default, 10 MiB):
/// rejecting a pattern too large takes time in proportion to this.
const DOCUMENT_REGEX_SIZE_LIMIT: usize = 2 << 20;

/// Why a query stopped.
pub(super) enum Abort {
    /// The work limit ran out.
    Exhausted,
    /// A regex pattern read from the document could not be used.
    Regex(String),
}

pub(super) struct Cx {
    remaining: u64,
    limit: u64,
    regexes: HashMap<(bool, String), Option<Regex>>,
}

impl Cx {
    pub(super) fn new(doc: &Value) -> Cx {
        let limit = WORK_FLOOR.saturating_add(WORK_PER_DOC_NODE.saturating_mul(count_nodes(doc)));
        Cx {
            remaining: limit,
            limit,
            regexes: HashMap::new(),
        }
    }

    pub(super) fn charge(&mut self, work: u64) -> Result<(), Abort> {
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

    pub(super) fn message(&self, abort: Abort) -> String {
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
    pub(super) fn regex(&mut self, pattern: &str, full: bool) -> Result<Option<Regex>, Abort> {
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
pub(super) fn count_nodes(value: &Value) -> u64 {
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::{json, Value};

    use super::super::test_support::{compile_error, deep};
    use super::super::JPath;
    use super::MAX_DOCUMENT_REGEXES;

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
}
