//! Printing: aligned tables for people, the server's JSON for programs.
//!
//! Every string the server sends may come from a step (an error message, an
//! output) or a client (an id, a label), and a terminal obeys the control
//! characters in what it prints: `ESC ] 0;...BEL` retitles it, `ESC [2J`
//! clears it, others rewrite what is on screen. So every line for people
//! goes through [`escape`] where it is written ([`line`], [`Table`]), and
//! JSON for programs is written with those characters as `\u` escapes
//! ([`json`], [`json_line`]). Only [`out`] writes text as it is: for the
//! CLI's own control sequences, and for text already escaped.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write;

use serde_json::Value;
use tartan_core::flow::FlowState;

/// `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// Write to stdout; a closed pipe (`| head`) is not worth a panic.
pub fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// One line for people, escaped.
pub fn line(text: &str) {
    out(&format!("{}\n", escape(text)));
}

/// Text made safe for a terminal: every C0 control character, DEL, every
/// C1 control character (U+0080 to U+009F) and every Unicode bidirectional
/// control (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069:
/// they reorder what follows on the line, so a step's output could make
/// an error read as a success) is shown as an escape (`\n`, `\t`, `\x1b`,
/// `\x7f`, `\u{9b}`, `\u{202e}`), none kept, not even a newline: one
/// value is one line. Backslashes stay as they are, so escaping twice
/// changes nothing more.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut safe = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => safe.push_str("\\n"),
            '\r' => safe.push_str("\\r"),
            '\t' => safe.push_str("\\t"),
            c if u32::from(c) < 0x80 && is_control(c) => {
                let _ = write!(safe, "\\x{:02x}", u32::from(c));
            }
            c if is_control(c) => {
                let _ = write!(safe, "\\u{{{:x}}}", u32::from(c));
            }
            c => safe.push(c),
        }
    }
    Cow::Owned(safe)
}

/// C0 (including newline and tab), DEL, C1, and the bidi controls.
fn is_control(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00..=0x1f | 0x7f..=0x9f | 0x061c | 0x200e | 0x200f | 0x202a..=0x202e | 0x2066..=0x2069
    )
}

/// JSON text with DEL and the C1 control characters written as `\u`
/// escapes: serde_json escapes C0 but writes those as they are, and a
/// terminal may obey them. Outside strings JSON text has none, so the
/// result is the same JSON value.
pub fn json_text(text: String) -> String {
    if !text.chars().any(is_control) {
        return text;
    }
    let mut safe = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        // C0 is escaped by serde_json already.
        if is_control(c) && u32::from(c) >= 0x7f {
            let _ = write!(safe, "\\u{:04x}", u32::from(c));
        } else {
            safe.push(c);
        }
    }
    safe
}

/// The server's JSON, pretty.
pub fn json(value: &impl serde::Serialize) {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("\"{e}\""));
    out(&format!("{}\n", json_text(text)));
}

/// A time as the API writes it.
pub fn time(at: &tartan_core::flow::Time) -> String {
    match serde_json::to_value(at) {
        Ok(Value::String(s)) => s,
        _ => at.to_rfc3339(),
    }
}

/// A duration for people: `0.3s`, `1.5s`, `30s` (tenths, a whole number
/// without them).
pub fn seconds(ms: u64) -> String {
    let text = format!("{:.1}", ms as f64 / 1000.0);
    format!("{}s", text.strip_suffix(".0").unwrap_or(&text))
}

/// An optional time as the API writes it; empty when absent.
pub fn maybe_time(at: &Option<tartan_core::flow::Time>) -> String {
    at.as_ref().map(time).unwrap_or_default()
}

/// The server's JSON on one line (JSON lines).
pub fn json_line(value: &impl serde::Serialize) {
    let text = serde_json::to_string(value).unwrap_or_else(|e| format!("\"{e}\""));
    out(&format!("{}\n", json_text(text)));
}

/// Columns padded to their widest cell; the last column is not padded.
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| (*h).to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table, every cell escaped.
    pub fn render(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| row.iter().map(|cell| escape(cell).into_owned()).collect())
            .collect();
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &rows {
            for (i, cell) in row.iter().enumerate().take(n) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut text = String::new();
        for row in std::iter::once(&self.headers).chain(&rows) {
            let mut cells = Vec::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = row.get(i).map(String::as_str).unwrap_or("");
                if i + 1 == n {
                    cells.push(cell.to_string());
                } else {
                    let pad = width.saturating_sub(cell.chars().count());
                    cells.push(format!("{cell}{}", " ".repeat(pad)));
                }
            }
            text.push_str(cells.join("  ").trim_end());
            text.push('\n');
        }
        text
    }

    pub fn print(&self) {
        out(&self.render());
    }
}

/// A value for a table cell: strings bare, anything else as JSON, one line.
pub fn cell(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => one_line(s),
        other => other.to_string(),
    }
}

/// An optional text for a table cell, on one line; empty when absent.
pub fn maybe(text: &Option<String>) -> String {
    text.as_deref().map(one_line).unwrap_or_default()
}

/// Newlines and tabs would break a table's rows.
pub fn one_line(s: &str) -> String {
    s.replace(['\n', '\r', '\t'], " ")
}

/// `k=v,k=v` of labels, each value on one line.
pub fn pairs(labels: &std::collections::BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={}", one_line(v)))
        .collect::<Vec<_>>()
        .join(",")
}

/// The goals' outputs of a completed flow: each goal's execution outputs,
/// in the order the step returned them.
pub fn result_of(state: &FlowState) -> String {
    let mut result = serde_json::Map::new();
    for goal in &state.plan.goals {
        if let Some(outputs) = state.executions.get(goal).and_then(|e| e.outputs.as_ref()) {
            result.extend(tartan_core::json::args_of(outputs));
        }
    }
    Value::Object(result).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        let hostile = "\x1b]0;pwned\x07\x1b[2Jdone\r\n\ttab\x7f\u{9b}31m é";
        let safe = escape(hostile);
        assert_eq!(
            safe,
            "\\x1b]0;pwned\\x07\\x1b[2Jdone\\r\\n\\ttab\\x7f\\u{9b}31m é"
        );
        assert!(!safe.chars().any(is_control));
        assert_eq!(escape(&safe), safe, "escaping twice changes nothing more");
        assert!(matches!(escape("plain ünïcode"), Cow::Borrowed(_)));
        // Bidi controls: "failed" shown reversed would read "deliaf".
        let bidi = "ok \u{202e}deliaf\u{202c} \u{2066}x\u{2069}\u{200f}";
        assert_eq!(
            escape(bidi),
            "ok \\u{202e}deliaf\\u{202c} \\u{2066}x\\u{2069}\\u{200f}"
        );
        let text = json_text(serde_json::json!({"e": bidi}).to_string());
        assert!(!text.chars().any(is_control), "{text}");
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap_or_default()["e"],
            bidi
        );
    }

    #[test]
    fn json_keeps_its_value_without_raw_control_characters() {
        let value = serde_json::json!({"error": "\x1b[2J\u{9b}\x7f ok"});
        let text = json_text(value.to_string());
        assert!(!text.chars().any(is_control), "{text}");
        let back: Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(back, value);
    }

    #[test]
    fn table_cells_are_escaped_before_they_are_measured() {
        let mut t = Table::new(&["A", "B"]);
        t.row(vec!["\x1b[2J".into(), "x".into()]);
        t.row(vec!["abcdefgh".into(), "y".into()]);
        let text = t.render();
        assert_eq!(text, "A         B\n\\x1b[2J   x\nabcdefgh  y\n");
    }
}
