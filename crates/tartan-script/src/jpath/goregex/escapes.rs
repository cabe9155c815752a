//! Backslash escapes outside brackets: assertions, `\Q...\E`, classes
//! and escaped characters.

use super::{Invalid, TResult, Translator};

fn is_octal(c: char) -> bool {
    ('0'..='7').contains(&c)
}

impl Translator {
    /// A backslash outside brackets.
    pub(super) fn escape(&mut self) -> TResult<()> {
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

    /// An escape standing for one character, at `self.i` (a backslash);
    /// moves past it.
    pub(super) fn escaped_char(&mut self) -> TResult<u32> {
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
}
