//! The sandbox: limits, isolation between evaluations, conversions.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use serde_json::json;

use super::*;

thread_local! {
    /// States this thread has built.
    pub(super) static BUILT: Cell<usize> = const { Cell::new(0) };
}

fn built() -> usize {
    BUILT.with(Cell::get)
}

/// The memory the thread's state holds and what it held after its last
/// full collection, between evaluations.
fn state_memory() -> Option<(usize, usize)> {
    SANDBOX.with(|slot| {
        let sandbox = slot.take()?;
        let memory = (sandbox.lua.used_memory(), sandbox.live);
        slot.set(Some(sandbox));
        Some(memory)
    })
}

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
    // Read by name, as Lua 5.4's scripts did.
    assert_eq!(run("return _ENV['n'] + _G.n", json!({"n": 3})).unwrap(), json!(6));
}

/// Argyll's TestLuaInputTypes: integers stay integers, a fraction is a
/// float, a null input is nil, an array has a length, an object's keys
/// are fields.
#[test]
fn input_types_are_argylls() {
    let inputs = json!({"n": 21, "f": 1.25, "val": null, "items": [1, 2, 3], "data": {"key": "v"}});
    let out = run(
        "return { doubled = n * 2, scaled = f * 2, missing = val == nil, count = #items, key = data.key }",
        inputs,
    )
    .unwrap();
    assert_eq!(
        out,
        json!({"doubled": 42, "scaled": 2.5, "missing": true, "count": 3, "key": "v"})
    );
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
        "getfenv",
        "setfenv",
        "gcinfo",
        "newproxy",
        "print",
    ] {
        let out = run(&format!("return {name} == nil"), json!({})).unwrap();
        assert_eq!(out, json!(true), "{name} is reachable");
    }
    assert_eq!(run("return string.dump == nil", json!({})).unwrap(), json!(true));
    assert_eq!(run("return string.split == nil", json!({})).unwrap(), json!(true));
    assert_eq!(run("return coroutine == nil", json!({})).unwrap(), json!(true));
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

/// Reports, as a list of names, whatever differs from a new state's
/// globals and libraries (an empty table, `{}`, when nothing does).
const PRISTINE: &str = r#"
local bad = {}
local function check(name, ok) if not ok then bad[#bad + 1] = name end end
check("x", x == nil and rawget(_G, "x") == nil)
check("_G", _G._G == _G and getmetatable(_G) == nil)
check("undefined", undefined == nil)
check("string", type(string) == "table" and getmetatable(string) == nil and string.evil == nil)
check("string.upper", string.upper ~= nil and string.upper("a") == "A")
check("method", ("a"):upper() == "A" and ("").later == nil)
check("string metatable", getmetatable("").__index == string and getmetatable("").evil == nil)
check("arithmetic", "1" + 1 == 2)
check("math", type(math) == "table" and math.floor(1.5) == 1 and math.evil == nil)
check("table", table.insert ~= nil and table.concat({1, 2}, ",") == "1,2")
check("utf8", utf8.char(65) == "A")
check("setmetatable", setmetatable ~= nil and getmetatable ~= nil and rawset ~= nil)
local count = 0
for _ in pairs(string) do count = count + 1 end
check("string entries", count == 16)
return bad
"#;

/// Each attack succeeds, so its state is kept for the next evaluation,
/// and is gone by then: one state serves every evaluation here.
#[test]
fn no_evaluation_sees_or_affects_anothers_globals_or_libraries() {
    let pristine = Chunk::compile(PRISTINE).unwrap();
    assert_eq!(pristine.value(&Map::new(), &small()).unwrap(), json!({}));
    let before = built();
    for attack in [
        "string.upper = nil",
        "x = 1",
        "rawset(_G, 'x', 1)",
        "rawset(string, 'upper', nil) rawset(string, 'evil', true)",
        "for k in pairs(string) do string[k] = nil end",
        "getmetatable('').__index.upper = function() return 'evil' end",
        "getmetatable('').__index = { upper = function() return 'evil' end }",
        "getmetatable('').__add = function() return 0 end getmetatable('').evil = 1",
        "local mt = getmetatable('') for k in pairs(mt) do rawset(mt, k, nil) end",
        "getmetatable('').__index.later = function() return 'kept' end",
        "setmetatable(_G, { __index = function() return 'evil' end })",
        "setmetatable(_G, { __newindex = function() end, __metatable = 'locked' })",
        "setmetatable(string, { __index = function() return 'evil' end })",
        "_G.math = nil",
        "math.floor = function() return 'evil' end math.evil = 1",
        "table.insert = nil table.concat = nil utf8.char = nil",
        "_G.string = nil _G._G = nil",
        "setmetatable = nil getmetatable = nil rawset = nil",
        "table.freeze(string) table.freeze(_G)",
    ] {
        let chunk = Chunk::compile(&format!("{attack}\nreturn true")).unwrap();
        assert_eq!(
            chunk.value(&Map::new(), &small()).unwrap(),
            json!(true),
            "{attack}"
        );
        assert_eq!(
            pristine.value(&Map::new(), &small()).unwrap(),
            json!({}),
            "after {attack}"
        );
        // The same chunk again starts from a clean slate too.
        assert_eq!(
            chunk.value(&Map::new(), &small()).unwrap(),
            json!(true),
            "{attack}"
        );
    }
    assert_eq!(
        built(),
        before,
        "the state was not reused: the test proves nothing"
    );
}

#[test]
fn math_random_is_seeded_anew_for_each_evaluation() {
    let seeded = Chunk::compile("math.randomseed(42) return math.random(1, 2147483647)").unwrap();
    let unseeded = Chunk::compile("return math.random(1, 2147483647)").unwrap();
    let after_42 = seeded.value(&Map::new(), &small()).unwrap();
    assert_eq!(seeded.value(&Map::new(), &small()).unwrap(), after_42);
    let next = unseeded.value(&Map::new(), &small()).unwrap();
    assert_ne!(next, after_42, "the seed outlived its evaluation");
    assert_ne!(unseeded.value(&Map::new(), &small()).unwrap(), next);
}

/// Luau runs no finalizer of a table (it has no `__gc` for them): this one
/// would spin for ever were it run, and one left pending would run during
/// a later evaluation.
#[test]
fn no_finalizer_ever_runs() {
    let spin =
        Chunk::compile("setmetatable({}, { __gc = function() while true do end end }) return true").unwrap();
    let (sent, answer) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for _ in 0..3 {
            let _ = sent.send(spin.value(&Map::new(), &small()));
        }
    });
    for _ in 0..3 {
        let got = answer.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(got.unwrap(), json!(true));
    }
    // Not even during its own evaluation, after many collections...
    let ran = Chunk::compile(
        "local ran = false\n\
         setmetatable({}, { __gc = function() ran = true end })\n\
         for i = 1, 200000 do local t = { i } end\n\
         return ran",
    )
    .unwrap();
    assert_eq!(ran.value(&Map::new(), &small()).unwrap(), json!(false));
    // ...nor one meant to poison whoever comes next.
    let poison = Chunk::compile(
        "setmetatable({}, { __gc = function() getmetatable('').__index.upper = nil end })\n\
         return true",
    )
    .unwrap();
    let churn = Chunk::compile("for i = 1, 100000 do local t = { i } end return ('a'):upper()").unwrap();
    for _ in 0..3 {
        assert_eq!(poison.value(&Map::new(), &small()).unwrap(), json!(true));
        assert_eq!(churn.value(&Map::new(), &small()).unwrap(), json!("A"));
    }
    // The script still sees the metatable it set, `__gc` and all.
    let visible = "local mt = { __gc = function() end }\n\
                   local t = setmetatable({}, mt)\n\
                   return getmetatable(t) == mt and rawget(mt, '__gc') ~= nil";
    assert_eq!(run(visible, json!({})).unwrap(), json!(true));
}

#[test]
fn setmetatable_answers_as_the_real_one() {
    let out = run(
        "local t = {} return setmetatable(t, { __index = { a = 1 } }) == t and t.a",
        json!({}),
    )
    .unwrap();
    assert_eq!(out, json!(1));
    let e = run("setmetatable(1, {})", json!({})).err().unwrap();
    assert!(
        e.to_string()
            .ends_with("script:1: invalid argument #1 to 'setmetatable' (table expected, got number)"),
        "{e}"
    );
    let e = run(
        "local t = setmetatable({}, { __metatable = 1 })\nsetmetatable(t, {})",
        json!({}),
    )
    .err()
    .unwrap();
    assert!(
        e.to_string()
            .contains("script:2: cannot change a protected metatable"),
        "{e}"
    );
    // Strings keep their metatable: methods and arithmetic.
    let out = run(
        "return { ('ab'):upper(), '10' + 1, getmetatable('').__index == string }",
        json!({}),
    )
    .unwrap();
    assert_eq!(out, json!(["AB", 11, true]));
}

/// A closure or table in the answer, or stashed anywhere a script can
/// reach, is gone with the evaluation.
#[test]
fn nothing_of_an_evaluation_outlives_it() {
    let kept = Chunk::compile(
        "counter = 0\n\
         string.bump = function() counter = counter + 1 return counter end\n\
         getmetatable('').__index.bump = string.bump\n\
         return { count = function() return counter end }",
    )
    .unwrap();
    let e = kept.value(&Map::new(), &small()).err().unwrap();
    assert!(e.to_string().contains("function cannot be a result"), "{e}");
    let stash = Chunk::compile(
        "string.bump = function() return 1 end getmetatable('').__index.bump = string.bump return true",
    )
    .unwrap();
    assert_eq!(stash.value(&Map::new(), &small()).unwrap(), json!(true));
    let look = Chunk::compile("return { string.bump == nil, ('').bump == nil, counter == nil }").unwrap();
    assert_eq!(
        look.value(&Map::new(), &small()).unwrap(),
        json!([true, true, true])
    );
}

#[test]
fn a_failed_evaluation_throws_its_state_away() {
    let fine = Chunk::compile("return 1").unwrap();
    fine.value(&Map::new(), &small()).unwrap();
    let before = built();
    fine.value(&Map::new(), &small()).unwrap();
    assert_eq!(built(), before, "a clean success keeps the state");
    let mut expected = before;
    for failing in [
        "string.upper = nil error('boom')",
        "string.upper = nil while true do end",
        "string.upper = nil return string.rep('x', 2^30)",
        "string.upper = nil return function() end",
    ] {
        let chunk = Chunk::compile(failing).unwrap();
        assert!(chunk.value(&Map::new(), &small()).is_err(), "{failing}");
        assert_eq!(fine.value(&Map::new(), &small()).unwrap(), json!(1));
        expected += 1;
        assert_eq!(built(), expected, "after {failing}");
        assert_eq!(run("return ('a'):upper()", json!({})).unwrap(), json!("A"));
    }
}

/// The budget and the memory limit are each evaluation's, whole, and
/// garbage left behind is collected before the state waits idle with it.
#[test]
fn every_evaluation_gets_the_whole_budget() {
    // About 900,000 of the million instructions, again and again.
    let busy = Chunk::compile("local n = 0 for i = 1, 450000 do n = n + i end return n").unwrap();
    for _ in 0..5 {
        assert_eq!(
            busy.value(&Map::new(), &small()).unwrap(),
            json!(101_250_225_000_i64)
        );
    }
    // About 2.5 of the 4 MiB, left behind as garbage, again and again.
    let big = Chunk::compile(
        "local t = {} for i = 1, 5 do t[i] = string.rep(tostring(i), 512 * 1024) end return #t",
    )
    .unwrap();
    let small_one = Chunk::compile("return 1").unwrap();
    for _ in 0..5 {
        assert_eq!(big.value(&Map::new(), &small()).unwrap(), json!(5));
        small_one.value(&Map::new(), &small()).unwrap();
    }
    big.value(&Map::new(), &small()).unwrap();
    let (used, live) = state_memory().unwrap();
    assert!(
        used < live + MAX_GARBAGE,
        "{used} {live}: collected before the state goes back to wait"
    );
    assert!(
        live < 2 * 1024 * 1024,
        "{live}: the answer's strings are not kept"
    );
}
