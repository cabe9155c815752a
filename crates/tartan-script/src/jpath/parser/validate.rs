//! Validation: jpath checks the filters of the outermost query only.

use super::super::ast::{Expr, ExprKind, Func, Path, Selector};
use super::{perr, PResult};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    Logical,
    Operand,
    Argument,
}

pub(super) fn validate_path(path: &Path) -> PResult<()> {
    for segment in &path.segments {
        for selector in &segment.selectors {
            if let Selector::Filter(expr) = selector {
                validate_expr(expr, Use::Logical, false)?;
            }
        }
    }
    Ok(())
}

fn validate_expr(expr: &Expr, usage: Use, in_comparison: bool) -> PResult<()> {
    match &expr.kind {
        ExprKind::Literal(_) => {
            if usage == Use::Logical {
                return perr("literal must be compared", expr.pos);
            }
            Ok(())
        }
        ExprKind::Query { path, .. } => {
            if in_comparison && !is_singular(path) {
                return perr("comparison requires singular query", expr.pos);
            }
            Ok(())
        }
        ExprKind::Not(inner) => validate_expr(inner, Use::Logical, false),
        ExprKind::And(items) | ExprKind::Or(items) => items
            .iter()
            .try_for_each(|item| validate_expr(item, Use::Logical, false)),
        ExprKind::Compare { first, rest } => {
            validate_expr(first, Use::Operand, true)?;
            rest.iter()
                .try_for_each(|(_, item)| validate_expr(item, Use::Operand, true))
        }
        ExprKind::Call { func, args } => {
            validate_call(func, args, usage, in_comparison, expr.pos)?;
            args.iter()
                .try_for_each(|arg| validate_expr(arg, Use::Argument, false))
        }
    }
}

fn validate_call(func: &Func, args: &[Expr], usage: Use, in_comparison: bool, pos: usize) -> PResult<()> {
    let name = func.name();
    match func {
        Func::Match(_) | Func::Search(_) => {
            if args.len() != 2 {
                return perr("invalid function arity: match/search", pos);
            }
            if in_comparison {
                return perr("function result must not be compared: match/search", pos);
            }
            Ok(())
        }
        Func::Length | Func::Count | Func::Value => {
            let [arg] = args else {
                return perr(format!("invalid function arity: {name}"), pos);
            };
            if !in_comparison && usage == Use::Logical {
                return perr(format!("function result must be compared: {name}"), pos);
            }
            match (&arg.kind, func) {
                (ExprKind::Query { path, .. }, Func::Length) if !is_singular(path) => {
                    perr(format!("function requires singular query: {name}"), arg.pos)
                }
                (ExprKind::Query { .. }, _) | (_, Func::Length) => Ok(()),
                _ => perr(
                    format!("function requires query argument: {name} requires query argument"),
                    arg.pos,
                ),
            }
        }
    }
}

fn is_singular(path: &Path) -> bool {
    path.segments.iter().all(|segment| {
        !segment.descendant
            && matches!(
                segment.selectors.as_slice(),
                [Selector::Name(_) | Selector::Index(_)]
            )
    })
}
