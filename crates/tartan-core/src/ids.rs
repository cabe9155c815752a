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

/// Longest identifier accepted, in bytes: step and flow ids, step names,
/// attribute names, label keys and values, and the ids and prefixes of
/// filters. Each ends up in URLs, index keys, metric labels and log lines:
/// unbounded, one request could make every one of those as large as it
/// likes (docs/api.md, "Limits").
pub const MAX_ID_LEN: usize = 256;

/// Longest flow id accepted: every identifier's bound.
pub const MAX_FLOW_ID_LEN: usize = MAX_ID_LEN;

/// Longest flow id a read may name: a child flow's id adds its flow step's
/// id and its item's token to its parent's, at each level of sub-flows
/// (docs/steps.md, "Sub-flows").
pub const MAX_CHILD_FLOW_ID_LEN: usize = 4096;

/// A client's key as an error names it: whole when it is within the bound,
/// else its first characters, so that refusing a 400,000-byte name does not
/// echo it back.
pub fn shown_key(key: &str) -> String {
    const SHOWN: usize = 32;
    if key.len() <= MAX_ID_LEN {
        return key.to_string();
    }
    let cut: String = key.chars().take(SHOWN).collect();
    format!("{cut}…")
}

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
    fn long_keys_are_shown_cut() {
        assert_eq!(shown_key("team"), "team");
        let long = "é".repeat(MAX_ID_LEN);
        assert_eq!(shown_key(&long), format!("{}…", "é".repeat(32)));
    }

    #[test]
    fn dot_ids_are_told_apart() {
        assert!(is_dot_id(&sanitize_id(" .. ")));
        assert!(is_dot_id(&sanitize_id("-.-")));
        assert!(!is_dot_id("..."));
        assert!(!is_dot_id("a.b"));
    }
}
