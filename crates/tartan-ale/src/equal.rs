//! Ale's `Equal` (what `eq` uses): same type and same contents. Numbers of
//! different kinds are never `eq` (`(eq 1 1.0)` is false; `=` compares them
//! numerically).

use std::sync::Arc;

use crate::limits::{rt, Ctx, R};
use crate::value::Value;

pub fn equal(ctx: &mut Ctx, a: &Value, b: &Value) -> R<bool> {
    ctx.tick()?;
    Ok(match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        // Go's float equality: NaN differs from itself, 0.0 equals -0.0.
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::Ratio(n1, d1), Value::Ratio(n2, d2)) => n1 == n2 && d1 == d2,
        (Value::Str(x), Value::Str(y)) => x.text == y.text,
        (Value::Keyword(x), Value::Keyword(y)) | (Value::Symbol(x), Value::Symbol(y)) => x == y,
        (Value::List(x), Value::List(y)) => {
            if Arc::ptr_eq(x, y) {
                return Ok(true);
            }
            if x.len != y.len {
                return Ok(false);
            }
            ctx.nested(|ctx| {
                let (mut p, mut q) = (a.clone(), b.clone());
                while let (Value::List(c1), Value::List(c2)) = (&p, &q) {
                    if Arc::ptr_eq(c1, c2) {
                        return Ok(true);
                    }
                    if !equal(ctx, &c1.head, &c2.head)? {
                        return Ok(false);
                    }
                    let (np, nq) = (c1.tail.clone(), c2.tail.clone());
                    p = np;
                    q = nq;
                }
                Ok(true)
            })?
        }
        (Value::Vector(x), Value::Vector(y)) => {
            let (xs, ys) = (x.as_slice(), y.as_slice());
            if xs.len() != ys.len() {
                return Ok(false);
            }
            ctx.nested(|ctx| {
                for (p, q) in xs.iter().zip(ys) {
                    if !equal(ctx, p, q)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            })?
        }
        (Value::Object(x), Value::Object(y)) => {
            let (xs, ys) = (x.entries(), y.entries());
            if xs.len() != ys.len() {
                return Ok(false);
            }
            ctx.nested(|ctx| {
                for ((k1, v1), (k2, v2)) in xs.iter().zip(ys) {
                    if k1 != k2 || !equal(ctx, v1, v2)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            })?
        }
        (Value::Cons(x), Value::Cons(y)) => {
            Arc::ptr_eq(x, y)
                || ctx.nested(|ctx| Ok(equal(ctx, &x.car, &y.car)? && equal(ctx, &x.cdr, &y.cdr)?))?
        }
        (Value::Lazy(x), Value::Lazy(y)) => Arc::ptr_eq(x, y),
        (Value::Builtin(x), Value::Builtin(y)) => std::ptr::eq(*x, *y),
        (Value::Closure(x), Value::Closure(y)) => {
            if Arc::ptr_eq(x, y) {
                return Ok(true);
            }
            // Ale compares compiled code and captured values, which this
            // interpreter does not model.
            return rt("eq: cannot compare two distinct procedures");
        }
        (Value::Native(x), Value::Native(y)) => {
            if Arc::ptr_eq(x, y) {
                return Ok(true);
            }
            return rt("eq: cannot compare two distinct procedures");
        }
        _ => false,
    })
}
