//! Each evaluation's environment: the function that builds its globals and
//! string metatable from the sandboxed state's, and the few library
//! functions the sandbox replaces (the reasons are in the module above).

use std::fmt::Write as _;
use std::hash::{BuildHasher, RandomState};

use mlua::{Function, Lua, Table, Value as LuaValue};

/// A seed for `math.random`, new for every evaluation (Luau's
/// `randomseed` takes a 32-bit integer).
pub(super) fn seed() -> i32 {
    RandomState::new().hash_one(1u8) as i32
}

/// The function that makes one evaluation's globals and string metatable,
/// written out from what the state's globals hold once the sandbox has
/// removed its names: table constructors copy the values, a fresh table
/// for each library, `_G` the new globals; the string metatable is the
/// state's with `__index` the fresh `string`. It seeds `math.random` first. (Generated Lua, the values its upvalues: a
/// constructor per table costs a fraction of copying entry by entry.)
pub(super) fn builder(lua: &Lua, globals: &Table, string_metatable: &Table) -> mlua::Result<Function> {
    let mut libraries: Vec<(String, Table)> = Vec::new();
    let mut plain = Vec::new();
    let mut selves = Vec::new();
    for (name, value) in sorted(globals)? {
        match value {
            LuaValue::Table(t) if t.to_pointer() == globals.to_pointer() => selves.push(name),
            LuaValue::Table(t) => libraries.push((name, t)),
            other => plain.push((name, other)),
        }
    }
    // The fresh copy that stands for a library table wherever it appears.
    let copy_of = |t: &Table| {
        libraries
            .iter()
            .position(|(_, library)| library.to_pointer() == t.to_pointer())
            .map(|i| format!("new{i}"))
    };
    let mut values: Vec<LuaValue> = Vec::new();
    let mut field = |src: &mut String, name: &str, value: LuaValue| {
        values.push(value);
        let _ = write!(src, " [\"{name}\"] = v{},", values.len());
    };

    let mut body = String::new();
    for (i, (library, table)) in libraries.iter().enumerate() {
        let _ = write!(body, "  local new{i} = {{");
        for (name, value) in sorted(table)? {
            if let LuaValue::Table(_) = value {
                return Err(mlua::Error::runtime(format!("{library}.{name} is a table")));
            }
            field(&mut body, &name, value);
        }
        body.push_str(" }\n");
    }
    body.push_str("  local env = {");
    for (name, value) in plain {
        field(&mut body, &name, value);
    }
    for (i, (name, _)) in libraries.iter().enumerate() {
        let _ = write!(body, " [\"{name}\"] = new{i},");
    }
    body.push_str(" }\n");
    for name in &selves {
        let _ = writeln!(body, "  env[\"{name}\"] = env");
    }
    body.push_str("  return env, {");
    for (name, value) in sorted(string_metatable)? {
        match &value {
            LuaValue::Table(t) => {
                let copy = copy_of(t)
                    .ok_or_else(|| mlua::Error::runtime(format!("string metatable's {name} is a table")))?;
                let _ = write!(body, " [\"{name}\"] = {copy},");
            }
            _ => field(&mut body, &name, value),
        }
    }
    body.push_str(" }\nend\n");

    let math = libraries
        .iter()
        .find(|(name, _)| name == "math")
        .ok_or_else(|| mlua::Error::runtime("no math library"))?;
    let randomseed: Function = math.1.raw_get("randomseed")?;
    let mut src = String::from("local randomseed");
    for i in 1..=values.len() {
        let _ = write!(src, ", v{i}");
    }
    src.push_str(" = ...\nreturn function(seed)\n  randomseed(seed)\n");
    src.push_str(&body);
    let mut inputs = vec![LuaValue::Function(randomseed)];
    inputs.extend(values);
    lua.load(src)
        .set_name("=tartan.environment")
        .call(mlua::MultiValue::from_vec(inputs))
}

/// A table's entries by name, each name checked to be a plain identifier
/// (it is written into the builder's source).
fn sorted(table: &Table) -> mlua::Result<Vec<(String, LuaValue)>> {
    let mut entries = Vec::new();
    for pair in table.pairs::<LuaValue, LuaValue>() {
        let (key, value) = pair?;
        let name = match &key {
            LuaValue::String(s) => s.to_str()?.to_string(),
            other => return Err(mlua::Error::runtime(format!("a {} key", other.type_name()))),
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(mlua::Error::runtime(format!("unexpected name {name:?}")));
        }
        entries.push((name, value));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries)
}
