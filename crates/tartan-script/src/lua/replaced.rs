//! The library functions the sandbox replaces in the state before each
//! evaluation's environment is copied from it (docs/steps.md, "The
//! sandbox"):
//!
//! - `pcall` and `xpcall` pass a memory error on rather than catch it: a
//!   limit, once hit, is final (the interrupt makes the instruction and
//!   time limits so; this does the same for memory).
//! - `string.find` searches for plain text in linear time: Luau's own
//!   plain search compares the whole needle at every candidate position,
//!   O(n·m) in C, with no safepoint, so a 16 MB haystack and an 8 MB needle
//!   would hold the thread for hours. Patterns stay Luau's, whose matcher
//!   reaches a safepoint at every step.
//! - `tostring` and `string.format` write a table, function or other
//!   reference without a `__tostring` as its type name, not with its
//!   address (which says where the engine's memory lies).

use mlua::{Function, Lua, LuaString, MultiValue, Table, Value as LuaValue};

/// Lua's pattern specials: a pattern without them is plain text.
const SPECIALS: &[u8] = b"^$*+?.([%-";

/// The error object of a memory error (Luau's `memerrmsg`).
pub(super) const MEMORY_ERROR: &str = "not enough memory";

const PROTECTED: &str = r#"
local pcall, xpcall, error, memory = ...
local function pass(ok, ...)
  if not ok and (...) == memory then error(memory, 0) end
  return ok, ...
end
return function(...) return pass(pcall(...)) end,
       function(...) return pass(xpcall(...)) end
"#;

const TO_STRING: &str = r##"
local tostring, format, type, getmetatable, rawget, select = ...
local reference = { table = true, ["function"] = true, userdata = true, thread = true, buffer = true }
local function safe(v)
  local kind = type(v)
  if reference[kind] then
    local mt = getmetatable(v)
    if type(mt) ~= "table" or rawget(mt, "__tostring") == nil then return kind end
  end
  return v
end
local function each(n, v, ...)
  if n == 0 then return end
  return safe(v), each(n - 1, ...)
end
return function(...)
  if select("#", ...) == 0 then return tostring(...) end
  return tostring((safe((...))))
end, function(fmt, ...)
  return format(fmt, each(select("#", ...), ...))
end
"##;

/// Put the replacements into the state's globals and `string` table.
pub(super) fn install(lua: &Lua, globals: &Table) -> mlua::Result<()> {
    let (pcall, xpcall): (Function, Function) = lua.load(PROTECTED).set_name("=tartan.pcall").call((
        globals.raw_get::<Function>("pcall")?,
        globals.raw_get::<Function>("xpcall")?,
        globals.raw_get::<Function>("error")?,
        MEMORY_ERROR,
    ))?;
    globals.raw_set("pcall", pcall)?;
    globals.raw_set("xpcall", xpcall)?;

    let string: Table = globals.raw_get("string")?;
    let (tostring, format): (Function, Function) =
        lua.load(TO_STRING).set_name("=tartan.tostring").call((
            globals.raw_get::<Function>("tostring")?,
            string.raw_get::<Function>("format")?,
            globals.raw_get::<Function>("type")?,
            globals.raw_get::<Function>("getmetatable")?,
            globals.raw_get::<Function>("rawget")?,
            globals.raw_get::<Function>("select")?,
        ))?;
    globals.raw_set("tostring", tostring)?;
    string.raw_set("format", format)?;

    let find: Function = string.raw_get("find")?;
    string.raw_set("find", linear_find(lua, find)?)?;
    Ok(())
}

/// `string.find` with the plain path searched by `memchr`'s `memmem`
/// (linear in the haystack) and every other call left to Luau's.
fn linear_find(lua: &Lua, luau_find: Function) -> mlua::Result<Function> {
    lua.create_function(move |_, args: MultiValue| {
        let (Some(haystack), Some(needle)) = (text(args.front()), text(args.get(1))) else {
            return luau_find.call::<MultiValue>(args);
        };
        let plain = args
            .get(3)
            .is_some_and(|v| !matches!(v, LuaValue::Nil | LuaValue::Boolean(false)));
        let needle_bytes = needle.as_bytes();
        if !plain && needle_bytes.iter().any(|b| SPECIALS.contains(b)) {
            return luau_find.call::<MultiValue>(args);
        }
        let init = match args.get(2) {
            None | Some(LuaValue::Nil) => 1,
            Some(LuaValue::Integer(i)) => *i,
            Some(LuaValue::Number(n)) if n.fract() == 0.0 => *n as i64,
            // Anything else is Luau's to refuse, with its own message.
            Some(_) => return luau_find.call::<MultiValue>(args),
        };
        let hay = haystack.as_bytes();
        let len = i64::try_from(hay.len()).unwrap_or(i64::MAX);
        // Lua's rule: a negative start counts from the end; before the
        // first byte is the first byte; past the end finds nothing.
        let start = match init {
            i if i < 0 => (len + i + 1).max(1),
            0 => 1,
            i => i,
        };
        if start > len + 1 {
            return Ok(MultiValue::from_vec(vec![LuaValue::Nil]));
        }
        let from = usize::try_from(start - 1).unwrap_or(usize::MAX).min(hay.len());
        match memchr::memmem::find(&hay[from..], &needle_bytes) {
            Some(at) => {
                let first = (from + at + 1) as f64;
                let last = (from + at + needle_bytes.len()) as f64;
                Ok(MultiValue::from_vec(vec![
                    LuaValue::Number(first),
                    LuaValue::Number(last),
                ]))
            }
            None => Ok(MultiValue::from_vec(vec![LuaValue::Nil])),
        }
    })
}

/// A string argument, or a number as Lua coerces it; `None` for anything
/// else (left to Luau, which refuses it in its own words).
fn text(value: Option<&LuaValue>) -> Option<LuaString> {
    match value? {
        LuaValue::String(s) => Some(s.clone()),
        _ => None,
    }
}
