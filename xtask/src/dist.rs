//! `cargo xtask dist`: everything a user installs, for this machine's
//! platform, in one directory (docs/operating.md, "Installing"):
//!
//! - `tartan-LABEL-TARGET.tar.gz`: the binary, README, LICENSE, CHANGELOG,
//!   the example configuration and the systemd unit with its settings file;
//! - `tartan_LABEL_ARCH.deb` (deb.rs);
//! - `tartan-LABEL-image-ARCH.tar.gz`, the container image (image.rs);
//! - `tartan-LABEL.cdx.json`, the SBOM (sbom.rs);
//! - `SHA256SUMS` of them all, as `sha256sum -c` reads it.
//!
//! LABEL is the version for a release and marks any other build
//! (project.rs, `Build`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use crate::project::{self, Build};
use crate::{deb, image, sbom};

#[derive(Debug, clap::Args)]
pub struct DistArgs {
    /// Where the artifacts go.
    #[arg(long, default_value = "target/dist")]
    out: PathBuf,
    /// Package this binary instead of building the release one (CI packages
    /// the build its tests ran).
    #[arg(long)]
    binary: Option<PathBuf>,
    /// The container image's base (deploy/Dockerfile's RUNTIME_IMAGE).
    #[arg(long)]
    runtime_image: Option<String>,
    /// Leave the container image out (no Docker engine here).
    #[arg(long)]
    no_image: bool,
}

impl DistArgs {
    /// What `release` builds: the release binary, into target/dist.
    pub fn release(runtime_image: Option<String>) -> Self {
        Self {
            out: PathBuf::from("target/dist"),
            binary: None,
            runtime_image,
            no_image: false,
        }
    }
}

pub fn run(args: DistArgs) -> Result<()> {
    let root = project::root();
    let build = Build::read(&root)?;
    let out = root.join(&args.out);
    std::fs::create_dir_all(&out)?;
    let binary = match &args.binary {
        Some(b) => b.clone(),
        None => release_binary(&root, &build)?,
    };
    check_binary(&binary, &build)?;
    let target = host_target()?;
    let arch = deb::architecture()?;
    println!(
        "dist: tartan {} ({}) for {target}",
        build.label,
        &build.commit[..12]
    );

    let mut made = vec![tarball(&root, &build, &binary, &out, &target)?];
    made.push(deb::build(&root, &build, &binary, &out, &arch)?);
    if !args.no_image {
        made.push(image::build(
            &root,
            &build,
            &binary,
            &out,
            &arch,
            args.runtime_image.as_deref(),
        )?);
    }
    let bom = sbom::document(&root, &build, &target, "tartan")?;
    let bom_path = out.join(format!("tartan-{}.cdx.json", build.label));
    std::fs::write(&bom_path, serde_json::to_vec_pretty(&bom)?)?;
    made.push(bom_path);

    let mut sums = String::new();
    for path in &made {
        let bytes = std::fs::read(path)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        sums.push_str(&format!("{:x}  {name}\n", Sha256::digest(&bytes)));
        println!("dist: {} ({} KiB)", path.display(), bytes.len().div_ceil(1024));
    }
    std::fs::File::create(out.join("SHA256SUMS"))?.write_all(sums.as_bytes())?;
    println!("dist: {}", out.join("SHA256SUMS").display());
    Ok(())
}

/// `cargo build --release --locked`, with the commit named (build.rs).
fn release_binary(root: &Path, build: &Build) -> Result<PathBuf> {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "--locked", "--bin", "tartan"])
        .env("TARTAN_COMMIT", &build.commit)
        .current_dir(root)
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("cargo build --release failed");
    }
    // Relative to the root, where cargo ran (an absolute one stays itself).
    let dir = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), |d| root.join(d));
    Ok(dir.join("release/tartan"))
}

/// The binary says the version and commit the artifacts carry.
fn check_binary(binary: &Path, build: &Build) -> Result<()> {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", binary.display()))?;
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let want = format!("tartan {} (commit {})", build.version, &build.commit[..12]);
    if said != want {
        bail!(
            "{} says {said:?}, not {want:?}: build it from this commit",
            binary.display()
        );
    }
    Ok(())
}

/// The target triple rustc builds for by default.
fn host_target() -> Result<String> {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .context("running rustc -vV")?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .context("rustc -vV names no host")
}

/// `tartan-LABEL-TARGET.tar.gz`, its files under `tartan-LABEL-TARGET/`,
/// owned by root with the commit's time.
fn tarball(root: &Path, build: &Build, binary: &Path, out: &Path, target: &str) -> Result<PathBuf> {
    let name = format!("tartan-{}-{target}", build.label);
    let stage = out.join(&name);
    if stage.exists() {
        std::fs::remove_dir_all(&stage)?;
    }
    std::fs::create_dir_all(stage.join("systemd"))?;
    std::fs::copy(binary, stage.join("tartan"))?;
    for f in ["README.md", "LICENSE", "CHANGELOG.md", "tartan.example.toml"] {
        std::fs::copy(root.join(f), stage.join(f)).with_context(|| format!("copying {f}"))?;
    }
    for f in ["tartan.service", "tartan.env"] {
        std::fs::copy(root.join("deploy/systemd").join(f), stage.join("systemd").join(f))?;
    }
    let tarball = out.join(format!("{name}.tar.gz"));
    let status = Command::new("tar")
        .args(["--sort=name", "--owner=0", "--group=0", "--numeric-owner"])
        .arg(format!("--mtime=@{}", build.epoch))
        // No name or time in gzip's header: one commit, one archive.
        .args(["--use-compress-program", "gzip -n", "-cf"])
        .arg(&tarball)
        .arg("-C")
        .arg(out)
        .arg(&name)
        .status()
        .context("running tar")?;
    if !status.success() {
        bail!("tar failed");
    }
    std::fs::remove_dir_all(&stage)?;
    Ok(tarball)
}
