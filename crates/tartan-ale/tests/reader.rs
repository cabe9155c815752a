//! The reader (Ale's lexical syntax) and compile errors with positions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{compile_err, ok};
use serde_json::json;
use tartan_ale::compile_lambda;

#[test]
fn integers_in_every_base() {
    assert_eq!(
        ok("[42 -7 +7 0x1F 0X1f 0b101 0755 0]"),
        json!([42, -7, 7, 31, 31, 5, 493, 0])
    );
}

#[test]
fn floats_and_ratios() {
    assert_eq!(
        ok("[1.5 -0.25 1e3 2.5E-1 1.0]"),
        json!([1.5, -0.25, 1000.0, 0.25, 1.0])
    );
    // Ratios stay exact; whole ones read as integers.
    assert_eq!(ok("[1/3 4/2 -6/4]"), json!(["1/3", 2, "-3/2"]));
}

#[test]
fn strings_and_escapes() {
    assert_eq!(
        ok(r#""a\"b\\c\nd\te\sf\qg""#),
        json!("a\"b\\c\nd\te f".to_string() + "qg")
    );
    assert_eq!(ok("\"multi\nline\""), json!("multi\nline"));
}

#[test]
fn keywords_symbols_and_booleans() {
    assert_eq!(
        ok("[:a :b/c :-> #t #f true false]"),
        json!(["a", "b/c", "->", true, false, true, false])
    );
    assert_eq!(ok("'some-symbol?"), json!("some-symbol?"));
    assert_eq!(ok("'ns/name"), json!("ns/name"));
}

#[test]
fn comments_are_ignored() {
    assert_eq!(
        ok("; line comment\n(+ 1 #| block #| nested |# |# 2) ; trailing"),
        json!(3)
    );
    // `;` inside a symbol does not start a comment, as in Ale.
    assert_eq!(compile_err("a;b").message, "unknown symbol: a;b");
}

#[test]
fn dotted_pairs_and_quoted_lists() {
    assert_eq!(ok("'(1 2 . 3)"), json!("(1 2 . 3)"));
    assert_eq!(ok("'(1 . (2 3))"), json!([1, 2, 3]));
    assert_eq!(ok("'()"), json!(null));
    assert_eq!(
        ok("'(a (b c) [d] {:e f})"),
        json!(["a", ["b", "c"], ["d"], {"e": "f"}])
    );
    // Quoting a quote keeps Ale's qualified marker.
    assert_eq!(ok("(str ''x)"), json!("(ale/quote x)"));
}

#[test]
fn object_literal_first_key_wins() {
    assert_eq!(ok("{:a 1 :a 2 :b 3}"), json!({"a": 1, "b": 3}));
}

#[test]
fn positions_of_errors() {
    let e = compile_err("(+ 1\n   (foo 2))");
    assert_eq!(
        (e.line, e.column, e.message.as_str()),
        (2, 5, "unknown symbol: foo")
    );
    let e = compile_err("  \"never closed");
    assert_eq!((e.line, e.column), (1, 3));
    assert_eq!(e.message, "string has no closing quote");
    let e = compile_err("(list 1 2");
    assert_eq!((e.line, e.column, e.message.as_str()), (1, 1, "list not closed"));
    let e = compile_err("[1 2\n\n 3 12abc]");
    assert_eq!(
        (e.line, e.column, e.message.as_str()),
        (3, 4, "invalid number: 12abc")
    );
    let e = compile_err("(+ 1 2))");
    assert_eq!(
        (e.line, e.column, e.message.as_str()),
        (1, 8, "unmatched list end")
    );
    assert_eq!(e.to_string(), "line 1, column 8: unmatched list end");
}

#[test]
fn syntax_errors() {
    for (src, msg) in [
        ("{:a}", "map must contain an even number of elements"),
        ("[1 . 2]", "unexpected dot"),
        ("(. 1)", "invalid list syntax"),
        ("(1 . 2 3)", "invalid list syntax"),
        ("(x y .)", "invalid list syntax"),
        ("#{1 2}", "unsupported syntax"),
        ("#b[1 2]", "unsupported syntax"),
        ("#| open", "comment has no closing marker"),
        ("|#", "no open block comment"),
        ("'", "end of file"),
        ("1.5.2", "invalid number"),
        ("1_000", "unsupported number literal"),
        ("99999999999999999999", "beyond 64 bits"),
        ("1e999", "invalid number"),
        ("`(a ,b)", "syntax-quote"),
        ("@x", "unexpected characters"),
    ] {
        let e = compile_err(src);
        assert!(e.message.contains(msg), "{src}: {e}");
    }
}

#[test]
fn deep_nesting_is_a_compile_error() {
    let src = "(".repeat(100_000);
    let e = compile_err(&src);
    assert!(e.message.contains("nested deeper"), "{e}");
    let src = "[".repeat(100_000) + &"]".repeat(100_000);
    assert!(compile_err(&src).message.contains("nested deeper"));
    // Nesting within the limit works.
    let src = "[".repeat(200) + "1" + &"]".repeat(200);
    let v = ok(&src);
    let mut cur = &v;
    for _ in 0..200 {
        cur = &cur[0];
    }
    assert_eq!(cur, &json!(1));
}

#[test]
fn long_threading_chains_are_bounded() {
    let src = format!("(-> 0 {})", "inc ".repeat(100));
    assert_eq!(ok(&src), json!(100));
    let src = format!("(-> 0 {})", "inc ".repeat(5_000));
    assert!(compile_err(&src).message.contains("nested deeper"));
}

#[test]
fn empty_scripts_and_bad_params() {
    assert_eq!(compile_err("").message, "script is empty");
    assert_eq!(compile_err("  ; only a comment\n").message, "script is empty");
    for bad in ["a b", "1", ":k", "#t", "(x)", "ns/x", ""] {
        assert!(compile_lambda(&[bad], "1").is_err(), "{bad:?}");
    }
    assert!(compile_lambda(&["a", "a"], "a")
        .unwrap_err()
        .message
        .contains("duplicate"));
    assert!(compile_lambda(&["if", "str", "odd-name?"], "(str if odd-name?)").is_ok());
}

#[test]
fn several_forms_yield_the_last() {
    assert_eq!(ok("1 2 (+ 1 2)"), json!(3));
}

/// Compilation runs on the caller's stack: the deepest accepted script must
/// compile on a small thread.
#[test]
fn deepest_script_compiles_on_a_small_stack() {
    let depth = 255;
    let src = "(+ 1 ".repeat(depth - 1) + "0" + &")".repeat(depth - 1);
    let h = std::thread::Builder::new()
        .stack_size(1024 * 1024)
        .spawn(move || compile_lambda(&[], &src).map(|_| ()))
        .unwrap();
    assert!(h.join().unwrap().is_ok());
    let src = format!("(some-> 0 {})", "inc ".repeat(300));
    let h = std::thread::Builder::new()
        .stack_size(1024 * 1024)
        .spawn(move || compile_lambda(&[], &src).map(|_| ()))
        .unwrap();
    assert!(h.join().unwrap().is_ok());
}
