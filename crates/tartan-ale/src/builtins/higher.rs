//! Procedures over procedures and the lazy sequence constructors
//! (`map`, `filter`, `fold-left`, `apply`, `range`, ...).

use super::{b, Builtin};
use crate::eval::apply;
use crate::lazy::{concat_of, range_continues, Gen};
use crate::limits::{rt, Ctx, R};
use crate::number::num_of;
use crate::seq::{car, cdr, is_seq, seq_nonempty, to_vec};
use crate::value::{NativeKind, Value};

pub static TABLE: &[Builtin] = &[
    b("map", 2, None, map),
    b("filter", 2, Some(2), filter),
    b("fold-left", 2, Some(3), fold_left),
    b("fold-right", 2, Some(3), fold_right),
    b("apply", 1, None, apply_fn),
    b("take", 2, Some(2), take),
    b("drop", 2, Some(2), drop),
    b("take-while", 2, Some(2), take_while),
    b("range", 0, Some(3), range),
    b("concat", 0, None, concat),
    b("zip", 0, None, zip),
    b("mapcat", 1, None, mapcat),
    b("partition", 2, Some(3), partition),
    b("partial", 1, None, partial),
    b("juxt", 1, None, juxt),
    b("constantly", 1, Some(1), constantly),
    b("identity", 1, Some(1), identity),
    b("no-op", 0, None, no_op),
];

fn arg(args: &[Value], i: usize) -> Value {
    args.get(i).cloned().unwrap_or(Value::Null)
}

fn map(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let f = arg(args, 0);
    if args.len() == 2 {
        return ctx.new_lazy(Gen::Map {
            f,
            coll: arg(args, 1),
        });
    }
    ctx.new_lazy(Gen::MapN {
        f,
        colls: args.get(1..).unwrap_or(&[]).to_vec(),
    })
}

fn filter(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    ctx.new_lazy(Gen::Filter {
        f: arg(args, 0),
        coll: arg(args, 1),
    })
}

fn fold_from(ctx: &mut Ctx, f: &Value, mut acc: Value, mut coll: Value) -> R<Value> {
    while seq_nonempty(ctx, &coll)? {
        ctx.tick()?;
        let x = car(ctx, &coll)?;
        acc = apply(ctx, f, vec![acc, x])?;
        coll = cdr(ctx, &coll)?;
    }
    Ok(acc)
}

/// `(fold-left f init? coll)`; without `init` an empty collection gives `(f)`.
fn fold_left(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let f = arg(args, 0);
    if args.len() == 3 {
        return fold_from(ctx, &f, arg(args, 1), arg(args, 2));
    }
    let coll = arg(args, 1);
    if seq_nonempty(ctx, &coll)? {
        let first = car(ctx, &coll)?;
        let rest = cdr(ctx, &coll)?;
        return fold_from(ctx, &f, first, rest);
    }
    apply(ctx, &f, Vec::new())
}

/// `fold-right`: a left fold over the reversed collection with the
/// arguments of `f` swapped.
fn fold_right(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let f = arg(args, 0);
    let coll = arg(args, args.len().saturating_sub(1));
    if !matches!(
        coll,
        Value::Null | Value::List(_) | Value::Vector(_) | Value::Str(_)
    ) {
        return rt(format!("reverse: {} is not reversible", coll.type_name()));
    }
    let mut items = to_vec(ctx, &coll, "fold-right")?;
    items.reverse();
    let mut it = items.into_iter();
    let mut acc = if args.len() == 3 {
        arg(args, 1)
    } else {
        match it.next() {
            Some(v) => v,
            // Ale calls its two-argument swap-args lambda with none.
            None => return rt("got 0 arguments, expected 2"),
        }
    };
    for x in it {
        ctx.tick()?;
        acc = apply(ctx, &f, vec![x, acc])?;
    }
    Ok(acc)
}

/// `(apply f a b ... seq)`: the last argument must be a sequence.
fn apply_fn(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let f = arg(args, 0);
    let rest = args.get(1..).unwrap_or(&[]);
    let Some((last, init)) = rest.split_last() else {
        return apply(ctx, &f, Vec::new());
    };
    if !is_seq(last) {
        return rt(format!("got {}, expected sequence", last.type_name()));
    }
    let mut all = init.to_vec();
    all.extend(to_vec(ctx, last, "apply")?);
    apply(ctx, &f, all)
}

fn take(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    ctx.new_lazy(Gen::Take {
        n: arg(args, 0),
        coll: arg(args, 1),
    })
}

fn drop(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    ctx.new_lazy(Gen::Drop {
        n: arg(args, 0),
        coll: arg(args, 1),
    })
}

fn take_while(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    ctx.new_lazy(Gen::TakeWhile {
        f: arg(args, 0),
        coll: arg(args, 1),
    })
}

fn gt(a: &Value, b: &Value) -> R<bool> {
    Ok(crate::number::cmp(num_of(a, "range")?, num_of(b, "range")?)? == Some(std::cmp::Ordering::Greater))
}

/// Ale's `range`, including its quirks: `(range 5 1)` is empty (it swaps
/// the bounds and steps down), and an empty range is the vector `[]`.
fn range(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let (first, last, step) = match args {
        [] => (Value::Int(0), Value::Null, Value::Int(1)),
        [last] => {
            let step = if gt(last, &Value::Int(0))? { 1 } else { -1 };
            (Value::Int(0), last.clone(), Value::Int(step))
        }
        [first, last] => {
            if gt(last, first)? {
                (first.clone(), last.clone(), Value::Int(1))
            } else {
                (last.clone(), first.clone(), Value::Int(-1))
            }
        }
        [first, last, step] => (first.clone(), last.clone(), step.clone()),
        _ => return rt("range: expected between 0 and 3 arguments"),
    };
    if !range_continues(&first, &last, &step)? {
        return Ok(Value::empty_vector());
    }
    let tail = ctx.new_lazy(Gen::Range {
        prev: first.clone(),
        last,
        step,
    })?;
    ctx.lazy_cell(first, tail)
}

fn concat(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let colls = ctx.new_vec(args.to_vec())?;
    concat_of(ctx, colls)
}

/// `(zip . colls)` is `(apply map list colls)`.
fn zip(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let list = super::lookup("list").map(Value::Builtin).unwrap_or(Value::Null);
    let mut all = vec![list];
    all.extend_from_slice(args);
    if all.len() < 2 {
        return rt("map: got 1 arguments, expected 2 or more");
    }
    map(ctx, &all)
}

/// `(mapcat f . colls)` is `(apply concat (apply map f colls))`: the mapped
/// sequence is realized, its elements concatenated lazily.
fn mapcat(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    if args.len() < 2 {
        return rt("map: got 1 arguments, expected 2 or more");
    }
    let mapped = map(ctx, args)?;
    let parts = to_vec(ctx, &mapped, "mapcat")?;
    let colls = ctx.new_vec(parts)?;
    concat_of(ctx, colls)
}

fn partition(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let (count, step, coll) = match args {
        [c, coll] => (c.clone(), c.clone(), coll.clone()),
        [c, s, coll] => (c.clone(), s.clone(), coll.clone()),
        _ => return rt("partition: expected between 2 and 3 arguments"),
    };
    ctx.new_lazy(Gen::Partition { count, step, coll })
}

fn is_procedure(v: &Value) -> bool {
    matches!(v, Value::Closure(_) | Value::Builtin(_) | Value::Native(_))
}

fn partial(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let f = arg(args, 0);
    if args.len() == 1 {
        return Ok(f);
    }
    if !is_procedure(&f) {
        return rt(format!("partial requires a procedure: {}", f.type_name()));
    }
    ctx.new_native(NativeKind::Partial(f, args.get(1..).unwrap_or(&[]).to_vec()))
}

fn juxt(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    ctx.new_native(NativeKind::Juxt(args.to_vec()))
}

fn constantly(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    ctx.new_native(NativeKind::Constantly(arg(args, 0)))
}

fn identity(_: &mut Ctx, args: &[Value]) -> R<Value> {
    Ok(arg(args, 0))
}

fn no_op(_: &mut Ctx, _: &[Value]) -> R<Value> {
    Ok(Value::Null)
}
