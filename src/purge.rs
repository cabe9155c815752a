//! `tartan purge --before DURATION`: delete by hand the finished flows
//! deactivated longer ago than DURATION, with their events, work items and
//! labels, in the batches the engine's retention sweep uses
//! (docs/operating.md, "Retention"). Safe beside running engines: each batch
//! is one transaction, and on Postgres engines purging at the same time
//! take other flows.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::config::{Config, DatabaseArgs};
use tartan_core::duration::{format_duration, parse_duration_str, DurationKind};

/// Delete finished flows older than a duration.
#[derive(Debug, Args)]
pub struct PurgeArgs {
    /// Delete the flows that finished (were deactivated) longer ago than
    /// this, with a unit: `30d`, `12h`, `P1W`.
    #[arg(long)]
    before: String,
    /// Delete nothing: count what would be deleted.
    #[arg(long)]
    dry_run: bool,
    /// The database, the one `tartan serve` would use.
    #[command(flatten)]
    settings: DatabaseArgs,
}

/// `--before`: a duration of more than zero.
fn parse_before(text: &str) -> Result<Duration> {
    // Elsewhere a bare number is milliseconds; here `--before 30` meaning
    // 30 ms would delete nearly everything, so a unit is required.
    if text.trim().chars().all(|c| c.is_ascii_digit()) && !text.trim().is_empty() && text.trim() != "0" {
        bail!(
            "--before: give a unit, e.g. --before {}d or --before {}h, not a bare number",
            text.trim(),
            text.trim()
        );
    }
    let before =
        parse_duration_str(text, DurationKind::Delay).map_err(|e| anyhow::anyhow!("--before: {e}"))?;
    if before.is_zero() {
        bail!(
            "--before: 0 would delete every finished flow; give how long ago a flow must have \
             finished to be deleted, e.g. --before 30d"
        );
    }
    Ok(before)
}

pub async fn run(args: PurgeArgs) -> Result<()> {
    let before = parse_before(&args.before)?;
    let cutoff = chrono::Duration::from_std(before)
        .ok()
        .and_then(|b| chrono::Utc::now().checked_sub_signed(b))
        .with_context(|| format!("--before: {} reaches before any date", format_duration(before)))?;
    let url = Config::load(&args.settings.settings())?.config.database_url;
    // A few connections: the purge runs one statement at a time.
    let pools = tartan_store::Pools {
        engine: Some(1),
        read: Some(1),
        ..tartan_store::Pools::default()
    };
    // No migration: a purge beside engines of another release must not
    // change their schema (docs/operating.md, "Upgrading").
    let store = tartan_store::open_as(&url, &pools, tartan_store::Schema::Require)
        .await
        .with_context(|| format!("opening {}", tartan_store::redact(&url)))?;
    if args.dry_run {
        let n = store
            .count_finished(cutoff)
            .await
            .context("counting the finished flows")?;
        println!(
            "would purge {n} finished flows deactivated before {} ({} ago) from {} (dry run: nothing deleted)",
            cutoff.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            format_duration(before),
            tartan_store::redact(&url)
        );
        return Ok(());
    }
    // Nothing stops it but the end of the work (or Ctrl-C, which ends the
    // process between batches' transactions or rolls one back).
    let (total, result) =
        tartan_engine::purge_before(&*store, cutoff, &tokio_util::sync::CancellationToken::new()).await;
    result.with_context(|| format!("purging (after {total} flows were deleted)"))?;
    println!(
        "purged {total} finished flows deactivated before {} ({} ago) from {}",
        cutoff.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        format_duration(before),
        tartan_store::redact(&url)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_takes_a_duration_above_zero() {
        assert_eq!(parse_before("30d").ok(), Some(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_before("PT1M").ok(), Some(Duration::from_secs(60)));
        assert_eq!(parse_before("1500ms").ok(), Some(Duration::from_millis(1500)));
        for bad in ["0", "0s", "PT0S", "", "soon", "-1d", "1y", "30"] {
            assert!(parse_before(bad).is_err(), "{bad:?} was accepted");
        }
        let zero = parse_before("0").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(zero.contains("every finished flow"), "{zero}");
    }
}
