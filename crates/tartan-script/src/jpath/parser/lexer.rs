//! The character level of jpath's grammar: the parser's position and
//! nesting depth, and numbers, names and strings.

use serde_json::Value;

use super::super::MAX_NESTING;
use super::{perr, PResult, Parser};

/// The largest index or slice bound (2^53 - 1, as RFC 9535 and jpath).
const MAX_INT: i64 = 9_007_199_254_740_991;

impl Parser {
    pub(super) fn new(source: &str) -> Parser {
        Parser {
            src: source.chars().collect(),
            pos: 0,
            depth: 0,
        }
    }

    pub(super) fn eof(&self) -> bool {
        self.pos >= self.src.len()
    }

    pub(super) fn peek(&self) -> Option<char> {
        self.src.get(self.pos).copied()
    }

    pub(super) fn peek_is(&self, f: impl Fn(char) -> bool) -> bool {
        self.peek().is_some_and(f)
    }

    pub(super) fn consume(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub(super) fn consume_str(&mut self, s: &str) -> bool {
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
    pub(super) fn skip_ws(&mut self) {
        while self.peek_is(char::is_whitespace) {
            self.pos += 1;
        }
    }

    pub(super) fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return perr(
                format!("expression nested more than {MAX_NESTING} levels deep"),
                self.pos,
            );
        }
        Ok(())
    }

    pub(super) fn leave(&mut self) {
        self.depth -= 1;
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

    pub(super) fn digits(&mut self) -> bool {
        let from = self.pos;
        while self.peek_is(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        self.pos > from
    }

    /// An index or slice bound: an integer of at most ±(2^53 - 1), not `-0`.
    pub(super) fn parse_int(&mut self) -> Option<i64> {
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
    pub(super) fn parse_number(&mut self) -> Option<Value> {
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
    pub(super) fn parse_member_name(&mut self) -> Option<String> {
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

    pub(super) fn parse_string(&mut self) -> PResult<String> {
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
