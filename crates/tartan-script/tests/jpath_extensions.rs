//! jpath (src/jpath/) where it differs from RFC 9535 or goes beyond the
//! other case tables (checked against kode4food/jpath); expected answers
//! are kode4food/jpath's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

mod jpath_support;

use jpath_support::{check, Case};

/// Cases from jpath extensions (checked against kode4food/jpath); expected answers are kode4food/jpath's.
#[test]
fn jpath_extensions() {
    check(&member_order_and_top_level());
    check(&comparisons_and_functions());
    check(&validation());
    check(&nested_filters());
    check(&literals_and_white_space());
}

/// Member order, and expressions at the top level.
fn member_order_and_top_level() -> Vec<Case> {
    vec![
        // object members come in key order, not document order
        (
            r#"$.*"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2, {"y": 25, "z": 26}])),
        ),
        // descendants: each node before its children, members by key
        (
            r#"$..*"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2, {"y": 25, "z": 26}, 25, 26])),
        ),
        // filters over an object visit members by key
        (
            r#"$[?@ > 0]"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2])),
        ),
        // a true top-level comparison matches every child of the root
        (
            r#"$.b == 2"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2, {"y": 25, "z": 26}])),
        ),
        // a false one matches nothing
        (
            r#"$.b == 3"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([])),
        ),
        // a true comparison over a document without children matches nothing
        (r#"1 == 1"#, json!({}), Some(json!([]))),
        // nor over a scalar document
        (r#"1 == 1"#, json!(5), Some(json!([]))),
        // an explicit null child counts
        (r#"1 == 1"#, json!([null]), Some(json!([null]))),
        // a parenthesised absolute query is the query
        (
            r#"($.c)"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([{"y": 25, "z": 26}])),
        ),
        (
            r#"(($.c.y))"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([25])),
        ),
        (
            r#"$"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([{"a": 1, "b": 2, "c": {"y": 25, "z": 26}}])),
        ),
        // a top-level relative query: children having y
        (r#"@.y"#, json!([{"y": 1}, {"x": 2}]), Some(json!([{"y": 1}]))),
        (r#"@ > 1"#, json!([1, 2, 3]), Some(json!([2, 3]))),
        // negation at the top level
        (
            r#"!$.missing"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2, {"y": 25, "z": 26}])),
        ),
        (
            r#"$.a && $.missing"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([])),
        ),
        (
            r#"$.a || $.missing"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2, {"y": 25, "z": 26}])),
        ),
        (
            r#"$.a == 1 && $.b == 2"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2, {"y": 25, "z": 26}])),
        ),
        // chained comparison: (a == 1) == true
        (
            r#"$.a == 1 == true"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2, {"y": 25, "z": 26}])),
        ),
        (
            r#"$.a == 1 == false"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([])),
        ),
        (
            r#"1 < 2 < 3"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([])),
        ),
        // a negated comparison operand: (!$.a) == false
        (
            r#"!$.a == false"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2, {"y": 25, "z": 26}])),
        ),
        // a parenthesised comparison operand
        (
            r#"(@) == 2"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([2])),
        ),
    ]
}

/// Comparisons of node lists and numbers, and functions at the top level.
fn comparisons_and_functions() -> Vec<Case> {
    vec![
        // two empty node lists are equal
        (
            r#"$.missing == $.other"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2, {"y": 25, "z": 26}])),
        ),
        (
            r#"$.missing != 1"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2, {"y": 25, "z": 26}])),
        ),
        // an empty node list is not null
        (
            r#"$.missing == null"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([])),
        ),
        // numbers compare as floats
        (
            r#"$.a == 1.0"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2, {"y": 25, "z": 26}])),
        ),
        (
            r#"$.a == 1e0"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2, {"y": 25, "z": 26}])),
        ),
        (
            r#"length($.c) == 2"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2, {"y": 25, "z": 26}])),
        ),
        (
            r#"count($.*) == 3"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2, {"y": 25, "z": 26}])),
        ),
        (
            r#"value($.a) == 1"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1, 2, {"y": 25, "z": 26}])),
        ),
        // match() at the top level
        (
            r#"match($.s, 'a.c')"#,
            json!({"s": "abc", "t": "a\nc"}),
            Some(json!(["abc", "a\nc"])),
        ),
        // '.' never matches a line break
        (
            r#"search($.t, 'a.c')"#,
            json!({"s": "abc", "t": "a\nc"}),
            Some(json!([])),
        ),
    ]
}

/// Validation of the outermost filters.
fn validation() -> Vec<Case> {
    vec![
        // validation: a bare literal must be compared
        (r#"1"#, json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}), None),
        (r#"'x'"#, json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}), None),
        // validation: length() must be compared
        (
            r#"length($.c)"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            None,
        ),
        // validation: comparisons need singular queries
        (
            r#"$..a == 1"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            None,
        ),
        (
            r#"$.c[*] == 1"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            None,
        ),
        // validation: length() needs a singular query
        (
            r#"length($..a) == 1"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            None,
        ),
        // validation: count() needs a query
        (
            r#"count(1) == 1"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            None,
        ),
        // validation: match() must not be compared
        (
            r#"match($.a, 'x') == true"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            None,
        ),
        // validation: arity
        (
            r#"match($.a)"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            None,
        ),
        // unknown function
        (
            r#"nope($.a)"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            None,
        ),
        // no space before a call's parenthesis
        (
            r#"length ($.a) == 1"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            None,
        ),
    ]
}

/// Nested filters, `$` in them, and the expression grammar inside brackets.
fn nested_filters() -> Vec<Case> {
    vec![
        // a nested filter
        (
            r#"$.items[?@.tags[?@ == 'z']]"#,
            json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
            Some(json!([{"n": 2, "tags": ["z"]}])),
        ),
        // nested filters are not validated: a bare literal is true...
        (
            r#"$.items[?@.tags[?1]]"#,
            json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
            Some(json!([{"n": 1, "tags": ["x", "y"]}, {"n": 2, "tags": ["z"]}])),
        ),
        // ...unless null or false
        (
            r#"$.items[?@.tags[?null]]"#,
            json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
            Some(json!([])),
        ),
        // an uncompared function result is true unless nothing
        (
            r#"$.items[?@.tags[?length(@)]]"#,
            json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
            Some(json!([{"n": 1, "tags": ["x", "y"]}, {"n": 2, "tags": ["z"]}])),
        ),
        // a non-singular comparison holds when any node compares
        (
            r#"$.items[?@[?@..* == 'y']]"#,
            json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
            Some(json!([{"n": 1, "tags": ["x", "y"]}])),
        ),
        // $ inside a relative query is where that query started (here each item)
        (
            r#"$.items[?@.tags[?$ == 'z']]"#,
            json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
            Some(json!([])),
        ),
        (
            r#"$.items[?@.tags[?$.want == 'z']]"#,
            json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
            Some(json!([])),
        ),
        // $ in an outermost filter is the document
        (
            r#"$.items[?$.n == @.n]"#,
            json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
            Some(json!([{"n": 2, "tags": ["z"]}])),
        ),
        // chained comparisons in brackets
        (
            r#"$.items[?@.n > 1 == true]"#,
            json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
            Some(json!([{"n": 2, "tags": ["z"]}, {"n": 3, "tags": []}])),
        ),
        // parenthesised operands in brackets
        (
            r#"$.items[?(@.n) > 1]"#,
            json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
            Some(json!([{"n": 2, "tags": ["z"]}, {"n": 3, "tags": []}])),
        ),
        (
            r#"$.items[?!@.n == false]"#,
            json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
            Some(json!([{"n": 1, "tags": ["x", "y"]}, {"n": 2, "tags": ["z"]}, {"n": 3, "tags": []}])),
        ),
        (
            r#"$.items[?!(@.n > 1)]"#,
            json!({"items": [{"tags": ["x", "y"], "n": 1}, {"tags": ["z"], "n": 2}, {"tags": [], "n": 3}], "want": "z", "n": 2}),
            Some(json!([{"n": 1, "tags": ["x", "y"]}])),
        ),
    ]
}

/// Literals, indexes, white space, strings and slices.
fn literals_and_white_space() -> Vec<Case> {
    vec![
        // a number literal too large is an error
        (r#"$[?@ == 1e400]"#, json!([1]), None),
        // -0 is a number literal...
        (r#"$[?@ == -0]"#, json!([0]), Some(json!([0]))),
        // ...but not an index
        (r#"$[-0]"#, json!([0]), None),
        // indexes are at most 2^53 - 1
        (r#"$[9007199254740992]"#, json!([0]), None),
        // no leading or trailing white space
        (r#" $.a"#, json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}), None),
        (r#"$.a "#, json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}), None),
        // white space before a segment
        (
            r#"$ .a"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            Some(json!([1])),
        ),
        (r#"$[ 0 , 1 ]"#, json!([5, 6]), Some(json!([5, 6]))),
        (
            r#"$.a $.b"#,
            json!({"b": 2, "a": 1, "c": {"z": 26, "y": 25}}),
            None,
        ),
        // string escapes
        (r#"$['\u00e9']"#, json!({"é": 1}), Some(json!([1]))),
        // non-ASCII member names
        (r#"$.é"#, json!({"é": 1}), Some(json!([1]))),
        (
            r#"$[?@.n == 'a"b']"#,
            json!([{"n": "a\"b"}]),
            Some(json!([{"n": "a\"b"}])),
        ),
        // \' is not an escape in a double-quoted string
        (r#"$[?@ == "\'"]"#, json!(["'"]), None),
        (r#"$[?true]"#, json!([1]), None),
        (r#"$[?true == true]"#, json!([1, 2]), Some(json!([1, 2]))),
        // a zero step selects nothing
        (r#"$[::0]"#, json!([1, 2]), Some(json!([]))),
        (r#"$[::-1]"#, json!([1, 2, 3]), Some(json!([3, 2, 1]))),
        // a filter over a scalar selects nothing
        (r#"$.a[?@ > 1]"#, json!({"a": 5}), Some(json!([]))),
    ]
}
