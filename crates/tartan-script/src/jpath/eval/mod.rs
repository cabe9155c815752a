//! Evaluation: applying a path to a document, and a filter expression to
//! a node.

use serde_json::{Map, Value};

use super::ast::{Expr, ExprKind, Path, Selector};
use super::limits::{Abort, Cx};
use functions::call;
use values::{compare, truthy, Sc, Val};

mod functions;
mod values;

/// An object's member values in key order (bytes), as jpath visits them.
fn sorted_values(map: &Map<String, Value>) -> Vec<&Value> {
    let mut members: Vec<(&String, &Value)> = map.iter().collect();
    members.sort_unstable_by(|a, b| a.0.cmp(b.0));
    members.into_iter().map(|(_, v)| v).collect()
}

/// Apply `path` from `start`; `start` is also the `$` of its filters.
pub(super) fn eval_path<'a>(path: &'a Path, start: &'a Value, cx: &mut Cx) -> Result<Vec<&'a Value>, Abort> {
    let root = start;
    let mut nodes = vec![start];
    for segment in &path.segments {
        let mut out = Vec::new();
        for &node in &nodes {
            if !segment.descendant {
                for selector in &segment.selectors {
                    select(selector, node, root, &mut out, cx)?;
                }
                continue;
            }
            // The node and its descendants, each before its children,
            // children in order (object members by key).
            let mut stack = vec![node];
            while let Some(visit) = stack.pop() {
                cx.charge(1)?;
                for selector in &segment.selectors {
                    select(selector, visit, root, &mut out, cx)?;
                }
                match visit {
                    Value::Array(items) => stack.extend(items.iter().rev()),
                    Value::Object(map) => stack.extend(sorted_values(map).into_iter().rev()),
                    _ => {}
                }
            }
        }
        nodes = out;
    }
    Ok(nodes)
}

fn push<'a>(out: &mut Vec<&'a Value>, value: &'a Value, cx: &mut Cx) -> Result<(), Abort> {
    cx.charge(1)?;
    out.push(value);
    Ok(())
}

fn select<'a>(
    selector: &'a Selector,
    node: &'a Value,
    root: &'a Value,
    out: &mut Vec<&'a Value>,
    cx: &mut Cx,
) -> Result<(), Abort> {
    match selector {
        Selector::Name(name) => {
            if let Some(value) = node.as_object().and_then(|map| map.get(name)) {
                push(out, value, cx)?;
            }
        }
        Selector::Index(index) => {
            if let Value::Array(items) = node {
                let len = items.len() as i64;
                let at = if *index < 0 { index + len } else { *index };
                if (0..len).contains(&at) {
                    push(out, &items[at as usize], cx)?;
                }
            }
        }
        Selector::Wildcard => match node {
            Value::Array(items) => items.iter().try_for_each(|v| push(out, v, cx))?,
            Value::Object(map) => sorted_values(map)
                .into_iter()
                .try_for_each(|v| push(out, v, cx))?,
            _ => {}
        },
        Selector::Slice { start, end, step } => {
            if let Value::Array(items) = node {
                slice(items, *start, *end, *step, |v| push(out, v, cx))?;
            }
        }
        Selector::Filter(expr) => {
            let children: Vec<&Value> = match node {
                Value::Array(items) => items.iter().collect(),
                Value::Object(map) => sorted_values(map),
                _ => return Ok(()),
            };
            for child in children {
                cx.charge(1)?;
                if truthy(&eval_expr(expr, child, root, cx)?) {
                    push(out, child, cx)?;
                }
            }
        }
    }
    Ok(())
}

/// RFC 9535's array slice (section 2.3.4.2), calling `each` in order.
fn slice<'a>(
    items: &'a [Value],
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
    mut each: impl FnMut(&'a Value) -> Result<(), Abort>,
) -> Result<(), Abort> {
    let len = items.len() as i64;
    let normalize = |i: i64| if i >= 0 { i } else { len + i };
    if step > 0 {
        let lower = start.map_or(0, normalize).clamp(0, len);
        let upper = end.map_or(len, normalize).clamp(0, len);
        let mut i = lower;
        while i < upper {
            each(&items[i as usize])?;
            i += step;
        }
    } else if step < 0 {
        let upper = start.map_or(len - 1, normalize).clamp(-1, len - 1);
        let lower = end.map_or(-len - 1, normalize).clamp(-1, len - 1);
        let mut i = upper;
        while lower < i {
            each(&items[i as usize])?;
            i += step;
        }
    }
    Ok(())
}

fn eval_expr<'a>(expr: &'a Expr, current: &'a Value, root: &'a Value, cx: &mut Cx) -> Result<Val<'a>, Abort> {
    Ok(match &expr.kind {
        ExprKind::Literal(value) => Val::Scalar(Sc::Json(value)),
        ExprKind::Query { absolute, path } => {
            Val::Nodes(eval_path(path, if *absolute { root } else { current }, cx)?)
        }
        ExprKind::Not(inner) => Val::Scalar(Sc::Bool(!truthy(&eval_expr(inner, current, root, cx)?))),
        ExprKind::And(exprs) => {
            for item in exprs {
                if !truthy(&eval_expr(item, current, root, cx)?) {
                    return Ok(Val::Scalar(Sc::Bool(false)));
                }
            }
            Val::Scalar(Sc::Bool(true))
        }
        ExprKind::Or(exprs) => {
            for item in exprs {
                if truthy(&eval_expr(item, current, root, cx)?) {
                    return Ok(Val::Scalar(Sc::Bool(true)));
                }
            }
            Val::Scalar(Sc::Bool(false))
        }
        ExprKind::Compare { first, rest } => {
            let mut acc = eval_expr(first, current, root, cx)?;
            for (op, item) in rest {
                let right = eval_expr(item, current, root, cx)?;
                acc = Val::Scalar(Sc::Bool(compare(*op, &acc, &right)));
            }
            acc
        }
        ExprKind::Call { func, args } => {
            let mut values = Vec::with_capacity(args.len());
            for arg in args {
                values.push(eval_expr(arg, current, root, cx)?);
            }
            Val::Scalar(call(func, &values, cx)?)
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::super::test_support::deep;
    use super::super::JPath;

    #[test]
    fn deep_documents_walk_without_recursion() {
        // Documents reach scripts with at most 128 levels of nesting.
        let doc = deep(128, json!("bottom"));
        let path = JPath::compile("$..*").unwrap();
        let all = path.try_query(&doc).unwrap();
        assert_eq!(all.len(), 128);
        assert_eq!(all.last(), Some(&json!("bottom")));
        let leaves = JPath::compile("$..[?@ == 'bottom']")
            .unwrap()
            .try_query(&doc)
            .unwrap();
        assert_eq!(leaves, vec![json!("bottom")]);
        assert!(JPath::compile("$..x..x").unwrap().try_matches(&doc).unwrap());
    }
}
