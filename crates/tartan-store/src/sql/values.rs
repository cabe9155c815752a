//! Large values stored once per flow (docs/durability.md, "Large values").
//!
//! A step's output is named by several events (the item's success, the
//! attribute it sets, the step's and the flow's completion) and by the
//! flow's snapshot. Stored as written, a 1 MB output would cost 5 MB or
//! more. Instead, when an event's or a snapshot's text is large, each
//! large JSON value in it is cut out and kept in `flow_values`, keyed by the
//! flow and the SHA-256 of its text: the same value, wherever it appears in
//! the flow, is one row. What remains (the *skeleton*) is stored with its
//! *references*: where in the skeleton each value goes, and which. Reading
//! splices the values back, byte for byte: what a reader gets is the text
//! that was written, so the event shapes are unchanged.
//!
//! Values are cut out bottom-up: a value is cut out when what remains of it,
//! after its own large parts are cut out, is still at least
//! [`LARGE_VALUE`] bytes. So a large string is cut out alone (and shared by
//! every object that holds it), and an array of many small items whole.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use sqlx::any::AnyRow;
use sqlx::{Any, Row};

use crate::dialect::{values_list, Backend};
use crate::error::StoreError;

/// A JSON value this large (in bytes of text) is stored apart.
pub(super) const LARGE_VALUE: usize = 16 * 1024;

/// A text as stored: the skeleton and, when values were cut out of it,
/// their references (`offset:hash` pairs, `;`-separated, offsets in
/// increasing order into the skeleton) and the values themselves.
#[derive(Debug)]
pub(super) struct Stored {
    pub skeleton: String,
    pub refs: Option<String>,
    /// Bytes of the values cut out (the text's length less the skeleton's).
    pub value_bytes: i64,
    /// The values cut out, by hash (those the caller already holds may be
    /// dropped: `value_bytes` still counts them).
    pub values: Vec<(String, String)>,
}

impl Stored {
    /// The whole text's length, as a reader gets it.
    pub(super) fn full_bytes(&self) -> i64 {
        self.skeleton.len() as i64 + self.value_bytes
    }
}

/// Cut the large values out of `text` (JSON). A text smaller than
/// [`LARGE_VALUE`] is kept whole without being looked into.
pub(super) fn split(text: String) -> Result<Stored, StoreError> {
    if text.len() < LARGE_VALUE {
        return Ok(whole(text));
    }
    let root: &RawValue = serde_json::from_str(&text)?;
    let mut spans = Vec::new();
    cut(&text, root, &mut spans)?;
    if spans.is_empty() {
        return Ok(whole(text));
    }
    spans.sort_unstable();
    let mut skeleton = String::with_capacity(text.len() - spans.iter().map(|(s, e)| e - s).sum::<usize>());
    let mut refs = String::new();
    let mut values: BTreeMap<String, String> = BTreeMap::new();
    let mut value_bytes = 0_i64;
    let mut from = 0;
    for (start, end) in spans {
        skeleton.push_str(&text[from..start]);
        let value = &text[start..end];
        let hash = hex_sha256(value);
        if !refs.is_empty() {
            refs.push(';');
        }
        // Writing to a String cannot fail.
        let _ = write!(refs, "{}:{hash}", skeleton.len());
        value_bytes += value.len() as i64;
        values.entry(hash).or_insert_with(|| value.to_string());
        from = end;
    }
    skeleton.push_str(&text[from..]);
    Ok(Stored {
        skeleton,
        refs: Some(refs),
        value_bytes,
        values: values.into_iter().collect(),
    })
}

fn whole(text: String) -> Stored {
    Stored {
        skeleton: text,
        refs: None,
        value_bytes: 0,
        values: Vec::new(),
    }
}

fn hex_sha256(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in digest {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// The spans (byte ranges of `base`) to cut out of `value`, a part of
/// `base`; returns the bytes of `value` that stay.
fn cut(base: &str, value: &RawValue, spans: &mut Vec<(usize, usize)>) -> Result<usize, StoreError> {
    let text = value.get();
    if text.len() < LARGE_VALUE {
        return Ok(text.len());
    }
    let start = text.as_ptr() as usize - base.as_ptr() as usize;
    let mut kept = text.len();
    if text.starts_with('{') || text.starts_with('[') {
        let mark = spans.len();
        let children: Children<'_> = serde_json::from_str(text)?;
        for child in children.0 {
            let size = child.get().len();
            kept = kept - size + cut(base, child, spans)?;
        }
        if kept < LARGE_VALUE {
            return Ok(kept);
        }
        // Still large: the value goes whole, its parts with it.
        spans.truncate(mark);
    }
    spans.push((start, start + text.len()));
    Ok(0)
}

/// The values directly inside an object or an array, as they are in the
/// text (a key's duplicates included: each is a span of the text).
struct Children<'a>(Vec<&'a RawValue>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Children<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Collect;
        impl<'de> Visitor<'de> for Collect {
            type Value = Children<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object or array")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut all = Vec::new();
                while let Some((_, value)) = map.next_entry::<serde::de::IgnoredAny, &'de RawValue>()? {
                    all.push(value);
                }
                Ok(Children(all))
            }
            fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
                let mut all = Vec::new();
                while let Some(value) = seq.next_element::<&'de RawValue>()? {
                    all.push(value);
                }
                Ok(Children(all))
            }
        }
        deserializer.deserialize_any(Collect)
    }
}

/// The references of a stored text, parsed.
fn parse_refs(refs: &str) -> Result<Vec<(usize, &str)>, StoreError> {
    refs.split(';')
        .map(|one| {
            one.split_once(':')
                .and_then(|(at, hash)| Some((at.parse::<usize>().ok()?, hash)))
                .ok_or_else(|| StoreError::Corrupt(format!("value reference {one:?}")))
        })
        .collect()
}

/// The text as written: the skeleton with its values spliced back in.
pub(super) fn splice(
    skeleton: &str,
    refs: &str,
    values: &HashMap<String, String>,
) -> Result<String, StoreError> {
    let refs = parse_refs(refs)?;
    let mut size = skeleton.len();
    for (_, hash) in &refs {
        size += values
            .get(*hash)
            .ok_or_else(|| StoreError::Corrupt(format!("stored value {hash} is missing")))?
            .len();
    }
    let mut text = String::with_capacity(size);
    let mut from = 0;
    for (at, hash) in refs {
        let piece = skeleton
            .get(from..at)
            .ok_or_else(|| StoreError::Corrupt(format!("value reference at {at}")))?;
        text.push_str(piece);
        text.push_str(&values[hash]);
        from = at;
    }
    text.push_str(skeleton.get(from..).unwrap_or_default());
    Ok(text)
}

/// The hashes `refs` names.
fn hashes(refs: &str) -> impl Iterator<Item = &str> {
    refs.split(';')
        .filter_map(|one| one.split_once(':').map(|(_, h)| h))
}

/// Rows whose `data` (or `state`) may hold references: the texts as
/// written, each row's in its column `text` with its references in
/// `refs_column`, the flow it belongs to in `flow_column`. The values are
/// read in one query per flow.
pub(super) async fn resolve<'e, E>(
    executor: E,
    rows: &[AnyRow],
    text: &str,
    refs_column: &str,
    flow_column: &str,
) -> Result<Vec<String>, StoreError>
where
    E: sqlx::Executor<'e, Database = Any> + Copy,
{
    let mut wanted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for row in rows {
        if let Some(refs) = row.try_get::<Option<String>, _>(refs_column)? {
            let flow: String = row.try_get(flow_column)?;
            wanted
                .entry(flow)
                .or_default()
                .extend(hashes(&refs).map(str::to_string));
        }
    }
    let mut found: HashMap<String, HashMap<String, String>> = HashMap::new();
    for (flow, hashes) in wanted {
        let values = read_values(executor, &flow, &hashes.into_iter().collect::<Vec<_>>()).await?;
        found.insert(flow, values);
    }
    let none = HashMap::new();
    rows.iter()
        .map(|row| {
            let skeleton: String = row.try_get(text)?;
            match row.try_get::<Option<String>, _>(refs_column)? {
                None => Ok(skeleton),
                Some(refs) => {
                    let flow: String = row.try_get(flow_column)?;
                    splice(&skeleton, &refs, found.get(&flow).unwrap_or(&none))
                }
            }
        })
        .collect()
}

/// Values of one flow by hash.
async fn read_values<'e, E>(
    executor: E,
    flow: &str,
    hashes: &[String],
) -> Result<HashMap<String, String>, StoreError>
where
    E: sqlx::Executor<'e, Database = Any> + Copy,
{
    let mut values = HashMap::new();
    for chunk in hashes.chunks(super::ROWS_PER_STATEMENT) {
        let sql = format!(
            "SELECT hash, data FROM flow_values WHERE flow_id = $1 AND hash IN ({})",
            (0..chunk.len())
                .map(|k| format!("${}", k + 2))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut q = sqlx::query(&sql).bind(flow);
        for hash in chunk {
            q = q.bind(hash.as_str());
        }
        for row in q.fetch_all(executor).await? {
            values.insert(row.try_get("hash")?, row.try_get("data")?);
        }
    }
    Ok(values)
}

/// Store values of flows (`(flow, hash, text)`), once each: a value the
/// flow already has is not written again.
pub(super) async fn write_values(
    tx: &mut sqlx::Transaction<'_, Any>,
    backend: Backend,
    values: &[(&str, &str, &str)],
) -> Result<(), StoreError> {
    for chunk in values.chunks(super::ROWS_PER_STATEMENT) {
        let sql = format!(
            "INSERT INTO flow_values (flow_id, hash, data) VALUES {} ON CONFLICT (flow_id, hash) DO NOTHING",
            values_list(backend, chunk.len(), 3)
        );
        let mut q = sqlx::query(&sql);
        for (flow, hash, data) in chunk {
            q = q.bind(*flow).bind(*hash).bind(*data);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(value: &serde_json::Value) -> Stored {
        let text = value.to_string();
        let stored = split(text.clone()).unwrap();
        let values: HashMap<String, String> = stored.values.iter().cloned().collect();
        let back = match &stored.refs {
            Some(refs) => splice(&stored.skeleton, refs, &values).unwrap(),
            None => stored.skeleton.clone(),
        };
        assert_eq!(back, text, "read back byte for byte");
        assert_eq!(stored.full_bytes(), text.len() as i64);
        stored
    }

    #[test]
    fn a_small_text_is_kept_whole() {
        let stored = round_trip(&json!({"outputs": {"a": "x".repeat(100)}}));
        assert!(stored.refs.is_none());
        assert!(stored.values.is_empty());
    }

    #[test]
    fn one_large_string_named_four_times_is_one_value() {
        let big = "x".repeat(100_000);
        let stored = round_trip(&json!({
            "outputs": {"out": big}, "value": big, "result": [big, {"deep": big}], "small": 1,
        }));
        assert_eq!(stored.values.len(), 1);
        assert_eq!(stored.values[0].1.len(), 100_002, "the string with its quotes");
        assert!(stored.skeleton.len() < 400, "{}", stored.skeleton);
        assert_eq!(stored.refs.as_deref().map(|r| r.split(';').count()), Some(4));
    }

    #[test]
    fn many_small_items_go_as_one_value() {
        let items: Vec<_> = (0..5_000).map(|i| json!({"i": i})).collect();
        let stored = round_trip(&json!({"value": items, "other": items}));
        assert_eq!(stored.values.len(), 1, "the array, once");
    }

    #[test]
    fn escapes_and_unicode_survive() {
        let tricky = format!("\"quoted\" \\ é ✓ \n {}", "y".repeat(40_000));
        let stored = round_trip(&json!({"a": tricky, "b": {"c": tricky, "d": "\u{0}"}}));
        assert_eq!(stored.values.len(), 1);
    }

    #[test]
    fn a_missing_value_is_corrupt_not_a_panic() {
        let stored = split(json!({"a": "z".repeat(LARGE_VALUE)}).to_string()).unwrap();
        let refs = stored.refs.unwrap();
        assert!(splice(&stored.skeleton, &refs, &HashMap::new()).is_err());
        assert!(splice(&stored.skeleton, "99999:abc", &HashMap::new()).is_err());
        assert!(splice(&stored.skeleton, "nonsense", &HashMap::new()).is_err());
    }
}
