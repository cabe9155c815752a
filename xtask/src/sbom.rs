//! The SBOM: a CycloneDX 1.5 JSON document of what the `tartan` binary is
//! built from. Every crate it is compiled from: the normal dependencies for
//! the target platform with the features a build of that package resolves
//! (`cargo tree -e normal`; `cargo metadata` unifies the whole workspace's,
//! test dependencies' features included, and so lists crates the binary
//! never links), each with its version, purl, licence and the SHA-256 that
//! `Cargo.lock` pins (details from `cargo metadata`), and the dependency
//! graph between them.
//!
//! Written here rather than by `cargo cyclonedx`: that tool is a separate
//! install (minutes of compiling on every CI run) for what is one
//! `cargo metadata` call turned into JSON; CI checks the document against
//! CycloneDX's own schema (.ci/release-check).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use crate::project::Build;

/// The SBOM of package `root_package`'s normal dependencies for `target`.
pub fn document(root: &Path, build: &Build, target: &str, root_package: &str) -> Result<Value> {
    let meta = cargo(
        root,
        &[
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--filter-platform",
            target,
        ],
    )?;
    let meta: Value = serde_json::from_str(&meta).context("cargo metadata's output")?;
    let checksums = lock_checksums(root)?;

    let packages: HashMap<&str, &Value> = meta["packages"]
        .as_array()
        .ok_or_else(|| anyhow!("cargo metadata: no packages"))?
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p)))
        .collect();
    let root_id = packages
        .values()
        .find(|p| p["name"] == root_package && p["source"].is_null())
        .and_then(|p| p["id"].as_str())
        .ok_or_else(|| anyhow!("no workspace package {root_package}"))?;
    // Packages by name and version, as `cargo tree` names them.
    let by_name: HashMap<(&str, &str), &str> = packages
        .iter()
        .filter_map(|(id, p)| Some(((p["name"].as_str()?, p["version"].as_str()?), *id)))
        .collect();
    let tree = cargo(
        root,
        &[
            "tree",
            "--locked",
            "-p",
            root_package,
            "-e",
            "normal",
            "--target",
            target,
            "--prefix",
            "depth",
            "--format",
            "{p}",
        ],
    )?;
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    // The package last seen at each depth: a line's parent is at depth - 1.
    let mut path: Vec<String> = Vec::new();
    for line in tree.lines().filter(|l| !l.trim().is_empty()) {
        let digits = line.chars().take_while(char::is_ascii_digit).count();
        let depth: usize = line[..digits].parse().context("cargo tree's depth")?;
        let mut words = line[digits..].split_whitespace();
        let (Some(name), Some(version)) = (words.next(), words.next().and_then(|v| v.strip_prefix('v')))
        else {
            bail!("cargo tree: {line:?}");
        };
        let id = by_name
            .get(&(name, version))
            .ok_or_else(|| anyhow!("cargo tree names {name} {version}, which cargo metadata does not"))?;
        seen.insert(id);
        let reference = bom_ref(packages.get(id).copied())?;
        graph.entry(reference.clone()).or_default();
        path.truncate(depth);
        if let Some(parent) = path.last() {
            graph.entry(parent.clone()).or_default().insert(reference.clone());
        }
        path.push(reference);
    }

    let root_ref = bom_ref(packages.get(root_id).copied())?;
    let mut components = Vec::new();
    for id in &seen {
        let Some(p) = packages.get(*id) else { continue };
        let reference = bom_ref(Some(p))?;
        if reference == root_ref {
            continue;
        }
        let name = p["name"].as_str().unwrap_or_default();
        let version = p["version"].as_str().unwrap_or_default();
        let mut c = json!({
            "type": "library",
            "bom-ref": reference,
            "name": name,
            "version": version,
            "purl": reference,
        });
        if let Some(d) = p["description"].as_str() {
            c["description"] = json!(d.trim());
        }
        if let Some(l) = p["license"].as_str() {
            c["licenses"] = json!([{ "expression": spdx(l) }]);
        }
        if let Some(sum) = checksums.get(&(name.to_string(), version.to_string())) {
            c["hashes"] = json!([{ "alg": "SHA-256", "content": sum }]);
        }
        if let Some(r) = p["repository"].as_str() {
            c["externalReferences"] = json!([{ "type": "vcs", "url": r }]);
        }
        components.push(c);
    }
    let dependencies: Vec<Value> = graph
        .iter()
        .map(|(r, deps)| json!({ "ref": r, "dependsOn": deps }))
        .collect();
    let timestamp = chrono::DateTime::from_timestamp(build.epoch, 0)
        .ok_or_else(|| anyhow!("the commit's time is out of range"))?
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    Ok(json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": format!("urn:uuid:{}", uuid::Uuid::new_v4()),
        "version": 1,
        "metadata": {
            "timestamp": timestamp,
            "tools": { "components": [{ "type": "application", "name": "cargo xtask dist", "version": build.version }] },
            "component": {
                "type": "application",
                "bom-ref": root_ref,
                "name": root_package,
                "version": build.label,
                "purl": root_ref,
                "licenses": [{ "expression": spdx(packages.get(root_id).and_then(|p| p["license"].as_str()).unwrap_or("NOASSERTION")) }],
                "properties": [{ "name": "vcs:commit", "value": build.commit }],
            },
        },
        "components": components,
        "dependencies": dependencies,
    }))
}

/// `cargo ARGS` in `root`: its output.
fn cargo(root: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .current_dir(root)
        .output()
        .with_context(|| format!("running cargo {}", args[0]))?;
    if !out.status.success() {
        bail!(
            "cargo {}: {}",
            args[0],
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A package's reference: its purl, `pkg:cargo/NAME@VERSION`.
fn bom_ref(package: Option<&Value>) -> Result<String> {
    let p = package.ok_or_else(|| anyhow!("a dependency missing from cargo metadata"))?;
    Ok(format!(
        "pkg:cargo/{}@{}",
        p["name"].as_str().unwrap_or_default(),
        p["version"].as_str().unwrap_or_default()
    ))
}

/// Cargo's old licence form `MIT/Apache-2.0` as the SPDX expression it means.
fn spdx(license: &str) -> String {
    license.split('/').map(str::trim).collect::<Vec<_>>().join(" OR ")
}

/// `Cargo.lock`'s checksum of each registry package, by name and version.
fn lock_checksums(root: &Path) -> Result<HashMap<(String, String), String>> {
    let text = std::fs::read_to_string(root.join("Cargo.lock")).context("reading Cargo.lock")?;
    let lock: toml::Table = text.parse().context("parsing Cargo.lock")?;
    let mut sums = HashMap::new();
    for p in lock
        .get("package")
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
    {
        if let (Some(n), Some(v), Some(c)) = (
            p.get("name").and_then(|x| x.as_str()),
            p.get("version").and_then(|x| x.as_str()),
            p.get("checksum").and_then(|x| x.as_str()),
        ) {
            sums.insert((n.to_string(), v.to_string()), c.to_string());
        }
    }
    Ok(sums)
}

#[cfg(test)]
mod tests {
    use super::spdx;

    #[test]
    fn old_cargo_licences_become_spdx_expressions() {
        assert_eq!(spdx("MIT/Apache-2.0"), "MIT OR Apache-2.0");
        assert_eq!(spdx("MIT OR Apache-2.0"), "MIT OR Apache-2.0");
    }
}
