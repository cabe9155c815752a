//! Equality, `not`, strings, `raise` and `is-a`.

use super::{b, Builtin};
use crate::equal::equal;
use crate::limits::{rt, Ctx, R};
use crate::print::{quoted, str_of};
use crate::value::Value;

pub static TABLE: &[Builtin] = &[
    b("eq", 1, None, eq),
    b("!eq", 1, None, not_eq),
    b("not", 1, Some(1), not),
    b("str", 0, None, str_fn),
    b("str!", 0, None, str_bang),
    b("raise", 0, None, raise),
    b("is-a", 2, Some(2), is_a),
];

/// Every consecutive pair `Equal` (Ale's `make-comparator` with `eq`).
fn all_equal(ctx: &mut Ctx, args: &[Value]) -> R<bool> {
    for pair in args.windows(2) {
        if let [a, b] = pair {
            if !equal(ctx, a, b)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

fn eq(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    Ok(Value::Bool(all_equal(ctx, args)?))
}

fn not_eq(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    Ok(Value::Bool(!all_equal(ctx, args)?))
}

/// Only `#f` is false in Ale: `(not null)` is `#f`.
fn not(_: &mut Ctx, args: &[Value]) -> R<Value> {
    Ok(Value::Bool(args.first().is_some_and(Value::is_false)))
}

fn str_fn(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let s = str_of(ctx, args)?;
    ctx.new_str(s)
}

/// `str!`: the reader forms of the arguments, separated by spaces.
fn str_bang(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            ctx.check_room(out.len() + 1)?;
            out.push(' ');
        }
        quoted(ctx, a, &mut out)?;
    }
    ctx.new_str(out)
}

/// `(raise . parts)`: fails with the `str` of its arguments.
fn raise(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let msg = str_of(ctx, args)?;
    rt(msg)
}

/// `(is-a :type value)`.
fn is_a(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let (kind, v) = match args {
        [k, v] => (k, v),
        _ => return rt("is-a: expected 2 arguments"),
    };
    let Value::Keyword(k) = kind else {
        return rt(format!("is-a: expected a keyword, got {}", kind.type_name()));
    };
    match super::preds::type_test(k) {
        Some(test) => Ok(Value::Bool(test(ctx, v)?)),
        None => rt(format!("unknown predicate: :{k}")),
    }
}
