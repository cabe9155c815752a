//! Lua 5.4 in a full sandbox: only the base, string, table, math and utf8
//! libraries, minus everything that reaches outside (files, processes,
//! modules, loading code, bytecode, the collector), a memory limit and an
//! instruction hook that also watches the clock. The chunk is compiled
//! once, to bytecode, at registration.
//!
//! Making a Lua state costs several times what evaluating a small script
//! does, so each thread keeps one sandboxed state, made when first needed,
//! and its evaluations take turns in it, isolated all the same:
//!
//! - Every evaluation runs in an environment made for it alone: a new
//!   globals table (its inputs bound there) with new copies of the library
//!   tables, and a new string metatable whose `__index` is that copy of
//!   `string`. Whatever a script can name (`_G`, `_ENV`, `string`,
//!   `getmetatable("")`, ...) is its own, so whatever it sets, removes,
//!   `rawset`s or gives a metatable goes with it. The functions in the
//!   copies are the state's; none keeps anything a script could change but
//!   `math.random`'s generator, seeded anew for each evaluation as a new
//!   state's is. The state's own tables are reachable from no script, and
//!   nothing refers to an evaluation's objects once it is over (there are
//!   no coroutines, and an answer holding a function is refused).
//! - No table is ever marked for finalization: `setmetatable` takes a
//!   metatable's `__gc` away while it sets it (and puts it back), so no
//!   code of one evaluation can run after it, during another. Lua runs
//!   finalizers with hooks off: one that looped would never be stopped
//!   (with a state per evaluation, it looped for ever as the state closed).
//! - The limits are each evaluation's: a memory limit of what the state
//!   holds as the evaluation starts plus its allowance, and a new hook
//!   whose count and clock start at zero. Beyond its libraries a state
//!   holds only garbage of earlier evaluations, collected in full first
//!   once it passes `MAX_GARBAGE`.
//! - An evaluation that fails in any way (a limit, an error, an answer that
//!   is not JSON) throws its state away, and the next builds a new one: a
//!   state is used again only after a clean success.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use mlua::chunk::ChunkMode;
use mlua::{Function, HookTriggers, Lua, LuaOptions, LuaString, StdLib, Table, Value as LuaValue, VmState};
use serde_json::{Map, Number, Value};

use crate::{CompileError, Language, Limit, Limits, ScriptError};

use environment::{builder, seeds};

mod environment;

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

/// Most garbage of earlier evaluations a state may hold when one starts
/// (and never more than an eighth of its memory limit): beyond it, a full
/// collection runs first. Garbage the collector frees during an evaluation
/// is room it gains, so this bounds the slack in its memory limit.
const MAX_GARBAGE: usize = 256 * 1024;

thread_local! {
    /// The thread's state between evaluations (taken out during one).
    static SANDBOX: Cell<Option<Sandbox>> = const { Cell::new(None) };
}

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
        // Taken out of the thread's slot for the evaluation: a panic, an
        // error or a nested evaluation cannot find it half-used.
        let mut sandbox = match SANDBOX.try_with(Cell::take).ok().flatten() {
            Some(sandbox) => sandbox,
            None => Sandbox::new().map_err(|e| failed(e.to_string()))?,
        };
        // On any failure the state goes with the evaluation.
        let answer = sandbox.evaluate(&self.bytecode, args, limits, read)?;
        if sandbox.tidy().is_ok() {
            // Fails only while the thread is exiting: the state goes then.
            let _ = SANDBOX.try_with(|slot| slot.set(Some(sandbox)));
        }
        Ok(answer)
    }
}

/// One thread's Lua state with the safe libraries, and what it needs to
/// give each evaluation an environment of its own.
struct Sandbox {
    lua: Lua,
    /// Makes one evaluation's globals and string metatable (see `builder`).
    fresh: Function,
    /// The state's own string metatable, in place between evaluations.
    string_metatable: Table,
    /// Memory in use after the last full collection.
    live: usize,
}

impl Sandbox {
    fn new() -> mlua::Result<Sandbox> {
        #[cfg(test)]
        tests::BUILT.with(|built| built.set(built.get() + 1));
        let libs = StdLib::STRING | StdLib::TABLE | StdLib::MATH | StdLib::UTF8;
        let lua = Lua::new_with(libs, LuaOptions::default())?;
        let globals = lua.globals();
        for name in REMOVED {
            globals.raw_set(name, LuaValue::Nil)?;
        }
        // `string.dump` turns functions into bytecode, which `load` would run
        // unverified; `load` is gone, but no reason to leave half the pair.
        let string: Table = globals.raw_get("string")?;
        string.raw_set("dump", LuaValue::Nil)?;
        let string_metatable = lua
            .type_metatable::<LuaString>()
            .ok_or_else(|| mlua::Error::runtime("strings have no metatable"))?;
        let fresh = builder(&lua, &globals, &string_metatable)?;
        lua.gc_collect()?;
        let live = lua.used_memory();
        Ok(Sandbox {
            lua,
            fresh,
            string_metatable,
            live,
        })
    }

    fn evaluate<T>(
        &mut self,
        bytecode: &[u8],
        args: &Map<String, Value>,
        limits: &Limits,
        read: impl FnOnce(LuaValue) -> Result<T, String>,
    ) -> Result<T, ScriptError> {
        let lua = &self.lua;
        let fail = |e: mlua::Error| classify(&e, limits);
        let garbage = (limits.memory_bytes / 8).min(MAX_GARBAGE);
        if lua.used_memory() > self.live.saturating_add(garbage) {
            lua.gc_collect().map_err(fail)?;
            self.live = lua.used_memory();
        }
        let (seed1, seed2) = seeds();
        let (env, string_metatable): (Table, Table) = self.fresh.call((seed1, seed2)).map_err(fail)?;
        lua.set_type_metatable::<LuaString>(Some(string_metatable));
        let used = lua.used_memory();
        lua.set_memory_limit(used.saturating_add(limits.memory_bytes))
            .map_err(fail)?;
        arm(lua, limits).map_err(fail)?;
        for (name, value) in args {
            let value = to_lua(lua, value, 0).map_err(fail)?;
            env.raw_set(name.as_str(), value).map_err(fail)?;
        }
        let result: LuaValue = lua
            .load(bytecode)
            .set_name("script")
            .set_mode(ChunkMode::Binary)
            .set_environment(env)
            .call(())
            .map_err(fail)?;
        read(result).map_err(failed)
    }

    /// After a clean evaluation: no hook, no memory limit, and the state's
    /// own string metatable (the evaluation's goes with the rest of it).
    fn tidy(&self) -> mlua::Result<()> {
        self.lua.remove_hook();
        self.lua.set_memory_limit(0)?;
        self.lua
            .set_type_metatable::<LuaString>(Some(self.string_metatable.clone()));
        Ok(())
    }
}

/// The instruction and clock hook of one evaluation, counting from zero
/// (setting a hook restarts Lua's count, as in a new state).
fn arm(lua: &Lua, limits: &Limits) -> mlua::Result<()> {
    let budget = limits.instructions;
    let wall = limits.wall;
    let started = Instant::now();
    let spent = AtomicU64::new(0);
    lua.set_global_hook(
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
    )
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
mod tests;
