//! `tartan schedule ls|get|apply|pause|resume|trigger|rm`: flows started on
//! a clock (docs/schedules.md).

use std::path::PathBuf;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tartan_server::api::schedules::{ScheduleList, ScheduleShown, TriggerAnswer};

use super::client::{exit, problem, CliError, Client};
use super::files;
use super::output::{self, Format, Table};
use super::Conn;

#[derive(Debug, clap::Args)]
pub struct ScheduleCmd {
    #[command(flatten)]
    conn: Conn,
    #[command(subcommand)]
    command: ScheduleSub,
}

#[derive(Debug, clap::Subcommand)]
enum ScheduleSub {
    /// List every schedule: when it fires next, its last fire.
    #[command(alias = "list")]
    Ls,
    /// Show one schedule and its latest fires.
    Get { id: String },
    /// Create schedules from files, replacing those that changed.
    Apply {
        /// A JSON or YAML file (one schedule or a list), or a directory
        /// whose *.json, *.yaml and *.yml files are applied in name order.
        #[arg(short = 'f', long = "file", required = true)]
        files: Vec<PathBuf>,
    },
    /// Pause a schedule: nothing fires until it is resumed.
    Pause { id: String },
    /// Resume a schedule: it fires from its next time after now.
    Resume { id: String },
    /// Fire a schedule now (its overlap rule applies).
    Trigger { id: String },
    /// Delete a schedule (its flows stay).
    #[command(alias = "delete")]
    Rm { id: String },
}

pub async fn run(cmd: ScheduleCmd) -> Result<u8, CliError> {
    let client = cmd.conn.client()?;
    let format = cmd.conn.output;
    let listed = matches!(cmd.command, ScheduleSub::Ls);
    let schedules = match cmd.command {
        ScheduleSub::Apply { files } => return apply(&client, &files, format).await,
        ScheduleSub::Ls => {
            let list: ScheduleList = client.get_as(client.url(&["engine", "schedule"])).await?;
            list.schedules
        }
        ScheduleSub::Get { id } => {
            let one: ScheduleShown = client.get_as(client.url(&["engine", "schedule", &id])).await?;
            if format == Format::Json {
                output::json(&one);
            } else {
                print!("{}", describe(&one));
            }
            return Ok(exit::OK);
        }
        ScheduleSub::Pause { id } => vec![paused(&client, &id, "pause", format).await?],
        ScheduleSub::Resume { id } => vec![paused(&client, &id, "resume", format).await?],
        ScheduleSub::Trigger { id } => {
            let done: TriggerAnswer = client
                .post_as(&["engine", "schedule", &id, "trigger"], &json!({}))
                .await?;
            if format == Format::Json {
                output::json(&done);
            } else {
                let what = match (&done.flow_id, &done.detail) {
                    (Some(flow), _) => format!("{}: flow {flow}", done.outcome),
                    (None, Some(why)) => format!("{}: {}", done.outcome, output::one_line(why)),
                    (None, None) => done.outcome.clone(),
                };
                output::line(&format!("fired {id}: {what}"));
            }
            return Ok(exit::OK);
        }
        ScheduleSub::Rm { id } => {
            client
                .send(Method::DELETE, client.url(&["engine", "schedule", &id]), None)
                .await?;
            if format == Format::Json {
                output::json(&json!({"id": id, "deleted": true}));
            } else {
                output::line(&format!("deleted schedule {id}"));
            }
            return Ok(exit::OK);
        }
    };
    if format == Format::Json {
        // A pause or resume printed its one schedule.
        if schedules.len() == 1 && !listed {
            return Ok(exit::OK);
        }
        output::json(&ScheduleList {
            count: schedules.len(),
            schedules,
        });
        return Ok(exit::OK);
    }
    let mut table = Table::new(&["ID", "WHEN", "NEXT", "LAST", "FLOW", "PAUSED"]);
    for s in &schedules {
        table.row(vec![
            output::one_line(&s.id),
            when(s),
            s.next.first().map(output::time).unwrap_or_else(|| "-".into()),
            s.last
                .as_ref()
                .map(|l| format!("{} {}", output::time(&l.at), l.outcome))
                .unwrap_or_else(|| "-".into()),
            s.last
                .as_ref()
                .and_then(|l| {
                    l.flow_id.as_ref().map(|f| {
                        format!(
                            "{} ({})",
                            output::one_line(f),
                            l.flow_status.as_deref().unwrap_or("deleted")
                        )
                    })
                })
                .unwrap_or_else(|| "-".into()),
            if s.paused { "yes" } else { "-" }.into(),
        ]);
    }
    table.print();
    Ok(exit::OK)
}

/// `POST /engine/schedule/{id}/pause` or `/resume` (`act`); printed at
/// once as JSON, else shown as `ls` shows it.
async fn paused(client: &Client, id: &str, act: &str, format: Format) -> Result<ScheduleShown, CliError> {
    let one: ScheduleShown = client
        .post_as(&["engine", "schedule", id, act], &json!({}))
        .await?;
    if format == Format::Json {
        output::json(&one);
    }
    Ok(one)
}

/// `cron 0 3 * * * (Europe/Berlin)`, `every 15m`, `at <time>`.
fn when(s: &ScheduleShown) -> String {
    let spec = &s.spec;
    let zone = spec
        .timezone
        .as_deref()
        .map(|z| format!(" ({})", output::one_line(z)))
        .unwrap_or_default();
    let shown = |v: &Value| match v {
        Value::String(text) => output::one_line(text),
        other => output::one_line(&other.to_string()),
    };
    match (&spec.cron, &spec.every, &spec.at) {
        (Some(cron), _, _) => format!("cron {}{zone}", output::one_line(cron)),
        (_, Some(every), _) => format!("every {}", shown(every)),
        (_, _, Some(at)) => format!("at {}", shown(at)),
        _ => "-".into(),
    }
}

/// One schedule for people: its settings, next times and latest fires.
fn describe(s: &ScheduleShown) -> String {
    let mut head = Table::new(&["FIELD", "VALUE"]);
    head.row(vec!["id".into(), output::one_line(&s.id)]);
    head.row(vec!["when".into(), when(s)]);
    head.row(vec![
        "goals".into(),
        output::one_line(&s.spec.flow.goals.join(", ")),
    ]);
    head.row(vec!["paused".into(), s.paused.to_string()]);
    let next: Vec<String> = s.next.iter().map(output::time).collect();
    head.row(vec![
        "next".into(),
        if next.is_empty() {
            "-".into()
        } else {
            next.join(", ")
        },
    ]);
    let mut text = head.render();
    text.push('\n');
    let mut fires = Table::new(&["FIRE", "OUTCOME", "FLOW", "DETAIL"]);
    for f in &s.fires {
        fires.row(vec![
            output::time(&f.at),
            f.outcome.clone(),
            f.flow_id
                .as_deref()
                .map(output::one_line)
                .unwrap_or_else(|| "-".into()),
            f.detail.as_deref().map(output::one_line).unwrap_or_default(),
        ]);
    }
    text.push_str(&fires.render());
    text
}

/// Create each schedule, or replace it when the stored one differs. Every
/// file is read before anything is sent, so a bad file changes nothing.
async fn apply(client: &Client, paths: &[PathBuf], format: Format) -> Result<u8, CliError> {
    let mut all = Vec::new();
    for file in files::expand(paths)? {
        for (id, schedule) in files::read_named(&file, "schedule")? {
            all.push((file.display().to_string(), id, schedule));
        }
    }
    let mut table = Table::new(&["SCHEDULE", "RESULT", "FILE"]);
    let mut results = Vec::new();
    let mut failed = false;
    for (file, id, schedule) in &all {
        match apply_one(client, id, schedule).await {
            Ok((stored, result)) => {
                table.row(vec![stored.clone(), result.into(), file.clone()]);
                results.push(json!({"id": stored, "result": result, "file": file}));
            }
            Err(e @ CliError::Unreachable { .. }) => return Err(e),
            Err(e) => {
                table.row(vec![output::one_line(id), "error".into(), file.clone()]);
                eprintln!(
                    "{} ({}): {}",
                    output::escape(id),
                    output::escape(file),
                    e.message()
                );
                results.push(json!({"id": id, "result": "error", "file": file, "error": e.message()}));
                failed = true;
            }
        }
    }
    if format == Format::Json {
        output::json(&json!({"count": results.len(), "schedules": results}));
    } else {
        table.print();
    }
    Ok(if failed { exit::ERROR } else { exit::OK })
}

async fn apply_one(client: &Client, id: &str, schedule: &Value) -> Result<(String, &'static str), CliError> {
    let timeout = std::time::Duration::from_secs(60);
    let url = client.url(&["engine", "schedule"]);
    let (status, body) = client
        .send_raw(Method::POST, url, Some(schedule), timeout)
        .await?;
    match status {
        StatusCode::CREATED => Ok((client.typed::<ScheduleShown>(body)?.id, "created")),
        StatusCode::CONFLICT => {
            // The id as stored: the server sanitises it.
            let stored: ScheduleShown = client.get_as(client.url(&["engine", "schedule", id])).await?;
            let asked: Value = client
                .typed::<tartan_core::schedule::ScheduleRequest>(schedule.clone())
                .map(|r| json!(r))?;
            let mut kept = json!(stored.spec);
            // The id may be written differently in the file.
            kept["id"] = asked["id"].clone();
            if kept == asked {
                return Ok((stored.id, "unchanged"));
            }
            let body = client
                .send(
                    Method::PUT,
                    client.url(&["engine", "schedule", &stored.id]),
                    Some(schedule),
                )
                .await?;
            Ok((client.typed::<ScheduleShown>(body)?.id, "updated"))
        }
        _ => Err(problem(status, &body)),
    }
}
