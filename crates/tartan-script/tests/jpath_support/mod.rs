//! What the `jpath_*` case tables share: running a table of cases.

use serde_json::{json, Value};
use tartan_script::jpath::JPath;

/// One case of [`check`].
pub type Case = (&'static str, Value, Option<Value>);

/// Each case: source, document, and the matches in order, or `None`
/// when the source must not compile.
pub fn check(cases: &[Case]) {
    for (source, doc, expected) in cases {
        match (JPath::compile(source), expected) {
            (Ok(path), Some(expected)) => {
                let got = Value::Array(path.try_query(doc).unwrap());
                assert_eq!(&got, expected, "{source} over {doc}");
                let matched = path.try_matches(doc).unwrap();
                assert_eq!(matched, got != json!([]), "{source} over {doc}: try_matches");
            }
            (Err(_), None) => {}
            (Ok(_), None) => panic!("{source} compiled, but jpath rejects it"),
            (Err(e), Some(_)) => panic!("{source} did not compile: {e}"),
        }
    }
}
