//! Luau (Lua 5.1 with Roblox's extensions, built in) in a full sandbox:
//! the base, string, table, math and utf8 libraries, minus everything
//! that reaches outside or past the sandbox (modules, loading code,
//! environments of other functions, the collector, printing), a memory
//! limit, and an interrupt at every safepoint that enforces the instruction
//! and time limits and a cancel flag another thread may set (`budget`).
//! The chunk is compiled once, to bytecode, at registration.
//!
//! Why Luau (docs/steps.md, "The sandbox"): it is made to run untrusted
//! code. Its interrupt reaches every call, every loop iteration and every
//! step of the pattern matcher, and runs in error handlers too, so a limit
//! once hit is final (see `budget`); tables have no finalizers (`__gc`),
//! and there is no `<close>` or `goto`. Its numbers are Lua 5.1's, as in
//! Argyll's go-lua (Shopify's): `10 / 2` is `5` and `'v' .. 10 / 2` is
//! `v5`.
//!
//! Making a state costs several times what evaluating a small script
//! does, so each thread keeps one sandboxed state, made when first needed,
//! and its evaluations take turns in it, isolated all the same:
//!
//! - Every evaluation runs in an environment made for it alone: a new
//!   globals table (its inputs bound there) with new copies of the library
//!   tables, and a new string metatable whose `__index` is that copy of
//!   `string`. Whatever a script can name (`_G`, `string`,
//!   `getmetatable("")`, ...) is its own, so whatever it sets, removes,
//!   `rawset`s or gives a metatable goes with it. The functions in the
//!   copies are the state's; none keeps anything a script could change but
//!   `math.random`'s generator, seeded anew for each evaluation. The
//!   state's own tables are reachable from no script (`getfenv`, which
//!   would reach them through a library function, is removed), and nothing
//!   refers to an evaluation's objects once it is over (there are no
//!   coroutines, and an answer holding a function is refused).
//! - The limits are each evaluation's: a memory limit of what the state
//!   holds as the evaluation starts plus its allowance, and a new budget
//!   whose count and clock start at zero. Beyond its libraries a state
//!   holds only garbage of earlier evaluations, collected in full first
//!   once it passes `MAX_GARBAGE`.
//! - The answer is converted to JSON within the same allowance (`convert`).
//! - An evaluation that fails in any way (a limit, an error, an answer that
//!   is not JSON) throws its state away, and the next builds a new one: a
//!   state is used again only after a clean success.

use std::cell::Cell;
use std::sync::{Arc, Once};

use mlua::chunk::{ChunkMode, Compiler};
use mlua::{Function, Lua, LuaOptions, LuaString, StdLib, Table, Value as LuaValue};
use serde_json::{Map, Value};

use crate::{CompileError, Language, Limit, Limits, ScriptError};

use budget::{arm, Budget, Trip};
use convert::{to_json, to_lua, Charge, Fault};
use environment::{builder, seed};

mod budget;
mod convert;
mod environment;
mod replaced;

/// Names removed from the globals after the libraries are opened: what
/// loads code, reaches another function's environment (and through a
/// library function, the state's own globals), drives the collector,
/// makes userdata, or prints.
const REMOVED: [&str; 8] = [
    "require",
    "loadstring",
    "getfenv",
    "setfenv",
    "collectgarbage",
    "gcinfo",
    "newproxy",
    "print",
];

/// Most garbage of earlier evaluations a state may hold when one starts
/// (and never more than an eighth of its memory limit): beyond it, a full
/// collection runs first. Garbage the collector frees during an evaluation
/// is room it gains, so this bounds the slack in its memory limit.
const MAX_GARBAGE: usize = 256 * 1024;

thread_local! {
    /// The thread's state between evaluations (taken out during one).
    static SANDBOX: Cell<Option<Sandbox>> = const { Cell::new(None) };
}

/// Luau's feature flags, set once before any state or compiler is used:
/// `table.move` of a sparse range moves only the entries there are (its
/// plain loop over `table.move({}, 1, 3e8, 2)` runs for seconds with no
/// safepoint). A flag a later Luau no longer has is its default by then.
fn luau() {
    static FLAGS: Once = Once::new();
    FLAGS.call_once(|| {
        let _ = Lua::set_fflag("LuauTableMoveTimeoutFix", true);
    });
}

/// A compiled chunk: Luau bytecode of the script.
#[derive(Clone)]
pub(crate) struct Chunk {
    bytecode: Arc<[u8]>,
}

impl Chunk {
    pub(crate) fn compile(source: &str) -> Result<Chunk, CompileError> {
        luau();
        let bytecode = Compiler::new()
            .set_debug_level(1)
            .compile(source)
            .map_err(|e| CompileError {
                message: syntax_message(&e),
            })?;
        Ok(Chunk {
            bytecode: bytecode.into(),
        })
    }

    /// The script's answer: a table with string keys becomes an object,
    /// one with keys 1..n an array, anything else its JSON value.
    pub(crate) fn value(&self, args: &Map<String, Value>, limits: &Limits) -> Result<Value, ScriptError> {
        self.run(args, limits, |v, charge| to_json(&v, 0, charge))
    }

    pub(crate) fn truth(&self, args: &Map<String, Value>, limits: &Limits) -> Result<bool, ScriptError> {
        self.run(args, limits, |v, _| {
            Ok(!matches!(v, LuaValue::Nil | LuaValue::Boolean(false)))
        })
    }

    fn run<T>(
        &self,
        args: &Map<String, Value>,
        limits: &Limits,
        read: impl FnOnce(LuaValue, &mut Charge<'_>) -> Result<T, Fault>,
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

/// One thread's Luau state with the safe libraries, and what it needs to
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
        luau();
        #[cfg(test)]
        tests::BUILT.with(|built| built.set(built.get() + 1));
        let libs = StdLib::STRING | StdLib::TABLE | StdLib::MATH | StdLib::UTF8;
        let lua = Lua::new_with(libs, LuaOptions::default())?;
        let globals = lua.globals();
        for name in REMOVED {
            globals.raw_set(name, LuaValue::Nil)?;
        }
        // Luau's `string.split` has an O(n·m) search of its own; Lua 5.1
        // (and so Argyll's scripts) has no such function.
        let string: Table = globals.raw_get("string")?;
        string.raw_set("split", LuaValue::Nil)?;
        replaced::install(&lua, &globals)?;
        // `_ENV` names the evaluation's globals, as `_G` does: scripts
        // written for Lua 5.4 (which Tartan ran before) read inputs as
        // `_ENV[name]`. Assigning to it changes no scoping, as in 5.1.
        globals.raw_set("_ENV", globals.clone())?;
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
        read: impl FnOnce(LuaValue, &mut Charge<'_>) -> Result<T, Fault>,
    ) -> Result<T, ScriptError> {
        let budget = Budget::new(limits.instructions, limits.wall, crate::cancel::current());
        if let Some(trip) = budget.overdue() {
            return Err(tripped(trip, limits));
        }
        let lua = &self.lua;
        let fail = |e: mlua::Error| classify(&e, &budget, limits);
        let garbage = (limits.memory_bytes / 8).min(MAX_GARBAGE);
        if lua.used_memory() > self.live.saturating_add(garbage) {
            lua.gc_collect().map_err(fail)?;
            self.live = lua.used_memory();
        }
        let (env, string_metatable): (Table, Table) = self.fresh.call(seed()).map_err(fail)?;
        lua.set_type_metatable::<LuaString>(Some(string_metatable));
        let used = lua.used_memory();
        lua.set_memory_limit(used.saturating_add(limits.memory_bytes))
            .map_err(fail)?;
        arm(lua, budget.clone());
        for (name, value) in args {
            let value = to_lua(lua, value, 0).map_err(fail)?;
            env.raw_set(name.as_str(), value).map_err(fail)?;
        }
        let result: LuaValue = lua
            .load(bytecode)
            .set_name("=script")
            .set_mode(ChunkMode::Binary)
            .set_environment(env)
            .call(())
            .map_err(fail)?;
        // A limit the script caught (`pcall`) and went on past is still
        // the evaluation's end: its answer is not taken.
        if let Some(trip) = budget.tripped() {
            return Err(tripped(trip, limits));
        }
        let mut charge = Charge::new(limits.memory_bytes, &budget);
        read(result, &mut charge).map_err(|fault| match fault {
            Fault::Memory => ScriptError::Limit {
                language: Language::Lua,
                limit: Limit::Memory(limits.memory_bytes),
            },
            Fault::Trip(trip) => tripped(trip, limits),
            Fault::Invalid(message) => failed(message),
        })
    }

    /// After a clean evaluation: no interrupt, no memory limit, the
    /// state's own string metatable (the evaluation's goes with the rest),
    /// and its garbage collected once past `MAX_GARBAGE`: an idle thread
    /// keeps a state, and should not keep 32 MiB of garbage with it.
    fn tidy(&mut self) -> mlua::Result<()> {
        self.lua.remove_interrupt();
        self.lua.set_memory_limit(0)?;
        self.lua
            .set_type_metatable::<LuaString>(Some(self.string_metatable.clone()));
        if self.lua.used_memory() > self.live.saturating_add(MAX_GARBAGE) {
            self.lua.gc_collect()?;
            self.live = self.lua.used_memory();
        }
        Ok(())
    }
}

fn failed(message: String) -> ScriptError {
    ScriptError::Failed {
        language: Language::Lua,
        message,
    }
}

fn tripped(trip: Trip, limits: &Limits) -> ScriptError {
    let limit = match trip {
        Trip::Instructions => Limit::Instructions(limits.instructions),
        Trip::Time => Limit::Time(limits.wall),
        Trip::Cancelled => {
            return ScriptError::Cancelled {
                language: Language::Lua,
            }
        }
    };
    ScriptError::Limit {
        language: Language::Lua,
        limit,
    }
}

/// Tell a limit the sandbox imposed from the script's own error. The
/// budget says which bound was hit, whatever the script did with the
/// error on its way out (it may have caught it and raised another).
fn classify(e: &mlua::Error, budget: &Budget, limits: &Limits) -> ScriptError {
    if let Some(trip) = budget.tripped() {
        return tripped(trip, limits);
    }
    let text = e.to_string();
    let memory = match root(e) {
        mlua::Error::MemoryError(_) => true,
        // Passed on by the sandbox's `pcall` (see `replaced`).
        mlua::Error::RuntimeError(message) => first_line(message) == replaced::MEMORY_ERROR,
        _ => false,
    };
    if memory {
        return ScriptError::Limit {
            language: Language::Lua,
            limit: Limit::Memory(limits.memory_bytes),
        };
    }
    match root(e) {
        // The script's own message, without mlua's "runtime error: ".
        mlua::Error::RuntimeError(message) => failed(first_line(message)),
        _ => failed(first_line(&text)),
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

/// Luau's syntax errors read `:3: Expected ...` (after the chunk's name):
/// say the line in words.
fn syntax_message(e: &mlua::Error) -> String {
    let text = match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    };
    let text = first_line(&text);
    let rest = text.trim_start_matches(':');
    match rest.split_once(':') {
        Some((line, message)) if !line.is_empty() && line.chars().all(|c| c.is_ascii_digit()) => {
            format!("line {line}: {}", message.trim())
        }
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod attacks;
#[cfg(test)]
mod tests;
