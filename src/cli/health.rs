//! `tartan health`: `GET /health` and `GET /ready`, then the cluster
//! (`GET /engine/health`): the engines and the steps that are not healthy;
//! exits non-zero when the server is not ready.

use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Value};
use tartan_server::api::answers::{ClusterState, Health, Ready};

use super::client::{exit, CliError, ProblemText};
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
    // Read as the API's types, but leniently: a 200 from something that is
    // not Tartan (a proxy's page) is not "ready", an exit 1, not an error.
    let ready_answer = Ready::deserialize(&ready).ok();
    let is_ready = health_status.is_success()
        && ready_status.is_success()
        && ready_answer.as_ref().is_some_and(|r| r.status == "ready");
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
        let ready_text = if ready_status.is_success() {
            ready_answer
                .map(|r| output::one_line(&r.status))
                .unwrap_or_default()
        } else {
            let why = ProblemText::of(&ready).detail;
            let why = why.map_or_else(|| ready_status.to_string(), |d| output::one_line(&d));
            format!("not ready: {why}")
        };
        print_server(&client.server(), &health, ready_text);
        if let Some(cluster) = cluster.as_ref().and_then(|c| ClusterState::deserialize(c).ok()) {
            print_cluster(&cluster);
        }
    }
    Ok(if is_ready { exit::OK } else { exit::ERROR })
}

/// The server, its health and readiness, and what `GET /health` says of
/// the process (nothing of an answer that is not the API's).
fn print_server(server: &str, health: &Value, ready_text: String) {
    let health = Health::deserialize(health).ok();
    let mut table = Table::new(&["CHECK", "VALUE"]);
    table.row(vec!["server".into(), server.to_string()]);
    let status = health.as_ref().map(|h| output::one_line(&h.status));
    table.row(vec!["health".into(), status.unwrap_or_default()]);
    table.row(vec!["ready".into(), ready_text]);
    if let Some(d) = health.map(|h| h.details) {
        for (key, value) in [
            ("version", output::one_line(&d.version)),
            ("store", output::one_line(&d.store)),
            ("node_id", output::one_line(&d.node_id)),
            ("active_flows", d.active_flows.to_string()),
            ("calls_in_flight", d.calls_in_flight.to_string()),
            ("calls_queued", d.calls_queued.to_string()),
        ] {
            table.row(vec![key.into(), value]);
        }
    }
    table.print();
}

/// The engines with their heartbeats, then each step that is not healthy
/// with why (every node shows the same health).
fn print_cluster(cluster: &ClusterState) {
    println!();
    let mut engines = Table::new(&["ENGINE", "LAST SEEN", "STARTED"]);
    for (id, node) in &cluster.nodes {
        engines.row(vec![
            id.clone(),
            output::time(&node.last_seen),
            output::time(&node.started_at),
        ]);
    }
    engines.print();
    let Some(first) = cluster.nodes.values().next() else {
        return;
    };
    let steps = &first.health;
    let mut table = Table::new(&["STEP", "HEALTH", "ERROR", "CHECKED BY"]);
    let mut shown = 0;
    for (id, h) in steps {
        if h.status == "healthy" {
            continue;
        }
        shown += 1;
        table.row(vec![
            id.clone(),
            output::one_line(&h.status),
            output::maybe(&h.error),
            output::maybe(&h.checked_by),
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
