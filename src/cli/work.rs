//! `tartan work ls`: work items across flows (`GET /engine/work`);
//! `tartan work retry`: an item's retry started now
//! (`POST /engine/flow/{id}/work/{token}/retry`).

use tartan_server::api::answers::{WorkItem, WorkList, WorkRetried};

use super::client::{exit, shorten, CliError};
use super::output::{self, Format, Table};
use super::Conn;

#[derive(Debug, clap::Args)]
pub struct WorkCmd {
    #[command(flatten)]
    conn: Conn,
    #[command(subcommand)]
    command: WorkSub,
}

#[derive(Debug, clap::Subcommand)]
enum WorkSub {
    /// List work items, following the server's pages up to --limit.
    #[command(alias = "list")]
    Ls {
        /// Only items in this status (pending, which includes those waiting for a retry, active, succeeded, failed, ...).
        #[arg(long)]
        status: Option<String>,
        /// Only items of this step.
        #[arg(long)]
        step: Option<String>,
        /// Only items of this flow.
        #[arg(long)]
        flow: Option<String>,
        /// At most this many items.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        limit: u32,
    },
    /// Start an item's retry now instead of when it is due (docs/retries.md, "Retry now").
    Retry {
        /// The flow's id.
        flow: String,
        /// The work item's token (`tartan work ls --flow FLOW` lists them).
        token: String,
    },
}

pub async fn run(cmd: WorkCmd) -> Result<u8, CliError> {
    let client = cmd.conn.client()?;
    let (status, step, flow, limit) = match cmd.command {
        WorkSub::Ls {
            status,
            step,
            flow,
            limit,
        } => (status, step, flow, limit),
        WorkSub::Retry { flow, token } => {
            let path = ["engine", "flow", &flow, "work", &token, "retry"];
            let answer: WorkRetried = client.post_as(&path, &serde_json::json!({})).await?;
            if cmd.conn.output == Format::Json {
                output::json(&answer);
            } else {
                let attempt = answer
                    .attempt
                    .map(|a| format!(": attempt {a}"))
                    .unwrap_or_default();
                output::line(&format!(
                    "flow {flow}: step {} retried now ({}{attempt}; it was due {})",
                    answer.step_id,
                    answer.status,
                    output::time(&answer.was_due_at)
                ));
            }
            return Ok(exit::OK);
        }
    };
    let limit = limit as usize;
    let mut items: Vec<WorkItem> = Vec::new();
    let mut cursor: Option<String> = None;
    while items.len() < limit {
        let mut url = client.url(&["engine", "work"]);
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("limit", &(limit - items.len()).min(1000).to_string());
            for (k, v) in [
                ("status", &status),
                ("step", &step),
                ("flow_id", &flow),
                ("cursor", &cursor),
            ] {
                if let Some(v) = v {
                    q.append_pair(k, v);
                }
            }
        }
        let page: WorkList = client.get_as(url).await?;
        let empty = page.work_items.is_empty();
        items.extend(page.work_items);
        cursor = page.next_cursor;
        if cursor.is_none() || empty {
            break;
        }
    }
    items.truncate(limit);
    if cmd.conn.output == Format::Json {
        output::json(&WorkList {
            count: items.len(),
            work_items: items,
            next_cursor: None,
        });
        return Ok(exit::OK);
    }
    let mut table = Table::new(&[
        "FLOW",
        "STEP",
        "TOKEN",
        "STATUS",
        "ATTEMPT",
        "NEXT RETRY",
        "ERROR",
    ]);
    for w in &items {
        table.row(vec![
            w.flow_id.clone(),
            w.step_id.clone(),
            w.token.clone(),
            w.status.as_str().into(),
            w.attempt.to_string(),
            output::maybe_time(&w.next_retry_at),
            shorten(
                &output::one_line(w.last_error.as_deref().unwrap_or_default()),
                100,
            ),
        ]);
    }
    table.print();
    Ok(exit::OK)
}
