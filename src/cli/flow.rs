//! `tartan flow start|ls|get|events|cancel|retry`.

use reqwest::Method;
use serde_json::json;

use std::collections::BTreeMap;

use tartan_core::flow::{FlowState, FlowStatus};
use tartan_server::api::answers::{
    FlowAnswer, FlowCancelled, FlowPage, FlowResumed, FlowRetried, FlowSummary,
};
use tartan_server::api::requests::{QueryRequest, ResumeBody, RetryBody};

use super::client::{exit, CliError, Client};
use super::output::{self, Format, Table};
use super::watch::{self, Mode};
use super::Conn;

/// The most flows one `flow ls` lists: ten pages of the server's largest.
const MAX_LIST: usize = 10_000;

#[derive(Debug, clap::Args)]
pub struct FlowCmd {
    #[command(flatten)]
    conn: Conn,
    #[command(subcommand)]
    command: FlowSub,
}

#[derive(Debug, clap::Args)]
pub struct WatchFlags {
    /// Follow the flow live until it ends; the exit code tells how it ended.
    #[arg(long)]
    pub watch: bool,
    /// One line per event even on a terminal.
    #[arg(long)]
    pub plain: bool,
}

#[derive(Debug, clap::Subcommand)]
enum FlowSub {
    /// Start a flow; prints its id (generated when --id is absent).
    Start {
        /// The goal steps.
        #[arg(required = true)]
        goals: Vec<String>,
        /// An initial value, name=value (repeatable; JSON when it parses, else text; one starting with {, [ or " must be JSON).
        #[arg(long = "init", value_name = "NAME=VALUE")]
        init: Vec<String>,
        /// The flow id.
        #[arg(long)]
        id: Option<String>,
        /// A label, key=value (repeatable).
        #[arg(long = "label", value_name = "KEY=VALUE")]
        labels: Vec<String>,
        /// Start no step before this time (RFC 3339), e.g. 2027-01-01T09:00:00Z.
        #[arg(long = "at", value_name = "TIME", conflicts_with = "start_in")]
        start_at: Option<String>,
        /// Start no step before this duration has passed, e.g. 10m or PT1H.
        #[arg(long = "in", value_name = "DURATION")]
        start_in: Option<String>,
        /// A concurrency key: at most --limit flows with it run at once, the
        /// others wait their turn (docs/concurrency.md).
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
        /// How many flows of --key may run at once.
        #[arg(long, value_name = "N", requires = "key", default_value_t = 1)]
        limit: u32,
        /// Higher goes first where flows and calls wait (-1000 to 1000; each
        /// point is worth a second of waiting).
        #[arg(long, value_name = "N", allow_negative_numbers = true)]
        priority: Option<i32>,
        #[command(flatten)]
        watch: WatchFlags,
    },
    /// List flows, newest first.
    #[command(alias = "list")]
    Ls {
        /// Only flows in this status (repeatable): active, completed, failed, cancelled.
        #[arg(long = "status")]
        statuses: Vec<String>,
        /// Only flows whose id starts with this.
        #[arg(long)]
        prefix: Option<String>,
        /// Only flows carrying this label, key=value (repeatable).
        #[arg(long = "label", value_name = "KEY=VALUE")]
        labels: Vec<String>,
        /// At most this many flows.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=MAX_LIST as i64))]
        limit: u32,
    },
    /// Show a flow's state: its steps, attempts and result.
    Get { id: String },
    /// A flow's events; with --follow, live until it ends.
    Events {
        id: String,
        /// Keep printing events as they happen, until the flow ends.
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Watch a flow live until it ends.
    Watch {
        id: String,
        /// One line per event even on a terminal.
        #[arg(long)]
        plain: bool,
    },
    /// Cancel an active flow.
    Cancel {
        id: String,
        /// Do not run the compensations of its succeeded work.
        #[arg(long)]
        no_compensate: bool,
    },
    /// Run a failed or cancelled flow again from where it stopped.
    Retry {
        id: String,
        /// Keep the attempt counts (by default they start again from zero).
        #[arg(long)]
        keep_attempts: bool,
        #[command(flatten)]
        watch: WatchFlags,
    },
    /// Resume an active flow's parked work items (docs/retries.md, "Parking").
    Resume {
        id: String,
        /// Count their attempts from 1 again, with a new retry budget (by
        /// default each gets one more attempt).
        #[arg(long)]
        reset_attempts: bool,
    },
}

pub async fn run(cmd: FlowCmd) -> Result<u8, CliError> {
    let client = cmd.conn.client()?;
    let format = cmd.conn.output;
    match cmd.command {
        FlowSub::Start {
            goals,
            init,
            id,
            labels,
            start_at,
            start_in,
            key,
            limit,
            priority,
            watch,
        } => {
            let id = id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            let mut body = json!({"id": id, "goals": goals, "init": super::parse_init(&init)?});
            let labels = super::parse_labels(&labels)?;
            if !labels.is_empty() {
                body["labels"] = json!(labels);
            }
            // Checked by the server, which names a bad one.
            if let Some(at) = start_at {
                body["start_at"] = json!(at);
            }
            if let Some(within) = start_in {
                body["start_in"] = json!(within);
            }
            if let Some(key) = key {
                body["concurrency"] = json!({"key": key, "limit": limit});
            }
            if let Some(priority) = priority {
                body["priority"] = json!(priority);
            }
            let answer: FlowAnswer = client.post_as(&["engine", "flow"], &body).await?;
            let id = answer.flow_id.clone();
            announce(&answer, format, watch.watch, &format!("started flow {id}"));
            if watch.watch {
                return watch::watch(&client, &id, Mode::pick(watch.plain, format)).await;
            }
            Ok(exit::OK)
        }
        FlowSub::Ls {
            statuses,
            prefix,
            labels,
            limit,
        } => {
            let labels = super::parse_labels(&labels)?;
            let flows = list(&client, &statuses, prefix, labels, limit as usize).await?;
            if format == Format::Json {
                output::json(&json!({"flows": flows, "count": flows.len()}));
                return Ok(exit::OK);
            }
            let mut table = Table::new(&["ID", "STATUS", "UPDATED", "LABELS", "ERROR"]);
            for f in &flows {
                table.row(vec![
                    f.id.clone(),
                    f.status.as_str().into(),
                    // The query's last change (a step's result, a retry
                    // scheduled), not `timestamp`: that is Argyll's, the
                    // start of a flow still running.
                    output::time(f.last_updated.as_ref().unwrap_or(&f.timestamp)),
                    output::pairs(&f.labels),
                    super::client::shorten(&output::one_line(f.error.as_deref().unwrap_or_default()), 100),
                ]);
            }
            table.print();
            Ok(exit::OK)
        }
        FlowSub::Get { id } => {
            let body = client.get(&["engine", "flow", &id]).await?;
            if format == Format::Json {
                output::json(&body);
            } else {
                let state: FlowState = client.typed(body)?;
                output::out(&describe(&state));
                // Its place in its key's line, while it waits for its turn.
                if state.queued && state.status == tartan_core::flow::FlowStatus::Active {
                    if let Ok(turn) = client.get(&["engine", "flow", &id, "turn"]).await {
                        let turn: tartan_server::api::turns::FlowTurnAnswer = client.typed(turn)?;
                        output::line(&format!(
                            "waiting for its turn on key {}: place {} of {} waiting, {} of {} running",
                            output::one_line(&turn.key),
                            turn.place,
                            turn.waiting,
                            turn.running,
                            turn.limit
                        ));
                    }
                }
            }
            Ok(exit::OK)
        }
        FlowSub::Events { id, follow } => {
            if follow {
                let mode = if format == Format::Json {
                    Mode::JsonLines
                } else {
                    Mode::Plain
                };
                return watch::watch(&client, &id, mode).await;
            }
            let events = watch::history(&client, &id, 0).await?;
            if format == Format::Json {
                output::json(&json!({"count": events.len(), "events": events}));
            } else {
                let mut view = super::view::View::new(&id);
                for e in events {
                    output::line(&view.apply(&client.typed(e)?));
                }
            }
            Ok(exit::OK)
        }
        FlowSub::Watch { id, plain } => watch::watch(&client, &id, Mode::pick(plain, format)).await,
        FlowSub::Cancel { id, no_compensate } => {
            let mut url = client.url(&["engine", "flow", &id, "cancel"]);
            if no_compensate {
                url.set_query(Some("compensate=false"));
            }
            let answer = client.send(Method::POST, url, Some(&json!({}))).await?;
            let answer: FlowCancelled = client.typed(answer)?;
            if format == Format::Json {
                output::json(&answer);
            } else {
                output::line(&format!("cancelled flow {id}"));
            }
            Ok(exit::OK)
        }
        FlowSub::Retry {
            id,
            keep_attempts,
            watch,
        } => {
            // What happened before the retry is not printed again.
            let before = if watch.watch {
                watch::history(&client, &id, 0)
                    .await?
                    .pop()
                    .map(|e| client.typed(e))
                    .transpose()?
                    .map_or(0, |e| watch::sequence(&e))
            } else {
                0
            };
            let retry = RetryBody {
                reset_attempts: !keep_attempts,
            };
            let answer: FlowRetried = client.post_as(&["engine", "flow", &id, "retry"], &retry).await?;
            announce(&answer, format, watch.watch, &format!("retrying flow {id}"));
            if watch.watch {
                return watch::watch_after(&client, &id, Mode::pick(watch.plain, format), before).await;
            }
            Ok(exit::OK)
        }
        FlowSub::Resume { id, reset_attempts } => {
            let body = ResumeBody { reset_attempts };
            let answer: FlowResumed = client.post_as(&["engine", "flow", &id, "resume"], &body).await?;
            announce(
                &answer,
                format,
                false,
                &format!("flow {id}: {} parked work items resumed", answer.resumed),
            );
            Ok(exit::OK)
        }
    }
}

/// The answer to a start or a retry: pretty JSON, or one JSON line when the
/// events follow as JSON lines, or `text`.
fn announce(answer: &impl serde::Serialize, format: Format, watching: bool, text: &str) {
    match (format, watching) {
        (Format::Json, false) => output::json(answer),
        (Format::Json, true) => output::json_line(answer),
        (Format::Table, _) => output::line(text),
    }
}

/// Flows matching the filter, following `next_cursor` up to `limit`.
async fn list(
    client: &Client,
    statuses: &[String],
    prefix: Option<String>,
    labels: BTreeMap<String, String>,
    limit: usize,
) -> Result<Vec<FlowSummary>, CliError> {
    let mut flows = Vec::new();
    let mut query = QueryRequest {
        statuses: statuses.to_vec(),
        id_prefix: prefix.unwrap_or_default(),
        labels,
        sort: "recent_desc".into(),
        total: Some(false),
        ..QueryRequest::default()
    };
    while flows.len() < limit {
        query.limit = i64::try_from((limit - flows.len()).min(1000)).unwrap_or(1000);
        let page: FlowPage = client.post_as(&["engine", "flow", "query"], &query).await?;
        let empty = page.flows.is_empty();
        flows.extend(page.flows);
        match page.next_cursor {
            Some(cursor) if !empty => query.cursor = cursor,
            _ => break,
        }
    }
    flows.truncate(limit);
    Ok(flows)
}

/// A flow's state for people: what it is, each step with its attempts, and
/// its result or error.
pub fn describe(state: &FlowState) -> String {
    let mut text = String::new();
    let goals: Vec<String> = state.plan.goals.iter().map(|g| output::one_line(g)).collect();
    let mut head = Table::new(&["FIELD", "VALUE"]);
    for (key, value) in [
        ("id", output::one_line(&state.id)),
        ("status", state.status.as_str().into()),
        ("created_at", output::time(&state.created_at)),
        ("completed_at", output::maybe_time(&state.completed_at)),
        ("deactivated_at", output::maybe_time(&state.deactivated_at)),
        ("goals", goals.join(", ")),
    ] {
        head.row(vec![key.into(), value]);
    }
    if let Some(at) = &state.starts_at {
        head.row(vec!["starts_at".into(), output::time(at)]);
    }
    if let Some(c) = &state.concurrency {
        let waits = if state.queued {
            " (waiting for its turn)"
        } else {
            ""
        };
        head.row(vec![
            "concurrency".into(),
            format!("{} (limit {}){waits}", output::one_line(&c.key), c.limit),
        ]);
    }
    if state.priority != 0 {
        head.row(vec!["priority".into(), state.priority.to_string()]);
    }
    if !state.labels.is_empty() {
        head.row(vec!["labels".into(), output::pairs(&state.labels)]);
    }
    if let Some(error) = &state.error {
        head.row(vec!["error".into(), output::one_line(error)]);
    }
    text.push_str(&head.render());
    text.push('\n');
    let mut steps = Table::new(&["STEP", "STATUS", "ITEMS", "ATTEMPTS", "ERROR"]);
    for id in super::plan::order(&state.plan) {
        // A step of the plan has an execution from the flow's start.
        let Some(exec) = state.executions.get(&id) else {
            steps.row(vec![id, String::new(), "0".into(), "0".into(), String::new()]);
            continue;
        };
        let attempts: usize = exec.work_items.values().map(|w| w.attempts.len()).sum();
        let error = exec.error.as_deref().or(exec.reason.as_deref());
        let error = error.map(output::one_line).unwrap_or_default();
        steps.row(vec![
            id,
            exec.status.as_str().into(),
            exec.work_items.len().to_string(),
            attempts.to_string(),
            super::client::shorten(&error, 120),
        ]);
    }
    text.push_str(&steps.render());
    if state.status == FlowStatus::Completed {
        text.push_str(&format!(
            "\nresult: {}\n",
            output::escape(&output::result_of(state))
        ));
    }
    text
}
