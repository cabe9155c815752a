//! `cargo xtask release X.Y.Z`: record a release in the repository
//! (CONTRIBUTING.md, "Releasing"). Two commits: "Release X.Y.Z" sets the
//! version (`Cargo.toml`, and what carries it: `Cargo.lock`, the clients,
//! the API reference) and moves the CHANGELOG's "Unreleased" under
//! `## X.Y.Z — date`; "Record release X.Y.Z" adds
//! `vX.Y.Z COMMIT NEWEST-MIGRATION` to `migrations/RELEASES`, naming the
//! first commit, which is what `bench/upgrade.sh` builds as the previous
//! release. Between the two, the release's artifacts are built from the
//! first (`cargo xtask dist`). Git tags are optional on top of this record.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::project::{self, Changelog};

#[derive(Debug, clap::Args)]
pub struct ReleaseArgs {
    /// The new version, MAJOR.MINOR.PATCH (Semantic Versioning).
    version: String,
    /// Record the release without building its artifacts.
    #[arg(long)]
    no_dist: bool,
    /// Passed to `dist`: the container image's base.
    #[arg(long)]
    runtime_image: Option<String>,
}

pub fn run(args: ReleaseArgs) -> Result<()> {
    let root = project::root();
    let new = args.version.trim_start_matches('v').to_string();
    let old = project::cargo_version(&root)?;
    if project::numbers(&new)? <= project::numbers(&old)? {
        bail!("{new} is not after the current version {old}");
    }
    if let Some(r) = project::releases(&root)?.iter().find(|r| r.version == new) {
        bail!(
            "{new} is recorded already, as commit {} (newest migration {})",
            r.commit,
            r.migration
        );
    }
    if !project::git(&root, &["status", "--porcelain", "--untracked-files=no"])?.is_empty() {
        bail!("the working tree has changes: commit them first");
    }
    let changelog = Changelog::read(&root)?;
    if !changelog.has_unreleased() {
        bail!("CHANGELOG.md's \"## Unreleased\" is empty: nothing to release");
    }
    let date = chrono::Utc::now().format("%Y-%m-%d");
    let text = changelog.text.replacen(
        "## Unreleased\n",
        &format!("## Unreleased\n\n## {new} — {date}\n"),
        1,
    );
    std::fs::write(root.join("CHANGELOG.md"), text)?;
    set_cargo_version(&root, &old, &new)?;

    // What carries the version: the lock file's workspace packages, the
    // served OpenAPI document's info.version and so the clients and the
    // API reference generated from it.
    run_in(&root, cargo().args(["update", "--workspace"]))?;
    run_in(&root, cargo().args(["build", "--locked", "--bin", "tartan"]))?;
    run_in(&root, Command::new("bash").arg("clients/regen"))?;
    run_in(
        &root,
        cargo()
            .args([
                "test",
                "--locked",
                "-p",
                "tartan",
                "--test",
                "api",
                "--",
                "docs::reference",
            ])
            .env("UPDATE_DOCS", "1"),
    )?;
    // What the steps above changed (new generated files included), and nothing else.
    project::git(
        &root,
        &[
            "add",
            "-A",
            "--",
            "Cargo.toml",
            "Cargo.lock",
            "CHANGELOG.md",
            "clients",
            "docs/api-reference.md",
        ],
    )?;
    project::git(&root, &["commit", "-q", "-m", &format!("Release {new}")])?;
    let commit = project::git(&root, &["rev-parse", "HEAD"])?;
    println!("release: {new} is commit {commit}");

    if !args.no_dist {
        crate::dist::run(crate::dist::DistArgs::release(args.runtime_image))?;
    }

    let migration = project::newest_migration(&root)?;
    let mut record = std::fs::read_to_string(root.join("migrations/RELEASES"))?;
    if !record.ends_with('\n') {
        record.push('\n');
    }
    record.push_str(&format!("v{new} {commit} {migration}\n"));
    std::fs::write(root.join("migrations/RELEASES"), record)?;
    project::git(
        &root,
        &[
            "commit",
            "-q",
            "-m",
            &format!("Record release {new} ({})", &commit[..12]),
            "--",
            "migrations/RELEASES",
        ],
    )?;
    println!(
        "release: recorded in migrations/RELEASES; push main (and, if you tag, `git tag -a v{new} {commit}`)"
    );
    Ok(())
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn run_in(root: &Path, cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let status = cmd
        .current_dir(root)
        .status()
        .with_context(|| format!("running {shown}"))?;
    if !status.success() {
        bail!("{shown} failed");
    }
    Ok(())
}

/// `version = "OLD"` under `[workspace.package]` becomes NEW.
fn set_cargo_version(root: &Path, old: &str, new: &str) -> Result<()> {
    let path = root.join("Cargo.toml");
    let text = std::fs::read_to_string(&path)?;
    let section = text
        .find("[workspace.package]")
        .context("Cargo.toml has no [workspace.package]")?;
    let line = format!("version = \"{old}\"");
    let at = text[section..]
        .find(&line)
        .map(|i| section + i)
        .context("no version line under [workspace.package]")?;
    let updated = format!("{}version = \"{new}\"{}", &text[..at], &text[at + line.len()..]);
    std::fs::write(&path, updated)?;
    Ok(())
}
