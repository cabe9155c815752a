//! Lua 5.4 in a full sandbox: every evaluation gets a fresh state with only
//! the base, string, table, math and utf8 libraries, minus everything that
//! reaches outside (files, processes, modules, loading code, bytecode, the
//! collector), a memory limit and an instruction hook that also watches the
//! clock. A fresh state per evaluation means no script sees another's
//! globals; the chunk is compiled once, to bytecode, at registration.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use mlua::chunk::ChunkMode;
use mlua::{HookTriggers, Lua, LuaOptions, StdLib, Table, Value as LuaValue, VmState};
use serde_json::{Map, Number, Value};

use crate::{CompileError, Language, Limit, Limits, ScriptError};

/// Names removed from the globals after the libraries are opened.
const REMOVED: [&str; 7] = [
    "require",
    "load",
    "loadstring",
    "dofile",
    "loadfile",
    "collectgarbage",
    "print",
];

/// How often (in VM instructions) the hook counts and checks the clock.
const HOOK_EVERY: u32 = 1000;

/// Deepest table nesting converted back to JSON (a table may contain itself).
const MAX_DEPTH: usize = 128;

/// A compiled chunk: Lua bytecode of the script.
#[derive(Clone)]
pub(crate) struct Chunk {
    bytecode: Arc<[u8]>,
}

impl Chunk {
    pub(crate) fn compile(source: &str) -> Result<Chunk, CompileError> {
        let lua = Lua::new_with(StdLib::NONE, LuaOptions::default()).map_err(|e| CompileError {
            message: e.to_string(),
        })?;
        let function = lua
            .load(source)
            .set_name("script")
            .set_mode(ChunkMode::Text)
            .into_function()
            .map_err(|e| CompileError {
                message: syntax_message(&e),
            })?;
        Ok(Chunk {
            bytecode: function.dump(false).into(),
        })
    }

    /// The script's answer: a table with string keys becomes an object,
    /// one with keys 1..n an array, anything else its JSON value.
    pub(crate) fn value(&self, args: &Map<String, Value>, limits: &Limits) -> Result<Value, ScriptError> {
        self.run(args, limits, |v| to_json(&v, 0))
    }

    pub(crate) fn truth(&self, args: &Map<String, Value>, limits: &Limits) -> Result<bool, ScriptError> {
        self.run(args, limits, |v| {
            Ok(!matches!(v, LuaValue::Nil | LuaValue::Boolean(false)))
        })
    }

    fn run<T>(
        &self,
        args: &Map<String, Value>,
        limits: &Limits,
        read: impl FnOnce(LuaValue) -> Result<T, String>,
    ) -> Result<T, ScriptError> {
        let lua = sandbox(limits).map_err(|e| failed(e.to_string()))?;
        let globals = lua.globals();
        for (name, value) in args {
            let value = to_lua(&lua, value, 0).map_err(|e| classify(&e, limits))?;
            globals
                .raw_set(name.as_str(), value)
                .map_err(|e| classify(&e, limits))?;
        }
        let result: LuaValue = lua
            .load(&self.bytecode[..])
            .set_name("script")
            .set_mode(ChunkMode::Binary)
            .call(())
            .map_err(|e| classify(&e, limits))?;
        read(result).map_err(failed)
    }
}

/// A fresh state with the safe libraries and the limits in place.
fn sandbox(limits: &Limits) -> mlua::Result<Lua> {
    let libs = StdLib::STRING | StdLib::TABLE | StdLib::MATH | StdLib::UTF8;
    let lua = Lua::new_with(libs, LuaOptions::default())?;
    let globals = lua.globals();
    for name in REMOVED {
        globals.raw_set(name, LuaValue::Nil)?;
    }
    // `string.dump` turns functions into bytecode, which `load` would run
    // unverified; `load` is gone, but no reason to leave half the pair.
    if let Ok(string) = globals.raw_get::<Table>("string") {
        string.raw_set("dump", LuaValue::Nil)?;
    }
    let used = lua.used_memory();
    lua.set_memory_limit(used.saturating_add(limits.memory_bytes))?;
    let budget = limits.instructions;
    let wall = limits.wall;
    let started = Instant::now();
    let spent = AtomicU64::new(0);
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(HOOK_EVERY),
        move |_, _| {
            let count = spent.fetch_add(u64::from(HOOK_EVERY), Ordering::Relaxed) + u64::from(HOOK_EVERY);
            if count > budget {
                return Err(mlua::Error::runtime(LIMIT_INSTRUCTIONS));
            }
            if started.elapsed() > wall {
                return Err(mlua::Error::runtime(LIMIT_TIME));
            }
            Ok(VmState::Continue)
        },
    )?;
    Ok(lua)
}

const LIMIT_INSTRUCTIONS: &str = "tartan: instruction limit";
const LIMIT_TIME: &str = "tartan: time limit";

fn failed(message: String) -> ScriptError {
    ScriptError::Failed {
        language: Language::Lua,
        message,
    }
}

/// Tell a limit the sandbox imposed from the script's own error.
fn classify(e: &mlua::Error, limits: &Limits) -> ScriptError {
    let text = e.to_string();
    // The hook's own errors are told by their text: mlua carries a
    // callback's error as a string.
    let limit = if matches!(root(e), mlua::Error::MemoryError(_)) {
        Limit::Memory(limits.memory_bytes)
    } else if text.contains(LIMIT_INSTRUCTIONS) {
        Limit::Instructions(limits.instructions)
    } else if text.contains(LIMIT_TIME) {
        Limit::Time(limits.wall)
    } else {
        return failed(first_line(&text));
    };
    ScriptError::Limit {
        language: Language::Lua,
        limit,
    }
}

fn root(e: &mlua::Error) -> &mlua::Error {
    match e {
        mlua::Error::CallbackError { cause, .. } => root(cause),
        other => other,
    }
}

/// Lua's message without the traceback mlua appends.
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or(text).to_string()
}

/// Lua's syntax errors read `[string "script"]:3: unexpected symbol near 'x'`:
/// say the line in words.
fn syntax_message(e: &mlua::Error) -> String {
    let text = match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    };
    let text = first_line(&text);
    let rest = text.strip_prefix("[string \"script\"]:").unwrap_or(&text);
    match rest.split_once(':') {
        Some((line, message)) if line.chars().all(|c| c.is_ascii_digit()) => {
            format!("line {line}: {}", message.trim())
        }
        _ => text.to_string(),
    }
}

fn to_lua(lua: &Lua, value: &Value, depth: usize) -> mlua::Result<LuaValue> {
    if depth > MAX_DEPTH {
        return Err(mlua::Error::runtime("input nested too deeply"));
    }
    Ok(match value {
        Value::Null => LuaValue::Nil,
        Value::Bool(b) => LuaValue::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => LuaValue::Integer(i),
            None => LuaValue::Number(n.as_f64().unwrap_or(f64::NAN)),
        },
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

fn to_json(value: &LuaValue, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err("result nested too deeply (a table that contains itself?)".into());
    }
    Ok(match value {
        LuaValue::Nil => Value::Null,
        LuaValue::Boolean(b) => Value::Bool(*b),
        LuaValue::Integer(i) => Value::from(*i),
        LuaValue::Number(n) => number(*n)?,
        LuaValue::String(s) => Value::String(s.to_str().map_err(|e| e.to_string())?.to_string()),
        LuaValue::Table(t) => table_to_json(t, depth)?,
        other => return Err(format!("a {} cannot be a result", other.type_name())),
    })
}

/// A whole float is an integer, as Argyll's conversion makes it.
fn number(n: f64) -> Result<Value, String> {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        return Ok(Value::from(n as i64));
    }
    Number::from_f64(n)
        .map(Value::Number)
        .ok_or_else(|| format!("{n} is not a JSON number"))
}

/// A table of keys 1..n is an array; any other an object (a non-string
/// key is written as its JSON text, as Argyll does).
fn table_to_json(t: &Table, depth: usize) -> Result<Value, String> {
    let len = t.raw_len();
    let mut count = 0usize;
    let mut all_numeric = true;
    for pair in t.clone().pairs::<LuaValue, LuaValue>() {
        let (key, _) = pair.map_err(|e| e.to_string())?;
        count += 1;
        if !matches!(key, LuaValue::Integer(_) | LuaValue::Number(_)) {
            all_numeric = false;
        }
    }
    if all_numeric && count > 0 && count == len {
        let mut items = Vec::with_capacity(len);
        for i in 1..=len {
            let item: LuaValue = t.raw_get(i).map_err(|e| e.to_string())?;
            items.push(to_json(&item, depth + 1)?);
        }
        return Ok(Value::Array(items));
    }
    let mut fields = Map::new();
    for pair in t.clone().pairs::<LuaValue, LuaValue>() {
        let (key, value) = pair.map_err(|e| e.to_string())?;
        let key = match key {
            LuaValue::String(s) => s.to_str().map_err(|e| e.to_string())?.to_string(),
            other => to_json(&other, depth + 1)?.to_string(),
        };
        fields.insert(key, to_json(&value, depth + 1)?);
    }
    Ok(Value::Object(fields))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn small() -> Limits {
        Limits {
            instructions: 1_000_000,
            memory_bytes: 4 * 1024 * 1024,
            wall: Duration::from_secs(2),
        }
    }

    fn run(src: &str, a: Value) -> Result<Value, ScriptError> {
        Chunk::compile(src).unwrap().value(&args(a), &small())
    }

    #[test]
    fn inputs_are_globals_and_tables_convert_both_ways() {
        let out = run(
            "return { total = price * qty, tags = { 'a', 'b' }, who = user.name, none = nil }",
            json!({"price": 2.5, "qty": 4, "user": {"name": "ada"}}),
        )
        .unwrap();
        assert_eq!(out, json!({"total": 10, "tags": ["a", "b"], "who": "ada"}));
        assert_eq!(run("return 1.5", json!({})).unwrap(), json!(1.5));
        assert_eq!(run("return 'x' .. n", json!({"n": 3})).unwrap(), json!("x3"));
        assert_eq!(run("return {}", json!({})).unwrap(), json!({}));
    }

    #[test]
    fn truth_is_luas() {
        let c = Chunk::compile("return x").unwrap();
        for (x, want) in [
            (json!(null), false),
            (json!(false), false),
            (json!(0), true),
            (json!(""), true),
        ] {
            assert_eq!(c.truth(&args(json!({ "x": x })), &small()).unwrap(), want);
        }
    }

    #[test]
    fn a_syntax_error_names_the_line() {
        let e = Chunk::compile("local a = 1\nreturn a +").err().unwrap();
        assert!(e.message.starts_with("line 2:"), "{}", e.message);
    }

    #[test]
    fn nothing_reaches_outside() {
        for name in [
            "io",
            "os",
            "debug",
            "package",
            "require",
            "load",
            "loadstring",
            "dofile",
            "loadfile",
            "collectgarbage",
        ] {
            let out = run(&format!("return {name} == nil"), json!({})).unwrap();
            assert_eq!(out, json!(true), "{name} is reachable");
        }
        assert_eq!(run("return string.dump == nil", json!({})).unwrap(), json!(true));
        // Globals do not leak from one evaluation to the next.
        let c = Chunk::compile("leaked = (leaked or 0) + 1; return leaked").unwrap();
        assert_eq!(c.value(&Map::new(), &small()).unwrap(), json!(1));
        assert_eq!(c.value(&Map::new(), &small()).unwrap(), json!(1));
    }

    #[test]
    fn limits_stop_loops_memory_and_time() {
        let e = run("while true do end", json!({})).err().unwrap();
        assert!(
            matches!(
                &e,
                ScriptError::Limit {
                    limit: Limit::Instructions(_),
                    ..
                }
            ),
            "{e}"
        );
        let e = run("return string.rep('x', 1024 * 1024 * 1024)", json!({}))
            .err()
            .unwrap();
        assert!(
            matches!(
                &e,
                ScriptError::Limit {
                    limit: Limit::Memory(_),
                    ..
                }
            ),
            "{e}"
        );
        let e = run("local t = {} for i = 1, 1e9 do t[i] = i end", json!({}))
            .err()
            .unwrap();
        assert!(matches!(e, ScriptError::Limit { .. }), "{e}");
        let slow = Limits {
            instructions: u64::MAX,
            wall: Duration::from_millis(50),
            ..small()
        };
        let e = Chunk::compile("while true do end")
            .unwrap()
            .value(&Map::new(), &slow)
            .err()
            .unwrap();
        assert!(
            matches!(
                &e,
                ScriptError::Limit {
                    limit: Limit::Time(_),
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn errors_are_the_scripts_message() {
        let e = run("error('boom')", json!({})).err().unwrap();
        assert!(e.to_string().contains("boom"), "{e}");
        let e = run("local t = {} t.self = t return t", json!({})).err().unwrap();
        assert!(e.to_string().contains("nested too deeply"), "{e}");
        let e = run("return function() end", json!({})).err().unwrap();
        assert!(e.to_string().contains("function"), "{e}");
    }
}
