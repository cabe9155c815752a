//! The commit the binary is built from, for `tartan --version`
//! (docs/operating.md, "Releases"): `TARTAN_COMMIT` when set (a build
//! without the repository, such as the image's builder stage), else
//! `git rev-parse HEAD`, else `unknown`.
//!
//! Hand-written rather than `vergen`: one `git` call and the two files it
//! reads are all it takes, against a crate tree for the build.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=TARTAN_COMMIT");
    let commit = match std::env::var("TARTAN_COMMIT") {
        Ok(commit) if !commit.trim().is_empty() => commit.trim().to_string(),
        _ => {
            // A new commit moves HEAD or the branch it names (loose or packed).
            for path in ["HEAD", "packed-refs"] {
                if let Some(p) = git(&["rev-parse", "--git-path", path]) {
                    println!("cargo:rerun-if-changed={p}");
                }
            }
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                if let Some(p) = git(&["rev-parse", "--git-path", &branch]) {
                    println!("cargo:rerun-if-changed={p}");
                }
            }
            git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into())
        }
    };
    let short: String = commit.chars().take(12).collect();
    println!("cargo:rustc-env=TARTAN_COMMIT={commit}");
    println!(
        "cargo:rustc-env=TARTAN_LONG_VERSION={} (commit {short})",
        std::env::var("CARGO_PKG_VERSION").unwrap_or_default()
    );
}
