//! Lazy sequences, realized one cell at a time as Ale's `lazy-seq` does.
//!
//! Ale defines `map`, `filter`, `range`, `take`, `drop`, `concat` and
//! `partition` in its core library on top of `lazy-seq`; each generator
//! below follows the corresponding definition step by step, including
//! which arguments are checked when.

use std::sync::Arc;

use crate::eval::apply;
use crate::limits::{rt, Ctx, R};
use crate::number::{add, cmp, num_of, sub, Num};
use crate::seq::{car, cdr, is_empty, seq_nonempty, split, Split};
use crate::value::{Lazy, Value};

pub enum Gen {
    /// `(lazy-seq body)`: a thunk returning a sequence.
    Thunk(Value),
    Map {
        f: Value,
        coll: Value,
    },
    MapN {
        f: Value,
        colls: Vec<Value>,
    },
    Filter {
        f: Value,
        coll: Value,
    },
    /// The tail of `(range first last step)` after `prev`; `last` is `Null`
    /// for an unbounded range.
    Range {
        prev: Value,
        last: Value,
        step: Value,
    },
    Take {
        n: Value,
        coll: Value,
    },
    TakeWhile {
        f: Value,
        coll: Value,
    },
    Drop {
        n: Value,
        coll: Value,
    },
    /// `concat`: the sequence being walked, then the remaining ones.
    Concat {
        cur: Value,
        rest: Value,
    },
    Partition {
        count: Value,
        step: Value,
        coll: Value,
    },
}

pub enum LazyState {
    Pending(Gen),
    Running,
    /// `None` when the sequence is empty.
    Done(Option<(Value, Value)>),
}

type Cell = Option<(Value, Value)>;

impl LazyState {
    /// Moves out every value held, for the iterative drop.
    pub fn take_values(&mut self) -> Vec<Value> {
        match std::mem::replace(self, LazyState::Running) {
            LazyState::Done(Some((a, b))) => vec![a, b],
            LazyState::Pending(g) => match g {
                Gen::Thunk(a) => vec![a],
                Gen::MapN { f, colls } => {
                    let mut v = colls;
                    v.push(f);
                    v
                }
                Gen::Map { f: a, coll: b }
                | Gen::Filter { f: a, coll: b }
                | Gen::Take { n: a, coll: b }
                | Gen::TakeWhile { f: a, coll: b }
                | Gen::Drop { n: a, coll: b }
                | Gen::Concat { cur: a, rest: b } => vec![a, b],
                Gen::Range { prev, last, step } => vec![prev, last, step],
                Gen::Partition { count, step, coll } => vec![count, step, coll],
            },
            _ => Vec::new(),
        }
    }
}

/// Realizes the first cell of a lazy sequence (memoized).
pub fn force(ctx: &mut Ctx, lazy: &Arc<Lazy>) -> R<Cell> {
    let gen = {
        let mut st = match lazy.state.lock() {
            Ok(g) => g,
            Err(_) => return rt("lazy sequence state poisoned"),
        };
        match std::mem::replace(&mut *st, LazyState::Running) {
            LazyState::Done(c) => {
                *st = LazyState::Done(c.clone());
                return Ok(c);
            }
            // Go's sync.Once would deadlock here; we fail instead.
            LazyState::Running => return rt("lazy sequence realized itself recursively"),
            LazyState::Pending(g) => g,
        }
    };
    let cell = ctx.nested(|ctx| step(ctx, gen))?;
    if let Ok(mut st) = lazy.state.lock() {
        *st = LazyState::Done(cell.clone());
    }
    Ok(cell)
}

fn cell_of(ctx: &mut Ctx, v: &Value) -> R<Cell> {
    match split(ctx, v)? {
        Split::Cell(a, b) => Ok(Some((a, b))),
        Split::Empty => Ok(None),
        Split::NotSeq => rt(format!("lazy-seq: {} is not a sequence", v.type_name())),
    }
}

fn gt_zero(n: &Value, op: &str) -> R<bool> {
    Ok(cmp(num_of(n, op)?, Num::Int(0))? == Some(std::cmp::Ordering::Greater))
}

fn dec(n: &Value, op: &str) -> R<Value> {
    Ok(sub(num_of(n, op)?, Num::Int(1))?.to_value())
}

fn step(ctx: &mut Ctx, gen: Gen) -> R<Cell> {
    match gen {
        Gen::Thunk(f) => {
            let r = apply(ctx, &f, Vec::new())?;
            if matches!(r, Value::Null) {
                return Ok(None);
            }
            cell_of(ctx, &r)
        }
        Gen::Map { f, coll } => match split(ctx, &coll)? {
            Split::Cell(x, rest) => {
                let v = apply(ctx, &f, vec![x])?;
                let tail = ctx.new_lazy(Gen::Map { f, coll: rest })?;
                Ok(Some((v, tail)))
            }
            _ => Ok(None),
        },
        Gen::MapN { f, colls } => map_n(ctx, f, colls),
        Gen::Filter { f, coll } => filter(ctx, f, coll),
        Gen::Range { prev, last, step } => range_step(ctx, prev, last, step),
        Gen::Take { n, coll } => {
            if !gt_zero(&n, "take")? || is_empty(ctx, &coll, "take")? {
                return Ok(None);
            }
            let first = car(ctx, &coll)?;
            let rest = cdr(ctx, &coll)?;
            let tail = ctx.new_lazy(Gen::Take {
                n: dec(&n, "take")?,
                coll: rest,
            })?;
            Ok(Some((first, tail)))
        }
        Gen::TakeWhile { f, coll } => {
            if !seq_nonempty(ctx, &coll)? {
                return Ok(None);
            }
            let first = car(ctx, &coll)?;
            if apply(ctx, &f, vec![first.clone()])?.is_false() {
                return Ok(None);
            }
            let rest = cdr(ctx, &coll)?;
            let tail = ctx.new_lazy(Gen::TakeWhile { f, coll: rest })?;
            Ok(Some((first, tail)))
        }
        Gen::Drop { mut n, mut coll } => {
            while gt_zero(&n, "drop")? {
                ctx.tick()?;
                coll = cdr(ctx, &coll)?;
                n = dec(&n, "drop")?;
            }
            if matches!(coll, Value::Null) {
                return Ok(None);
            }
            cell_of(ctx, &coll)
        }
        Gen::Concat { cur, rest } => concat(ctx, cur, rest),
        Gen::Partition { count, step, coll } => partition(ctx, count, step, coll),
    }
}

fn map_n(ctx: &mut Ctx, f: Value, colls: Vec<Value>) -> R<Cell> {
    for c in &colls {
        if is_empty(ctx, c, "map")? {
            return Ok(None);
        }
    }
    let mut firsts = Vec::with_capacity(colls.len());
    let mut rests = Vec::with_capacity(colls.len());
    for c in &colls {
        firsts.push(car(ctx, c)?);
        rests.push(cdr(ctx, c)?);
    }
    let v = apply(ctx, &f, firsts)?;
    let tail = ctx.new_lazy(Gen::MapN { f, colls: rests })?;
    Ok(Some((v, tail)))
}

fn filter(ctx: &mut Ctx, f: Value, mut coll: Value) -> R<Cell> {
    loop {
        ctx.tick()?;
        match split(ctx, &coll)? {
            Split::Cell(x, rest) => {
                if !apply(ctx, &f, vec![x.clone()])?.is_false() {
                    let tail = ctx.new_lazy(Gen::Filter { f, coll: rest })?;
                    return Ok(Some((x, tail)));
                }
                coll = rest;
            }
            _ => return Ok(None),
        }
    }
}

/// Whether `(range first last step)` yields `first`, per Ale's `cmp` choice.
pub fn range_continues(first: &Value, last: &Value, step: &Value) -> R<bool> {
    if matches!(last, Value::Null) {
        return Ok(true);
    }
    let ord = if cmp(num_of(step, "range")?, Num::Int(0))? == Some(std::cmp::Ordering::Less) {
        std::cmp::Ordering::Greater
    } else {
        std::cmp::Ordering::Less
    };
    Ok(cmp(num_of(first, "range")?, num_of(last, "range")?)? == Some(ord))
}

fn range_step(ctx: &mut Ctx, prev: Value, last: Value, step: Value) -> R<Cell> {
    let next = add(num_of(&prev, "range")?, num_of(&step, "range")?)?.to_value();
    if !range_continues(&next, &last, &step)? {
        return Ok(None);
    }
    let tail = ctx.new_lazy(Gen::Range {
        prev: next.clone(),
        last,
        step,
    })?;
    Ok(Some((next, tail)))
}

fn concat(ctx: &mut Ctx, mut cur: Value, mut rest: Value) -> R<Cell> {
    loop {
        ctx.tick()?;
        if seq_nonempty(ctx, &cur)? {
            let first = car(ctx, &cur)?;
            let more = cdr(ctx, &cur)?;
            let tail = ctx.new_lazy(Gen::Concat { cur: more, rest })?;
            return Ok(Some((first, tail)));
        }
        match split(ctx, &rest)? {
            Split::Cell(next, remaining) => {
                cur = next;
                rest = remaining;
            }
            _ => return Ok(None),
        }
    }
}

fn partition(ctx: &mut Ctx, count: Value, step: Value, coll: Value) -> R<Cell> {
    if !seq_nonempty(ctx, &coll)? {
        return Ok(None);
    }
    // (seq->list (take count coll))
    let mut items = Vec::new();
    let (mut n, mut c) = (count.clone(), coll.clone());
    while gt_zero(&n, "partition")? && !is_empty(ctx, &c, "partition")? {
        ctx.tick()?;
        items.push(car(ctx, &c)?);
        c = cdr(ctx, &c)?;
        n = dec(&n, "partition")?;
    }
    let chunk = ctx.new_list(items)?;
    let dropped = ctx.new_lazy(Gen::Drop {
        n: step.clone(),
        coll,
    })?;
    let tail = ctx.new_lazy(Gen::Partition {
        count,
        step,
        coll: dropped,
    })?;
    Ok(Some((chunk, tail)))
}

/// `(cons v lazy)`: a realized cell in front of the sequence.
pub fn lazy_prepend(ctx: &mut Ctx, v: Value, lazy: Value) -> R<Value> {
    ctx.lazy_cell(v, lazy)
}

/// `concat`'s entry point: walk `colls` (a sequence of sequences).
pub fn concat_of(ctx: &mut Ctx, colls: Value) -> R<Value> {
    ctx.new_lazy(Gen::Concat {
        cur: Value::Null,
        rest: colls,
    })
}
