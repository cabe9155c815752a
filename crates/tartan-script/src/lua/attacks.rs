//! What a hostile or careless script tries against the sandbox: catching
//! its limit and going on, looping in C, answering with more than it holds,
//! and outliving whoever waits for it. Bounds are generous (the machine
//! may be loaded): each shape ran for seconds to hours, or for ever, before.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::Cancel;

fn limits(wall_ms: u64) -> Limits {
    Limits {
        instructions: 10_000_000,
        memory_bytes: 32 * 1024 * 1024,
        wall: Duration::from_millis(wall_ms),
    }
}

/// Evaluate, and say how long it took.
fn timed(src: &str, args: Value, limits: &Limits) -> (Result<Value, ScriptError>, Duration) {
    let chunk = Chunk::compile(src).unwrap();
    let started = Instant::now();
    let out = chunk.value(args.as_object().unwrap(), limits);
    (out, started.elapsed())
}

fn is_limit(e: &ScriptError) -> bool {
    matches!(e, ScriptError::Limit { .. })
}

#[test]
fn a_limit_is_final_whatever_the_script_catches() {
    for src in [
        // A handler that loops, run after the limit.
        "xpcall(function() while true do end end, function(e) while true do end end) return true",
        // Catch the limit and answer anyway.
        "pcall(function() while true do end end) return true",
        // Catch it again and again.
        "while true do pcall(function() while true do end end) end",
        "local n = 0 while true do n = n + 1 pcall(error, n) end",
        // Catch it, then go on working.
        "pcall(function() while true do end end) local n = 0 for i = 1, 1e12 do n = n + i end return n",
        // Recursion that catches at every level.
        "local function f() pcall(f) while true do end end f() return 1",
        // A memory error caught and ignored.
        "local ok = pcall(string.rep, 'x', 2^30) return { ok = ok }",
        "local ok = xpcall(function() return string.rep('x', 2^30) end, function(e) return e end) return ok",
    ] {
        let (out, took) = timed(src, json!({}), &limits(200));
        let e = out.err().unwrap_or_else(|| panic!("{src}: answered"));
        assert!(is_limit(&e), "{src}: {e}");
        assert!(took < Duration::from_secs(5), "{src}: {took:?}");
    }
    // The instruction limit is just as final.
    let few = Limits {
        instructions: 10_000,
        ..limits(10_000)
    };
    let (out, _) = timed(
        "pcall(function() while true do end end) return true",
        json!({}),
        &few,
    );
    assert!(
        matches!(
            out,
            Err(ScriptError::Limit {
                limit: Limit::Instructions(_),
                ..
            })
        ),
        "{out:?}"
    );
}

#[test]
fn nothing_loops_in_c_past_its_limit() {
    let long = "a".repeat(20_000);
    for (src, args) in [
        ("return table.move({}, 1, 3e8, 2) ~= nil", json!({})),
        ("return string.find(string.rep('a', 2000), '.-.-b')", json!({})),
        // A backtracking predicate on an input any flow starter controls.
        (
            "return string.find(email, '^.-.-.-@.-%..-$') ~= nil",
            json!({"email": long}),
        ),
        (
            "return string.match(email, '(.-)(.-)(.-)b') ~= nil",
            json!({"email": long}),
        ),
        (
            "return string.gsub(email, '.-.-b', '') ~= nil",
            json!({"email": long}),
        ),
        (
            "for w in string.gmatch(email, '.-.-b') do end return 1",
            json!({"email": long}),
        ),
    ] {
        let (out, took) = timed(src, args, &limits(300));
        assert!(took < Duration::from_secs(5), "{src}: {took:?}");
        if let Err(e) = out {
            assert!(is_limit(&e), "{src}: {e}");
        }
    }
    // A plain search is linear: a 4 MB haystack and a 2 MB needle that
    // matches at every candidate but its last byte (hours as Luau had it).
    let (out, took) = timed(
        "local h = string.rep('a', 4e6) local n = string.rep('a', 2e6) .. 'b'\n\
         return { string.find(h, n, 1, true) == nil, string.find(h .. 'b', n, 1, true) }",
        json!({}),
        &limits(5_000),
    );
    assert_eq!(out.unwrap(), json!([true, 2_000_001, 4_000_001]));
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn plain_find_answers_as_luas() {
    let src = "return {\n\
        { string.find('hello world', 'o w') },\n\
        { string.find('hello', 'l', 1, true) },\n\
        { string.find('hello', 'l', -2) },\n\
        { string.find('hello', 'l', -100) },\n\
        { string.find('hello', '', 10) },\n\
        { string.find('hello', '', 6) },\n\
        { string.find('a.b', '.', 2, true) },\n\
        { string.find('a.b', '%.') },\n\
        { ('abc'):find('c') },\n\
        { string.find('hello', 'z') },\n\
    }";
    let (out, _) = timed(src, json!({}), &limits(1_000));
    assert_eq!(
        out.unwrap(),
        json!([
            [5, 7],
            [3, 3],
            [4, 4],
            [3, 3],
            {},
            [6, 5],
            [2, 2],
            [2, 2],
            [3, 3],
            {}
        ])
    );
    let (out, _) = timed("return string.find({}, 'x')", json!({}), &limits(1_000));
    assert!(out.is_err());
}

#[test]
fn an_answer_is_charged_to_the_memory_allowance() {
    // 10^8 leaves out of eight tables of ten entries each.
    let src = "local t = { 1 } for d = 1, 8 do local u = {} for i = 1, 10 do u[i] = t end t = u end return t";
    let (out, took) = timed(src, json!({}), &limits(10_000));
    assert!(
        matches!(
            out,
            Err(ScriptError::Limit {
                limit: Limit::Memory(_),
                ..
            })
        ),
        "{out:?}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    // Long strings shared many times are charged each time.
    let src = "local s = string.rep('x', 1e6) local t = {} for i = 1, 100 do t[i] = s end return t";
    let (out, _) = timed(src, json!({}), &limits(10_000));
    assert!(out.is_err_and(|e| is_limit(&e)));
    // An answer within the allowance is unchanged.
    let (out, _) = timed(
        "local t = { 1 } for d = 1, 3 do local u = {} for i = 1, 3 do u[i] = t end t = u end return t",
        json!({}),
        &limits(1_000),
    );
    assert_eq!(
        out.unwrap(),
        json!([
            [[[1], [1], [1]], [[1], [1], [1]], [[1], [1], [1]]],
            [[[1], [1], [1]], [[1], [1], [1]], [[1], [1], [1]]],
            [[[1], [1], [1]], [[1], [1], [1]], [[1], [1], [1]]]
        ])
    );
}

#[test]
fn a_cancelled_evaluation_ends_at_its_next_safepoint() {
    let cancel = Cancel::new();
    let chunk = Chunk::compile("while true do end").unwrap();
    let inside = cancel.clone();
    let running = std::thread::spawn(move || {
        let started = Instant::now();
        let out = crate::under(&inside, || chunk.value(&Map::new(), &limits(60_000)));
        (out, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(50));
    cancel.cancel();
    let (out, took) = running.join().unwrap();
    assert!(matches!(out, Err(ScriptError::Cancelled { .. })), "{out:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    // One that would start under a cancelled flag does not start.
    let out = crate::under(&cancel, || run_default("return 1"));
    assert!(matches!(out, Err(ScriptError::Cancelled { .. })), "{out:?}");
    // Nor does the flag outlive `under`.
    assert_eq!(run_default("return 1").unwrap(), json!(1));
}

fn run_default(src: &str) -> Result<Value, ScriptError> {
    Chunk::compile(src).unwrap().value(&Map::new(), &limits(1_000))
}

#[test]
fn no_address_is_shown() {
    let out = run_default(
        "local t = setmetatable({}, { __tostring = function() return 'mine' end })\n\
         return { tostring({}), tostring(tostring), string.format('%*|%*', {}, t),\n\
                  `{ {} }`, tostring(t), tostring(1.5), tostring(nil) }",
    )
    .unwrap();
    assert_eq!(
        out,
        json!(["table", "function", "table|mine", "table", "mine", "1.5", "nil"])
    );
}

#[test]
fn numbers_are_lua_5_1s_as_in_argyll() {
    let out = run_default("return { 'v' .. (10 / 2), 10 / 2, 7 // 2, tostring(3.0), 2^52 }").unwrap();
    assert_eq!(out, json!(["v5", 5, 3, "3", 4503599627370496_i64]));
}
