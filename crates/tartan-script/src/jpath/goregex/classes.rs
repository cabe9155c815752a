//! Character classes: bracket expressions, Perl classes (`\d \s \w`)
//! and Unicode classes (`\pX`).

use super::names::{CATEGORIES, POSIX, SCRIPTS};
use super::{push_char, Invalid, TResult, Translator};

/// Matches no character / every character.
pub(super) const NOTHING: &str = "[^\\x{0}-\\x{10FFFF}]";
const ANYTHING: &str = "[\\x{0}-\\x{10FFFF}]";

/// The characters not in the class `body` (see above for why not `[^`).
fn negated(body: &str) -> String {
    format!("[\\x{{0}}-\\x{{10FFFF}}--[{body}]]")
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

impl Translator {
    /// `\d \D \s \S \w \W` at `self.i`: standalone, or as items inside
    /// a bracket (`in_class`).
    pub(super) fn perl_class(&self, in_class: bool) -> Option<String> {
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
    pub(super) fn unicode_class(&mut self, in_class: bool) -> TResult<Option<String>> {
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

    /// A bracket expression at `self.i`; moves past it.
    pub(super) fn class(&mut self) -> TResult<String> {
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
