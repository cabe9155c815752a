//! Reading the files `apply` takes (steps, schedules): JSON or YAML, one
//! object, a list or several documents, or a directory of such files.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::client::CliError;

/// The largest file read: a step body is at most 512 KiB on the server
/// (docs/api.md, "Conventions"); a file may hold a list of them.
const MAX_FILE: u64 = 4 * 1024 * 1024;

/// Every file `paths` name, a directory's *.json, *.yaml and *.yml files
/// in name order.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, CliError> {
    let mut files = Vec::new();
    for path in paths {
        let meta =
            std::fs::metadata(path).map_err(|e| CliError::local(format!("{}: {e}", path.display())))?;
        if meta.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|e| CliError::local(format!("{}: {e}", path.display())))?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && kind(p).is_some())
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(CliError::local(format!(
                    "{}: no *.json, *.yaml or *.yml file in it",
                    path.display()
                )));
            }
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Json,
    Yaml,
}

fn kind(path: &Path) -> Option<Kind> {
    match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
        "json" => Some(Kind::Json),
        "yaml" | "yml" => Some(Kind::Yaml),
        _ => None,
    }
}

/// The objects one file holds (steps, schedules: `what`): one object, a
/// list, or (YAML) several documents; each with its id. An object is sent
/// as the file has it: the server checks it, so only its id is read here.
pub fn read_named(path: &Path, what: &str) -> Result<Vec<(String, Value)>, CliError> {
    use std::io::Read;
    let name = path.display();
    let file = std::fs::File::open(path).map_err(|e| CliError::local(format!("{name}: {e}")))?;
    let mut bytes = Vec::new();
    // Read one byte past the limit to tell a file at the limit from a longer one.
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::local(format!("{name}: {e}")))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(CliError::local(format!(
            "{name}: larger than {MAX_FILE} bytes, the most a {what} file may be"
        )));
    }
    // An unknown extension (a single -f file) is read as YAML, which JSON is a subset of.
    let docs: Vec<Value> = match kind(path).unwrap_or(Kind::Yaml) {
        Kind::Json => vec![serde_json::from_slice(&bytes)
            .map_err(|e| CliError::local(format!("{name}: not valid JSON: {e}")))?],
        Kind::Yaml => {
            let mut docs = Vec::new();
            for doc in serde_yaml_ng::Deserializer::from_slice(&bytes) {
                let value: Value = serde::Deserialize::deserialize(doc)
                    .map_err(|e| CliError::local(format!("{name}: not valid YAML: {e}")))?;
                if !value.is_null() {
                    docs.push(value);
                }
            }
            docs
        }
    };
    let mut items = Vec::new();
    for doc in docs {
        match doc {
            Value::Array(list) => items.extend(list),
            other => items.push(other),
        }
    }
    let mut named = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        // A local file, not the server's answer: any JSON may be there.
        let Some(id) = item.get("id").and_then(Value::as_str) else {
            return Err(CliError::local(format!(
                "{name}: {what} {} has no \"id\" string",
                i + 1
            )));
        };
        named.push((id.to_string(), item));
    }
    Ok(named)
}
