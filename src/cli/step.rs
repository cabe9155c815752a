//! `tartan step apply|ls|get|rm`.

use std::path::PathBuf;

use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};
use tartan_core::step::Step;
use tartan_server::api::answers::{ClusterState, StepList, StepSaved};

use super::client::{exit, problem, CliError, Client};
use super::files;
use super::output::{self, Format, Table};
use super::Conn;

#[derive(Debug, clap::Args)]
pub struct StepCmd {
    #[command(flatten)]
    conn: Conn,
    #[command(subcommand)]
    command: StepSub,
}

#[derive(Debug, clap::Subcommand)]
enum StepSub {
    /// Register steps from files, updating those whose definition changed.
    Apply {
        /// A JSON or YAML file (one step or a list), or a directory whose
        /// *.json, *.yaml and *.yml files are applied in name order.
        #[arg(short = 'f', long = "file", required = true)]
        files: Vec<PathBuf>,
    },
    /// List the registered steps.
    #[command(alias = "list")]
    Ls,
    /// Show one step.
    Get { id: String },
    /// Remove a step (running flows keep their copy).
    #[command(alias = "delete")]
    Rm { id: String },
}

pub async fn run(cmd: StepCmd) -> Result<u8, CliError> {
    let client = cmd.conn.client()?;
    let format = cmd.conn.output;
    match cmd.command {
        StepSub::Apply { files } => apply(&client, &files, format).await,
        StepSub::Ls => {
            let body: StepList = client.get_as(client.url(&["engine", "step"])).await?;
            if format == Format::Json {
                output::json(&body);
                return Ok(exit::OK);
            }
            // Every node shows the same health: the first one's is the cluster's.
            let cluster: ClusterState = client.get_as(client.url(&["engine", "health"])).await?;
            let health = cluster.nodes.values().next().map(|n| &n.health);
            let mut table = Table::new(&["ID", "NAME", "TYPE", "HEALTH", "ENDPOINT", "INPUTS", "OUTPUTS"]);
            for step in &body.steps {
                let (inputs, outputs) = io_of(step);
                let status = health
                    .and_then(|h| h.get(&step.id))
                    .map_or("unknown".to_string(), |h| h.status.clone());
                table.row(vec![
                    step.id.clone(),
                    output::one_line(&step.name),
                    step.step_type.clone(),
                    status,
                    step.http.as_ref().map(|h| h.endpoint.clone()).unwrap_or_default(),
                    inputs.join(","),
                    outputs.join(","),
                ]);
            }
            table.print();
            Ok(exit::OK)
        }
        StepSub::Get { id } => {
            let body = client.get(&["engine", "step", &id]).await?;
            if format == Format::Json {
                output::json(&body);
                return Ok(exit::OK);
            }
            let step: Step = client.typed(body)?;
            show(&step);
            Ok(exit::OK)
        }
        StepSub::Rm { id } => {
            let body = client
                .send(Method::DELETE, client.url(&["engine", "step", &id]), None)
                .await?;
            if format == Format::Json {
                output::json(&body);
            } else {
                output::line(&format!("removed {id}"));
            }
            Ok(exit::OK)
        }
    }
}

/// `effective_retry` as the step routes show it: the policy's values
/// (a JSON object no type describes) with `in_words` added
/// (`tartan_server::api::answers::step_shown`).
#[derive(Deserialize)]
struct RetryShown {
    in_words: String,
}

/// One step's fields for people.
fn show(step: &Step) {
    let (inputs, outputs) = io_of(step);
    let http = step.http.as_ref();
    let retry = match step.effective_retry.as_ref() {
        None => String::new(),
        Some(retry) => match RetryShown::deserialize(retry) {
            Ok(shown) => output::one_line(&shown.in_words),
            Err(_) => output::cell(retry),
        },
    };
    let mut table = Table::new(&["FIELD", "VALUE"]);
    for (k, v) in [
        ("id", step.id.clone()),
        ("name", output::one_line(&step.name)),
        ("type", step.step_type.clone()),
        ("endpoint", http.map(|h| h.endpoint.clone()).unwrap_or_default()),
        ("method", http.map(|h| h.method.clone()).unwrap_or_default()),
        ("inputs", inputs.join(", ")),
        ("outputs", outputs.join(", ")),
        ("retry", retry),
        (
            "timeouts",
            step.effective_timeouts
                .as_ref()
                .map(output::cell)
                .unwrap_or_default(),
        ),
        ("labels", output::pairs(&step.labels)),
    ] {
        table.row(vec![k.into(), v]);
    }
    table.print();
}

/// A step's inputs (optional ones marked `?`) and outputs.
pub(crate) fn io_of(step: &Step) -> (Vec<String>, Vec<String>) {
    roles(step.attributes.iter().map(|(name, a)| (name, a.role.as_str())))
}

/// Inputs (optional ones marked `?`) and outputs, from `(name, role)`.
fn roles<'a>(attributes: impl Iterator<Item = (&'a String, &'a str)>) -> (Vec<String>, Vec<String>) {
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    for (name, role) in attributes {
        match role {
            "required" => inputs.push(name.clone()),
            "optional" => inputs.push(format!("{name}?")),
            "output" => outputs.push(name.clone()),
            _ => {}
        }
    }
    (inputs, outputs)
}

/// Register each step; one that holds a different definition is updated.
/// Every file is read before anything is sent, so a bad file changes nothing.
async fn apply(client: &Client, paths: &[PathBuf], format: Format) -> Result<u8, CliError> {
    let mut all = Vec::new();
    for file in files::expand(paths)? {
        for (id, step) in files::read_named(&file, "step")? {
            all.push((file.clone(), id, step));
        }
    }
    let mut table = Table::new(&["STEP", "RESULT", "FILE"]);
    let mut results = Vec::new();
    let mut failed = false;
    for (file, id, step) in &all {
        let id = id.as_str();
        let file = file.display().to_string();
        match apply_one(client, id, step).await {
            Ok((stored, result)) => {
                table.row(vec![stored.clone(), result.into(), file.clone()]);
                results.push(json!({"id": stored, "result": result, "file": file}));
            }
            Err(e @ CliError::Unreachable { .. }) => return Err(e),
            Err(e) => {
                table.row(vec![id.into(), "error".into(), file.clone()]);
                eprintln!(
                    "{} ({}): {}",
                    output::escape(id),
                    output::escape(&file),
                    e.message()
                );
                let detail = match &e {
                    CliError::Problem { detail, .. } => detail.clone(),
                    other => other.message(),
                };
                results.push(json!({"id": id, "result": "error", "file": file, "error": detail}));
                failed = true;
            }
        }
    }
    if format == Format::Json {
        output::json(&json!({"count": results.len(), "steps": results}));
    } else {
        table.print();
    }
    Ok(if failed { exit::ERROR } else { exit::OK })
}

async fn apply_one(client: &Client, id: &str, step: &Value) -> Result<(String, &'static str), CliError> {
    let timeout = std::time::Duration::from_secs(60);
    let (status, body) = client
        .send_raw(Method::GET, client.url(&["engine", "step", id]), None, timeout)
        .await?;
    let existed = match status {
        StatusCode::OK => true,
        StatusCode::NOT_FOUND => false,
        _ => return Err(problem(status, &body)),
    };
    let (status, body) = client
        .send_raw(Method::POST, client.url(&["engine", "step"]), Some(step), timeout)
        .await?;
    // The id as stored (the server sanitises it).
    let stored = |body: Value| client.typed::<StepSaved>(body).map(|saved| saved.step.id);
    match status {
        StatusCode::CREATED | StatusCode::OK => {
            Ok((stored(body)?, if existed { "unchanged" } else { "created" }))
        }
        StatusCode::CONFLICT => {
            let body = client
                .send(Method::PUT, client.url(&["engine", "step", id]), Some(step))
                .await?;
            Ok((stored(body)?, "updated"))
        }
        _ => Err(problem(status, &body)),
    }
}
