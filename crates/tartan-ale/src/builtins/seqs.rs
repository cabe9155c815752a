//! Sequence and object procedures (Ale's `asm.ale`, `sequences.ale` and the
//! Go builtins `list`, `vector`, `object`).

use super::{b, Builtin};
use crate::equal::equal;
use crate::limits::{rt, Ctx, R};
use crate::seq::{
    append, car, cdr, count, element_at, is_appendable, is_empty, is_seq, prepend, seq_nonempty, to_vec,
};
use crate::value::{Key, Value};

pub static TABLE: &[Builtin] = &[
    b("list", 0, None, list),
    b("vector", 0, None, vector),
    b("object", 0, None, object),
    b("car", 1, Some(1), car_fn),
    b("cdr", 1, Some(1), cdr_fn),
    b("cons", 2, Some(2), cons_fn),
    b("conj", 2, Some(2), conj),
    b("conj*", 1, None, conj_star),
    b("append", 2, Some(2), append_fn),
    b("append*", 1, None, append_star),
    b("assoc", 2, Some(2), assoc),
    b("assoc*", 1, None, assoc_star),
    b("dissoc", 2, Some(2), dissoc),
    b("dissoc*", 1, None, dissoc_star),
    b("get", 2, Some(3), get),
    b("nth", 2, Some(3), nth),
    b("length", 1, Some(1), length),
    b("last", 1, Some(1), last),
    b("contains?", 2, Some(2), contains),
    b("seq", 1, Some(1), seq_fn),
    b("seq!", 1, Some(1), seq_bang),
    b("reverse", 1, Some(1), reverse),
    b("reverse!", 1, Some(1), reverse_bang),
    b("length!", 1, Some(1), length_bang),
    b("last!", 1, Some(1), last_bang),
    b("nth!", 2, Some(3), nth_bang),
    b("index-of", 2, Some(2), index_of),
    b("seq->vector", 0, None, seq_to_vector),
    b("seq->list", 0, None, seq_to_list),
    b("seq->object", 0, None, seq_to_object),
    b("concat!", 0, None, concat_bang),
];

fn arg(args: &[Value], i: usize) -> &Value {
    args.get(i).unwrap_or(&Value::Null)
}

fn list(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    ctx.new_list(args.to_vec())
}

fn vector(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    ctx.new_vec(args.to_vec())
}

/// `ValuesToObject`: pairs of key and value; the first occurrence of a key
/// wins.
pub fn make_object(ctx: &mut Ctx, vals: Vec<Value>) -> R<Value> {
    if vals.len() & 1 == 1 {
        return rt("map must contain an even number of elements");
    }
    let mut entries: Vec<(Key, Value)> = Vec::with_capacity(vals.len() / 2);
    let mut it = vals.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        ctx.tick()?;
        entries.push((object_key(&k)?, v));
    }
    // Stable sort keeps the first of equal keys first; dedup keeps it.
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.dedup_by(|later, earlier| later.0 == earlier.0);
    ctx.new_obj(entries)
}

pub fn object_key(k: &Value) -> R<Key> {
    match Key::from_value(k) {
        Some(key) => Ok(key),
        None => rt(format!(
            "unsupported object key: {} (keys must be scalar values)",
            k.type_name()
        )),
    }
}

fn object(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    make_object(ctx, args.to_vec())
}

fn car_fn(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    car(ctx, arg(args, 0))
}

fn cdr_fn(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    cdr(ctx, arg(args, 0))
}

fn cons_fn(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    prepend(ctx, arg(args, 0).clone(), arg(args, 1).clone())
}

pub fn conj_one(ctx: &mut Ctx, coll: &Value, v: &Value) -> R<Value> {
    if is_appendable(coll) {
        append(ctx, coll, v.clone())
    } else {
        prepend(ctx, v.clone(), coll.clone())
    }
}

fn conj(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    conj_one(ctx, arg(args, 0), arg(args, 1))
}

fn fold_args(ctx: &mut Ctx, args: &[Value], f: fn(&mut Ctx, &Value, &Value) -> R<Value>) -> R<Value> {
    let mut acc = arg(args, 0).clone();
    for v in args.iter().skip(1) {
        ctx.tick()?;
        acc = f(ctx, &acc, v)?;
    }
    Ok(acc)
}

fn conj_star(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    fold_args(ctx, args, conj_one)
}

fn append_one(ctx: &mut Ctx, coll: &Value, v: &Value) -> R<Value> {
    append(ctx, coll, v.clone())
}

fn append_fn(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    append_one(ctx, arg(args, 0), arg(args, 1))
}

fn append_star(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    fold_args(ctx, args, append_one)
}

/// `(assoc obj pair)`: the pair's car is the key, its cdr the value (so a
/// vector `[k v]` associates `k` with `[v]`, as in Ale).
fn assoc_one(ctx: &mut Ctx, obj: &Value, pair: &Value) -> R<Value> {
    let Value::Object(o) = obj else {
        return rt(format!("assoc: {} is not an object", obj.type_name()));
    };
    if !is_seq(pair) && !matches!(pair, Value::Cons(_)) {
        return rt(format!("assoc: {} is not a pair", pair.type_name()));
    }
    let key = object_key(&car(ctx, pair)?)?;
    let val = cdr(ctx, pair)?;
    let mut entries = o.entries().to_vec();
    match entries.binary_search_by(|(k, _)| k.cmp(&key)) {
        Ok(i) => {
            if let Some(e) = entries.get_mut(i) {
                e.1 = val;
            }
        }
        Err(i) => entries.insert(i, (key, val)),
    }
    ctx.new_obj(entries)
}

fn assoc(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    assoc_one(ctx, arg(args, 0), arg(args, 1))
}

fn assoc_star(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    fold_args(ctx, args, assoc_one)
}

fn dissoc_one(ctx: &mut Ctx, obj: &Value, key: &Value) -> R<Value> {
    let Value::Object(o) = obj else {
        return rt(format!("dissoc: {} is not an object", obj.type_name()));
    };
    let Some(key) = Key::from_value(key) else {
        return Ok(obj.clone());
    };
    let entries = o.entries();
    match entries.binary_search_by(|(k, _)| k.cmp(&key)) {
        Ok(i) => {
            let mut e = entries.to_vec();
            e.remove(i);
            ctx.new_obj(e)
        }
        Err(_) => Ok(obj.clone()),
    }
}

fn dissoc(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    dissoc_one(ctx, arg(args, 0), arg(args, 1))
}

fn dissoc_star(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    fold_args(ctx, args, dissoc_one)
}

/// `(get coll key default?)`: objects only; a missing key is an error
/// without a default.
fn get(_: &mut Ctx, args: &[Value]) -> R<Value> {
    let (coll, key) = (arg(args, 0), arg(args, 1));
    let Value::Object(o) = coll else {
        return rt(format!("get: {} is not a mapped value", coll.type_name()));
    };
    if let Some(v) = Key::from_value(key).and_then(|k| o.get(&k).cloned()) {
        return Ok(v);
    }
    match args.get(2) {
        Some(d) => Ok(d.clone()),
        None => rt("key not found"),
    }
}

fn nth(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let Value::Int(i) = arg(args, 1) else {
        return rt(format!(
            "nth: index must be an integer, got {}",
            arg(args, 1).type_name()
        ));
    };
    match element_at(ctx, arg(args, 0), *i, "nth")? {
        Some(v) => Ok(v),
        None => match args.get(2) {
            Some(d) => Ok(d.clone()),
            None => rt("index out of bounds"),
        },
    }
}

fn length(_: &mut Ctx, args: &[Value]) -> R<Value> {
    Ok(Value::Int(
        i64::try_from(count(arg(args, 0), "length")?).unwrap_or(i64::MAX),
    ))
}

/// `(last coll)`: counted and indexed sequences; null when empty.
fn last(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let coll = arg(args, 0);
    let n = count(coll, "last")?;
    if n == 0 {
        return Ok(Value::Null);
    }
    match element_at(ctx, coll, (n - 1) as i64, "last")? {
        Some(v) => Ok(v),
        None => rt("index out of bounds"),
    }
}

/// `(contains? coll key)`: whether a mapped value resolves the key; false for
/// anything that is not mapped.
fn contains(_: &mut Ctx, args: &[Value]) -> R<Value> {
    match arg(args, 0) {
        Value::Object(o) => Ok(Value::Bool(
            Key::from_value(arg(args, 1)).is_some_and(|k| o.get(&k).is_some()),
        )),
        Value::Lazy(_) | Value::Closure(_) | Value::Builtin(_) | Value::Native(_) => {
            rt("contains?: unsupported on lazy sequences and procedures")
        }
        _ => Ok(Value::Bool(false)),
    }
}

fn seq_fn(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let v = arg(args, 0);
    Ok(if seq_nonempty(ctx, v)? {
        v.clone()
    } else {
        Value::Bool(false)
    })
}

fn seq_bang(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let v = arg(args, 0);
    if !is_seq(v) {
        return rt(format!("value can't act as a sequence: {}", v.type_name()));
    }
    Ok(if is_empty(ctx, v, "seq!")? {
        Value::Bool(false)
    } else {
        v.clone()
    })
}

fn reverse(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let v = arg(args, 0);
    match v {
        Value::Null => Ok(Value::Null),
        Value::List(_) => {
            let mut items = to_vec(ctx, v, "reverse")?;
            items.reverse();
            ctx.new_list(items)
        }
        Value::Vector(view) => {
            let mut items = view.as_slice().to_vec();
            items.reverse();
            ctx.new_vec(items)
        }
        Value::Str(s) => ctx.new_str(s.text.chars().rev().collect()),
        other => rt(format!("reverse: {} is not reversible", other.type_name())),
    }
}

fn is_reversible(v: &Value) -> bool {
    matches!(v, Value::Null | Value::List(_) | Value::Vector(_) | Value::Str(_))
}

/// `reverse!`: `reverse` when possible, else conj-ing onto null (a list).
fn reverse_bang(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let v = arg(args, 0);
    if is_reversible(v) {
        return reverse(ctx, args);
    }
    let mut acc = Value::Null;
    let mut cur = v.clone();
    while seq_nonempty(ctx, &cur)? {
        ctx.tick()?;
        let first = car(ctx, &cur)?;
        acc = conj_one(ctx, &acc, &first)?;
        cur = cdr(ctx, &cur)?;
    }
    Ok(acc)
}

/// Walks a sequence (counted ones are counted directly), as `length!`.
fn length_bang(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let mut cur = arg(args, 0).clone();
    let mut n: i64 = 0;
    loop {
        ctx.tick()?;
        if let Ok(c) = count(&cur, "length!") {
            return Ok(Value::Int(n.saturating_add(i64::try_from(c).unwrap_or(i64::MAX))));
        }
        if !seq_nonempty(ctx, &cur)? {
            return Ok(Value::Int(n));
        }
        cur = cdr(ctx, &cur)?;
        n += 1;
    }
}

fn last_bang(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let mut cur = arg(args, 0).clone();
    let mut prev = Value::Null;
    loop {
        ctx.tick()?;
        if matches!(
            cur,
            Value::Null | Value::List(_) | Value::Vector(_) | Value::Str(_)
        ) {
            let n = count(&cur, "last!")?;
            if n == 0 {
                return Ok(prev);
            }
            return Ok(element_at(ctx, &cur, (n - 1) as i64, "last!")?.unwrap_or(Value::Null));
        }
        if !seq_nonempty(ctx, &cur)? {
            return Ok(prev);
        }
        prev = car(ctx, &cur)?;
        cur = cdr(ctx, &cur)?;
    }
}

fn nth_bang(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let coll = arg(args, 0);
    if matches!(
        coll,
        Value::Null | Value::List(_) | Value::Vector(_) | Value::Str(_)
    ) {
        return nth(ctx, args);
    }
    let Value::Int(pos) = arg(args, 1) else {
        return rt(format!(
            "nth!: index must be an integer, got {}",
            arg(args, 1).type_name()
        ));
    };
    let (mut cur, mut pos) = (coll.clone(), *pos);
    loop {
        ctx.tick()?;
        if !seq_nonempty(ctx, &cur)? {
            return match args.get(2) {
                Some(d) => Ok(d.clone()),
                None => rt("index out of bounds"),
            };
        }
        if pos <= 0 {
            return car(ctx, &cur);
        }
        cur = cdr(ctx, &cur)?;
        pos -= 1;
    }
}

fn index_of(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let mut cur = arg(args, 0).clone();
    let needle = arg(args, 1);
    let mut idx = 0i64;
    while seq_nonempty(ctx, &cur)? {
        ctx.tick()?;
        let first = car(ctx, &cur)?;
        if equal(ctx, &first, needle)? {
            return Ok(Value::Int(idx));
        }
        cur = cdr(ctx, &cur)?;
        idx += 1;
    }
    Ok(Value::Bool(false))
}

/// `concat!`: the elements of every sequence argument, in order.
pub fn flatten_seqs(ctx: &mut Ctx, args: &[Value], op: &str) -> R<Vec<Value>> {
    let mut out = Vec::new();
    for a in args {
        if !is_seq(a) {
            return rt(format!("{op}: {} is not a sequence", a.type_name()));
        }
        out.extend(to_vec(ctx, a, op)?);
    }
    Ok(out)
}

fn seq_to_vector(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let items = flatten_seqs(ctx, args, "seq->vector")?;
    ctx.new_vec(items)
}

fn seq_to_list(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let items = flatten_seqs(ctx, args, "seq->list")?;
    ctx.new_list(items)
}

fn seq_to_object(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let items = flatten_seqs(ctx, args, "seq->object")?;
    make_object(ctx, items)
}

fn concat_bang(ctx: &mut Ctx, args: &[Value]) -> R<Value> {
    let items = flatten_seqs(ctx, args, "concat!")?;
    ctx.new_list(items)
}

/// Calling a string or list: `(s start end?)` takes a slice, as Ale's
/// `String.Call` and `List.Call` do.
pub fn call_slice(ctx: &mut Ctx, f: &Value, args: &[Value]) -> R<Value> {
    if args.is_empty() || args.len() > 2 {
        return rt(format!("expected between 1 and 2 arguments, got {}", args.len()));
    }
    let int = |v: &Value| match v {
        Value::Int(i) => Ok(*i),
        other => rt(format!("index must be an integer, got {}", other.type_name())),
    };
    let start = int(arg(args, 0))?;
    let end = args.get(1).map(int).transpose()?;
    match f {
        Value::Str(s) => {
            let chars: Vec<char> = s.text.chars().collect();
            let n = chars.len() as i64;
            let bad = match end {
                None => start < 0 || start > n,
                Some(e) => start < 0 || e < start || start > n || e > n,
            };
            if bad {
                return rt(match end {
                    None => format!("{start} is an invalid start index"),
                    Some(e) => format!("{start} and {e} are not valid start/end indices"),
                });
            }
            let e = end.unwrap_or(n);
            ctx.new_str(
                chars
                    .get(start as usize..e as usize)
                    .unwrap_or(&[])
                    .iter()
                    .collect(),
            )
        }
        _ => {
            let items = to_vec(ctx, f, "list call")?;
            let n = items.len() as i64;
            // Ale's List.from requires a start inside the list.
            if start < 0 || start >= n {
                return rt(match end {
                    None => format!("{start} is an invalid start index"),
                    Some(e) => format!("{start} and {e} are not valid start/end indices"),
                });
            }
            let e = end.unwrap_or(n);
            if e < start || e > n {
                return rt(format!("{start} and {e} are not valid start/end indices"));
            }
            ctx.new_list(items.get(start as usize..e as usize).unwrap_or(&[]).to_vec())
        }
    }
}

/// Ale's generated `caar` .. `cddddr`: compositions of `car` and `cdr`.
pub fn cxr(name: &str) -> Option<&'static Builtin> {
    CXR.iter().find(|b| b.name == name)
}

fn cxr_apply(ctx: &mut Ctx, name: &str, args: &[Value]) -> R<Value> {
    let mut v = arg(args, 0).clone();
    let ops = name.get(1..name.len() - 1).unwrap_or("");
    for op in ops.chars().rev() {
        v = if op == 'a' { car(ctx, &v)? } else { cdr(ctx, &v)? };
    }
    Ok(v)
}

macro_rules! cxr_table {
    ($($name:literal => $fn:ident),* $(,)?) => {
        $(fn $fn(ctx: &mut Ctx, args: &[Value]) -> R<Value> { cxr_apply(ctx, $name, args) })*
        static CXR: &[Builtin] = &[$(b($name, 1, Some(1), $fn)),*];
    };
}

cxr_table! {
    "caar" => caar, "cadr" => cadr, "cdar" => cdar, "cddr" => cddr,
    "caaar" => caaar, "caadr" => caadr, "cadar" => cadar, "caddr" => caddr,
    "cdaar" => cdaar, "cdadr" => cdadr, "cddar" => cddar, "cdddr" => cdddr,
    "caaaar" => caaaar, "caaadr" => caaadr, "caadar" => caadar, "caaddr" => caaddr,
    "cadaar" => cadaar, "cadadr" => cadadr, "caddar" => caddar, "cadddr" => cadddr,
    "cdaaar" => cdaaar, "cdaadr" => cdaadr, "cdadar" => cdadar, "cdaddr" => cdaddr,
    "cddaar" => cddaar, "cddadr" => cddadr, "cdddar" => cdddar, "cddddr" => cddddr,
}
