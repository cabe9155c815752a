//! JSON values as the rest of the core handles them: named values, and how
//! a value's kind is named in messages.

use serde_json::Value;

/// A JSON object of named values (inputs, outputs).
pub type Args = serde_json::Map<String, Value>;

/// "a string", "an array", ... for messages about a JSON value.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
