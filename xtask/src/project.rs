//! What a release is made of, read from the repository: the version
//! (`Cargo.toml`, the one place it is set), the CHANGELOG's sections, the
//! release record (`migrations/RELEASES`) and the commit.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

/// The repository's root: the xtask crate's parent.
pub fn root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// `Cargo.toml`'s `[workspace.package] version`.
pub fn cargo_version(root: &Path) -> Result<String> {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).context("reading Cargo.toml")?;
    let doc: toml::Table = text.parse().context("parsing Cargo.toml")?;
    doc.get("workspace")
        .and_then(|w| w.get("package"))
        .and_then(|p| p.get("version"))
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .ok_or_else(|| anyhow!("Cargo.toml has no [workspace.package] version"))
}

/// A version as its three numbers, for ordering.
pub fn numbers(version: &str) -> Result<(u64, u64, u64)> {
    let parts: Vec<u64> = version
        .split('.')
        .map(|p| p.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| anyhow!("{version:?} is not MAJOR.MINOR.PATCH"))?;
    match parts.as_slice() {
        [a, b, c] => Ok((*a, *b, *c)),
        _ => bail!("{version:?} is not MAJOR.MINOR.PATCH"),
    }
}

/// The CHANGELOG as its `## ` sections: the heading's text and the lines
/// under it.
pub struct Changelog {
    pub text: String,
}

impl Changelog {
    pub fn read(root: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(root.join("CHANGELOG.md")).context("reading CHANGELOG.md")?;
        Ok(Self { text })
    }

    /// The newest release's version: the first heading `## X.Y.Z — date`.
    pub fn newest_release(&self) -> Option<&str> {
        self.text
            .lines()
            .filter_map(|l| l.strip_prefix("## "))
            .filter_map(|h| h.split_whitespace().next())
            .find(|v| numbers(v).is_ok())
    }

    /// Whether "## Unreleased" holds anything but blank lines.
    pub fn has_unreleased(&self) -> bool {
        let mut lines = self.text.lines().skip_while(|l| l.trim() != "## Unreleased");
        lines.next().is_some()
            && lines
                .take_while(|l| !l.starts_with("## "))
                .any(|l| !l.trim().is_empty())
    }
}

/// One line of `migrations/RELEASES`: `vX.Y.Z COMMIT NEWEST-MIGRATION`.
pub struct Recorded {
    pub version: String,
    pub commit: String,
    pub migration: u64,
}

/// Every release recorded, oldest first.
pub fn releases(root: &Path) -> Result<Vec<Recorded>> {
    let text =
        std::fs::read_to_string(root.join("migrations/RELEASES")).context("reading migrations/RELEASES")?;
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            match fields.as_slice() {
                [v, commit, migration] if v.starts_with('v') => Ok(Recorded {
                    version: v[1..].to_string(),
                    commit: commit.to_string(),
                    migration: migration.parse().map_err(|_| {
                        anyhow!("migrations/RELEASES: {migration:?} is not a migration's version")
                    })?,
                }),
                _ => bail!("migrations/RELEASES: {l:?} is not `vX.Y.Z COMMIT MIGRATION`"),
            }
        })
        .collect()
}

/// The newest migration's version (the same numbers on both databases).
pub fn newest_migration(root: &Path) -> Result<u64> {
    let mut newest = 0;
    for backend in ["postgres", "sqlite"] {
        for entry in std::fs::read_dir(root.join("migrations").join(backend))? {
            let name = entry?.file_name().to_string_lossy().to_string();
            if let Some(v) = name.split('_').next().and_then(|v| v.parse::<u64>().ok()) {
                newest = newest.max(v);
            }
        }
    }
    Ok(newest)
}

/// `git args` in `root`, its output trimmed.
pub fn git(root: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .context("running git")?;
    if !out.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// What the artifacts are built from, and the version they carry.
pub struct Build {
    /// `Cargo.toml`'s version.
    pub version: String,
    /// The artifacts' version: `version` for a release, else
    /// `version+gitYYYYMMDDHHMMSS.COMMIT` (ordered after the release it
    /// follows, by semver and by dpkg).
    pub label: String,
    pub commit: String,
    /// The commit's time, seconds since the epoch: the artifacts' file
    /// times, so that two builds of one commit have the same archives.
    pub epoch: i64,
}

impl Build {
    /// Read the repository, checking that the CHANGELOG's newest release
    /// is `Cargo.toml`'s version.
    pub fn read(root: &Path) -> Result<Self> {
        let version = cargo_version(root)?;
        numbers(&version)?;
        let changelog = Changelog::read(root)?;
        match changelog.newest_release() {
            Some(v) if v == version => {}
            Some(v) => bail!(
                "CHANGELOG.md's newest release is {v}, Cargo.toml's version {version}: record the \
                 release in both (CONTRIBUTING.md, \"Releasing\")"
            ),
            None => bail!("CHANGELOG.md has no release section (`## X.Y.Z — YYYY-MM-DD`)"),
        }
        let commit = git(root, &["rev-parse", "HEAD"])?;
        let epoch: i64 = git(root, &["show", "-s", "--format=%ct", "HEAD"])?
            .parse()
            .context("the commit's time")?;
        let dirty = !git(root, &["status", "--porcelain", "--untracked-files=no"])?.is_empty();
        let label = if changelog.has_unreleased() || dirty {
            let time = chrono::DateTime::from_timestamp(epoch, 0)
                .ok_or_else(|| anyhow!("the commit's time {epoch} is out of range"))?
                .format("%Y%m%d%H%M%S");
            let dirty = if dirty { ".dirty" } else { "" };
            format!("{version}+git{time}.{}{dirty}", &commit[..12])
        } else {
            version.clone()
        };
        Ok(Self {
            version,
            label,
            commit,
            epoch,
        })
    }
}
