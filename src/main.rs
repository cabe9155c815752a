#![forbid(unsafe_code)]
//! The `tartan` binary: parse the configuration, open the store, start the
//! engine and serve the API until SIGTERM or SIGINT.

/// mimalloc: the engine allocates many short-lived JSON strings and states;
/// glibc's malloc showed as a third of the CPU profile under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod config;
mod purge;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use tartan_engine::{Engine, EngineConfig};
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

use crate::config::{Config, ServeArgs};

/// Tartan: an HTTP step-orchestration engine.
#[derive(Debug, Parser)]
#[command(name = "tartan", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start-up: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Run the engine and its API.
    Serve(ServeArgs),
    /// Delete finished flows older than a duration (docs/operating-retention.md).
    Purge(purge::PurgeArgs),
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .init();
    match Cli::parse().command {
        Command::Serve(args) => serve(Config::resolve(args)?).await,
        Command::Purge(args) => purge::run(args).await,
    }
}

async fn serve(config: Config) -> Result<()> {
    let listener = TcpListener::bind(&config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let addr = listener.local_addr()?;
    let store = tartan_store::open_with(&config.database_url, &config.pools)
        .await
        .with_context(|| format!("opening {}", tartan_store::redact(&config.database_url)))?;
    let node_id = config
        .node_id
        .clone()
        .unwrap_or_else(|| format!("{}-{}", hostname(), addr.port()));
    // One live process per node id: two would take each other's leases for
    // their own (docs/durability.md). Held until the process ends.
    let _node = store.hold_node(&node_id).await?;
    let engine_config = EngineConfig {
        node_id,
        webhook_base_url: config
            .webhook_base_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}")),
        work_defaults: config.work_defaults,
        step_timeout: config.step_timeout,
        max_step_attempts: config.max_step_attempts,
        max_active_flows: config.max_active_flows,
        lease: config.lease,
        step_hosts: config.step_hosts.clone(),
        max_calls: config.max_calls,
        max_calls_per_step: config.max_calls_per_step,
        max_queued_calls: config.max_queued_calls,
        max_response_bytes: config.max_response_bytes,
        max_retry_after: config.max_retry_after,
        retention: purge::retention_setting()?,
    };
    tracing::info!(step_hosts = %config.step_hosts, "steps may call");
    let engine = Engine::start(engine_config, store).await?;
    if !config.security.requires_token() && !addr.ip().to_canonical().is_loopback() {
        tracing::warn!("serving without authentication on {addr} (TARTAN_ALLOW_UNAUTHENTICATED)");
    }
    tracing::info!(store = engine.store().backend(), node_id = %engine.config().node_id, "listening on {addr}");
    tartan_server::serve_with(
        listener,
        engine,
        config.security,
        config.server_limits,
        shutdown_signal(),
    )
    .await?;
    tracing::info!("stopped");
    Ok(())
}

/// This machine's name, for the default node id.
fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!("cannot listen for SIGINT: {e}");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!(
        "shutting down: no new work, handing back what has not started, letting calls in flight finish"
    );
}
