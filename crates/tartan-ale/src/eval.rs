//! The evaluator. Calls in tail position (closure bodies, `if`/`let`/`do`
//! branches) loop instead of recursing, as Ale's VM turns them into jumps;
//! only argument and test evaluation nests.

use std::sync::Arc;

use crate::builtins::{call_builtin, Builtin};
use crate::limits::{rt, Ctx, R};
use crate::node::{LambdaDef, Node, N};
use crate::seq::element_at;
use crate::value::{Closure, Env, Frame, Key, NativeKind, Slots, Value};

/// Evaluates `node` one level deeper than the caller.
pub fn eval(ctx: &mut Ctx, node: &N, env: &Env) -> R<Value> {
    // Leaves need no loop, depth or clones.
    match &**node {
        Node::Const(v) => {
            ctx.tick()?;
            return Ok(v.clone());
        }
        Node::Local { up, idx } => {
            ctx.tick()?;
            return lookup(ctx, env, *up, *idx, false);
        }
        _ => {}
    }
    ctx.enter()?;
    let r = eval_loop(ctx, node, env);
    ctx.leave();
    r
}

fn frame_at(env: &Env, up: usize) -> R<&Arc<Frame>> {
    let mut f: Option<&Arc<Frame>> = env.as_ref();
    for _ in 0..up {
        f = f.and_then(|fr| fr.parent.as_ref());
    }
    f.map_or_else(|| rt("internal error: unresolved frame"), Ok)
}

/// A `let-rec` lambda and the frame its closures capture.
fn rec_target(env: &Env, up: usize, idx: usize) -> R<(Arc<LambdaDef>, Env)> {
    let frame = frame_at(env, up)?;
    match &frame.slots {
        Slots::Rec(defs) => match defs.get(idx) {
            Some(def) => Ok((def.clone(), Some(frame.clone()))),
            None => rt("internal error: unresolved slot"),
        },
        Slots::Values(_) => rt("internal error: frame kind mismatch"),
    }
}

fn lookup(ctx: &mut Ctx, env: &Env, up: usize, idx: usize, rec: bool) -> R<Value> {
    if rec {
        let (def, fenv) = rec_target(env, up, idx)?;
        return ctx.new_closure(def, fenv);
    }
    match &frame_at(env, up)?.slots {
        Slots::Values(vals) => match vals.get(idx) {
            Some(v) => Ok(v.clone()),
            None => rt("internal error: unresolved slot"),
        },
        Slots::Rec(_) => rt("internal error: frame kind mismatch"),
    }
}

fn eval_args(ctx: &mut Ctx, args: &[N], env: &Env) -> R<Vec<Value>> {
    let mut out = Vec::with_capacity(args.len());
    for a in args {
        out.push(eval(ctx, a, env)?);
    }
    Ok(out)
}

/// Binds arguments for a closure call: the body to run and its frame.
fn bind(ctx: &mut Ctx, c: &Closure, args: Vec<Value>) -> R<(N, Env)> {
    bind_def(ctx, &c.def, &c.env, args)
}

fn bind_def(ctx: &mut Ctx, def: &LambdaDef, env: &Env, mut args: Vec<Value>) -> R<(N, Env)> {
    let argc = args.len();
    let Some(case) = def.find_case(argc) else {
        return rt(format!("got {argc} arguments, expected {}", def.signature()));
    };
    if case.rest {
        let rest: Vec<Value> = args.split_off(case.fixed.min(argc));
        let rest = ctx.new_vec(rest)?;
        args.push(rest);
    }
    let frame = ctx.new_frame(args, env.clone())?;
    Ok((case.body.clone(), Some(frame)))
}

/// The node and environment start borrowed and are only owned once a tail
/// position moves to another node or frame (saving reference counting).
fn eval_loop(ctx: &mut Ctx, start: &N, start_env: &Env) -> R<Value> {
    let mut owned_cur: Option<N> = None;
    let mut owned_env: Option<Env> = None;
    loop {
        ctx.tick()?;
        let cur: &N = owned_cur.as_ref().unwrap_or(start);
        let env: &Env = owned_env.as_ref().unwrap_or(start_env);
        let mut new_env: Option<Env> = None;
        // Each arm returns a value or yields the node to continue with (a
        // tail position), possibly with a new environment.
        let next: N = match &**cur {
            Node::Const(v) => return Ok(v.clone()),
            Node::Local { up, idx } => return lookup(ctx, env, *up, *idx, false),
            Node::RecRef { up, idx } => return lookup(ctx, env, *up, *idx, true),
            Node::If(t, a, b) => {
                if eval(ctx, t, env)?.is_false() {
                    b.clone()
                } else {
                    a.clone()
                }
            }
            Node::Do(items) => {
                let Some((last, init)) = items.split_last() else {
                    return Ok(Value::Null);
                };
                for n in init {
                    eval(ctx, n, env)?;
                }
                last.clone()
            }
            Node::Let { values, body } => {
                let vals = eval_args(ctx, values, env)?;
                new_env = Some(Some(ctx.new_frame(vals, env.clone())?));
                body.clone()
            }
            Node::LetRec { defs, body } => {
                new_env = Some(Some(ctx.new_rec_frame(defs.clone(), env.clone())?));
                body.clone()
            }
            Node::Lambda(def) => return ctx.new_closure(def.clone(), env.clone()),
            Node::LazySeq(def) => {
                let thunk = ctx.new_closure(def.clone(), env.clone())?;
                return ctx.new_lazy(crate::lazy::Gen::Thunk(thunk));
            }
            Node::And(items) => match short_circuit(ctx, items, env, true)? {
                Ok(v) => return Ok(v),
                Err(last) => last,
            },
            Node::Or(items) => match short_circuit(ctx, items, env, false)? {
                Ok(v) => return Ok(v),
                Err(last) => last,
            },
            Node::Cond(clauses) => {
                let mut chosen = None;
                for (test, branch) in clauses {
                    if !eval(ctx, test, env)?.is_false() {
                        chosen = Some(branch.clone());
                        break;
                    }
                }
                match chosen {
                    Some(n) => n,
                    None => return Ok(Value::Null),
                }
            }
            Node::CallBuiltin { f, args } => return call_builtin_node(ctx, f, args, env),
            Node::Call { f, args } => {
                let (body, frame) = if let Node::RecRef { up, idx } = &**f {
                    // Calling a let-rec name directly needs no closure value.
                    let (def, fenv) = rec_target(env, *up, *idx)?;
                    let argv = eval_args(ctx, args, env)?;
                    bind_def(ctx, &def, &fenv, argv)?
                } else {
                    let fv = eval(ctx, f, env)?;
                    let argv = eval_args(ctx, args, env)?;
                    match &fv {
                        Value::Closure(c) => bind(ctx, c, argv)?,
                        _ => return call_value(ctx, &fv, argv),
                    }
                };
                new_env = Some(frame);
                body
            }
            Node::Vector(items) => {
                let vals = eval_args(ctx, items, env)?;
                return ctx.new_vec(vals);
            }
            Node::Object(items) => {
                let vals = eval_args(ctx, items, env)?;
                return crate::builtins::seqs::make_object(ctx, vals);
            }
            Node::Cons(a, b) => {
                let cdr = eval(ctx, b, env)?;
                let car = eval(ctx, a, env)?;
                return crate::seq::prepend(ctx, car, cdr);
            }
        };
        if let Some(e) = new_env {
            owned_env = Some(e);
        }
        owned_cur = Some(next);
    }
}

/// Builtin calls with few arguments evaluate them on the stack (most calls
/// are small: this avoids an allocation per call).
fn call_builtin_node(ctx: &mut Ctx, f: &'static Builtin, args: &[N], env: &Env) -> R<Value> {
    match args {
        [] => call_builtin(ctx, f, &[]),
        [a] => {
            let a = eval(ctx, a, env)?;
            call_builtin(ctx, f, std::slice::from_ref(&a))
        }
        [a, b] => {
            let argv = [eval(ctx, a, env)?, eval(ctx, b, env)?];
            call_builtin(ctx, f, &argv)
        }
        [a, b, c] => {
            let argv = [eval(ctx, a, env)?, eval(ctx, b, env)?, eval(ctx, c, env)?];
            call_builtin(ctx, f, &argv)
        }
        _ => {
            let argv = eval_args(ctx, args, env)?;
            call_builtin(ctx, f, &argv)
        }
    }
}

/// `and`/`or` up to their last form: `Ok(value)` when a form decides,
/// `Err(last)` to continue with the last form in tail position.
fn short_circuit(ctx: &mut Ctx, items: &[N], env: &Env, is_and: bool) -> R<Result<Value, N>> {
    let Some((last, init)) = items.split_last() else {
        return Ok(Ok(Value::Bool(is_and)));
    };
    for n in init {
        let v = eval(ctx, n, env)?;
        if v.is_false() == is_and {
            return Ok(Ok(v));
        }
    }
    Ok(Err(last.clone()))
}

/// Calls any procedure with already evaluated arguments.
pub fn apply(ctx: &mut Ctx, f: &Value, args: Vec<Value>) -> R<Value> {
    match f {
        Value::Closure(c) => {
            let (body, frame) = bind(ctx, c, args)?;
            eval(ctx, &body, &frame)
        }
        _ => ctx.nested(|ctx| call_value(ctx, f, args)),
    }
}

fn arity_range(args: &[Value], min: usize, max: usize, what: &str) -> R<()> {
    if args.len() < min || args.len() > max {
        return rt(format!(
            "{what}: expected between {min} and {max} arguments, got {}",
            args.len()
        ));
    }
    Ok(())
}

fn index_arg(v: &Value, what: &str) -> R<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        other => rt(format!(
            "{what}: index must be an integer, got {}",
            other.type_name()
        )),
    }
}

/// Calling a non-closure value, as each Ale type's `Call` method does.
pub fn call_value(ctx: &mut Ctx, f: &Value, args: Vec<Value>) -> R<Value> {
    match f {
        Value::Closure(_) => apply(ctx, f, args),
        Value::Builtin(b) => call_builtin_checked(ctx, b, &args),
        Value::Native(n) => match &n.kind {
            NativeKind::Partial(func, first) => {
                let mut all = first.clone();
                all.extend(args);
                apply(ctx, func, all)
            }
            NativeKind::Constantly(v) => Ok(v.clone()),
            NativeKind::Juxt(fs) => {
                let mut out = Vec::with_capacity(fs.len());
                for func in fs {
                    out.push(apply(ctx, func, args.clone())?);
                }
                ctx.new_vec(out)
            }
        },
        // Keywords look themselves up in a mapped value (extra args ignored).
        Value::Keyword(_) => {
            let Some(target) = args.first() else {
                return rt("keyword call: expected between 1 and 2 arguments, got 0");
            };
            mapped_get(target, f, args.get(1).cloned())
        }
        Value::Object(_) => {
            let Some(k) = args.first() else {
                return rt("object call: expected between 1 and 2 arguments, got 0");
            };
            mapped_get(f, k, args.get(1).cloned())
        }
        Value::Int(i) => {
            let Some(target) = args.first() else {
                return rt("integer call: expected between 1 and 2 arguments, got 0");
            };
            match element_at(ctx, target, *i, "integer call")? {
                Some(v) => Ok(v),
                None => Ok(args.get(1).cloned().unwrap_or(Value::Null)),
            }
        }
        Value::Bool(b) => Ok(Value::Bool(*b)),
        Value::Vector(view) => {
            arity_range(&args, 1, 2, "vector call")?;
            let len = view.len() as i64;
            let start = index_arg(args.first().unwrap_or(&Value::Null), "vector call")?;
            let end = match args.get(1) {
                Some(e) => index_arg(e, "vector call")?,
                None => len,
            };
            if start < 0 || start > len || end < start || end > len {
                return rt(format!(
                    "vector call: {start} and {end} are not valid start/end indices"
                ));
            }
            let items = view
                .as_slice()
                .get(start as usize..end as usize)
                .unwrap_or(&[])
                .to_vec();
            ctx.new_vec(items)
        }
        Value::Str(_) | Value::List(_) | Value::Null => crate::builtins::seqs::call_slice(ctx, f, &args),
        other => rt(format!("{} is not a procedure", other.type_name())),
    }
}

pub fn call_builtin_checked(ctx: &mut Ctx, b: &'static Builtin, args: &[Value]) -> R<Value> {
    if args.len() < b.min || b.max.is_some_and(|m| args.len() > m) {
        return rt(format!(
            "{}: got {} arguments, expected {}",
            b.name,
            args.len(),
            b.arity_text()
        ));
    }
    call_builtin(ctx, b, args)
}

/// `Mapped.Get` with Ale's keyword-call behaviour: a missing key gives the
/// default or null.
fn mapped_get(target: &Value, key: &Value, default: Option<Value>) -> R<Value> {
    match target {
        Value::Object(o) => {
            let found = Key::from_value(key).and_then(|k| o.get(&k).cloned());
            Ok(found.or(default).unwrap_or(Value::Null))
        }
        other => rt(format!(
            "cannot look up {} in {}: not a mapped value",
            describe_key(key),
            other.type_name()
        )),
    }
}

fn describe_key(key: &Value) -> String {
    match key {
        Value::Keyword(k) => format!(":{k}"),
        other => other.type_name().to_string(),
    }
}
