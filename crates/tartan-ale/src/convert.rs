//! JSON <-> Ale conversions, following Argyll's `jsonToAle` and `aleToJSON`
//! (engine/internal/engine/script/ale.go).

use serde_json::{Map, Number, Value as Json};

use crate::limits::{rt, Ctx, R};
use crate::number::{format_ratio, go_g};
use crate::print::display;
use crate::value::{Key, Value, SLOT_BYTES};

/// Objects become objects keyed by keywords, arrays vectors, integers stay
/// integers and other numbers become floats.
pub fn json_to_value(ctx: &mut Ctx, j: &Json) -> R<Value> {
    ctx.tick()?;
    match j {
        Json::Null => Ok(Value::Null),
        Json::Bool(b) => Ok(Value::Bool(*b)),
        Json::Number(n) => Ok(match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        }),
        Json::String(s) => ctx.new_str(s.clone()),
        Json::Array(items) => ctx.nested(|ctx| {
            ctx.check_room(items.len() * SLOT_BYTES)?;
            let vals = items
                .iter()
                .map(|i| json_to_value(ctx, i))
                .collect::<R<Vec<_>>>()?;
            ctx.new_vec(vals)
        }),
        Json::Object(map) => ctx.nested(|ctx| {
            let mut entries = Vec::with_capacity(map.len());
            for (k, v) in map {
                entries.push((Key::Keyword(k.as_str().into()), json_to_value(ctx, v)?));
            }
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.dedup_by(|later, earlier| later.0 == earlier.0);
            ctx.new_obj(entries)
        }),
    }
}

/// Results nested deeper are refused: callers drop and serialize JSON
/// recursively, on stacks of unknown size.
const MAX_JSON_DEPTH: usize = 512;

/// `aleToJSON`: keywords become strings, vectors and non-empty lists arrays,
/// empty lists null, objects maps (keys printed as Go's `%v` would), and
/// everything else its printed form.
pub fn value_to_json(ctx: &mut Ctx, v: &Value) -> R<Json> {
    to_json(ctx, v, 0)
}

fn to_json(ctx: &mut Ctx, v: &Value, depth: usize) -> R<Json> {
    ctx.tick()?;
    if depth > MAX_JSON_DEPTH {
        return rt(format!("result nested deeper than {MAX_JSON_DEPTH} levels"));
    }
    Ok(match v {
        Value::Bool(b) => Json::Bool(*b),
        Value::Keyword(k) => Json::String(k.to_string()),
        Value::Int(i) => Json::Number((*i).into()),
        Value::Float(f) => match Number::from_f64(*f) {
            Some(n) => Json::Number(n),
            None => {
                return rt(format!(
                    "result contains {}, which JSON cannot represent",
                    go_g(*f)
                ))
            }
        },
        Value::Null => Json::Null,
        Value::Vector(view) => ctx.nested(|ctx| {
            ctx.charge(view.len() * SLOT_BYTES)?;
            Ok(Json::Array(
                view.as_slice()
                    .iter()
                    .map(|e| to_json(ctx, e, depth + 1))
                    .collect::<R<_>>()?,
            ))
        })?,
        Value::List(_) => ctx.nested(|ctx| {
            let mut out = Vec::new();
            let mut cur = v.clone();
            while let Value::List(c) = cur {
                ctx.charge(SLOT_BYTES)?;
                out.push(to_json(ctx, &c.head, depth + 1)?);
                cur = c.tail.clone();
            }
            Ok(Json::Array(out))
        })?,
        Value::Object(o) => ctx.nested(|ctx| {
            let mut pairs = Vec::with_capacity(o.entries().len());
            for (k, val) in o.entries() {
                let text = key_text(k);
                ctx.charge(text.len() + SLOT_BYTES)?;
                pairs.push((text, to_json(ctx, val, depth + 1)?));
            }
            // Go's encoder writes map keys sorted; equal printed keys would
            // overwrite each other in an order Go leaves unspecified.
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            if pairs.windows(2).any(|w| matches!(w, [a, b] if a.0 == b.0)) {
                return rt("object keys collide when converted to JSON strings");
            }
            let mut map = Map::new();
            for (k, val) in pairs {
                map.insert(k, val);
            }
            Ok(Json::Object(map))
        })?,
        Value::Str(s) => {
            ctx.charge(s.text.len())?;
            Json::String(s.text.clone())
        }
        Value::Symbol(s) => Json::String(s.to_string()),
        Value::Ratio(n, d) => Json::String(format_ratio(*n, *d)),
        Value::Cons(_) => {
            let mut out = String::new();
            display(ctx, v, &mut out)?;
            ctx.charge(out.len())?;
            Json::String(out)
        }
        Value::Lazy(_) => {
            return rt(
                "result is a lazy sequence, which Ale prints as a memory address: \
                 realize it with seq->vector",
            )
        }
        Value::Closure(_) | Value::Builtin(_) | Value::Native(_) => {
            return rt("result is a procedure, which Ale prints as a memory address")
        }
    })
}

/// `fmt.Sprintf("%v", aleToJSON(key))`.
fn key_text(k: &Key) -> String {
    match k {
        Key::Null => "<nil>".to_string(),
        Key::Bool(b) => b.to_string(),
        Key::Int(i) => i.to_string(),
        Key::Float(f) => go_g(*f),
        Key::Ratio(n, d) => format_ratio(*n, *d),
        Key::Str(s) => s.text.clone(),
        Key::Keyword(s) | Key::Symbol(s) => s.to_string(),
    }
}
