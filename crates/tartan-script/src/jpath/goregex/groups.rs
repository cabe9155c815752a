//! Groups and flags: `(...)`, `(?:...)`, named groups, `(?flags)` and
//! `(?flags:...)`.

use super::{Flags, Frame, Invalid, TResult, Top, Translator};

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

impl Translator {
    pub(super) fn open(&mut self) -> TResult<()> {
        if self.peek(self.i + 1) != Some('?') {
            self.i += 1;
            self.push_group(self.flags);
            self.out.push_str("(?:");
            return Ok(());
        }
        let rest = self.s.len() - self.i;
        let named_p = rest > 4 && self.peek(self.i + 2) == Some('P') && self.peek(self.i + 3) == Some('<');
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

    pub(super) fn close(&mut self) -> TResult<()> {
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
}
