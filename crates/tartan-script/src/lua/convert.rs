//! JSON into Lua values and back. The way back is charged: a table may
//! hold the same sub-table many times over, so a script of a hundred bytes
//! can describe an answer of 10^8 leaves that costs nothing inside Lua and
//! gigabytes as JSON. Each value made is charged, by an estimate of its
//! size, to the evaluation's memory allowance (`Limits::memory_bytes`), and
//! the conversion stops as soon as that is spent, or when the evaluation's
//! time runs out or it is cancelled.

use mlua::{Lua, Table, Value as LuaValue};
use serde_json::{Map, Number, Value};

use super::budget::{Budget, Trip};

/// Deepest table nesting converted back to JSON (a table may contain itself).
pub(super) const MAX_DEPTH: usize = 128;

/// How many values are made between two readings of the clock.
const CLOCK_EVERY: u64 = 4096;

/// Why a conversion stopped.
#[derive(Debug)]
pub(super) enum Fault {
    /// The answer would take more than the evaluation's memory allowance.
    Memory,
    /// The evaluation's time ran out, or it was cancelled.
    Trip(Trip),
    /// The answer is not JSON (a function, a key that cannot be one, ...).
    Invalid(String),
}

impl From<mlua::Error> for Fault {
    fn from(e: mlua::Error) -> Fault {
        Fault::Invalid(e.to_string())
    }
}

/// What converting an answer may still make.
pub(super) struct Charge<'a> {
    left: usize,
    made: u64,
    budget: &'a Budget,
}

impl<'a> Charge<'a> {
    pub(super) fn new(bytes: usize, budget: &'a Budget) -> Charge<'a> {
        Charge {
            left: bytes,
            made: 0,
            budget,
        }
    }

    /// Charge one value of `extra` bytes beyond the value itself.
    fn take(&mut self, extra: usize) -> Result<(), Fault> {
        let cost = std::mem::size_of::<Value>().saturating_add(extra);
        self.left = self.left.checked_sub(cost).ok_or(Fault::Memory)?;
        self.made += 1;
        if self.made.is_multiple_of(CLOCK_EVERY) {
            if let Some(trip) = self.budget.overdue() {
                return Err(Fault::Trip(trip));
            }
        }
        Ok(())
    }
}

pub(super) fn to_lua(lua: &Lua, value: &Value, depth: usize) -> mlua::Result<LuaValue> {
    if depth > MAX_DEPTH {
        return Err(mlua::Error::runtime("input nested too deeply"));
    }
    Ok(match value {
        Value::Null => LuaValue::Nil,
        Value::Bool(b) => LuaValue::Boolean(*b),
        Value::Number(n) => LuaValue::Number(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => LuaValue::String(lua.create_string(s)?),
        Value::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                table.raw_set(i + 1, to_lua(lua, item, depth + 1)?)?;
            }
            LuaValue::Table(table)
        }
        Value::Object(fields) => {
            let table = lua.create_table_with_capacity(0, fields.len())?;
            for (k, v) in fields {
                table.raw_set(k.as_str(), to_lua(lua, v, depth + 1)?)?;
            }
            LuaValue::Table(table)
        }
    })
}

/// The script's answer as JSON: a table with keys 1..n becomes an array,
/// any other table an object, anything else its JSON value.
pub(super) fn to_json(value: &LuaValue, depth: usize, charge: &mut Charge<'_>) -> Result<Value, Fault> {
    if depth > MAX_DEPTH {
        return Err(Fault::Invalid(
            "result nested too deeply (a table that contains itself?)".into(),
        ));
    }
    Ok(match value {
        LuaValue::Nil => {
            charge.take(0)?;
            Value::Null
        }
        LuaValue::Boolean(b) => {
            charge.take(0)?;
            Value::Bool(*b)
        }
        LuaValue::Integer(i) => {
            charge.take(0)?;
            Value::from(*i)
        }
        LuaValue::Number(n) => {
            charge.take(0)?;
            number(*n)?
        }
        LuaValue::String(s) => {
            let text = s.to_str()?;
            charge.take(text.len())?;
            Value::String(text.to_string())
        }
        LuaValue::Table(t) => table_to_json(t, depth, charge)?,
        other => {
            return Err(Fault::Invalid(format!(
                "a {} cannot be a result",
                other.type_name()
            )))
        }
    })
}

/// A whole float is an integer, as Argyll's conversion makes it.
fn number(n: f64) -> Result<Value, Fault> {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        return Ok(Value::from(n as i64));
    }
    Number::from_f64(n)
        .map(Value::Number)
        .ok_or_else(|| Fault::Invalid(format!("{n} is not a JSON number")))
}

/// A table of keys 1..n is an array; any other an object (a non-string
/// key is written as its JSON text, as Argyll does).
fn table_to_json(t: &Table, depth: usize, charge: &mut Charge<'_>) -> Result<Value, Fault> {
    charge.take(0)?;
    let len = t.raw_len();
    let mut count = 0usize;
    let mut all_numeric = true;
    for pair in t.clone().pairs::<LuaValue, LuaValue>() {
        let (key, _) = pair?;
        count += 1;
        if !matches!(key, LuaValue::Integer(_) | LuaValue::Number(_)) {
            all_numeric = false;
        }
    }
    if all_numeric && count > 0 && count == len {
        let mut items = Vec::with_capacity(len.min(charge.left / std::mem::size_of::<Value>() + 1));
        for i in 1..=len {
            let item: LuaValue = t.raw_get(i)?;
            items.push(to_json(&item, depth + 1, charge)?);
        }
        return Ok(Value::Array(items));
    }
    let mut fields = Map::new();
    for pair in t.clone().pairs::<LuaValue, LuaValue>() {
        let (key, value) = pair?;
        let key = match key {
            LuaValue::String(s) => s.to_str()?.to_string(),
            other => to_json(&other, depth + 1, charge)?.to_string(),
        };
        // A field's key, and its place in the map, beside its value.
        charge.take(key.len().saturating_add(std::mem::size_of::<String>() * 2))?;
        fields.insert(key, to_json(&value, depth + 1, charge)?);
    }
    Ok(Value::Object(fields))
}
