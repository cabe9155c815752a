//! Arithmetic and numeric comparison (Ale's `numerics.ale`).

use std::cmp::Ordering;

use super::{b, Builtin};
use crate::limits::{Ctx, R};
use crate::number::{add, cmp, div, modulo, mul, num_of, sub, Num};
use crate::value::Value;

pub static TABLE: &[Builtin] = &[
    b("+", 0, None, plus),
    b("*", 0, None, times),
    b("-", 1, None, minus),
    b("/", 1, None, divide),
    b("mod", 2, None, modulo_fn),
    b("inc", 1, Some(1), inc),
    b("dec", 1, Some(1), dec),
    b("=", 1, None, num_eq),
    b("!=", 1, None, num_neq),
    b("<", 1, None, lt),
    b("<=", 1, None, lte),
    b(">", 1, None, gt),
    b(">=", 1, None, gte),
];

type Op = fn(Num, Num) -> R<Num>;

/// Ale's `make-reducer`: folds `args` onto `init` left to right.
fn reduce(ctx: &mut Ctx, init: Num, args: &[Value], op: Op, name: &str) -> R<Value> {
    let mut acc = init;
    for a in args {
        ctx.tick()?;
        acc = op(acc, num_of(a, name)?)?;
    }
    Ok(acc.to_value())
}

fn plus(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    reduce(ctx, Num::Int(0), args, add, "+")
}

fn times(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    reduce(ctx, Num::Int(1), args, mul, "*")
}

fn first_and_rest<'a>(args: &'a [Value], name: &str) -> R<(Num, &'a [Value])> {
    match args.split_first() {
        Some((f, r)) => Ok((num_of(f, name)?, r)),
        None => crate::limits::rt(format!("{name}: expected at least 1 argument")),
    }
}

fn minus(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let (f, r) = first_and_rest(args, "-")?;
    if r.is_empty() {
        return Ok(sub(Num::Int(0), f)?.to_value());
    }
    reduce(ctx, f, r, sub, "-")
}

fn divide(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let (f, r) = first_and_rest(args, "/")?;
    if r.is_empty() {
        return Ok(div(Num::Int(1), f)?.to_value());
    }
    reduce(ctx, f, r, div, "/")
}

fn modulo_fn(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let (f, r) = first_and_rest(args, "mod")?;
    let Some((d, more)) = r.split_first() else {
        return crate::limits::rt("mod: expected at least 2 arguments");
    };
    let init = modulo(f, num_of(d, "mod")?)?;
    reduce(ctx, init, more, modulo, "mod")
}

fn inc(_: &mut Ctx, args: &[Value]) -> R<Value> {
    let v = args.first().unwrap_or(&Value::Null);
    Ok(add(num_of(v, "inc")?, Num::Int(1))?.to_value())
}

fn dec(_: &mut Ctx, args: &[Value]) -> R<Value> {
    let v = args.first().unwrap_or(&Value::Null);
    Ok(sub(num_of(v, "dec")?, Num::Int(1))?.to_value())
}

/// Ale's `make-comparator`: every consecutive pair must satisfy `ok`;
/// stops at the first failure (later arguments are not checked, and a lone
/// argument is not checked at all: `(< "a")` is true in Ale).
fn compare(ctx: &mut Ctx, args: &[Value], name: &str, ok: fn(Option<Ordering>) -> bool) -> R<bool> {
    for pair in args.windows(2) {
        ctx.tick()?;
        if let [p, n] = pair {
            if !ok(cmp(num_of(p, name)?, num_of(n, name)?)?) {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

pub fn numeric_eq(ctx: &mut Ctx, args: &[Value]) -> R<bool> {
    compare(ctx, args, "=", |o| o == Some(Ordering::Equal))
}

fn num_eq(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    Ok(Value::Bool(numeric_eq(ctx, args)?))
}

fn num_neq(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    Ok(Value::Bool(!compare(ctx, args, "!=", |o| {
        o == Some(Ordering::Equal)
    })?))
}

fn lt(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    Ok(Value::Bool(compare(ctx, args, "<", |o| {
        o == Some(Ordering::Less)
    })?))
}

fn lte(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    Ok(Value::Bool(compare(ctx, args, "<=", |o| {
        matches!(o, Some(Ordering::Less | Ordering::Equal))
    })?))
}

fn gt(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    Ok(Value::Bool(compare(ctx, args, ">", |o| {
        o == Some(Ordering::Greater)
    })?))
}

fn gte(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    Ok(Value::Bool(compare(ctx, args, ">=", |o| {
        matches!(o, Some(Ordering::Greater | Ordering::Equal))
    })?))
}
