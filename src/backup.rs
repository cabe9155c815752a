//! `tartan backup --to FILE`: a consistent copy of the SQLite database,
//! taken while engines serve it (docs/operating.md, "Backups"). An engine
//! started on the copy recovers every flow that was in flight when it was
//! taken, calling the steps it was waiting on again with their receipt
//! tokens. Postgres is backed up with its own tools.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use crate::config::{Config, DatabaseArgs};

/// Copy the SQLite database to a new file, online.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The file to write: a new one (an existing file is never
    /// overwritten). Written as FILE.partial, then renamed.
    #[arg(long, value_name = "FILE")]
    to: PathBuf,
    /// The database, the one `tartan serve` would use.
    #[command(flatten)]
    settings: DatabaseArgs,
}

pub async fn run(args: BackupArgs) -> Result<()> {
    let url = Config::load(&args.settings.settings())?.config.database_url;
    let shown = tartan_store::redact(&url);
    let bytes = tartan_store::backup(&url, &args.to)
        .await
        .with_context(|| format!("backing up {shown}"))?;
    println!("backed up {shown} to {} ({bytes} bytes)", args.to.display());
    Ok(())
}
