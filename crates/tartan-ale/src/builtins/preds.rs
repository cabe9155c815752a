//! Ale's predicates (`predicates.ale`): `name?` is true when every argument
//! satisfies the test, `!name?` when none does; both stop at the first
//! argument that decides.

use super::{b, Builtin};
use crate::builtins::numeric::numeric_eq;
use crate::limits::{rt, Ctx, R};
use crate::number::{modulo, num_of, Num};
use crate::seq::{is_empty, is_seq};
use crate::value::Value;

type Pred = fn(&mut Ctx, &Value) -> R<bool>;

fn pred_apply(ctx: &mut Ctx, args: &[Value], p: Pred, negate: bool) -> R<Value> {
    for a in args {
        ctx.tick()?;
        if p(ctx, a)? == negate {
            return Ok(Value::Bool(false));
        }
    }
    Ok(Value::Bool(true))
}

macro_rules! predicates {
    ($($name:literal, $neg:literal => $pos_fn:ident, $neg_fn:ident, $test:expr;)*) => {
        $(
            fn $pos_fn(ctx: &mut Ctx, args: &[Value]) -> R<Value> { pred_apply(ctx, args, $test, false) }
            fn $neg_fn(ctx: &mut Ctx, args: &[Value]) -> R<Value> { pred_apply(ctx, args, $test, true) }
        )*
        pub static TABLE: &[Builtin] = &[
            $(b($name, 1, None, $pos_fn), b($neg, 1, None, $neg_fn),)*
        ];
    };
}

fn num_is(ctx: &mut Ctx, v: &Value, n: Value) -> R<bool> {
    numeric_eq(ctx, &[v.clone(), n])
}

fn mod2_is(ctx: &mut Ctx, v: &Value, r: i64) -> R<bool> {
    let m = modulo(num_of(v, "mod")?, Num::Int(2))?.to_value();
    num_is(ctx, &m, Value::Int(r))
}

fn is_procedure(v: &Value) -> bool {
    matches!(v, Value::Closure(_) | Value::Builtin(_) | Value::Native(_))
}

/// The `is-a` keywords and their tests (Ale's `%is-a`).
pub fn type_test(kind: &str) -> Option<Pred> {
    Some(match kind {
        "any" => |_, _| Ok(true),
        "atom" => |_, v| {
            Ok(!matches!(
                v,
                Value::Symbol(_) | Value::Null | Value::List(_) | Value::Vector(_) | Value::Object(_)
            ))
        },
        "appender" => |_, v| Ok(crate::seq::is_appendable(v)),
        "boolean" => |_, v| Ok(matches!(v, Value::Bool(_))),
        "bytes" | "macro" | "promise" | "set" | "special" => |_, _| Ok(false),
        "cons" => |_, v| Ok(matches!(v, Value::Cons(_))),
        "counted" => |_, v| {
            Ok(matches!(
                v,
                Value::Null | Value::List(_) | Value::Vector(_) | Value::Str(_) | Value::Object(_)
            ))
        },
        "procedure" => |_, v| Ok(is_procedure(v)),
        "indexed" => |_, v| {
            Ok(matches!(
                v,
                Value::Null | Value::List(_) | Value::Vector(_) | Value::Str(_)
            ))
        },
        "keyword" => |_, v| Ok(matches!(v, Value::Keyword(_))),
        "list" => |_, v| Ok(matches!(v, Value::Null | Value::List(_))),
        "local" => |_, v| Ok(matches!(v, Value::Symbol(s) if !is_qualified(s))),
        // Ale's procedures and lazy sequences answer `Get` with debug data.
        "mapped" => |_, v| Ok(matches!(v, Value::Object(_) | Value::Lazy(_)) || is_procedure(v)),
        "mapper" => |_, v| Ok(matches!(v, Value::Object(_))),
        "nan" => |_, v| Ok(matches!(v, Value::Float(f) if f.is_nan())),
        "null" => |_, v| Ok(matches!(v, Value::Null)),
        "number" => |_, v| Ok(matches!(v, Value::Int(_) | Value::Float(_) | Value::Ratio(..))),
        "object" => |_, v| Ok(matches!(v, Value::Object(_))),
        "pair" => |_, v| {
            Ok(matches!(
                v,
                Value::List(_)
                    | Value::Vector(_)
                    | Value::Str(_)
                    | Value::Object(_)
                    | Value::Cons(_)
                    | Value::Lazy(_)
            ))
        },
        "qualified" => |_, v| Ok(matches!(v, Value::Symbol(s) if is_qualified(s))),
        "resolved" => |_, _| Ok(true),
        "reverser" => |_, v| {
            Ok(matches!(
                v,
                Value::Null | Value::List(_) | Value::Vector(_) | Value::Str(_)
            ))
        },
        "sequence" => |_, v| Ok(is_seq(v)),
        "string" => |_, v| Ok(matches!(v, Value::Str(_))),
        "symbol" => |_, v| Ok(matches!(v, Value::Symbol(_))),
        "vector" => |_, v| Ok(matches!(v, Value::Vector(_))),
        _ => return None,
    })
}

fn is_qualified(s: &str) -> bool {
    s != "/" && s.contains('/')
}

fn test(kind: &str) -> Pred {
    type_test(kind).unwrap_or(|_, _| rt("internal error: unknown predicate"))
}

predicates! {
    "any?", "!any?" => any_p, not_any_p, test("any");
    "appendable?", "!appendable?" => app_p, not_app_p, test("appender");
    "atom?", "!atom?" => atom_p, not_atom_p, test("atom");
    "boolean?", "!boolean?" => bool_p, not_bool_p, test("boolean");
    "bytes?", "!bytes?" => bytes_p, not_bytes_p, test("bytes");
    "cons?", "!cons?" => cons_p, not_cons_p, test("cons");
    "counted?", "!counted?" => counted_p, not_counted_p, test("counted");
    "empty?", "!empty?" => empty_p, not_empty_p, |ctx, v| is_empty(ctx, v, "empty?");
    "even?", "!even?" => even_p, not_even_p, |ctx, v| mod2_is(ctx, v, 0);
    "false?", "!false?" => false_p, not_false_p, |_, v| Ok(matches!(v, Value::Bool(false)));
    "indexed?", "!indexed?" => indexed_p, not_indexed_p, test("indexed");
    "keyword?", "!keyword?" => kw_p, not_kw_p, test("keyword");
    "list?", "!list?" => list_p, not_list_p, test("list");
    "local?", "!local?" => local_p, not_local_p, test("local");
    "macro?", "!macro?" => macro_p, not_macro_p, test("macro");
    "mapped?", "!mapped?" => mapped_p, not_mapped_p, test("mapped");
    "mapper?", "!mapper?" => mapper_p, not_mapper_p, test("mapper");
    "nan?", "!nan?" => nan_p, not_nan_p, test("nan");
    "-inf?", "!-inf?" => ninf_p, not_ninf_p, |ctx, v| num_is(ctx, v, Value::Float(f64::NEG_INFINITY));
    "null?", "!null?" => null_p, not_null_p, test("null");
    "number?", "!number?" => number_p, not_number_p, test("number");
    "object?", "!object?" => object_p, not_object_p, test("object");
    "odd?", "!odd?" => odd_p, not_odd_p, |ctx, v| mod2_is(ctx, v, 1);
    "pair?", "!pair?" => pair_p, not_pair_p, test("pair");
    "inf?", "!inf?" => inf_p, not_inf_p, |ctx, v| num_is(ctx, v, Value::Float(f64::INFINITY));
    "procedure?", "!procedure?" => proc_p, not_proc_p, test("procedure");
    "promise?", "!promise?" => promise_p, not_promise_p, test("promise");
    "qualified?", "!qualified?" => qual_p, not_qual_p, test("qualified");
    "resolved?", "!resolved?" => resolved_p, not_resolved_p, test("resolved");
    "reversible?", "!reversible?" => rev_p, not_rev_p, test("reverser");
    "seq?", "!seq?" => seq_p, not_seq_p, test("sequence");
    "set?", "!set?" => set_p, not_set_p, test("set");
    "special?", "!special?" => special_p, not_special_p, test("special");
    "string?", "!string?" => string_p, not_string_p, test("string");
    "symbol?", "!symbol?" => symbol_p, not_symbol_p, test("symbol");
    "true?", "!true?" => true_p, not_true_p, |_, v| Ok(matches!(v, Value::Bool(true)));
    "vector?", "!vector?" => vector_p, not_vector_p, test("vector");
    "zero?", "!zero?" => zero_p, not_zero_p, |ctx, v| num_is(ctx, v, Value::Int(0));
}
