//! `tartan health`: `GET /health` and `GET /ready`; exits non-zero when the
//! server is not ready.

use reqwest::Method;
use serde_json::json;

use super::client::{exit, CliError};
use super::output::{self, Format, Table};
use super::Conn;

#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    #[command(flatten)]
    conn: Conn,
}

pub async fn run(args: HealthArgs) -> Result<u8, CliError> {
    let client = args.conn.client()?;
    let timeout = std::time::Duration::from_secs(30);
    let (health_status, health) = client
        .send_raw(Method::GET, client.url(&["health"]), None, timeout)
        .await?;
    let (ready_status, ready) = client
        .send_raw(Method::GET, client.url(&["ready"]), None, timeout)
        .await?;
    // A 200 from something that is not Tartan (a proxy's page) is not "ready".
    let is_ready = health_status.is_success() && ready_status.is_success() && ready["status"] == "ready";
    if args.conn.output == Format::Json {
        output::json(&json!({"health": health, "ready": ready}));
    } else {
        let d = &health["details"];
        let mut table = Table::new(&["CHECK", "VALUE"]);
        table.row(vec!["server".into(), client.server()]);
        table.row(vec!["health".into(), output::cell(&health["status"])]);
        let ready_text = if ready_status.is_success() {
            output::cell(&ready["status"])
        } else {
            let why = ready
                .get("detail")
                .map(output::cell)
                .unwrap_or_else(|| ready_status.to_string());
            format!("not ready: {why}")
        };
        table.row(vec!["ready".into(), ready_text]);
        for key in [
            "version",
            "store",
            "node_id",
            "active_flows",
            "calls_in_flight",
            "calls_queued",
        ] {
            if !d[key].is_null() {
                table.row(vec![key.into(), output::cell(&d[key])]);
            }
        }
        table.print();
    }
    Ok(if is_ready { exit::OK } else { exit::ERROR })
}
