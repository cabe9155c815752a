#![forbid(unsafe_code)]
//! The `tartan` binary: parse the configuration, open the store, start the
//! engine and serve the API until SIGTERM or SIGINT.

/// mimalloc: the engine allocates many short-lived JSON strings and states;
/// glibc's malloc showed as a third of the CPU profile under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod backup;
mod cli;
mod config;
mod nofile;
mod purge;
mod telemetry;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use tartan_engine::{Engine, EngineConfig};
use tokio::net::TcpListener;

use crate::config::{Config, LogFormat, ServeArgs};

/// Tartan: an HTTP step-orchestration engine.
#[derive(Debug, Parser)]
// The version and the commit built (build.rs).
#[command(name = "tartan", version = env!("TARTAN_LONG_VERSION"), about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where a flag's value may come from instead (docs/operating.md).
const SETTINGS_HELP: &str = "Every flag is also an environment variable (TARTAN_ and the flag's name in \
capitals: --max-calls is TARTAN_MAX_CALLS) and a key of the --config file (max_calls). Flags win over \
the environment, the environment over the file, the file over the defaults. Durations take integer \
milliseconds or text (1.5s, 1h30m, PT1M).";

// Parsed once at start-up: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Run the engine and its API.
    #[command(after_help = SETTINGS_HELP)]
    Serve(ServeCmd),
    /// Apply the database migrations this release has and the database
    /// lacks, then exit (docs/operating.md, "Upgrading").
    Migrate(config::DatabaseArgs),
    /// Delete finished flows older than a duration (docs/operating.md, "Retention").
    Purge(purge::PurgeArgs),
    /// Copy the SQLite database to a new file while it is in use
    /// (docs/operating.md, "Backups").
    Backup(backup::BackupArgs),
    /// Work with the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Register, list, show and remove steps (client of a running server).
    #[command(after_help = CLIENT_HELP)]
    Step(cli::step::StepCmd),
    /// Preview the plan for goals, nothing started (client).
    #[command(after_help = CLIENT_HELP)]
    Plan(cli::plan::PlanArgs),
    /// Start, list, show, follow, cancel and retry flows (client).
    #[command(after_help = CLIENT_HELP)]
    Flow(cli::flow::FlowCmd),
    /// Start flows on a clock: list, apply, pause, resume, trigger, remove
    /// schedules (client).
    #[command(after_help = CLIENT_HELP)]
    Schedule(cli::schedule::ScheduleCmd),
    /// List work items across flows (client).
    #[command(after_help = CLIENT_HELP)]
    Work(cli::work::WorkCmd),
    /// Retry or cancel many flows at once, at a bounded rate (client).
    #[command(after_help = CLIENT_HELP)]
    Bulk(cli::bulk::BulkCmd),
    /// See the lanes; pause and resume one (client).
    #[command(after_help = CLIENT_HELP)]
    Lane(cli::lane::LaneCmd),
    /// Is the server alive and ready? Exits non-zero when not ready (client).
    #[command(after_help = CLIENT_HELP)]
    Health(cli::health::HealthArgs),
    /// Print the shell's completion script for tartan: `source <(tartan
    /// completions bash)`, or see docs/cli.md, "Completions".
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// `tartan serve`: the settings, and whether it migrates.
#[derive(Debug, clap::Args)]
struct ServeCmd {
    /// Apply no migration: refuse to start on a database that lacks some
    /// (run `tartan migrate` first). For deployments that migrate in a
    /// step of their own.
    #[arg(long)]
    no_migrate: bool,
    #[command(flatten)]
    settings: ServeArgs,
}

/// The client commands' exit codes (docs/cli.md).
const CLIENT_HELP: &str = "Exit codes: 0 done (a watched flow completed); 1 the server refused the request \
or a local input is wrong (or a waited-for bulk job failed on some flows); 2 bad usage; 3 the server cannot be reached; 4 a watched flow failed; 5 a \
watched flow was cancelled; 130 interrupted.";

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the resolved configuration, each value with its source; exit
    /// non-zero, naming the setting, when it is invalid.
    #[command(after_help = SETTINGS_HELP)]
    Check(ServeArgs),
}

/// A failure is one line, `error: ` and its causes, and exit status 1:
/// never a `Debug` form or a backtrace, whatever `RUST_BACKTRACE` says.
fn main() -> std::process::ExitCode {
    match start(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The runtime, then the command on it. `serve` reads its settings first:
/// they say how many worker threads it runs (`TARTAN_WORKER_THREADS`,
/// docs/operating.md, "Threads").
fn start(cli: Cli) -> Result<()> {
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    let Command::Serve(ServeCmd { no_migrate, settings }) = cli.command else {
        return runtime
            .build()
            .context("starting the async runtime")?
            .block_on(run(cli));
    };
    let loaded = Config::load(&settings)?;
    if let Some(n) = loaded.config.worker_threads {
        runtime.worker_threads(n);
    }
    let schema = if no_migrate {
        tartan_store::Schema::Require
    } else {
        tartan_store::Schema::Migrate
    };
    runtime
        .build()
        .context("starting the async runtime")?
        .block_on(serve(loaded, schema))
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        // Started by `start`, on a runtime of its own settings.
        Command::Serve(_) => Ok(()),
        Command::Migrate(args) => migrate(&args).await,
        Command::Config(ConfigCommand::Check(args)) => config_check(&args),
        Command::Backup(args) => backup::run(args).await,
        Command::Purge(args) => {
            telemetry::init_logging(LogFormat::Text, None);
            purge::run(args).await
        }
        Command::Step(c) => std::process::exit(cli::run(cli::step::run(c)).await),
        Command::Plan(c) => std::process::exit(cli::run(cli::plan::run(c)).await),
        Command::Flow(c) => std::process::exit(cli::run(cli::flow::run(c)).await),
        Command::Schedule(c) => std::process::exit(cli::run(cli::schedule::run(c)).await),
        Command::Work(c) => std::process::exit(cli::run(cli::work::run(c)).await),
        Command::Bulk(c) => std::process::exit(cli::run(cli::bulk::run(c)).await),
        Command::Lane(c) => std::process::exit(cli::run(cli::lane::run(c)).await),
        Command::Health(c) => std::process::exit(cli::run(cli::health::run(c)).await),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            use std::io::Write;
            // Made whole first: the generator panics on a failed write (a
            // closed pipe, `| head`), a write here is an error or nothing.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "tartan", &mut script);
            match std::io::stdout().lock().write_all(&script) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing the script"),
                _ => Ok(()),
            }
        }
    }
}

/// `tartan config check`: the resolved settings as a TOML file would hold
/// them, each with its source.
fn config_check(args: &ServeArgs) -> Result<()> {
    use std::fmt::Write as _;
    let loaded = Config::load(args)?;
    let mut out =
        String::from("# The resolved configuration (secrets redacted), each value with its source.\n");
    for line in loaded.report() {
        let _ = match line.value {
            Some(value) => writeln!(out, "{} = {value}  # {}", line.key, line.origin),
            None => writeln!(out, "# {} is not set", line.key),
        };
    }
    // A closed pipe (`| head`) is not an error worth a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes());
    for warning in loaded.warnings() {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

/// `tartan migrate`: what was applied, or that nothing was missing.
async fn migrate(args: &config::DatabaseArgs) -> Result<()> {
    let url = Config::load(&args.settings())?.config.database_url;
    let shown = tartan_store::redact(&url);
    let applied = tartan_store::migrate(&url)
        .await
        .with_context(|| format!("migrating {shown}"))?;
    if applied.is_empty() {
        println!("{shown} lacks no migration of this release");
    }
    for m in &applied {
        println!("applied {} {}", m.version, m.description);
    }
    Ok(())
}

async fn serve(loaded: config::Loaded, schema: tartan_store::Schema) -> Result<()> {
    // What is logged once logging is set up, which waits for the node id:
    // spans name their engine (`service.instance.id`).
    let settings = loaded
        .report()
        .iter()
        .filter_map(|line| Some(format!("{}={}", line.key, line.value.as_deref()?)))
        .collect::<Vec<_>>()
        .join(" ");
    let warnings = loaded.warnings();
    let mut config = loaded.config;
    let open_files = nofile::raise();
    let max_connections = nofile::max_connections(config.max_connections, open_files);
    config.server.max_connections = max_connections;
    let listener = TcpListener::bind(&config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let addr = listener.local_addr()?;
    let node_id = config
        .node_id
        .clone()
        .unwrap_or_else(|| format!("{}-{}", hostname(), addr.port()));
    let traces = telemetry::init_traces(&node_id)?;
    telemetry::init_logging(config.log_format, traces.as_ref());
    tracing::info!(%settings, "configuration (secrets redacted; `tartan config check` shows each source)");
    for warning in warnings {
        tracing::warn!("configuration: {warning}");
    }
    if let Some(traces) = &traces {
        traces.log_export();
    }
    let open_files_shown = open_files.map_or_else(|| "unknown".to_string(), |l| l.to_string());
    if nofile::leaves_too_few(max_connections, open_files) {
        tracing::warn!(
            "TARTAN_MAX_CONNECTIONS={max_connections} is more than half the open-file limit \
             ({open_files_shown}): idle clients could take the descriptors the database and step calls need"
        );
    }
    tracing::info!(
        "at most {max_connections} connections at once (TARTAN_MAX_CONNECTIONS; open-file limit {open_files_shown})"
    );
    let store = tartan_store::open_as(&config.database_url, &config.pools, schema)
        .await
        .with_context(|| format!("opening {}", tartan_store::redact(&config.database_url)))?;
    // One live process per node id: two would take each other's leases for
    // their own (docs/durability.md). Held until the process ends.
    let _node = store.hold_node(&node_id).await?;
    let engine_config = EngineConfig {
        node_id,
        webhook_base_url: config
            .webhook_base_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}")),
        tracer: traces.as_ref().map(telemetry::TraceGuard::tracer),
        ..config.engine
    };
    tracing::info!(step_hosts = %engine_config.step_hosts, "steps may call");
    if config.webhook_base_url.is_none() && addr.ip().is_unspecified() {
        tracing::warn!(
            "webhook URLs handed to async steps start with http://{addr}, which other hosts cannot reach: \
             set TARTAN_WEBHOOK_BASE_URL to an address they can"
        );
    }
    let engine = Engine::start(engine_config, store).await?;
    if !config.security.requires_token() && !addr.ip().to_canonical().is_loopback() {
        tracing::warn!(
            "serving without authentication on {addr} (TARTAN_ALLOW_UNAUTHENTICATED); requests must name \
             a loopback address, localhost, the listen address (any address on 0.0.0.0 or [::]) or a name \
             in TARTAN_ALLOWED_HOSTS"
        );
    }
    let shutdown = shutdown_signal();
    // The runtime's own count of its workers (`TARTAN_WORKER_THREADS`).
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    tracing::info!(store = engine.store().backend(), node_id = %engine.config().node_id, workers, "listening on {addr}");
    tartan_server::serve_with(listener, engine, config.security, config.server, shutdown).await?;
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

/// Resolves on SIGTERM or SIGINT. The handlers are in place once this
/// returns, before the server answers anything: a signal sent as soon as
/// it answers (a supervisor's stop, a test) is a clean stop, never the
/// default disposition's kill. (The serve loop first polls the future
/// only when no connection is waiting.)
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let waits = {
        use tokio::signal::unix::{signal, SignalKind};
        [SignalKind::terminate(), SignalKind::interrupt()].map(|kind| match signal(kind) {
            Ok(signal) => Some(signal),
            Err(e) => {
                tracing::error!("cannot listen for signal {}: {e}", kind.as_raw_value());
                None
            }
        })
    };
    async move {
        #[cfg(unix)]
        {
            let [term, int] = waits;
            let wait = |signal: Option<tokio::signal::unix::Signal>| async move {
                match signal {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = wait(term) => {},
                _ = wait(int) => {},
            }
        }
        #[cfg(not(unix))]
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!("cannot listen for Ctrl-C: {e}");
            std::future::pending::<()>().await;
        }
        tracing::info!(
            "shutting down: no new work, handing back what has not started, letting calls in flight finish"
        );
    }
}
