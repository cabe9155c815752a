//! Tartan's release tooling, run as `cargo xtask COMMAND` (the alias is in
//! .cargo/config.toml): `dist` builds what a user installs, `release`
//! records a release (CONTRIBUTING.md, "Releasing").

mod deb;
mod dist;
mod image;
mod project;
mod release;
mod sbom;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Build the release's artifacts for this platform: a tarball, a
    /// Debian package, the container image, an SBOM and SHA256SUMS.
    Dist(dist::DistArgs),
    /// Set a new version and record the release (two commits), building
    /// its artifacts in between.
    Release(release::ReleaseArgs),
}

fn main() -> std::process::ExitCode {
    let result = match Cli::parse().command {
        Task::Dist(args) => dist::run(args),
        Task::Release(args) => release::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
