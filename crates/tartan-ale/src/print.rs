//! Ale's printed forms (`String()` and `ToQuotedString`).
//!
//! Ale prints lazy sequences and procedures by dumping their memory address,
//! which differs from run to run; those are refused rather than invented.

use crate::limits::{rt, Ctx, R};
use crate::number::{format_float, format_ratio};
use crate::value::{Key, Value};

/// Text of `(str v)` for one argument (strings unquoted).
pub fn display(ctx: &mut Ctx, v: &Value, out: &mut String) -> R<()> {
    match v {
        Value::Str(s) => push(ctx, out, &s.text),
        _ => write(ctx, v, out),
    }
}

/// `ToQuotedString`: strings quoted and escaped, everything else as `display`.
pub fn quoted(ctx: &mut Ctx, v: &Value, out: &mut String) -> R<()> {
    match v {
        Value::Str(s) => {
            let mut q = String::with_capacity(s.text.len() + 2);
            q.push('"');
            for c in s.text.chars() {
                match c {
                    '"' => q.push_str("\\\""),
                    '\u{8}' => q.push_str("\\b"),
                    '\u{c}' => q.push_str("\\f"),
                    '\n' => q.push_str("\\n"),
                    '\r' => q.push_str("\\r"),
                    '\t' => q.push_str("\\t"),
                    '\\' => q.push_str("\\\\"),
                    c => q.push(c),
                }
            }
            q.push('"');
            push(ctx, out, &q)
        }
        _ => write(ctx, v, out),
    }
}

/// Appends, failing before the text would exceed the memory limit.
fn push(ctx: &mut Ctx, out: &mut String, s: &str) -> R<()> {
    ctx.check_room(out.len() + s.len())?;
    out.push_str(s);
    Ok(())
}

pub fn key_text(ctx: &mut Ctx, k: &Key) -> R<String> {
    let mut s = String::new();
    display(ctx, &k.to_value(), &mut s)?;
    Ok(s)
}

fn write(ctx: &mut Ctx, v: &Value, out: &mut String) -> R<()> {
    ctx.tick()?;
    match v {
        Value::Null => push(ctx, out, "()"),
        Value::Bool(b) => push(ctx, out, if *b { "#t" } else { "#f" }),
        Value::Int(i) => push(ctx, out, &i.to_string()),
        Value::Float(f) => push(ctx, out, &format_float(*f)),
        Value::Ratio(n, d) => push(ctx, out, &format_ratio(*n, *d)),
        Value::Str(s) => push(ctx, out, &s.text),
        Value::Keyword(k) => {
            push(ctx, out, ":")?;
            push(ctx, out, k)
        }
        Value::Symbol(s) => push(ctx, out, s),
        Value::List(_) => ctx.nested(|ctx| {
            push(ctx, out, "(")?;
            let mut cur = v.clone();
            let mut first = true;
            while let Value::List(c) = cur {
                if !first {
                    push(ctx, out, " ")?;
                }
                first = false;
                quoted(ctx, &c.head, out)?;
                cur = c.tail.clone();
            }
            push(ctx, out, ")")
        }),
        Value::Vector(view) => ctx.nested(|ctx| {
            push(ctx, out, "[")?;
            for (i, e) in view.as_slice().iter().enumerate() {
                if i > 0 {
                    push(ctx, out, " ")?;
                }
                quoted(ctx, e, out)?;
            }
            push(ctx, out, "]")
        }),
        Value::Object(o) => ctx.nested(|ctx| {
            // Ale sorts the pairs by the printed form of their keys.
            let mut pairs = Vec::with_capacity(o.entries().len());
            for (k, val) in o.entries() {
                pairs.push((key_text(ctx, k)?, k, val));
            }
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            push(ctx, out, "{")?;
            for (i, (_, k, val)) in pairs.into_iter().enumerate() {
                if i > 0 {
                    push(ctx, out, " ")?;
                }
                quoted(ctx, &k.to_value(), out)?;
                push(ctx, out, " ")?;
                quoted(ctx, val, out)?;
            }
            push(ctx, out, "}")
        }),
        Value::Cons(_) => ctx.nested(|ctx| write_cons(ctx, v, out)),
        Value::Closure(_) | Value::Builtin(_) | Value::Native(_) => {
            rt("cannot print a procedure: Ale prints its memory address")
        }
        Value::Lazy(_) => {
            rt("cannot print a lazy sequence: Ale prints its memory address (realize it with seq->vector)")
        }
    }
}

/// `Cons.String()`: walks cdr pairs, ending in ` . x` for a non-sequence.
fn write_cons(ctx: &mut Ctx, v: &Value, out: &mut String) -> R<()> {
    push(ctx, out, "(")?;
    let mut next = v.clone();
    loop {
        ctx.tick()?;
        let (car, cdr) = match &next {
            Value::Cons(c) => (c.car.clone(), c.cdr.clone()),
            Value::Object(o) => match crate::seq::obj_pair(ctx, o)? {
                Some(p) => (p, crate::seq::cdr(ctx, &next)?),
                None => break,
            },
            _ => break,
        };
        quoted(ctx, &car, out)?;
        match &cdr {
            Value::Str(_) => {
                push(ctx, out, " . ")?;
                quoted(ctx, &cdr, out)?;
                break;
            }
            Value::Object(o) if o.entries().is_empty() => break,
            Value::Cons(_) | Value::Object(_) => {
                push(ctx, out, " ")?;
                next = cdr;
            }
            Value::List(_) | Value::Vector(_) | Value::Lazy(_) | Value::Null => {
                // Not produced by `cons` (those prepend); printed as Ale would
                // walk them: element by element.
                for e in crate::seq::to_vec(ctx, &cdr, "print")? {
                    push(ctx, out, " ")?;
                    quoted(ctx, &e, out)?;
                }
                break;
            }
            _ => {
                push(ctx, out, " . ")?;
                quoted(ctx, &cdr, out)?;
                break;
            }
        }
    }
    push(ctx, out, ")")
}

/// The whole `(str a b ...)`: arguments that are null are skipped.
pub fn str_of(ctx: &mut Ctx, args: &[Value]) -> R<String> {
    let mut out = String::new();
    for a in args {
        if matches!(a, Value::Null) {
            continue;
        }
        display(ctx, a, &mut out)?;
    }
    Ok(out)
}
