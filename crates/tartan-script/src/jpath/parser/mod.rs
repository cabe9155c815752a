//! The grammar of jpath: a source is read as a filter expression, and
//! becomes a path (see the module docs of `jpath` for what is read how).

use std::fmt;

use serde_json::Value;

use super::ast::{CmpOp, Expr, ExprKind, Func, Path, Pattern, Segment, Selector};
use super::goregex;
use validate::validate_path;

mod lexer;
mod validate;

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

/// Parse `source` into the path it means, or say what is wrong and where.
pub(super) fn parse(source: &str) -> Result<Path, String> {
    Parser::new(source).parse_top().map_err(|e| e.to_string())
}

impl Parser {
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::super::test_support::compile_error;
    use super::super::{JPath, MAX_NESTING};

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
}
