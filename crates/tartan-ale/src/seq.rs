//! Ale's sequence interfaces (`data.Sequence`, `Pair`, `Counted`, `Indexed`,
//! `Prepender`, `Appender`) over our value types.

use crate::lazy::{force, lazy_prepend};
use crate::limits::{rt, Ctx, R};
use crate::value::{ObjView, Value, VecView};

pub enum Split {
    Empty,
    Cell(Value, Value),
    /// The value does not implement Ale's `Sequence`.
    NotSeq,
}

/// Ale's `Sequence`: lists, vectors, strings, objects and lazy sequences.
pub fn is_seq(v: &Value) -> bool {
    matches!(
        v,
        Value::Null | Value::List(_) | Value::Vector(_) | Value::Str(_) | Value::Object(_) | Value::Lazy(_)
    )
}

fn str_split(ctx: &mut Ctx, s: &str) -> R<Option<(Value, Value)>> {
    let mut chars = s.chars();
    match chars.next() {
        None => Ok(None),
        Some(c) => {
            let first = ctx.new_str(c.to_string())?;
            let rest = ctx.new_str(chars.as_str().to_string())?;
            Ok(Some((first, rest)))
        }
    }
}

fn vec_rest(v: &VecView) -> Value {
    Value::Vector(VecView {
        data: v.data.clone(),
        start: (v.start + 1).min(v.end),
        end: v.end,
    })
}

fn obj_rest(o: &ObjView) -> Value {
    Value::Object(ObjView {
        data: o.data.clone(),
        start: o.start + 1,
    })
}

/// The first entry of an object as Ale's pair `(key . value)`.
pub fn obj_pair(ctx: &mut Ctx, o: &ObjView) -> R<Option<Value>> {
    match o.entries().first() {
        Some((k, v)) => Ok(Some(ctx.new_cons(k.to_value(), v.clone())?)),
        None => Ok(None),
    }
}

/// `Split()` of a sequence; realizes lazy sequences.
pub fn split(ctx: &mut Ctx, v: &Value) -> R<Split> {
    Ok(match v {
        Value::Null => Split::Empty,
        Value::List(c) => Split::Cell(c.head.clone(), c.tail.clone()),
        Value::Vector(view) => match view.as_slice().first() {
            Some(f) => Split::Cell(f.clone(), vec_rest(view)),
            None => Split::Empty,
        },
        Value::Str(s) => match str_split(ctx, &s.text)? {
            Some((a, b)) => Split::Cell(a, b),
            None => Split::Empty,
        },
        Value::Object(o) => match obj_pair(ctx, o)? {
            Some(p) => Split::Cell(p, obj_rest(o)),
            None => Split::Empty,
        },
        Value::Lazy(l) => match force(ctx, l)? {
            Some((a, b)) => Split::Cell(a, b),
            None => Split::Empty,
        },
        _ => Split::NotSeq,
    })
}

/// Ale's `Pair` (`car`/`first`): sequences and cons cells.
pub fn car(ctx: &mut Ctx, v: &Value) -> R<Value> {
    match v {
        Value::Cons(c) => Ok(c.car.clone()),
        _ => match split(ctx, v)? {
            Split::Cell(a, _) => Ok(a),
            Split::Empty => Ok(Value::Null),
            Split::NotSeq => rt(format!("car: {} is not a pair", v.type_name())),
        },
    }
}

/// Ale's `cdr`/`rest`; the rest of an empty sequence keeps its type.
pub fn cdr(ctx: &mut Ctx, v: &Value) -> R<Value> {
    match v {
        Value::Cons(c) => Ok(c.cdr.clone()),
        Value::Vector(view) => Ok(vec_rest(view)),
        Value::Object(o) => Ok(obj_rest(o)),
        Value::Str(s) => match str_split(ctx, &s.text)? {
            Some((_, b)) => Ok(b),
            None => Ok(v.clone()),
        },
        _ => match split(ctx, v)? {
            Split::Cell(_, b) => Ok(b),
            Split::Empty => Ok(Value::Null),
            Split::NotSeq => rt(format!("cdr: {} is not a pair", v.type_name())),
        },
    }
}

/// `IsEmpty()`, failing (as Ale's type assertion does) for non-sequences.
pub fn is_empty(ctx: &mut Ctx, v: &Value, op: &str) -> R<bool> {
    match v {
        Value::Null => Ok(true),
        Value::List(_) => Ok(false),
        Value::Vector(view) => Ok(view.is_empty()),
        Value::Str(s) => Ok(s.text.is_empty()),
        Value::Object(o) => Ok(o.entries().is_empty()),
        Value::Lazy(l) => Ok(force(ctx, l)?.is_none()),
        other => rt(format!("{op}: {} is not a sequence", other.type_name())),
    }
}

/// Ale's `(seq v)` as a condition: a non-empty sequence.
pub fn seq_nonempty(ctx: &mut Ctx, v: &Value) -> R<bool> {
    if !is_seq(v) {
        return Ok(false);
    }
    Ok(!is_empty(ctx, v, "seq")?)
}

/// `Counted.Count()`: strings count characters; lazy sequences do not count.
pub fn count(v: &Value, op: &str) -> R<usize> {
    match v {
        Value::Null => Ok(0),
        Value::List(c) => Ok(c.len),
        Value::Vector(view) => Ok(view.len()),
        Value::Str(s) => Ok(s.text.chars().count()),
        Value::Object(o) => Ok(o.entries().len()),
        other => rt(format!("{op}: {} is not a counted sequence", other.type_name())),
    }
}

/// `Indexed.ElementAt`: lists, vectors and strings.
pub fn element_at(ctx: &mut Ctx, v: &Value, idx: i64, op: &str) -> R<Option<Value>> {
    let Ok(i) = usize::try_from(idx) else {
        if matches!(v, Value::Null | Value::List(_) | Value::Vector(_) | Value::Str(_)) {
            return Ok(None);
        }
        return rt(format!("{op}: {} is not an indexed sequence", v.type_name()));
    };
    match v {
        Value::Null => Ok(None),
        Value::List(_) => {
            let mut cur = v.clone();
            for _ in 0..i {
                ctx.tick()?;
                cur = match cur {
                    Value::List(c) => c.tail.clone(),
                    _ => return Ok(None),
                };
            }
            match cur {
                Value::List(c) => Ok(Some(c.head.clone())),
                _ => Ok(None),
            }
        }
        Value::Vector(view) => Ok(view.as_slice().get(i).cloned()),
        Value::Str(s) => match s.text.chars().nth(i) {
            Some(c) => Ok(Some(ctx.new_str(c.to_string())?)),
            None => Ok(None),
        },
        other => rt(format!("{op}: {} is not an indexed sequence", other.type_name())),
    }
}

/// The `cons` instruction: prepend to lists, vectors and lazy sequences,
/// otherwise build a pair.
pub fn prepend(ctx: &mut Ctx, v: Value, seq: Value) -> R<Value> {
    match seq {
        Value::Null | Value::List(_) => ctx.prepend_list(v, seq),
        Value::Vector(view) => {
            let mut items = Vec::with_capacity(view.len() + 1);
            items.push(v);
            items.extend_from_slice(view.as_slice());
            ctx.new_vec(items)
        }
        Value::Lazy(_) => lazy_prepend(ctx, v, seq),
        other => ctx.new_cons(v, other),
    }
}

/// Whether `append` applies (Ale's `Appender`).
pub fn is_appendable(v: &Value) -> bool {
    matches!(v, Value::Vector(_) | Value::Str(_))
}

pub fn append(ctx: &mut Ctx, seq: &Value, v: Value) -> R<Value> {
    match seq {
        Value::Vector(view) => {
            let mut items = Vec::with_capacity(view.len() + 1);
            items.extend_from_slice(view.as_slice());
            items.push(v);
            ctx.new_vec(items)
        }
        Value::Str(s) => match &v {
            Value::Str(t) => {
                let mut text = String::with_capacity(s.text.len() + t.text.len());
                ctx.check_room(s.text.len() + t.text.len())?;
                text.push_str(&s.text);
                text.push_str(&t.text);
                ctx.new_str(text)
            }
            other => rt(format!("append: value is not a string: {}", other.type_name())),
        },
        other => rt(format!("append: {} is not appendable", other.type_name())),
    }
}

/// `sequence.ToVector`: all elements, realizing lazy sequences.
pub fn to_vec(ctx: &mut Ctx, v: &Value, op: &str) -> R<Vec<Value>> {
    match v {
        Value::Vector(view) => {
            ctx.check_room(view.len() * crate::value::SLOT_BYTES)?;
            Ok(view.as_slice().to_vec())
        }
        Value::Object(o) => {
            let mut out = Vec::with_capacity(o.entries().len());
            for (k, val) in o.entries() {
                ctx.tick()?;
                out.push(ctx.new_cons(k.to_value(), val.clone())?);
            }
            Ok(out)
        }
        Value::Str(s) => {
            let mut out = Vec::new();
            for c in s.text.chars() {
                ctx.tick()?;
                out.push(ctx.new_str(c.to_string())?);
            }
            Ok(out)
        }
        _ => {
            let mut out = Vec::new();
            let mut cur = v.clone();
            loop {
                ctx.tick()?;
                match split(ctx, &cur)? {
                    Split::Cell(a, b) => {
                        ctx.check_room((out.len() + 1) * crate::value::SLOT_BYTES)?;
                        out.push(a);
                        cur = b;
                    }
                    Split::Empty => return Ok(out),
                    Split::NotSeq => {
                        return rt(format!("{op}: {} is not a sequence", cur.type_name()));
                    }
                }
            }
        }
    }
}
