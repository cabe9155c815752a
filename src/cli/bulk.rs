//! `tartan bulk retry|cancel|get|ls|stop`: act on many flows at once through
//! a bulk job the server runs at a bounded rate (docs/cli.md, "Bulk jobs";
//! docs/api.md, "Bulk operations").

use std::time::Duration;
use tartan_server::api::answers::{BulkDryRun, BulkJobList, BulkJobView};

use serde_json::{json, Map, Value};

use super::client::{exit, shorten, CliError, Client};
use super::output::{self, Format, Table};
use super::Conn;

/// How often `--wait` asks for the job's progress.
const WAIT_POLL: Duration = Duration::from_millis(500);

#[derive(Debug, clap::Args)]
pub struct BulkCmd {
    #[command(flatten)]
    conn: Conn,
    #[command(subcommand)]
    command: BulkSub,
}

/// Which flows a bulk job acts on: every flag given must match.
#[derive(Debug, clap::Args)]
struct Filter {
    /// These flows (repeatable).
    #[arg(long = "id", value_name = "ID")]
    ids: Vec<String>,
    /// Flows whose id starts with this.
    #[arg(long)]
    prefix: Option<String>,
    /// Flows carrying this label, key=value (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    /// Flows in this status (repeatable).
    #[arg(long = "status")]
    statuses: Vec<String>,
    /// Flows where this step failed.
    #[arg(long)]
    failed_step: Option<String>,
    /// Flows whose failure is of this class (e.g. retryable, permanent, timeout).
    #[arg(long)]
    error_class: Option<String>,
    /// Flows created at or after this: an RFC 3339 time, or a duration ago (2h, 30m).
    #[arg(long)]
    since: Option<String>,
    /// Flows created before this: an RFC 3339 time, or a duration ago.
    #[arg(long)]
    until: Option<String>,
}

#[derive(Debug, clap::Args)]
struct JobFlags {
    /// Flows acted on per second (the server's default when absent).
    #[arg(long)]
    rate: Option<u32>,
    /// Only count the flows that match; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Wait for the job to finish, showing its progress; exit non-zero when a flow failed.
    #[arg(long)]
    wait: bool,
}

#[derive(Debug, clap::Subcommand)]
enum BulkSub {
    /// Retry every failed or cancelled flow the filter matches.
    Retry {
        #[command(flatten)]
        filter: Filter,
        #[command(flatten)]
        job: JobFlags,
        /// Keep the attempt counts (by default they count from 1 again).
        #[arg(long)]
        keep_attempts: bool,
    },
    /// Cancel every active flow the filter matches.
    Cancel {
        #[command(flatten)]
        filter: Filter,
        #[command(flatten)]
        job: JobFlags,
        /// Do not run the compensations of their succeeded work.
        #[arg(long)]
        no_compensate: bool,
    },
    /// Show a bulk job's progress and the flows it failed on.
    Get { job: String },
    /// List bulk jobs, the most recent first.
    #[command(alias = "list")]
    Ls,
    /// Stop a bulk job: it acts on no more flows.
    Stop { job: String },
}

const HEADERS: [&str; 9] = [
    "ID",
    "KIND",
    "STATUS",
    "TOTAL",
    "DONE",
    "SKIPPED",
    "FAILED",
    "REMAINING",
    "CREATED",
];

pub async fn run(cmd: BulkCmd) -> Result<u8, CliError> {
    let client = cmd.conn.client()?;
    let format = cmd.conn.output;
    let (action, filter, flags, extra) = match cmd.command {
        BulkSub::Get { job } => {
            let job: BulkJobView = client.get_as(client.url(&["engine", "bulk", &job])).await?;
            show(&job, format);
            return Ok(exit::OK);
        }
        BulkSub::Stop { job } => {
            let job: BulkJobView = client
                .post_as(&["engine", "bulk", &job, "cancel"], &json!({}))
                .await?;
            show(&job, format);
            return Ok(exit::OK);
        }
        BulkSub::Ls => {
            let body: BulkJobList = client.get_as(client.url(&["engine", "bulk"])).await?;
            if format == Format::Json {
                output::json(&body);
                return Ok(exit::OK);
            }
            let mut table = Table::new(&HEADERS);
            for j in &body.jobs {
                table.row(row(j));
            }
            table.print();
            return Ok(exit::OK);
        }
        BulkSub::Retry {
            filter,
            job,
            keep_attempts,
        } => ("retry", filter, job, ("reset_attempts", !keep_attempts)),
        BulkSub::Cancel {
            filter,
            job,
            no_compensate,
        } => ("cancel", filter, job, ("compensate", !no_compensate)),
    };
    let mut body = json!({"filter": filter_json(&filter)?, "dry_run": flags.dry_run});
    body[extra.0] = json!(extra.1);
    if let Some(rate) = flags.rate {
        body["rate"] = json!(rate);
    }
    let answer = client.post(&["engine", "bulk", action], &body).await?;
    if flags.dry_run {
        let dry: BulkDryRun = client.typed(answer)?;
        if format == Format::Json {
            output::json(&dry);
        } else {
            output::line(&format!(
                "{} flows match; a bulk {action} would act on them (dry run: nothing done)",
                dry.matched
            ));
        }
        return Ok(exit::OK);
    }
    let job: BulkJobView = client.typed(answer)?;
    let id = job.id.clone();
    if !flags.wait {
        show(&job, format);
        return Ok(exit::OK);
    }
    if format == Format::Table {
        output::line(&format!("bulk job {id} ({action}) started"));
    }
    let job = wait(&client, &id, format).await?;
    show(&job, format);
    Ok(if job.status == "completed" && job.failed == 0 {
        exit::OK
    } else {
        exit::ERROR
    })
}

/// Poll the job until it is no longer queued or running.
async fn wait(client: &Client, id: &str, format: Format) -> Result<BulkJobView, CliError> {
    let mut last = String::new();
    loop {
        let job: BulkJobView = client.get_as(client.url(&["engine", "bulk", id])).await?;
        if !matches!(job.status.as_str(), "queued" | "running") {
            return Ok(job);
        }
        let progress = format!(
            "{}: {} matched, {} done, {} skipped, {} failed",
            job.status, job.total, job.done, job.skipped, job.failed,
        );
        if format == Format::Table && progress != last {
            output::line(&progress);
            last = progress;
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

fn row(j: &BulkJobView) -> Vec<String> {
    vec![
        j.id.clone(),
        j.kind.clone(),
        j.status.clone(),
        j.total.to_string(),
        j.done.to_string(),
        j.skipped.to_string(),
        j.failed.to_string(),
        j.remaining.to_string(),
        output::time(&j.created_at),
    ]
}

fn show(job: &BulkJobView, format: Format) {
    if format == Format::Json {
        output::json(job);
        return;
    }
    let mut table = Table::new(&HEADERS);
    table.row(row(job));
    table.print();
    if !job.failures.is_empty() {
        let mut t = Table::new(&["FLOW", "ERROR"]);
        for e in &job.failures {
            t.row(vec![
                e.flow_id.clone(),
                shorten(&output::one_line(&e.detail), 150),
            ]);
        }
        output::line("");
        t.print();
    }
}

/// The filter object of the API; at least one flag must be given, so a
/// bare `bulk cancel` cannot reach every flow by accident.
fn filter_json(f: &Filter) -> Result<Value, CliError> {
    let mut m = Map::new();
    if !f.ids.is_empty() {
        m.insert("ids".into(), json!(f.ids));
    }
    if let Some(p) = &f.prefix {
        m.insert("id_prefix".into(), json!(p));
    }
    let labels = super::parse_labels(&f.labels)?;
    if !labels.is_empty() {
        m.insert("labels".into(), json!(labels));
    }
    if !f.statuses.is_empty() {
        m.insert("statuses".into(), json!(f.statuses));
    }
    if let Some(s) = &f.failed_step {
        m.insert("failed_step".into(), json!(s));
    }
    if let Some(c) = &f.error_class {
        m.insert("error_class".into(), json!(c));
    }
    if let Some(t) = &f.since {
        m.insert("created_after".into(), json!(time_arg("--since", t)?));
    }
    if let Some(t) = &f.until {
        m.insert("created_before".into(), json!(time_arg("--until", t)?));
    }
    if m.is_empty() {
        return Err(CliError::local(
            "give at least one filter (--id, --prefix, --label, --status, --failed-step, --error-class, --since, --until)",
        ));
    }
    Ok(Value::Object(m))
}

/// An RFC 3339 time as given, or a duration before now (`2h`, `PT30M`).
fn time_arg(flag: &str, text: &str) -> Result<String, CliError> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(t
            .with_timezone(&chrono::Utc)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    }
    let ago = tartan_core::duration::parse_duration_str(text, tartan_core::duration::DurationKind::Delay)
        .map_err(|e| {
            CliError::local(format!(
                "{flag} {text:?}: neither an RFC 3339 time nor a duration ({e})"
            ))
        })?;
    let ago = chrono::Duration::from_std(ago)
        .map_err(|_| CliError::local(format!("{flag} {text:?}: too long ago")))?;
    let at = chrono::Utc::now()
        .checked_sub_signed(ago)
        .ok_or_else(|| CliError::local(format!("{flag} {text:?}: too long ago")))?;
    Ok(at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}
