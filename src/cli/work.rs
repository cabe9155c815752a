//! `tartan work ls`: work items across flows (`GET /engine/work`).

use reqwest::Method;
use serde_json::{json, Value};

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
        /// Only items in this status (pending, active, not_completed, succeeded, failed, ...).
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
}

pub async fn run(cmd: WorkCmd) -> Result<u8, CliError> {
    let client = cmd.conn.client()?;
    let WorkSub::Ls {
        status,
        step,
        flow,
        limit,
    } = cmd.command;
    let limit = limit as usize;
    let mut items: Vec<Value> = Vec::new();
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
        let page = client.send(Method::GET, url, None).await?;
        let got = page["work_items"].as_array().cloned().unwrap_or_default();
        let empty = got.is_empty();
        items.extend(got);
        cursor = page["next_cursor"].as_str().map(str::to_string);
        if cursor.is_none() || empty {
            break;
        }
    }
    items.truncate(limit);
    if cmd.conn.output == Format::Json {
        output::json(&json!({"count": items.len(), "work_items": items}));
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
            output::s(w, "flow_id").into(),
            output::s(w, "step_id").into(),
            output::s(w, "token").into(),
            output::s(w, "status").into(),
            output::cell(&w["attempt"]),
            output::s(w, "next_retry_at").into(),
            shorten(&output::one_line(output::s(w, "last_error")), 100),
        ]);
    }
    table.print();
    Ok(exit::OK)
}
