//! Ale's reader: the lexical rules of Ale's `lang/syntax.go` and the list,
//! vector and object structure of its parser, with positions for errors.

use crate::CompileError;

/// Deeper nesting is refused rather than risking the stack.
pub const MAX_NESTING: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefix {
    Quote,
    SyntaxQuote,
    Unquote,
    Splice,
}

#[derive(Clone, Debug)]
pub enum Datum {
    Int(i64),
    Float(f64),
    Ratio(i64, i64),
    Str(String),
    Keyword(String),
    Symbol(String),
    Bool(bool),
    /// `()` is the empty list, Ale's null.
    List(Vec<Form>),
    /// `(a b . c)`: at least one element before the dot.
    Dotted(Vec<Form>, Box<Form>),
    Vector(Vec<Form>),
    /// Pairs in source order, duplicates (first wins) already removed.
    Object(Vec<(Form, Form)>),
    Prefixed(Prefix, Box<Form>),
}

#[derive(Clone, Debug)]
pub struct Form {
    pub datum: Datum,
    pub pos: Pos,
}

pub fn err<T>(pos: Pos, message: impl Into<String>) -> Result<T, CompileError> {
    Err(CompileError {
        message: message.into(),
        line: pos.line,
        column: pos.column,
    })
}

#[derive(Debug)]
enum Tok {
    Open,
    Close,
    VecOpen,
    VecClose,
    ObjOpen,
    ObjClose,
    Dot,
    Prefix(Prefix),
    Atom(Datum),
}

struct Lexer<'a> {
    src: &'a str,
    at: usize,
    line: usize,
    column: usize,
}

fn is_structure(c: char) -> bool {
    matches!(
        c,
        '(' | ')' | '{' | '}' | '[' | ']' | '"' | ' ' | '\t' | '\n' | '\r' | '\u{c}'
    )
}

fn is_prefix_char(c: char) -> bool {
    matches!(c, '`' | ',' | '@')
}

impl<'a> Lexer<'a> {
    fn rest(&self) -> &'a str {
        self.src.get(self.at..).unwrap_or("")
    }

    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            column: self.column,
        }
    }

    fn bump(&mut self, n_bytes: usize) {
        let taken = self.rest().get(..n_bytes).unwrap_or("");
        let mut chars = taken.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\n' || (c == '\r' && chars.peek() != Some(&'\n')) {
                self.line += 1;
                self.column = 1;
            } else if c != '\r' {
                self.column += 1;
            }
        }
        self.at += n_bytes;
    }

    /// Skips whitespace and comments; fails on an unterminated block comment.
    fn skip_ignorable(&mut self) -> Result<(), CompileError> {
        loop {
            let r = self.rest();
            if r.starts_with("#|") {
                let start = self.pos();
                let mut depth = 0usize;
                let mut i = 0;
                loop {
                    let tail = r.get(i..).unwrap_or("");
                    if tail.is_empty() {
                        return err(start, "comment has no closing marker");
                    }
                    if tail.starts_with("#|") {
                        depth += 1;
                        i += 2;
                    } else if tail.starts_with("|#") {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += tail.chars().next().map_or(1, char::len_utf8);
                    }
                }
                self.bump(i);
            } else if r.starts_with("|#") {
                return err(self.pos(), "encountered '|#' with no open block comment");
            } else if r.starts_with(';') {
                let n = r.find('\n').map_or(r.len(), |i| i + 1);
                self.bump(n);
            } else if let Some(c) = r
                .chars()
                .next()
                .filter(|c| matches!(c, ' ' | '\t' | '\u{c}' | '\n' | '\r'))
            {
                self.bump(c.len_utf8());
            } else {
                return Ok(());
            }
        }
    }

    fn next(&mut self) -> Result<Option<(Tok, Pos)>, CompileError> {
        self.skip_ignorable()?;
        let pos = self.pos();
        let r = self.rest();
        let Some(c) = r.chars().next() else {
            return Ok(None);
        };
        let fixed = [
            ("#b[", None),
            ("#{", None),
            ("(", Some(Tok::Open)),
            (")", Some(Tok::Close)),
            ("[", Some(Tok::VecOpen)),
            ("]", Some(Tok::VecClose)),
            ("{", Some(Tok::ObjOpen)),
            ("}", Some(Tok::ObjClose)),
            ("'", Some(Tok::Prefix(Prefix::Quote))),
            ("`", Some(Tok::Prefix(Prefix::SyntaxQuote))),
            (",@", Some(Tok::Prefix(Prefix::Splice))),
            (",", Some(Tok::Prefix(Prefix::Unquote))),
        ];
        for (text, tok) in fixed {
            if r.starts_with(text) {
                let Some(tok) = tok else {
                    return err(
                        pos,
                        format!("unsupported syntax: {text} (bytes and sets are not supported)"),
                    );
                };
                self.bump(text.len());
                return Ok(Some((tok, pos)));
            }
        }
        if c == '"' {
            return self.string(pos).map(|d| Some((Tok::Atom(d), pos)));
        }
        let next_is_digit = r.chars().nth(1).is_some_and(|d| d.is_ascii_digit());
        if c.is_ascii_digit() || (matches!(c, '+' | '-') && next_is_digit) {
            return self.number(pos).map(|d| Some((Tok::Atom(d), pos)));
        }
        // Identifiers (and keywords) run to the next structural character.
        let len = r
            .char_indices()
            .skip(1)
            .find(|(_, ch)| is_structure(*ch))
            .map_or(r.len(), |(i, _)| i);
        let word = r.get(..len).unwrap_or("");
        self.bump(len);
        let tok = if let Some(kw) = word.strip_prefix(':').filter(|k| !k.is_empty()) {
            Tok::Atom(Datum::Keyword(kw.to_string()))
        } else if word == "." {
            Tok::Dot
        } else if word == "#t" {
            Tok::Atom(Datum::Bool(true))
        } else if word == "#f" {
            Tok::Atom(Datum::Bool(false))
        } else if is_prefix_char(c) {
            return err(pos, format!("unexpected characters: {c}"));
        } else {
            Tok::Atom(Datum::Symbol(word.to_string()))
        };
        Ok(Some((tok, pos)))
    }

    fn string(&mut self, pos: Pos) -> Result<Datum, CompileError> {
        let r = self.rest();
        let mut out = String::new();
        let mut chars = r.char_indices().skip(1);
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.bump(i + 1);
                    return Ok(Datum::Str(out));
                }
                '\\' => match chars.next() {
                    Some((_, e)) => out.push(match e {
                        'b' => '\u{8}',
                        'f' => '\u{c}',
                        'n' => '\n',
                        'r' => '\r',
                        's' => ' ',
                        't' => '\t',
                        other => other,
                    }),
                    None => break,
                },
                c => out.push(c),
            }
        }
        err(pos, "string has no closing quote")
    }

    /// Numbers follow Ale's patterns: the token runs over the characters a
    /// symbol may continue with (but not `/`, except in a ratio).
    fn number(&mut self, pos: Pos) -> Result<Datum, CompileError> {
        let r = self.rest();
        let stop = |ch: char| is_structure(ch) || is_prefix_char(ch) || ch == '/';
        let mut len = r
            .char_indices()
            .skip(1)
            .find(|(_, ch)| stop(*ch))
            .map_or(r.len(), |(i, _)| i);
        let head = r.get(..len).unwrap_or("");
        let tail = r.get(len..).unwrap_or("");
        let int_head = head.trim_start_matches(['+', '-']);
        if tail.starts_with('/')
            && !int_head.is_empty()
            && int_head.chars().all(|c| c.is_ascii_digit())
            && tail.chars().nth(1).is_some_and(|c| matches!(c, '1'..='9'))
        {
            let more = tail
                .char_indices()
                .skip(1)
                .find(|(_, ch)| stop(*ch))
                .map_or(tail.len(), |(i, _)| i);
            len += more;
        }
        let text = r.get(..len).unwrap_or("").to_string();
        self.bump(len);
        parse_number(&text).map_or_else(|m| err(pos, m), Ok)
    }
}

fn parse_number(text: &str) -> Result<Datum, String> {
    let bad = || Err(format!("invalid number: {text}"));
    if text.contains('_') {
        return Err(format!("unsupported number literal: {text}"));
    }
    let (neg, body) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if let Some((n, d)) = body.split_once('/') {
        let (Ok(n), Ok(d)) = (n.parse::<i128>(), d.parse::<i128>()) else {
            return bad();
        };
        let n = if neg { -n } else { n };
        return match crate::number::make_ratio(n, d) {
            Ok(crate::number::Num::Int(i)) => Ok(Datum::Int(i)),
            Ok(crate::number::Num::Ratio(a, b)) => Ok(Datum::Ratio(a, b)),
            _ => Err(format!("unsupported number literal (beyond 64 bits): {text}")),
        };
    }
    let is_float = body.contains('.')
        || (!body.starts_with("0x") && !body.starts_with("0X") && body.contains(['e', 'E']));
    if is_float {
        let valid = float_shape(body);
        return match (valid, text.parse::<f64>()) {
            (true, Ok(f)) if f.is_finite() => Ok(Datum::Float(f)),
            _ => bad(),
        };
    }
    let (radix, digits) = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        (16, h)
    } else if let Some(b) = body.strip_prefix("0b").or_else(|| body.strip_prefix("0B")) {
        (2, b)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..])
    } else {
        (10, body)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return bad();
    }
    match i128::from_str_radix(digits, radix)
        .ok()
        .map(|v| if neg { -v } else { v })
        .map(i64::try_from)
    {
        Some(Ok(v)) => Ok(Datum::Int(v)),
        Some(Err(_)) => Err(format!("unsupported number literal (beyond 64 bits): {text}")),
        None => Err(format!("unsupported number literal (beyond 64 bits): {text}")),
    }
}

/// `(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?` with at least a fraction or an
/// exponent, as Ale's float pattern.
fn float_shape(s: &str) -> bool {
    let (mant, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int, frac) = match mant.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (mant, None),
    };
    let digits = |x: &str| !x.is_empty() && x.chars().all(|c| c.is_ascii_digit());
    let int_ok = int == "0" || (digits(int) && !int.starts_with('0'));
    let frac_ok = frac.is_none_or(digits);
    let exp_ok = exp.is_none_or(|e| {
        digits(e.trim_start_matches(['+', '-'])) && e.len() - e.trim_start_matches(['+', '-']).len() <= 1
    });
    int_ok && frac_ok && exp_ok && (frac.is_some() || exp.is_some())
}

struct Parser<'a> {
    lex: Lexer<'a>,
    peeked: Option<(Tok, Pos)>,
}

/// Reads every form of `src`.
pub fn read_all(src: &str) -> Result<Vec<Form>, CompileError> {
    let mut p = Parser {
        lex: Lexer {
            src,
            at: 0,
            line: 1,
            column: 1,
        },
        peeked: None,
    };
    let mut out = Vec::new();
    while let Some((tok, pos)) = p.take()? {
        out.push(p.value(tok, pos, 0)?);
    }
    Ok(out)
}

impl Parser<'_> {
    fn take(&mut self) -> Result<Option<(Tok, Pos)>, CompileError> {
        match self.peeked.take() {
            Some(t) => Ok(Some(t)),
            None => self.lex.next(),
        }
    }

    fn value(&mut self, tok: Tok, pos: Pos, depth: usize) -> Result<Form, CompileError> {
        if depth >= MAX_NESTING {
            return err(pos, format!("forms nested deeper than {MAX_NESTING} levels"));
        }
        let datum = match tok {
            Tok::Atom(d) => d,
            Tok::Open => self.list(pos, depth + 1)?,
            Tok::VecOpen => Datum::Vector(self.seq(Close::Vector, pos, depth + 1)?),
            Tok::ObjOpen => self.object(pos, depth + 1)?,
            Tok::Prefix(p) => match self.take()? {
                Some((t, tp)) => Datum::Prefixed(p, Box::new(self.value(t, tp, depth + 1)?)),
                None => return err(pos, "end of file before completing quoted form"),
            },
            Tok::Close => return err(pos, "unmatched list end"),
            Tok::VecClose => return err(pos, "unmatched vector end"),
            Tok::ObjClose => return err(pos, "unmatched object end"),
            Tok::Dot => return err(pos, "unexpected dot"),
        };
        Ok(Form { datum, pos })
    }

    fn list(&mut self, open: Pos, depth: usize) -> Result<Datum, CompileError> {
        let mut items: Vec<Form> = Vec::new();
        let mut dot_at: Option<(usize, Pos)> = None;
        loop {
            let Some((tok, pos)) = self.take()? else {
                return err(open, "list not closed");
            };
            match tok {
                Tok::Dot => {
                    if items.is_empty() || dot_at.is_some() {
                        return err(pos, "invalid list syntax");
                    }
                    dot_at = Some((items.len(), pos));
                }
                Tok::Close => {
                    let Some((at, dpos)) = dot_at else {
                        return Ok(Datum::List(items));
                    };
                    if at + 1 != items.len() {
                        return err(dpos, "invalid list syntax");
                    }
                    let Some(last) = items.pop() else {
                        return err(dpos, "invalid list syntax");
                    };
                    // `(a . (b c))` is the list `(a b c)`.
                    return Ok(match last.datum {
                        Datum::List(tail) => {
                            items.extend(tail);
                            Datum::List(items)
                        }
                        _ => Datum::Dotted(items, Box::new(last)),
                    });
                }
                other => items.push(self.value(other, pos, depth)?),
            }
        }
    }

    fn seq(&mut self, close: Close, open: Pos, depth: usize) -> Result<Vec<Form>, CompileError> {
        let mut items = Vec::new();
        loop {
            let Some((tok, pos)) = self.take()? else {
                return err(open, format!("{} not closed", close.name()));
            };
            match (tok, close) {
                (Tok::VecClose, Close::Vector) | (Tok::ObjClose, Close::Object) => return Ok(items),
                (other, _) => items.push(self.value(other, pos, depth)?),
            }
        }
    }

    fn object(&mut self, open: Pos, depth: usize) -> Result<Datum, CompileError> {
        let items = self.seq(Close::Object, open, depth)?;
        if items.len() & 1 == 1 {
            return err(open, "map must contain an even number of elements");
        }
        let mut pairs: Vec<(Form, Form)> = Vec::new();
        let mut it = items.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            if !pairs.iter().any(|(pk, _)| same(&pk.datum, &k.datum)) {
                pairs.push((k, v));
            }
        }
        Ok(Datum::Object(pairs))
    }
}

#[derive(Clone, Copy)]
enum Close {
    Vector,
    Object,
}

impl Close {
    fn name(self) -> &'static str {
        match self {
            Close::Vector => "vector",
            Close::Object => "object",
        }
    }
}

/// Structural equality of read data (object literal keys).
fn same(a: &Datum, b: &Datum) -> bool {
    let all =
        |x: &[Form], y: &[Form]| x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(&p.datum, &q.datum));
    match (a, b) {
        (Datum::Int(x), Datum::Int(y)) => x == y,
        (Datum::Float(x), Datum::Float(y)) => x == y,
        (Datum::Ratio(a1, b1), Datum::Ratio(a2, b2)) => a1 == a2 && b1 == b2,
        (Datum::Str(x), Datum::Str(y))
        | (Datum::Keyword(x), Datum::Keyword(y))
        | (Datum::Symbol(x), Datum::Symbol(y)) => x == y,
        (Datum::Bool(x), Datum::Bool(y)) => x == y,
        (Datum::List(x), Datum::List(y)) | (Datum::Vector(x), Datum::Vector(y)) => all(x, y),
        (Datum::Dotted(x, t1), Datum::Dotted(y, t2)) => all(x, y) && same(&t1.datum, &t2.datum),
        (Datum::Prefixed(p1, x), Datum::Prefixed(p2, y)) => p1 == p2 && same(&x.datum, &y.datum),
        (Datum::Object(x), Datum::Object(y)) => {
            x.len() == y.len()
                && x.iter().all(|(k, v)| {
                    y.iter()
                        .any(|(k2, v2)| same(&k.datum, &k2.datum) && same(&v.datum, &v2.datum))
                })
        }
        _ => false,
    }
}
