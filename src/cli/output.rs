//! Printing: aligned tables for people, the server's JSON for programs.

use std::io::Write;

use serde_json::Value;

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

pub fn line(text: &str) {
    out(&format!("{text}\n"));
}

/// The server's JSON, pretty.
pub fn json(value: &Value) {
    line(&serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string()));
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

    pub fn render(&self) -> String {
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(n) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut text = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
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

/// Newlines and tabs would break a table's rows.
pub fn one_line(s: &str) -> String {
    s.replace(['\n', '\r', '\t'], " ")
}

/// `k=v,k=v` of a JSON object of strings.
pub fn pairs(value: &Value) -> String {
    value
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", cell(v)))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// A member of an object as text ("" when absent).
pub fn s<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}
