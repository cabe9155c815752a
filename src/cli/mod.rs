//! `tartan step|plan|flow|schedule|work|bulk|lane|health`: a client of the REST API in the
//! same binary (docs/cli.md). Each command group has a file;
//! `client.rs` talks HTTP, `output.rs` prints, `watch.rs` is the live view.

pub mod bulk;
pub mod client;
pub mod files;
pub mod flow;
pub mod health;
pub mod lane;
pub mod output;
pub mod plan;
pub mod schedule;
pub mod step;
pub mod view;
pub mod watch;
pub mod work;

use std::future::Future;

use serde_json::{Map, Value};

use self::client::{exit, CliError, Client};
use self::output::Format;

/// Where the server is and how to talk to it; accepted before or after the
/// subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct Conn {
    /// The Tartan server's base URL.
    #[arg(
        long,
        global = true,
        env = "TARTAN_SERVER",
        default_value = "http://127.0.0.1:8080"
    )]
    pub server: String,
    /// A bearer token (an API token, or a read token for reads).
    #[arg(long, global = true, env = "TARTAN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// `table` for people, `json` for the server's JSON, pretty.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

impl Conn {
    pub fn client(&self) -> Result<Client, CliError> {
        Client::new(&self.server, self.token.clone())
    }
}

/// Run one client command: its error printed to stderr, Ctrl-C ending it
/// with 130 after the live view gave the terminal back. Returns the exit
/// code.
pub async fn run(command: impl Future<Output = Result<u8, CliError>>) -> i32 {
    // Biased, Ctrl-C first: its handler is registered on its first poll,
    // which must come before the command's first output (a Ctrl-C right
    // after it would otherwise kill the process instead of ending it
    // with 130).
    let code = tokio::select! {
        biased;
        _ = tokio::signal::ctrl_c() => {
            watch::restore_terminal();
            eprintln!("interrupted");
            exit::INTERRUPTED
        }
        result = command => match result {
            Ok(code) => code,
            Err(e) => {
                eprintln!("{}", e.message());
                e.exit_code()
            }
        },
    };
    i32::from(code)
}

/// `--init name=value`, repeatable: the value is JSON when it parses as
/// JSON, else the text itself; each name's values are collected in order
/// into the array the API takes (`"name": [value, ...]`). A value that
/// starts as JSON does (`{`, `[`, `"`) and does not parse is an error:
/// sending the broken text as a string would start a flow on input nobody
/// meant.
pub fn parse_init(items: &[String]) -> Result<Map<String, Value>, CliError> {
    let mut init = Map::new();
    for item in items {
        let (name, text) = item
            .split_once('=')
            .ok_or_else(|| CliError::local(format!("--init {item:?}: expected name=value")))?;
        if name.is_empty() {
            return Err(CliError::local(format!("--init {item:?}: the name is empty")));
        }
        let value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(e) if text.trim_start().starts_with(['{', '[', '"']) => {
                return Err(CliError::local(format!(
                    "--init {item:?}: {name} is not valid JSON ({e}); a text starting with {{, [ or \" is \
                     taken as JSON: write it as a JSON string to send it as text"
                )))
            }
            Err(_) => Value::String(text.to_string()),
        };
        if let Value::Array(values) = init
            .entry(name.to_string())
            .or_insert_with(|| Value::Array(Vec::new()))
        {
            values.push(value);
        }
    }
    Ok(init)
}

/// `--label k=v`, repeatable.
pub fn parse_labels(items: &[String]) -> Result<std::collections::BTreeMap<String, String>, CliError> {
    let mut labels = std::collections::BTreeMap::new();
    for item in items {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| CliError::local(format!("--label {item:?}: expected key=value")))?;
        if k.is_empty() {
            return Err(CliError::local(format!("--label {item:?}: the key is empty")));
        }
        labels.insert(k.to_string(), v.to_string());
    }
    Ok(labels)
}
