//! Step and flow identifiers, sanitised as Argyll does so that clients that
//! send `"My Step"` and `"my-step"` name the same thing.

/// Lower-case, drop characters outside `[a-z0-9_.+ -]`, spaces become `-`,
/// trim `-` from both ends.
pub fn sanitize_id(raw: &str) -> String {
    let kept: String = raw
        .to_lowercase()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '+' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect();
    kept.trim_matches('-').to_string()
}

/// `.` and `..`: as a path segment (`/engine/flow/..`, a webhook URL) they
/// would name another resource, so they are refused as ids.
pub fn is_dot_id(id: &str) -> bool {
    id == "." || id == ".."
}

/// True when `text` has only characters an id may carry (before lowering).
pub fn is_valid_id_prefix(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '+' | ' '))
}

/// Longest flow id accepted.
pub const MAX_FLOW_ID_LEN: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizing_lowers_drops_and_hyphenates() {
        assert_eq!(sanitize_id("My Step!"), "my-step");
        assert_eq!(sanitize_id("--a_b.c+d--"), "a_b.c+d");
        assert_eq!(sanitize_id("ünï"), "n");
        assert_eq!(sanitize_id("***"), "");
    }

    #[test]
    fn dot_ids_are_told_apart() {
        assert!(is_dot_id(&sanitize_id(" .. ")));
        assert!(is_dot_id(&sanitize_id("-.-")));
        assert!(!is_dot_id("..."));
        assert!(!is_dot_id("a.b"));
    }
}
