//! How long one evaluation of a small Lua script takes, in nanoseconds: a
//! predicate and a mapping as the engine evaluates them per step decision,
//! and a somewhat larger mapping for comparison. Not a test: run it with
//! `cargo run --release -p tartan-script --example lua_bench`.

use std::error::Error;
use std::hint::black_box;
use std::time::Instant;

use serde_json::{json, Map, Value};
use tartan_script::{Language, Limits, Script};

const ROUNDS: u32 = 20_000;

fn main() -> Result<(), Box<dyn Error>> {
    let limits = Limits::default();
    let predicate = compile("return amount > 100", &["amount"])?;
    let mapping = compile("return value * 2", &["value"])?;
    let larger = compile(
        "local out = {}\n\
         for i, item in ipairs(items) do\n\
           out[i] = { name = string.upper(item.name), total = item.price * item.qty }\n\
         end\n\
         return { lines = out, count = #out }",
        &["items"],
    )?;
    let items = json!({"items": [
        {"name": "a", "price": 1.5, "qty": 2},
        {"name": "b", "price": 2.5, "qty": 1},
        {"name": "c", "price": 4, "qty": 3},
    ]});

    let amount = object(json!({"amount": 500}))?;
    let value = object(json!({"value": 21}))?;
    let items = object(items)?;
    measure("predicate `return amount > 100`", || {
        predicate.truth(&amount, &limits).map(|_| ())
    })?;
    measure("mapping `return value * 2`", || {
        mapping.value(&value, &limits).map(|_| ())
    })?;
    measure("mapping over 3 items", || {
        larger.value(&items, &limits).map(|_| ())
    })?;
    // What the sandbox's bound costs a busy script: a safepoint per
    // iteration (Luau's interrupt).
    let busy = compile("local n = 0 for i = 1, 10000 do n = n + i end return n", &[])?;
    let none = Map::new();
    measure("loop of 10,000 iterations", || {
        busy.value(&none, &limits).map(|_| ())
    })?;
    let pattern = compile("return string.find(s, '(%w+)@(%w+)%.com')", &["s"])?;
    let email = object(json!({"s": "someone.else@example.com"}))?;
    measure("pattern on an email", || {
        pattern.value(&email, &limits).map(|_| ())
    })?;
    Ok(())
}

fn compile(source: &str, params: &[&str]) -> Result<Script, Box<dyn Error>> {
    let params: Vec<String> = params.iter().map(|p| p.to_string()).collect();
    Ok(Script::compile(Language::Lua, source, &params)?)
}

fn object(value: Value) -> Result<Map<String, Value>, Box<dyn Error>> {
    value.as_object().cloned().ok_or_else(|| "not an object".into())
}

/// Times `eval`; a word given on the command line picks the cases to run.
fn measure<E: Error + 'static>(
    name: &str,
    mut eval: impl FnMut() -> Result<(), E>,
) -> Result<(), Box<dyn Error>> {
    if let Some(only) = std::env::args().nth(1) {
        if !name.contains(&only) {
            return Ok(());
        }
    }
    for _ in 0..ROUNDS / 10 {
        black_box(eval()?);
    }
    let started = Instant::now();
    for _ in 0..ROUNDS {
        black_box(eval()?);
    }
    let per = started.elapsed().as_nanos() / u128::from(ROUNDS);
    println!("{name:<36} {per:>8} ns/eval");
    Ok(())
}
