//! The Debian package (docs/operating.md, "Installing"): the binary, the
//! systemd unit (deploy/systemd, run as the `tartan` system user rather
//! than a dynamic one, so that the files it owns keep their owner across
//! upgrades), the settings file as a conffile, the docs, and the
//! maintainer scripts of deploy/debian: they make the user, the state
//! directory (owner-only), an API token when there is none, and start the
//! service where systemd runs.
//!
//! Built with `dpkg-deb` from a staged tree: cargo-deb would be a
//! separate install, and what it adds over these few lines (reading
//! `[package.metadata.deb]`) this package does not need.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

use crate::project::Build;

/// Where the package installs the binary.
const BIN: &str = "/usr/bin/tartan";

/// The unit of deploy/systemd/tartan.service as the package installs it.
pub fn packaged_unit(unit: &str) -> Result<String> {
    let mut out = String::from(
        "# Installed by the tartan Debian package (docs/operating.md, \"Installing\"):\n\
         # settings in /etc/tartan/tartan.env, the API token in /etc/tartan/api-token.\n",
    );
    let (mut exec, mut user) = (false, false);
    for line in unit.lines().skip_while(|l| l.starts_with('#')) {
        if let Some(args) = line.strip_prefix("ExecStart=/usr/local/bin/tartan ") {
            out.push_str(&format!("ExecStart={BIN} {args}\n"));
            exec = true;
        } else if line == "DynamicUser=yes" {
            out.push_str("User=tartan\nGroup=tartan\n");
            user = true;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !(exec && user) {
        bail!("deploy/systemd/tartan.service: no `ExecStart=/usr/local/bin/tartan ...` or `DynamicUser=yes` line to adapt");
    }
    Ok(out)
}

/// The package's architecture, as dpkg names this machine's.
pub fn architecture() -> Result<String> {
    let out = Command::new("dpkg")
        .arg("--print-architecture")
        .output()
        .context("running dpkg (the Debian package is built with dpkg-deb)")?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Build `tartan_LABEL_ARCH.deb` in `out` around `binary`.
pub fn build(root: &Path, build: &Build, binary: &Path, out: &Path, arch: &str) -> Result<PathBuf> {
    let stage = out.join("deb-stage");
    if stage.exists() {
        std::fs::remove_dir_all(&stage)?;
    }
    let put = |to: &str, from: &[u8], mode: u32| -> Result<u64> {
        let path = stage.join(to.trim_start_matches('/'));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, from).with_context(|| format!("writing {}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        Ok(from.len() as u64)
    };
    let read = |p: &str| std::fs::read(root.join(p)).with_context(|| format!("reading {p}"));
    let bin = std::fs::read(binary).with_context(|| format!("reading {}", binary.display()))?;
    let unit = packaged_unit(&String::from_utf8(read("deploy/systemd/tartan.service")?)?)?;
    let doc = "/usr/share/doc/tartan";
    let mut size = put(BIN, &bin, 0o755)?;
    size += put("/usr/lib/systemd/system/tartan.service", unit.as_bytes(), 0o644)?;
    size += put(
        "/etc/tartan/tartan.env",
        &read("deploy/systemd/tartan.env")?,
        0o600,
    )?;
    size += put(&format!("{doc}/copyright"), &read("LICENSE")?, 0o644)?;
    for f in ["README.md", "CHANGELOG.md", "tartan.example.toml"] {
        size += put(&format!("{doc}/{f}"), &read(f)?, 0o644)?;
    }
    for script in ["postinst", "prerm", "postrm"] {
        put(
            &format!("DEBIAN/{script}"),
            &read(&format!("deploy/debian/{script}"))?,
            0o755,
        )?;
    }
    put("DEBIAN/conffiles", b"/etc/tartan/tartan.env\n", 0o644)?;
    let control = format!(
        "Package: tartan\n\
         Version: {version}\n\
         Architecture: {arch}\n\
         Maintainer: {maintainer}\n\
         Installed-Size: {kib}\n\
         Depends: {depends}\n\
         Section: net\n\
         Priority: optional\n\
         Description: HTTP step-orchestration engine\n \
         Tartan plans the steps a flow's goals need, calls them over HTTP with\n \
         retries and timeouts, and keeps every flow durably (SQLite or Postgres).\n \
         It speaks Argyll's API and step protocol. Built from commit {commit}.\n",
        version = build.label,
        maintainer = std::env::var("TARTAN_DEB_MAINTAINER")
            .unwrap_or_else(|_| "Tartan maintainers <maintainers@tartan.invalid>".into()),
        kib = size.div_ceil(1024),
        depends = depends(binary, &bin)?,
        commit = build.commit,
    );
    put("DEBIAN/control", control.as_bytes(), 0o644)?;
    for dir in walk_dirs(&stage)? {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    }
    let deb = out.join(format!("tartan_{}_{arch}.deb", build.label));
    let status = Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zxz", "--build"])
        .arg(&stage)
        .arg(&deb)
        .env("SOURCE_DATE_EPOCH", build.epoch.to_string())
        .stdout(std::process::Stdio::null())
        .status()
        .context("running dpkg-deb")?;
    if !status.success() {
        bail!("dpkg-deb failed on {}", stage.display());
    }
    std::fs::remove_dir_all(&stage)?;
    Ok(deb)
}

/// Every directory under `dir`, itself included.
fn walk_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < dirs.len() {
        for entry in std::fs::read_dir(&dirs[i])? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                dirs.push(entry.path());
            }
        }
        i += 1;
    }
    Ok(dirs)
}

/// The packages the binary's shared libraries come from (`readelf -d`),
/// glibc at the newest symbol version it uses.
fn depends(path: &Path, binary: &[u8]) -> Result<String> {
    let out = Command::new("readelf")
        .arg("-d")
        .arg(path)
        .output()
        .context("running readelf (binutils)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let glibc =
        newest_glibc(binary).ok_or_else(|| anyhow!("{} uses no GLIBC_ symbol version", path.display()))?;
    let mut deps = vec![format!("libc6 (>= {glibc})")];
    for lib in text.lines().filter(|l| l.contains("(NEEDED)")) {
        let name = lib.rsplit('[').next().unwrap_or_default().trim_end_matches(']');
        match name {
            "libc.so.6"
            | "libm.so.6"
            | "libpthread.so.0"
            | "libdl.so.2"
            | "librt.so.1"
            | "ld-linux-x86-64.so.2"
            | "ld-linux-aarch64.so.1" => {}
            "libgcc_s.so.1" => deps.push("libgcc-s1".into()),
            // Luau, the Lua of step scripts, is C++.
            "libstdc++.so.6" => deps.push("libstdc++6".into()),
            other => bail!(
                "{} needs {other}: name its Debian package in xtask/src/deb.rs",
                path.display()
            ),
        }
    }
    // useradd, in the postinst.
    deps.push("passwd".into());
    Ok(deps.join(", "))
}

/// The newest `GLIBC_2.N` version named in the binary.
fn newest_glibc(binary: &[u8]) -> Option<String> {
    let mark = b"GLIBC_2.";
    let mut best: Option<(u32, u32)> = None;
    for (i, w) in binary.windows(mark.len()).enumerate() {
        if w != mark {
            continue;
        }
        let rest = &binary[i + mark.len()..];
        let digits = |s: &[u8]| s.iter().take_while(|b| b.is_ascii_digit()).count();
        let n = digits(rest);
        let Some(minor) = std::str::from_utf8(&rest[..n])
            .ok()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let patch = match rest.get(n) {
            Some(b'.') => {
                let m = digits(&rest[n + 1..]);
                std::str::from_utf8(&rest[n + 1..n + 1 + m])
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0)
            }
            _ => 0,
        };
        best = best.max(Some((minor, patch)));
    }
    best.map(|(minor, patch)| match patch {
        0 => format!("2.{minor}"),
        p => format!("2.{minor}.{p}"),
    })
}

#[cfg(test)]
mod tests {
    use super::{newest_glibc, packaged_unit};

    #[test]
    fn the_newest_glibc_version_is_found() {
        assert_eq!(
            newest_glibc(b"x GLIBC_2.2.5\0GLIBC_2.34\0GLIBC_2.3.4\0"),
            Some("2.34".into())
        );
        assert_eq!(newest_glibc(b"no versions"), None);
    }

    #[test]
    fn the_packaged_unit_runs_the_installed_binary_as_the_tartan_user() {
        let unit = "# how to install\n[Service]\nExecStart=/usr/local/bin/tartan serve\nDynamicUser=yes\n";
        let out = match packaged_unit(unit) {
            Ok(out) => out,
            Err(e) => panic!("not adapted: {e}"),
        };
        assert!(
            out.contains("ExecStart=/usr/bin/tartan serve\nUser=tartan\nGroup=tartan\n"),
            "{out}"
        );
        assert!(!out.contains("how to install"), "{out}");
        assert!(packaged_unit("[Service]\nExecStart=/opt/tartan serve\n").is_err());
    }
}
