//! `tartan lane ls|pause|resume`: the lanes' state, and an operator's
//! pause (docs/lanes.md, "Operating").

use serde::Deserialize;
use tartan_server::api::lanes::{LaneList, LanePause, LaneShown};

use super::client::{exit, CliError};
use super::output::{self, Format, Table};
use super::Conn;

#[derive(Debug, clap::Args)]
pub struct LaneCmd {
    #[command(flatten)]
    conn: Conn,
    #[command(subcommand)]
    command: LaneSub,
}

#[derive(Debug, clap::Subcommand)]
enum LaneSub {
    /// List every lane: its limits, slots, pause and breaker.
    #[command(alias = "list")]
    Ls,
    /// Pause a lane in every engine: no call of it starts until resumed.
    Pause {
        /// The lane: `step:<step id>` or `host:<host[:port]>`.
        id: String,
        /// For how long (`30s`, `5m`); without it, until resumed.
        #[arg(long = "for")]
        for_: Option<String>,
    },
    /// End a lane's pause and close its breaker.
    Resume {
        /// The lane.
        id: String,
    },
}

pub async fn run(cmd: LaneCmd) -> Result<u8, CliError> {
    let client = cmd.conn.client()?;
    let lanes = match cmd.command {
        LaneSub::Ls => {
            let list: LaneList = client.get_as(client.url(&["engine", "lanes"])).await?;
            list.lanes
        }
        LaneSub::Pause { id, for_ } => {
            let body = LanePause {
                for_: for_.map(serde_json::Value::String),
            };
            let lane: LaneShown = client.post_as(&["engine", "lanes", &id, "pause"], &body).await?;
            vec![lane]
        }
        LaneSub::Resume { id } => {
            let lane: LaneShown = client
                .post_as(&["engine", "lanes", &id, "resume"], &serde_json::json!({}))
                .await?;
            vec![lane]
        }
    };
    if cmd.conn.output == Format::Json {
        output::json(&LaneList {
            count: lanes.len(),
            lanes,
        });
        return Ok(exit::OK);
    }
    let mut table = Table::new(&["LANE", "LIMITS", "SLOTS", "HERE", "PAUSED", "BREAKER"]);
    for l in &lanes {
        let limits: Limits = client.typed(l.limits.clone())?;
        let paused = match (l.paused, &l.paused_until) {
            (false, _) => "-".to_string(),
            (true, Some(until)) => format!("until {}", output::maybe_time(&Some(*until))),
            (true, None) => "until resumed".to_string(),
        };
        table.row(vec![
            l.id.clone(),
            limits_text(&limits),
            format!("{}/{}", l.slots_held, l.slots_wanted),
            l.here
                .as_ref()
                .map(|h| format!("{} running, {} waiting", h.in_flight, h.waiting))
                .unwrap_or_else(|| "-".into()),
            paused,
            l.breaker
                .as_ref()
                .map(|b| format!("{} ({} failures)", b.state, b.failures))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    table.print();
    Ok(exit::OK)
}

/// A lane's `limits` as `LaneShown` holds them: the JSON of
/// `tartan_core::lanes::LaneLimits::to_json`, which no type describes.
#[derive(Deserialize)]
struct Limits {
    concurrency: Option<u32>,
    rate: Option<String>,
    /// Written with `rate`.
    burst: Option<u32>,
    breaker: Option<Breaker>,
}

#[derive(Deserialize)]
struct Breaker {
    failures: u32,
    /// In ms.
    cool_down: u64,
}

/// `concurrency 2, 10/s burst 5, breaker 5 in a row / 30s`.
fn limits_text(limits: &Limits) -> String {
    let mut parts = Vec::new();
    if let Some(n) = limits.concurrency {
        parts.push(format!("concurrency {n}"));
    }
    if let Some(rate) = &limits.rate {
        // 1, the core's default, when absent.
        parts.push(format!("{rate} burst {}", limits.burst.unwrap_or(1)));
    }
    if let Some(b) = &limits.breaker {
        parts.push(format!(
            "breaker {} in a row / {}",
            b.failures,
            output::seconds(b.cool_down)
        ));
    }
    parts.join(", ")
}
