//! The five functions: `length`, `count`, `value`, `match`, `search`.

use super::super::ast::{Func, Pattern};
use super::super::limits::{Abort, Cx};
use super::values::{view, Sc, Val, View};

/// A node list of exactly one node, or a scalar.
fn singular<'a>(value: &Val<'a>) -> Option<Sc<'a>> {
    match value {
        Val::Nodes(nodes) => match nodes.as_slice() {
            [only] => Some(Sc::Json(only)),
            _ => None,
        },
        Val::Scalar(sc) => Some(*sc),
    }
}

pub(super) fn call<'a>(func: &'a Func, args: &[Val<'a>], cx: &mut Cx) -> Result<Sc<'a>, Abort> {
    Ok(match (func, args) {
        (Func::Length, [arg]) => match singular(arg).map(view) {
            Some(View::Str(s)) => Sc::Num(s.chars().count() as f64),
            Some(View::Arr(items)) => Sc::Num(items.len() as f64),
            Some(View::Obj(map)) => Sc::Num(map.len() as f64),
            _ => Sc::Nothing,
        },
        (Func::Count, [Val::Nodes(nodes)]) => Sc::Num(nodes.len() as f64),
        (Func::Value, [arg]) => singular(arg).unwrap_or(Sc::Nothing),
        (Func::Match(pattern) | Func::Search(pattern), [subject, regex]) => {
            let full = matches!(func, Func::Match(_));
            let (Some(View::Str(subject)), Some(View::Str(source))) =
                (singular(subject).map(view), singular(regex).map(view))
            else {
                return Ok(Sc::Nothing);
            };
            let dynamic;
            let regex = match pattern {
                Pattern::Fixed(regex) => regex.as_ref(),
                Pattern::Dynamic => {
                    dynamic = cx.regex(source, full)?;
                    dynamic.as_ref()
                }
            };
            match regex {
                Some(regex) => {
                    cx.charge(1 + subject.len() as u64 / 16)?;
                    Sc::Bool(regex.is_match(subject))
                }
                None => Sc::Nothing,
            }
        }
        _ => Sc::Nothing,
    })
}
