//! Go's `regexp` syntax (RE2, as `regexp.Compile` parses it), rewritten for
//! the `regex` crate with the same meaning. The crate and Go share most of
//! the syntax; where they differ the translation follows Go:
//!
//! - `\d \s \w \b` (and negations) are ASCII-only in Go;
//! - `\123` is an octal escape, `\Q...\E` quotes, `{` that does not start
//!   a valid repetition is a literal, `\<` is a literal `<`;
//! - inside brackets `[`, `&&`, `--` and `~~` are plain characters;
//! - `\pX` names are Go's exact category and script names, and `\p{C}` is
//!   Go's `Cc|Cf|Co|Cs` (no unassigned code points);
//! - what Go rejects (stacked repetitions, counts over 1000, a repetition
//!   of nothing, bad escapes or flags, ...) is rejected.
//!
//! Every literal character is written as `\x{...}` (letters and digits as
//! themselves), so no character means anything else to the crate. Every
//! negated class is written as a difference from all characters
//! (`[\x{0}-\x{10FFFF}--[...]]`), never as `[^...]`: regex 1.13 negates a
//! class holding ranges that end at U+D7FF and resume at U+E000 into one
//! that matches both (`[^\p{Cn}\p{Co}]` matches U+E000); the difference is
//! computed correctly.

use regex::{Regex, RegexBuilder};

use classes::NOTHING;

mod classes;
mod escapes;
mod groups;
mod names;

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

#[derive(Clone, Copy)]
struct Flags {
    fold: bool,
    multi_line: bool,
    dot_nl: bool,
    ungreedy: bool,
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
}
