//! The container image as a tarball (`docker load` takes it): deploy/Dockerfile
//! built around the release binary (`TARTAN_BINARIES=prebuilt`), saved and
//! compressed. Needs a Docker engine with BuildKit.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::project::Build;

/// Build the image `tartan:LABEL` around `binary` on `runtime_image` (the
/// Dockerfile's default when `None`) and write it to `out` as
/// `tartan-LABEL-image-ARCH.tar.gz`.
pub fn build(
    root: &Path,
    build: &Build,
    binary: &Path,
    out: &Path,
    arch: &str,
    runtime_image: Option<&str>,
) -> Result<PathBuf> {
    // The build context: only what the prebuilt stages copy.
    let ctx = out.join("image-context");
    if ctx.exists() {
        std::fs::remove_dir_all(&ctx)?;
    }
    std::fs::create_dir_all(ctx.join("deploy"))?;
    std::fs::create_dir_all(ctx.join("bin"))?;
    for f in ["deploy/healthcheck", "deploy/container.toml"] {
        std::fs::copy(root.join(f), ctx.join(f)).with_context(|| format!("copying {f}"))?;
    }
    std::fs::copy(binary, ctx.join("bin/tartan")).context("copying the binary")?;
    // `+` is no tag character.
    let tag = format!("tartan:{}", build.label.replace('+', "-"));
    let mut cmd = builder()?;
    cmd.args(["--quiet", "--network", "none", "-f"])
        .arg(root.join("deploy/Dockerfile"))
        .args(["-t", &tag])
        .args([
            "--build-arg",
            "TARTAN_BINARIES=prebuilt",
            "--build-arg",
            "BIN_DIR=bin",
        ])
        .args([
            "--label",
            &format!("org.opencontainers.image.version={}", build.label),
        ])
        .args([
            "--label",
            &format!("org.opencontainers.image.revision={}", build.commit),
        ])
        .stdout(Stdio::null());
    if let Some(image) = runtime_image {
        cmd.args(["--build-arg", &format!("RUNTIME_IMAGE={image}")]);
    }
    let status = cmd.arg(&ctx).status().context("running docker build")?;
    if !status.success() {
        bail!("docker build of {tag} failed");
    }
    std::fs::remove_dir_all(&ctx)?;
    let tarball = out.join(format!("tartan-{}-image-{arch}.tar.gz", build.label));
    let file = std::fs::File::create(&tarball)?;
    let mut save = Command::new("docker")
        .args(["save", &tag])
        .stdout(Stdio::piped())
        .spawn()
        .context("running docker save")?;
    let saved = save.stdout.take().context("docker save's output")?;
    let gzip = Command::new("gzip")
        .args(["-n", "-6"])
        .stdin(saved)
        .stdout(file)
        .status()
        .context("running gzip")?;
    if !save.wait()?.success() || !gzip.success() {
        bail!("docker save {tag} | gzip failed");
    }
    Ok(tarball)
}

/// `docker build` through BuildKit, which builds only the stages the
/// target needs (the legacy builder would compile the Rust stage too):
/// `docker buildx build --load` where the buildx plugin is (Docker 23 and
/// later reach BuildKit only through it), else a client before 23 (such
/// as Debian's `docker.io`) with `DOCKER_BUILDKIT=1`.
fn builder() -> Result<Command> {
    let works = |client: &str, args: &[&str]| {
        Command::new(client)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    if works("docker", &["buildx", "version"]).is_some() {
        let mut cmd = Command::new("docker");
        cmd.args(["buildx", "build", "--load"]);
        return Ok(cmd);
    }
    for client in ["docker", "/usr/bin/docker"] {
        let version = works(client, &["version", "--format", "{{.Client.Version}}"]);
        let major = version
            .as_deref()
            .and_then(|v| v.split('.').next()?.parse::<u32>().ok());
        if major.is_some_and(|m| m < 23) {
            let mut cmd = Command::new(client);
            cmd.arg("build").env("DOCKER_BUILDKIT", "1");
            return Ok(cmd);
        }
    }
    bail!("no BuildKit: install docker-buildx, or use --no-image")
}
