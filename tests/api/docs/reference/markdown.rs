//! Markdown as the page writes it: headings' anchors, schema types with
//! links, prose and table cells.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

/// Anchors as GitHub and mdBook give them to headings: the heading's text
/// lowercased, blanks to `-`, punctuation but `-` and `_` dropped, and
/// `-1`, `-2`, ... after a repeated one.
#[derive(Default)]
pub(super) struct Anchors {
    seen: HashMap<String, usize>,
}

impl Anchors {
    pub(super) fn next(&mut self, heading: &str) -> String {
        let base: String = heading
            .chars()
            .filter_map(|c| match c {
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
                c if c.is_whitespace() => Some('-'),
                _ => None,
            })
            .collect();
        let n = self.seen.entry(base.clone()).or_insert(0);
        let anchor = match *n {
            0 => base,
            k => format!("{base}-{k}"),
        };
        *n += 1;
        anchor
    }
}

/// Types as words, schema names linked to their sections.
pub(super) struct Linker<'a> {
    pub(super) schemas: &'a HashMap<&'a str, String>,
}

impl Linker<'_> {
    pub(super) fn type_of(&self, s: &Value) -> String {
        let Some(obj) = s.as_object() else {
            return "any".to_string();
        };
        if let Some(reference) = obj.get("$ref").and_then(Value::as_str) {
            let name = reference.rsplit('/').next().unwrap_or(reference);
            return match self.schemas.get(name) {
                Some(anchor) => format!("[{name}](#{anchor})"),
                None => format!("`{name}`"),
            };
        }
        for (key, joint) in [("oneOf", " or "), ("anyOf", " or "), ("allOf", " and ")] {
            if let Some(parts) = obj.get(key).and_then(Value::as_array) {
                let words: Vec<String> = parts.iter().map(|p| self.type_of(p)).collect();
                return words.join(joint);
            }
        }
        if let Some(values) = obj.get("enum").and_then(Value::as_array) {
            let words: Vec<String> = values
                .iter()
                .map(|v| match v.as_str() {
                    Some(s) => format!("`{s}`"),
                    None => format!("`{v}`"),
                })
                .collect();
            return format!("one of {}", words.join(", "));
        }
        if let Some(value) = obj.get("const") {
            return format!("`{value}`");
        }
        let types: Vec<&str> = match obj.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if types.is_empty() {
            return "any".to_string();
        }
        let words: Vec<String> = types.iter().map(|t| self.one_type(t, obj)).collect();
        words.join(" or ")
    }

    /// One JSON type of a schema, with its format and bounds.
    pub(super) fn one_type(&self, t: &str, obj: &Map<String, Value>) -> String {
        let mut word = match t {
            "array" => match obj.get("items") {
                Some(items) if items.as_object().is_some_and(|i| !i.is_empty()) => {
                    format!("array of {}", self.type_of(items))
                }
                _ => "array".to_string(),
            },
            "object" => match obj.get("additionalProperties") {
                Some(values) if values.is_object() => format!("map of {}", self.type_of(values)),
                _ => "object".to_string(),
            },
            other => other.to_string(),
        };
        if t == "null" {
            return word;
        }
        let mut qualifiers: Vec<String> = Vec::new();
        if let Some(format) = obj.get("format").and_then(Value::as_str) {
            qualifiers.push(format.to_string());
        }
        let bound = |key: &str| obj.get(key).filter(|v| v.is_number()).map(Value::to_string);
        let (low, high, unit) = match t {
            "integer" | "number" => (bound("minimum"), bound("maximum"), ""),
            "string" => (bound("minLength"), bound("maxLength"), " characters"),
            "array" => (bound("minItems"), bound("maxItems"), " items"),
            _ => (None, None, ""),
        };
        match (low, high) {
            (Some(l), Some(h)) => qualifiers.push(format!("{l} to {h}{unit}")),
            (Some(l), None) => qualifiers.push(format!("at least {l}{unit}")),
            (None, Some(h)) => qualifiers.push(format!("at most {h}{unit}")),
            (None, None) => {}
        }
        if !qualifiers.is_empty() {
            let _ = write!(word, " ({})", qualifiers.join("; "));
        }
        word
    }
}

pub(super) fn yes_no(b: bool) -> &'static str {
    match b {
        true => "yes",
        false => "no",
    }
}

/// Text ending as a sentence does.
pub(super) fn sentence(text: &str) -> String {
    match text.ends_with(['.', '!', '?', ':', ')']) {
        true => text.to_string(),
        false => format!("{text}."),
    }
}

/// A JSON string's text; anything else empty.
pub(super) fn text(v: &Value) -> String {
    v.as_str().map(str::to_string).unwrap_or_default()
}

/// Text from the document as Markdown prose: its lines kept, a `<` outside
/// code escaped (so that `<id>` is not taken for HTML), and a line that
/// would start a heading, a list or a code block made plain text.
pub(super) fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for (i, line) in text.trim().lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let line = line.trim_start();
        let marker = line.starts_with('#')
            || line.starts_with("- ")
            || line.starts_with("* ")
            || line.starts_with("+ ")
            || line.starts_with('>');
        // `1. ` starts a list; `1\. ` does not.
        let numbered = line
            .split_once(". ")
            .filter(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
            .map(|(n, _)| n.len());
        if marker && !in_code {
            out.push('\\');
        }
        for (at, c) in line.char_indices() {
            if Some(at) == numbered && !in_code {
                out.push('\\');
            }
            match c {
                '`' => {
                    in_code = !in_code;
                    out.push(c);
                }
                '<' if !in_code => out.push_str("&lt;"),
                c => out.push(c),
            }
        }
    }
    out
}

/// Prose in a table cell: on one line, with `|` escaped.
pub(super) fn cell(text: &str) -> String {
    prose(text)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn anchors_are_the_renderers_and_repeats_are_numbered() {
        let mut a = Anchors::default();
        assert_eq!(a.next("`GET /engine/flow/{id}/status`"), "get-engineflowidstatus");
        assert_eq!(a.next("`GET /engine`"), "get-engine");
        assert_eq!(a.next("`GET /engine/`"), "get-engine-1");
        assert_eq!(a.next("`flows` operations"), "flows-operations");
        assert_eq!(a.next("FlowState"), "flowstate");
    }

    #[test]
    fn types_read_as_words_with_schemas_linked() {
        let schemas: HashMap<&str, String> = [("Step", "step".to_string())].into_iter().collect();
        let link = Linker { schemas: &schemas };
        let t = |s: Value| link.type_of(&s);
        assert_eq!(t(json!({"$ref": "#/components/schemas/Step"})), "[Step](#step)");
        assert_eq!(
            t(json!({"oneOf": [{"$ref": "#/components/schemas/Step"}, {"type": "null"}]})),
            "[Step](#step) or null"
        );
        assert_eq!(
            t(json!({"type": ["string", "null"], "format": "date-time"})),
            "string (date-time) or null"
        );
        assert_eq!(
            t(json!({"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 64})),
            "array of string (1 to 64 items)"
        );
        assert_eq!(
            t(json!({"type": "object", "additionalProperties": {"type": "array", "items": {}}})),
            "map of array"
        );
        assert_eq!(
            t(json!({"type": "integer", "format": "int32", "minimum": 1, "maximum": 1000})),
            "integer (int32; 1 to 1000)"
        );
        assert_eq!(
            t(json!({"type": "string", "enum": ["a", "b"]})),
            "one of `a`, `b`"
        );
        assert_eq!(t(json!({})), "any");
        assert_eq!(t(json!({"$ref": "#/components/schemas/Gone"})), "`Gone`");
    }

    #[test]
    fn prose_keeps_markdown_plain_and_cells_on_one_line() {
        assert_eq!(
            prose("Lane id: `step:<id>` or <host>"),
            "Lane id: `step:<id>` or &lt;host>"
        );
        assert_eq!(
            prose("a\n# not a heading\n- not a list\n1. nor this"),
            "a\n\\# not a heading\n\\- not a list\n1\\. nor this"
        );
        assert_eq!(cell("one\ntwo | three\n\nfour"), "one two \\| three four");
    }
}
