//! The values of filter expressions and how they compare, as Go's jpath
//! sees them.

use serde_json::{Map, Value};

use super::super::ast::CmpOp;

/// A filter expression's value: a node list (from a query) or one scalar.
pub(super) enum Val<'a> {
    Nodes(Vec<&'a Value>),
    Scalar(Sc<'a>),
}

#[derive(Clone, Copy)]
pub(super) enum Sc<'a> {
    /// jpath's "nothing": a function's answer when it has none.
    Nothing,
    Json(&'a Value),
    Bool(bool),
    Num(f64),
}

/// A scalar or node seen as a Go value, for comparisons.
#[derive(Clone, Copy)]
pub(super) enum View<'a> {
    Nothing,
    Null,
    Bool(bool),
    Num(f64),
    Str(&'a str),
    Arr(&'a [Value]),
    Obj(&'a Map<String, Value>),
}

fn json_view(value: &Value) -> View<'_> {
    match value {
        Value::Null => View::Null,
        Value::Bool(b) => View::Bool(*b),
        Value::Number(n) => View::Num(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => View::Str(s),
        Value::Array(items) => View::Arr(items),
        Value::Object(map) => View::Obj(map),
    }
}

pub(super) fn view(sc: Sc<'_>) -> View<'_> {
    match sc {
        Sc::Nothing => View::Nothing,
        Sc::Json(value) => json_view(value),
        Sc::Bool(b) => View::Bool(b),
        Sc::Num(n) => View::Num(n),
    }
}

/// Go's `reflect.DeepEqual` over decoded JSON (numbers are floats).
/// Recurses over the values' nesting (bounded, see the module docs).
fn deep_eq(a: View<'_>, b: View<'_>) -> bool {
    match (a, b) {
        (View::Nothing, View::Nothing) | (View::Null, View::Null) => true,
        (View::Bool(x), View::Bool(y)) => x == y,
        (View::Num(x), View::Num(y)) => x == y,
        (View::Str(x), View::Str(y)) => x == y,
        (View::Arr(x), View::Arr(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| deep_eq(json_view(p), json_view(q)))
        }
        (View::Obj(x), View::Obj(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, p)| y.get(k).is_some_and(|q| deep_eq(json_view(p), json_view(q))))
        }
        _ => false,
    }
}

fn less(a: View<'_>, b: View<'_>) -> bool {
    match (a, b) {
        (View::Num(x), View::Num(y)) => x < y,
        (View::Str(x), View::Str(y)) => x < y,
        _ => false,
    }
}

pub(super) fn truthy(value: &Val<'_>) -> bool {
    match value {
        Val::Nodes(nodes) => !nodes.is_empty(),
        Val::Scalar(Sc::Nothing | Sc::Json(Value::Null)) => false,
        Val::Scalar(Sc::Bool(b) | Sc::Json(Value::Bool(b))) => *b,
        Val::Scalar(_) => true,
    }
}

fn items<'v, 'a>(value: &'v Val<'a>) -> Box<dyn Iterator<Item = View<'a>> + 'v> {
    match value {
        Val::Nodes(nodes) => Box::new(nodes.iter().map(|n| json_view(n))),
        Val::Scalar(sc) => Box::new(std::iter::once(view(*sc))),
    }
}

fn count(value: &Val<'_>) -> usize {
    match value {
        Val::Nodes(nodes) => nodes.len(),
        Val::Scalar(_) => 1,
    }
}

fn is_nothing(value: &Val<'_>) -> bool {
    matches!(value, Val::Scalar(Sc::Nothing))
}

/// Whether some pair of items, one from each side, satisfies `test`.
fn any_pair(left: &Val<'_>, right: &Val<'_>, test: impl Fn(View<'_>, View<'_>) -> bool) -> bool {
    items(left).any(|l| items(right).any(|r| test(l, r)))
}

pub(super) fn compare(op: CmpOp, left: &Val<'_>, right: &Val<'_>) -> bool {
    let empty = count(left) == 0 || count(right) == 0;
    match op {
        CmpOp::Eq | CmpOp::Ne if empty => {
            // Both empty, or one empty and the other nothing: equal.
            let equal = (count(left) == 0 && count(right) == 0)
                || (count(left) == 0 && is_nothing(right))
                || (count(right) == 0 && is_nothing(left));
            equal == (op == CmpOp::Eq)
        }
        _ if empty => false,
        CmpOp::Eq => any_pair(left, right, deep_eq),
        CmpOp::Ne => any_pair(left, right, |l, r| !deep_eq(l, r)),
        CmpOp::Lt => any_pair(left, right, less),
        CmpOp::Le => any_pair(left, right, |l, r| deep_eq(l, r) || less(l, r)),
        CmpOp::Gt => any_pair(left, right, |l, r| less(r, l)),
        CmpOp::Ge => any_pair(left, right, |l, r| deep_eq(l, r) || less(r, l)),
    }
}
