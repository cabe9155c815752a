//! How deeply a JSON document nests (docs/api.md, "Limits"). Checked on the
//! raw bytes before anything is parsed, so that whatever is accepted can be
//! stored and read back: serde_json refuses to read documents nested deeper
//! than 128 levels, and a stored flow wraps a client's values in a few levels
//! of its own.

/// The deepest nesting of arrays and objects a request body, a step response
/// or a default value may have, the outermost counting as one.
pub const MAX_JSON_DEPTH: usize = 64;

/// Why a document is refused.
pub fn too_deep_message() -> String {
    format!("JSON nested deeper than {MAX_JSON_DEPTH} levels")
}

/// Whether `bytes` nests deeper than `MAX_JSON_DEPTH`. Brackets inside
/// strings do not count; malformed JSON is left to the parser to report.
pub fn is_too_deep(bytes: &[u8]) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_JSON_DEPTH {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> String {
        format!("{}{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn the_limit_is_inclusive() {
        assert!(!is_too_deep(nested(MAX_JSON_DEPTH).as_bytes()));
        assert!(is_too_deep(nested(MAX_JSON_DEPTH + 1).as_bytes()));
        let objects = format!("{}1{}", r#"{"a":"#.repeat(65), "}".repeat(65));
        assert!(is_too_deep(objects.as_bytes()));
    }

    #[test]
    fn brackets_in_strings_do_not_count() {
        let text = format!(r#"{{"a":"{}\"{}"}}"#, "[".repeat(100), "{".repeat(100));
        assert!(!is_too_deep(text.as_bytes()));
        // An escaped backslash closes nothing: the quote after it ends the string.
        let text = format!(r#"["\\", {}]"#, nested(64));
        assert!(is_too_deep(text.as_bytes()));
    }

    #[test]
    fn siblings_do_not_add_up() {
        let text = format!("[{}]", vec![nested(63); 50].join(","));
        assert!(!is_too_deep(text.as_bytes()));
    }
}
