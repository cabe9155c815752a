//! `tartan health`: `GET /health` and `GET /ready`, then the cluster
//! (`GET /engine/health`): the engines and the steps that are not healthy;
//! exits non-zero when the server is not ready.

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
    // The cluster needs a token where the API asks for one; without it the
    // rest still says whether the server is up.
    let cluster = client
        .send_raw(Method::GET, client.url(&["engine", "health"]), None, timeout)
        .await
        .ok()
        .filter(|(status, _)| status.is_success())
        .map(|(_, body)| body);
    if args.conn.output == Format::Json {
        output::json(&json!({"health": health, "ready": ready, "cluster": cluster}));
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
        if let Some(cluster) = &cluster {
            print_cluster(cluster);
        }
    }
    Ok(if is_ready { exit::OK } else { exit::ERROR })
}

/// The engines with their heartbeats, then each step that is not healthy
/// with why (every node shows the same health).
fn print_cluster(cluster: &serde_json::Value) {
    let Some(nodes) = cluster["nodes"].as_object() else {
        return;
    };
    println!();
    let mut engines = Table::new(&["ENGINE", "LAST SEEN", "STARTED"]);
    for (id, node) in nodes {
        engines.row(vec![
            id.clone(),
            output::cell(&node["last_seen"]),
            output::cell(&node["started_at"]),
        ]);
    }
    engines.print();
    let Some((_, first)) = nodes.iter().next() else {
        return;
    };
    let Some(steps) = first["health"].as_object() else {
        return;
    };
    let mut table = Table::new(&["STEP", "HEALTH", "ERROR", "CHECKED BY"]);
    let mut shown = 0;
    for (id, h) in steps {
        if h["status"] == "healthy" {
            continue;
        }
        shown += 1;
        table.row(vec![
            id.clone(),
            output::cell(&h["status"]),
            output::cell(&h["error"]),
            output::cell(&h["checked_by"]),
        ]);
    }
    println!();
    if shown == 0 {
        match steps.len() {
            1 => println!("the one step is healthy"),
            n => println!("every step is healthy ({n} steps)"),
        }
    } else {
        table.print();
    }
}
