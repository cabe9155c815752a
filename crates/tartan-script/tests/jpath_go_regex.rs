//! jpath's `match()` and `search()` (src/jpath/goregex/): Go's regular
//! expressions, not the `regex` crate's; expected answers are
//! kode4food/jpath's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

mod jpath_support;

use jpath_support::{check, Case};

#[test]
fn named_groups_as_go_1_22() {
    check(&[
        (
            r"$[?match(@, '(?P<n>a)b')]",
            json!(["ab", "b"]),
            Some(json!(["ab"])),
        ),
        (
            r"$[?match(@, '(?<n>a)b')]",
            json!(["ab", "b"]),
            Some(json!(["ab"])),
        ),
        (r"$[?match(@, '(?<n-x>a)b')]", json!(["ab", "b"]), Some(json!([]))),
        (r"$[?match(@, '(?<=a)b')]", json!(["ab", "b"]), Some(json!([]))),
    ]);
}

/// Cases from Go regular expressions in match() and search(); expected answers are kode4food/jpath's.
#[test]
fn go_regular_expressions() {
    check(&escapes_and_classes());
    check(&repetitions());
    check(&brackets_anchors_and_document_patterns());
}

/// Escapes and classes: ASCII-only Perl classes, case folding, Unicode names, octal, hex, quoting.
fn escapes_and_classes() -> Vec<Case> {
    vec![
        // \d is ASCII only
        (
            r#"$[?match(@, 'a\\d')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["a1"])),
        ),
        // \w is ASCII only
        (
            r#"$[?match(@, '\\w')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["k", "K", "_"])),
        ),
        // \s is ASCII only
        (
            r#"$[?match(@, 'x\\sy')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["x y"])),
        ),
        // \b is an ASCII word boundary
        (
            r#"$[?search(@, '\\bé')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!([])),
        ),
        // case folding includes the Kelvin sign
        (
            r#"$[?match(@, '(?i)k')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["k", "K", "\u{212a}"])),
        ),
        // (?i)\W excludes what folds to a word character
        (
            r#"$[?match(@, '(?i)\\W')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["é", "Ω"])),
        ),
        // Go's script names
        (
            r#"$[?match(@, '\\p{Greek}')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["Ω"])),
        ),
        // exactly: Go rejects other spellings (nothing)
        (
            r#"$[?match(@, '\\p{greek}')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!([])),
        ),
        // octal, hex, \Q...\E
        (
            r#"$[?match(@, '\\141\\x62|\\x{61}\\Q.\\E.')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["ab"])),
        ),
    ]
}

/// Repetitions: literal `{`, counts, stacked repetitions, flag groups.
fn repetitions() -> Vec<Case> {
    vec![
        // { that starts no repetition is a literal
        (
            r#"$[?match(@, '{2.')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["{2}"])),
        ),
        // a repetition of nothing: Go rejects the pattern
        (
            r#"$[?match(@, '{2}')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!([])),
        ),
        (
            r#"$[?match(@, 'a{2}')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["aa"])),
        ),
        // counts over 1000: Go rejects the pattern
        (
            r#"$[?match(@, 'a{1001}')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!([])),
        ),
        // stacked repetitions: rejected
        (
            r#"$[?match(@, 'a**')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!([])),
        ),
        // a repetition after a flag group repeats the item before it
        (
            r#"$[?match(@, 'a(?i)*')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["aa"])),
        ),
    ]
}

/// Brackets, `.`, anchoring, POSIX classes, and patterns read from the document.
fn brackets_anchors_and_document_patterns() -> Vec<Case> {
    vec![
        // [ inside brackets is a character
        (
            r#"$[?match(@, '[a[<]b')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["ab"])),
        ),
        // && inside brackets is two characters
        (
            r#"$[?match(@, '[a&&b]b')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["ab"])),
        ),
        // \< is a literal <
        (
            r#"$[?match(@, 'a\\<b')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["a<b"])),
        ),
        // a negated class
        (
            r#"$[?match(@, '[^\\x{0}-\\x{7f}]!?')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["\u{212a}", "é", "Ω", "é!"])),
        ),
        // . is [^\r\n]
        (
            r#"$[?match(@, 'a.c')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["a.c"])),
        ),
        // match() anchors as ^(?:pattern)$
        (
            r#"$[?match(@, 'a)|(a')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["a1", "a\u{661}", "a.c", "a\nc", "aa", "ab", "a<b"])),
        ),
        // POSIX classes
        (
            r#"$[?search(@, '[[:upper:]]')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!(["K"])),
        ),
        (
            r#"$[?search(@, '\\pL\\PL')]"#,
            json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "k", "K", "\u{212a}", "_", "é", "Ω", "a.c", "a\nc",
                "{2}", "aa", "ab", "a<b", "é!"
            ]),
            Some(json!([
                "a1", "a\u{661}", "x y", "x\u{a0}y", "a.c", "a\nc", "a<b", "é!"
            ])),
        ),
        // patterns read from the document
        (
            r#"$[?match(@.s, @.p)]"#,
            json!([{"s": "ab", "p": "a."}, {"s": "ab", "p": "a("}, {"s": "a1", "p": "a\\d"}, {"s": 1, "p": "1"}]),
            Some(json!([{"p": "a.", "s": "ab"}, {"p": "a\\d", "s": "a1"}])),
        ),
        // a negation the regex crate gets wrong as [^...]
        (
            r#"$[?match(@, '[^\\p{Cn}\\p{Co}]')]"#,
            json!(["\u{e000}", "\u{d7ff}", "a"]),
            Some(json!([])),
        ),
    ]
}
