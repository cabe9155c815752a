//! jpath (src/jpath/) against the cases of kode4food/jpath's own tests;
//! expected answers are kode4food/jpath's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

mod jpath_support;

use jpath_support::check;

/// Cases from kode4food/jpath jpath_test.go; expected answers are kode4food/jpath's.
#[test]
fn jpath_top_level_tests() {
    check(&[
        // TestTopLevelParseCompileQuery
        (r#"$[1]"#, json!([10, 20, 30]), Some(json!([20]))),
        // TestTopLevelWrappers
        (r#"$[0]"#, json!([9]), Some(json!([9]))),
        // TestTopLevelWrapperPanics: empty
        (r#""#, json!(null), None),
        // TestTopLevelFilterShorthand: explicit
        (
            r#"$[?($.product_info.name == "Professional Laptop")]"#,
            json!({"product_info": {"name": "Professional Laptop"}}),
            Some(json!([{"name": "Professional Laptop"}])),
        ),
        // TestTopLevelFilterShorthand: shorthand, same answer
        (
            r#"$.product_info.name == "Professional Laptop""#,
            json!({"product_info": {"name": "Professional Laptop"}}),
            Some(json!([{"name": "Professional Laptop"}])),
        ),
        // TestTopLevelFilterShorthand: explicit
        (
            r#"$[?($.product_info.name == "Professional Laptop")]"#,
            json!({"product_info": {"name": "Budget Laptop"}}),
            Some(json!([])),
        ),
        // TestTopLevelFilterShorthand: shorthand, same answer
        (
            r#"$.product_info.name == "Professional Laptop""#,
            json!({"product_info": {"name": "Budget Laptop"}}),
            Some(json!([])),
        ),
        // TestTopLevelFilterShorthandCurrentNode: explicit
        (
            r#"$[?@.name == "Professional Laptop"]"#,
            json!([{"name": "Professional Laptop"}, {"name": "Budget Laptop"}]),
            Some(json!([{"name": "Professional Laptop"}])),
        ),
        // TestTopLevelFilterShorthandCurrentNode: shorthand
        (
            r#"@.name == "Professional Laptop""#,
            json!([{"name": "Professional Laptop"}, {"name": "Budget Laptop"}]),
            Some(json!([{"name": "Professional Laptop"}])),
        ),
        // TestTopLevelFilterShorthandKeepsPathGrammar
        (
            r#"$.product_info.name"#,
            json!({"product_info": {"name": "Professional Laptop"}}),
            Some(json!(["Professional Laptop"])),
        ),
        // TestBadNumberError
        (r#"$[?(@ == 01)]"#, json!([1]), None),
    ]);
}

/// Cases from kode4food/jpath eval_test.go; expected answers are kode4food/jpath's.
#[test]
fn jpath_eval_tests() {
    check(&[
        // TestFilterPathValues
        (
            r#"$.items[?@.x[0] == 1]"#,
            json!({"x": [10, 20], "items": [{"x": [1, 2]}, {"x": [3, 4]}]}),
            Some(json!([{"x": [1, 2]}])),
        ),
        // TestFilterPathValues
        (
            r#"$.items[?$.x[0] == 10]"#,
            json!({"x": [10, 20], "items": [{"x": [1, 2]}, {"x": [3, 4]}]}),
            Some(json!([{"x": [1, 2]}, {"x": [3, 4]}])),
        ),
        // TestFilterBuiltinFunctions
        (
            r#"$[?length(@.name) == 4]"#,
            json!([{"name": "abcd", "vals": [1, 2]}, {"name": "xy", "vals": [9]}]),
            Some(json!([{"name": "abcd", "vals": [1, 2]}])),
        ),
        // TestFilterBuiltinFunctions
        (
            r#"$[?count(@.vals[*]) == 2]"#,
            json!([{"name": "abcd", "vals": [1, 2]}, {"name": "xy", "vals": [9]}]),
            Some(json!([{"name": "abcd", "vals": [1, 2]}])),
        ),
        // TestFilterBuiltinFunctions
        (
            r#"$[?value(@.name) == 'xy']"#,
            json!([{"name": "abcd", "vals": [1, 2]}, {"name": "xy", "vals": [9]}]),
            Some(json!([{"name": "xy", "vals": [9]}])),
        ),
        // TestFilterCompareOperators
        (r#"$[?@ < 2]"#, json!([1, 2, 3]), Some(json!([1]))),
        // TestFilterCompareOperators
        (r#"$[?@ <= 2]"#, json!([1, 2, 3]), Some(json!([1, 2]))),
        // TestFilterCompareOperators
        (r#"$[?@ > 2]"#, json!([1, 2, 3]), Some(json!([3]))),
        // TestFilterCompareOperators
        (r#"$[?@ >= 2]"#, json!([1, 2, 3]), Some(json!([2, 3]))),
        // TestFilterCompareOperators
        (r#"$[?@ != 2]"#, json!([1, 2, 3]), Some(json!([1, 3]))),
        // TestFilterMatchSearchEdgeCases
        (
            r#"$[?match(@.left[*], 'aa')]"#,
            json!([{"left": ["aa", "bb"], "right": ["xx", "yy"]}]),
            Some(json!([])),
        ),
        // TestFilterMatchSearchEdgeCases
        (
            r#"$[?match('aa', @.right[*])]"#,
            json!([{"left": ["aa", "bb"], "right": ["xx", "yy"]}]),
            Some(json!([])),
        ),
        // TestFilterMatchSearchEdgeCases: invalid regex is nothing
        (
            r#"$[?search('abc', '[')]"#,
            json!([{"left": ["aa", "bb"], "right": ["xx", "yy"]}]),
            Some(json!([])),
        ),
    ]);
}

/// Cases from kode4food/jpath slice_test.go, path_test.go, registry_test.go, validate_test.go; expected answers are kode4food/jpath's.
#[test]
fn jpath_slice_path_registry_validate_tests() {
    check(&[
        // TestPathSliceBounds / TestRegistrySliceSpecializations
        (r#"$[-9:2]"#, json!([0, 1, 2, 3, 4]), Some(json!([0, 1]))),
        // TestPathSliceBounds / TestRegistrySliceSpecializations
        (r#"$[9:]"#, json!([0, 1, 2, 3, 4]), Some(json!([]))),
        // TestPathSliceBounds / TestRegistrySliceSpecializations
        (r#"$[2:9]"#, json!([0, 1, 2, 3, 4]), Some(json!([2, 3, 4]))),
        // TestPathSliceBounds / TestRegistrySliceSpecializations
        (r#"$[:-9]"#, json!([0, 1, 2, 3, 4]), Some(json!([]))),
        // TestPathSliceBounds / TestRegistrySliceSpecializations
        (r#"$[-2::-1]"#, json!([0, 1, 2, 3, 4]), Some(json!([3, 2, 1, 0]))),
        // TestPathSliceBounds / TestRegistrySliceSpecializations
        (r#"$[-9::-1]"#, json!([0, 1, 2, 3, 4]), Some(json!([]))),
        // TestPathSliceBounds / TestRegistrySliceSpecializations
        (r#"$[:9:-1]"#, json!([0, 1, 2, 3, 4]), Some(json!([]))),
        // TestPathSliceBounds / TestRegistrySliceSpecializations
        (r#"$[9:1:-1]"#, json!([0, 1, 2, 3, 4]), Some(json!([4, 3, 2]))),
        // TestPathSliceBounds / TestRegistrySliceSpecializations
        (r#"$[:-1]"#, json!([0, 1, 2, 3, 4]), Some(json!([0, 1, 2, 3]))),
        // TestPathSliceBounds / TestRegistrySliceSpecializations
        (r#"$[:-3:-1]"#, json!([0, 1, 2, 3, 4]), Some(json!([4, 3]))),
        // TestPathSelectorMisses
        (r#"$.name"#, json!(1), Some(json!([]))),
        // TestPathSelectorMisses
        (r#"$.name"#, json!({}), Some(json!([]))),
        // TestPathSelectorMisses
        (r#"$[0]"#, json!({}), Some(json!([]))),
        // TestPathSelectorMisses
        (r#"$[*]"#, json!({}), Some(json!([]))),
        // TestPathSelectorMisses
        (r#"$[?@ == 1]"#, json!(1), Some(json!([]))),
        // TestFunctionValidationPaths: unknown function
        (r#"$[?missing()]"#, json!([1]), None),
        // TestValueRequiresQueryArgument
        (r#"$[?value(1) == 1]"#, json!([1]), None),
        // TestRegistryRegisterFunctionArityValidation (arity of a built-in)
        (r#"$[?length(@.name, 1) == 1]"#, json!([1]), None),
    ]);
}
