//! JSON values as the rest of the core handles them: named values, and how
//! a value's kind is named in messages.

use serde_json::Value;

/// A JSON object of named values (inputs, outputs).
pub type Args = serde_json::Map<String, Value>;

/// A JSON value held once however many places name it. A step's output is
/// named by its work item, the attribute it sets, its step and, for a goal,
/// the flow's result, in the state and in the events that set each: shared,
/// a 7 MB output costs 7 MB, not 7 MB for each of them (docs/durability.md,
/// "Large values"). Cloning it is cheap; it reads and writes as the value.
#[derive(Clone, PartialEq)]
pub struct Shared(std::sync::Arc<Value>);

impl Shared {
    pub fn new(value: Value) -> Self {
        Self(std::sync::Arc::new(value))
    }
}

impl std::ops::Deref for Shared {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.0
    }
}

impl AsRef<Value> for Shared {
    fn as_ref(&self) -> &Value {
        &self.0
    }
}

impl From<Value> for Shared {
    fn from(value: Value) -> Self {
        Self::new(value)
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl serde::Serialize for Shared {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for Shared {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Shared::new)
    }
}

/// A step's outputs by name, each value shared (`Shared`), in the order
/// the step returned them.
pub type Outputs = indexmap::IndexMap<String, Shared>;

/// Outputs from the values a step returned, moved, not copied.
pub fn outputs_of(args: Args) -> Outputs {
    args.into_iter().map(|(k, v)| (k, Shared::new(v))).collect()
}

/// The outputs as plain values (a copy: for the rare call that sends them).
pub fn args_of(outputs: &Outputs) -> Args {
    outputs
        .iter()
        .map(|(k, v)| (k.clone(), Value::clone(v)))
        .collect()
}

/// The length of `value` written as JSON, counted without keeping the text.
pub fn json_len(value: &impl serde::Serialize) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len() as u64);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing JSON values to a sink that takes every byte cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The most bytes of inputs and outputs one flow may hold unless set
/// (`TARTAN_MAX_FLOW_BYTES`), like Temporal's limit on a history.
pub const DEFAULT_MAX_FLOW_BYTES: u64 = 64 * 1024 * 1024;

/// The problem type of an output refused by `TARTAN_MAX_FLOW_BYTES`.
pub const FLOW_TOO_LARGE: &str = "urn:tartan:problem:flow-too-large";

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

/// A step's inputs, shared by all of its work items, with their JSON
/// encoding made once for all of their calls: 10,000 calls of one step
/// beside an 880 KB input encode that input once, not 10,000 times
/// (docs/work-items.md, "What an item holds"). Read and written as the
/// plain object.
#[derive(Debug, Default)]
pub struct StepInputs {
    args: Args,
    /// The members of `args` but those the items replace, encoded, and
    /// the names they replace (the same for every item of a step).
    /// Kept as `Bytes` so that every call sending it refers to it, however
    /// many are in flight, instead of copying it into its own body.
    encoded: std::sync::OnceLock<(Vec<String>, bytes::Bytes)>,
}

impl StepInputs {
    pub fn new(args: Args) -> Self {
        Self {
            args,
            encoded: std::sync::OnceLock::new(),
        }
    }

    pub fn args(&self) -> &Args {
        &self.args
    }
}

impl std::ops::Deref for StepInputs {
    type Target = Args;
    fn deref(&self) -> &Args {
        &self.args
    }
}

impl PartialEq for StepInputs {
    fn eq(&self, other: &Self) -> bool {
        self.args == other.args
    }
}

impl serde::Serialize for StepInputs {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.args.serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for StepInputs {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Args::deserialize(deserializer).map(Self::new)
    }
}

/// The inputs a work item is called with: its step's inputs, with the
/// item's own values (its for_each elements, its meta inputs) in place of
/// the step's. Kept as two parts so that what the items of a step share is
/// held and stored once, not copied into each item (docs/work-items.md,
/// "What an item holds").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ItemInputs {
    /// The step's inputs, shared by every item of it.
    pub shared: std::sync::Arc<StepInputs>,
    /// The item's own values; they win over the shared ones.
    pub own: Args,
}

impl ItemInputs {
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.own.get(name).or_else(|| self.shared.get(name))
    }

    /// Every input once, the step's first (in their order), then the item's.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.shared
            .iter()
            .filter(|(k, _)| !self.own.contains_key(k.as_str()))
            .chain(self.own.iter())
    }

    /// The named inputs alone, copied (e.g. an endpoint's placeholders).
    pub fn pick<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Args {
        names
            .into_iter()
            .filter_map(|n| Some((n.to_string(), self.get(n)?.clone())))
            .collect()
    }

    /// Every input, copied: for the rare call that needs them as one value.
    pub fn to_args(&self) -> Args {
        self.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// The inputs as one JSON object, the same as serialising `self`, with
    /// the step's part taken from its encoding made once.
    pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        self.to_json_parts().map(|parts| parts.to_vec())
    }

    /// The inputs as one JSON object in pieces: the step's part is its
    /// encoding made once, referred to rather than copied, so a step's
    /// calls in flight together hold what they share once.
    pub fn to_json_parts(&self) -> Result<JsonParts, serde_json::Error> {
        let Some(shared) = self.shared_encoding()? else {
            return serde_json::to_vec(self).map(|body| JsonParts(vec![body.into()]));
        };
        let mine = encode_members(self.own.iter())?;
        let mut tail = Vec::with_capacity(mine.len() + 2);
        if !shared.is_empty() && !mine.is_empty() {
            tail.push(b',');
        }
        tail.extend_from_slice(&mine);
        tail.push(b'}');
        Ok(JsonParts(vec![
            bytes::Bytes::from_static(b"{"),
            shared.clone(),
            tail.into(),
        ]))
    }

    /// The length of `to_json`, counted without writing the item's part
    /// (the step's is made once and kept): a call's body is sized before
    /// it is built, to take its share of the bytes in flight first.
    pub fn json_len(&self) -> Result<usize, serde_json::Error> {
        let Some(shared) = self.shared_encoding()? else {
            return Ok(usize::try_from(json_len(self)).unwrap_or(usize::MAX));
        };
        let mut mine = 0usize;
        for (i, (name, value)) in self.own.iter().enumerate() {
            let member = json_len(name).saturating_add(json_len(value)).saturating_add(1);
            mine = mine
                .saturating_add(usize::try_from(member).unwrap_or(usize::MAX))
                .saturating_add(usize::from(i > 0));
        }
        let comma = usize::from(!shared.is_empty() && mine > 0);
        Ok(shared
            .len()
            .saturating_add(mine)
            .saturating_add(comma)
            .saturating_add(2))
    }

    /// The step's part of the encoding, made on first use; `None` for an
    /// item that replaces other names than its siblings (one stored before
    /// items held only their own values), which is written whole.
    fn shared_encoding(&self) -> Result<Option<&bytes::Bytes>, serde_json::Error> {
        let (replaced, shared) = match self.shared.encoded.get() {
            Some(done) => done,
            None => {
                let encoded = encode_members(
                    self.shared
                        .iter()
                        .filter(|(k, _)| !self.own.contains_key(k.as_str())),
                )?;
                let replaced = self.own.keys().cloned().collect();
                self.shared
                    .encoded
                    .get_or_init(|| (replaced, bytes::Bytes::from(encoded)))
            }
        };
        let same = replaced
            .iter()
            .map(String::as_str)
            .eq(self.own.keys().map(String::as_str));
        Ok(same.then_some(shared))
    }
}

/// A JSON text in pieces that join to it (`ItemInputs::to_json_parts`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonParts(Vec<bytes::Bytes>);

impl JsonParts {
    /// The length of the whole text.
    pub fn len(&self) -> usize {
        self.0.iter().map(bytes::Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(bytes::Bytes::is_empty)
    }

    /// The pieces, in order; cloning one refers to its bytes, not copies them.
    pub fn into_pieces(self) -> Vec<bytes::Bytes> {
        self.0
    }

    /// The whole text, copied into one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut whole = Vec::with_capacity(self.len());
        for piece in &self.0 {
            whole.extend_from_slice(piece);
        }
        whole
    }
}

/// `"name":value,...`: the members of a JSON object, without its braces.
fn encode_members<'a>(
    members: impl Iterator<Item = (&'a String, &'a Value)>,
) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::new();
    for (i, (name, value)) in members.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, name)?;
        out.push(b':');
        serde_json::to_writer(&mut out, value)?;
    }
    Ok(out)
}

impl serde::Serialize for ItemInputs {
    /// Written as one JSON object straight from both parts: a call's body
    /// copies no input value, however large.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Args {
        match v {
            Value::Object(m) => m,
            _ => Args::new(),
        }
    }

    #[test]
    fn an_items_own_values_win_and_each_input_is_written_once() {
        let inputs = ItemInputs {
            shared: std::sync::Arc::new(StepInputs::new(args(
                json!({"big": "x", "items": [1, 2], "n": 1}),
            ))),
            own: args(json!({"items": 2, "flow": "f"})),
        };
        assert_eq!(
            serde_json::to_value(&inputs).ok(),
            Some(json!({"big": "x", "n": 1, "items": 2, "flow": "f"}))
        );
        assert_eq!(inputs.get("items"), Some(&json!(2)));
        assert_eq!(inputs.get("big"), Some(&json!("x")));
        assert_eq!(inputs.pick(["n", "none"]), args(json!({"n": 1})));
        assert_eq!(
            Value::Object(inputs.to_args()),
            json!({"big": "x", "n": 1, "items": 2, "flow": "f"})
        );
    }

    #[test]
    fn a_body_in_pieces_is_the_whole_encoding_and_its_length_is_known_before() {
        let shared = std::sync::Arc::new(StepInputs::new(args(json!({"big": "x\"y", "items": [1, 2]}))));
        let cases = [
            ItemInputs {
                shared: shared.clone(),
                own: args(json!({"items": 2, "flow": "f"})),
            },
            ItemInputs {
                shared: shared.clone(),
                own: args(json!({"items": "é", "flow": {"a": [null]}})),
            },
            // Other names replaced than its siblings: written whole.
            ItemInputs {
                shared: shared.clone(),
                own: args(json!({"flow": 1})),
            },
            ItemInputs::default(),
            ItemInputs {
                shared: std::sync::Arc::new(StepInputs::new(args(json!({"items": [1]})))),
                own: args(json!({"items": 1})),
            },
        ];
        for inputs in cases {
            let whole = serde_json::to_vec(&inputs).unwrap_or_default();
            let parts = inputs.to_json_parts().unwrap_or_default();
            assert_eq!(parts.to_vec(), whole, "{inputs:?}");
            assert_eq!(parts.len(), whole.len());
            assert_eq!(inputs.json_len().ok(), Some(whole.len()), "{inputs:?}");
            assert_eq!(inputs.to_json().ok(), Some(whole));
        }
        // The step's part is one buffer, referred to by every item's body.
        let a = cases_shared_piece(&shared, 1);
        let b = cases_shared_piece(&shared, 2);
        assert_eq!(a.as_ptr(), b.as_ptr());
    }

    fn cases_shared_piece(shared: &std::sync::Arc<StepInputs>, item: i64) -> bytes::Bytes {
        let inputs = ItemInputs {
            shared: shared.clone(),
            own: args(json!({"items": item, "flow": "f"})),
        };
        let pieces = inputs.to_json_parts().unwrap_or_default().into_pieces();
        pieces.get(1).cloned().unwrap_or_default()
    }
}
