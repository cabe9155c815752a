//! The live view of a flow (`flow start --watch`, `flow watch`, `flow events
//! --follow`): its history first, then its event stream
//! (`GET /engine/flow/{id}/stream`, resumed with `Last-Event-ID` after a
//! `dropped` message or a lost connection). A server without the stream
//! route is polled instead. Rendered as one line per event (plain), JSON
//! lines, or a per-step table redrawn in place on a terminal.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use tartan_core::flow::{FlowState, FlowStatus};
use tartan_server::api::answers::Event;

use super::client::{exit, problem, CliError, Client};
use super::output::{self, Format};
use super::view::View;

/// How often the terminal view is redrawn (the retry countdown ticks).
const REDRAW: Duration = Duration::from_millis(200);
/// How often a server without the stream route is asked for new events.
const POLL: Duration = Duration::from_millis(250);
/// A stream silent for this long (keep-alive comments included) is dead.
const IDLE: Duration = Duration::from_secs(60);
/// Connection failures in a row before giving up.
const MAX_FAILURES: u32 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Tty,
    Plain,
    JsonLines,
}

impl Mode {
    /// JSON lines with `-o json`; the redrawn table only on a terminal.
    pub fn pick(plain: bool, format: Format) -> Mode {
        if format == Format::Json {
            Mode::JsonLines
        } else if plain || !std::io::stdout().is_terminal() {
            Mode::Plain
        } else {
            Mode::Tty
        }
    }
}

/// Give the cursor back (the terminal view hides it while redrawing).
pub fn restore_terminal() {
    if std::io::stdout().is_terminal() {
        output::out("\x1b[?25h");
    }
}

/// An event's sequence; 0 (none) for one that is not positive.
pub fn sequence(event: &Event) -> u64 {
    u64::try_from(event.sequence).unwrap_or(0)
}

/// A page of a flow's history: `EventList`, its events kept as the server
/// sent them (`-o json` prints them so) and read as `Event` where used.
#[derive(Deserialize)]
struct HistoryPage {
    events: Vec<Value>,
    #[serde(default)]
    next: Option<Option<i64>>,
}

/// A flow's events after `after`, every page, as the server sent them.
pub async fn history(client: &Client, id: &str, mut after: u64) -> Result<Vec<Value>, CliError> {
    let mut events = Vec::new();
    loop {
        let mut url = client.url(&["engine", "flow", id, "events"]);
        url.set_query(Some(&format!("after={after}&limit=1000")));
        let page: HistoryPage = client.get_as(url).await?;
        if let Some(last) = page.events.last() {
            after = sequence(&client.typed(last.clone())?);
        }
        let empty = page.events.is_empty();
        events.extend(page.events);
        // `next` absent or null: the last page.
        if page.next.flatten().is_none() || empty {
            return Ok(events);
        }
    }
}

/// Follow the flow until it is over; the exit code says how it ended.
pub async fn watch(client: &Client, id: &str, mode: Mode) -> Result<u8, CliError> {
    watch_after(client, id, mode, 0).await
}

/// The same, printing only the events after `quiet_until` (those before
/// still build the view: after a retry, the plan and what already ran).
pub async fn watch_after(client: &Client, id: &str, mode: Mode, quiet_until: u64) -> Result<u8, CliError> {
    let mut watcher = Watcher {
        view: View::new(id),
        mode,
        drawn: 0,
        last_seq: 0,
        quiet_until,
    };
    if mode == Mode::Tty {
        output::out("\x1b[?25l");
    }
    let result = watcher.run(client, id).await;
    if let Ok(state) = &result {
        watcher.finish(state);
    }
    if mode == Mode::Tty {
        restore_terminal();
    }
    let state = result?;
    Ok(match state.status {
        FlowStatus::Completed => exit::OK,
        FlowStatus::Failed => exit::FLOW_FAILED,
        FlowStatus::Cancelled => exit::FLOW_CANCELLED,
        FlowStatus::Active => exit::ERROR,
    })
}

struct Watcher {
    view: View,
    mode: Mode,
    /// Lines of the terminal view on screen, to draw over.
    drawn: usize,
    last_seq: u64,
    quiet_until: u64,
}

/// How one connection to the stream ended.
enum Ended {
    /// The flow's final state.
    State(Box<FlowState>),
    /// Reconnect from the last event seen.
    Resume,
    /// The server has no stream route: poll.
    NoStream,
}

impl Watcher {
    async fn run(&mut self, client: &Client, id: &str) -> Result<FlowState, CliError> {
        let mut failures = 0;
        let mut streaming = true;
        loop {
            for event in history(client, id, self.last_seq).await? {
                self.event(&event).map_err(|e| client.not_this_api(e))?;
            }
            if self.view.over {
                return client.get_as(client.url(&["engine", "flow", id])).await;
            }
            if !streaming {
                self.pause(POLL).await;
                continue;
            }
            let before = self.last_seq;
            match self.stream(client, id).await {
                Ok(Ended::State(state)) => return Ok(*state),
                Ok(Ended::NoStream) => streaming = false,
                Ok(Ended::Resume) => {
                    failures = 0;
                    // A server that ends streams at once must not make this spin.
                    if self.last_seq == before {
                        self.pause(Duration::from_millis(500)).await;
                    }
                }
                Err(e @ CliError::Unreachable { .. }) => {
                    failures += 1;
                    if failures >= MAX_FAILURES {
                        return Err(e);
                    }
                    self.pause(Duration::from_millis(250 * u64::from(failures))).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Wait, redrawing the terminal view meanwhile.
    async fn pause(&mut self, wait: Duration) {
        let until = tokio::time::Instant::now() + wait;
        while tokio::time::Instant::now() < until {
            tokio::time::sleep_until(until.min(tokio::time::Instant::now() + REDRAW)).await;
            self.redraw();
        }
    }

    /// One connection to the stream, from the last event seen.
    async fn stream(&mut self, client: &Client, id: &str) -> Result<Ended, CliError> {
        let url = client.url(&["engine", "flow", id, "stream"]);
        let request = client
            .builder(Method::GET, url)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .header("Last-Event-ID", self.last_seq.to_string())
            .send();
        // The stream has no overall timeout, but its answer must start.
        let resp = match tokio::time::timeout(IDLE, request).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => {
                return Err(CliError::Unreachable {
                    server: client.server(),
                    reason: e.to_string(),
                })
            }
            Err(_) => {
                return Err(CliError::Unreachable {
                    server: client.server(),
                    reason: format!("no answer to the event stream request within {}s", IDLE.as_secs()),
                })
            }
        };
        let status = resp.status();
        if status == StatusCode::NOT_FOUND || status == StatusCode::METHOD_NOT_ALLOWED {
            // The flow exists (its history was just read): the route does not.
            return Ok(Ended::NoStream);
        }
        if !status.is_success() {
            let body = resp.json::<Value>().await.unwrap_or(Value::Null);
            return Err(problem(status, &body));
        }
        // Any bytes count as life, keep-alive comments included (the parser
        // drops those before they would reach the loop below).
        let start = std::time::Instant::now();
        let heard = Arc::new(AtomicU64::new(0));
        let heard_in = heard.clone();
        let mut events = resp
            .bytes_stream()
            .inspect(move |_| heard_in.store(start.elapsed().as_millis() as u64, Ordering::Relaxed))
            .eventsource();
        let mut tick = tokio::time::interval(REDRAW);
        loop {
            tokio::select! {
                next = events.next() => {
                    let Some(next) = next else { return Ok(Ended::Resume) };
                    let Ok(message) = next else { return Ok(Ended::Resume) };
                    // A state that is not one is skipped: the history read
                    // after reconnecting has what it missed.
                    match message.event.as_str() {
                        "state" => {
                            if let Ok(state) = serde_json::from_str::<FlowState>(&message.data) {
                                return Ok(Ended::State(Box::new(state)));
                            }
                            return Ok(Ended::Resume);
                        }
                        "dropped" => return Ok(Ended::Resume),
                        _ => {
                            if let Ok(event) = serde_json::from_str::<Value>(&message.data) {
                                // Not an event (an `error` message): skipped.
                                let _ = self.event(&event);
                            }
                        }
                    }
                }
                _ = tick.tick() => {
                    let silent = start.elapsed().saturating_sub(Duration::from_millis(heard.load(Ordering::Relaxed)));
                    if silent > IDLE {
                        return Ok(Ended::Resume);
                    }
                    self.redraw();
                }
            }
        }
    }

    /// One event as the server sent it: read as the API's type into the
    /// view, and printed (JSON lines: as sent) unless seen already.
    fn event(&mut self, raw: &Value) -> Result<(), serde_json::Error> {
        let event = Event::deserialize(raw)?;
        let seq = sequence(&event);
        if seq != 0 && seq <= self.last_seq {
            return Ok(());
        }
        self.last_seq = self.last_seq.max(seq);
        let line = self.view.apply(&event);
        if seq != 0 && seq <= self.quiet_until {
            return Ok(());
        }
        match self.mode {
            Mode::Plain => output::line(&line),
            Mode::JsonLines => output::json_line(raw),
            Mode::Tty => self.redraw(),
        }
        Ok(())
    }

    fn redraw(&mut self) {
        if self.mode != Mode::Tty {
            return;
        }
        // A terminal that does not know its size (0 columns) gets $COLUMNS
        // and $LINES, else 80 by 24.
        let size = crossterm::terminal::size().ok();
        let env = |name: &str| std::env::var(name).ok()?.parse::<usize>().ok();
        let width = size
            .map(|(w, _)| usize::from(w))
            .filter(|w| *w >= 20)
            .or_else(|| env("COLUMNS"))
            .unwrap_or(80)
            .max(20);
        let height = size
            .map(|(_, h)| usize::from(h))
            .filter(|h| *h >= 5)
            .or_else(|| env("LINES"))
            .unwrap_or(24)
            .max(5);
        // Lines that wrap or scroll off the top could not be drawn over.
        let mut lines: Vec<String> = self
            .view
            .table(Utc::now())
            .lines()
            .map(|l| l.chars().take(width - 1).collect())
            .collect();
        if lines.len() > height - 1 {
            let more = lines.len() - (height - 2);
            lines.truncate(height - 2);
            lines.push(format!("… {more} more lines (tartan flow get shows every step)"));
        }
        let mut text = String::new();
        if self.drawn > 0 {
            // Up to the first line drawn, then clear everything below it.
            text.push_str(&format!("\x1b[{}A\r", self.drawn));
        }
        text.push_str("\x1b[J");
        for l in &lines {
            text.push_str(l);
            text.push('\n');
        }
        self.drawn = lines.len();
        output::out(&text);
    }

    /// The flow's end: its result or its error.
    fn finish(&mut self, state: &FlowState) {
        if self.mode == Mode::JsonLines {
            return;
        }
        self.view.status = state.status.as_str().to_string();
        self.redraw();
        let id = &self.view.flow_id;
        match state.status.as_str() {
            "completed" => {
                let result = self
                    .view
                    .result
                    .as_ref()
                    .map(Value::to_string)
                    .unwrap_or_else(|| super::output::result_of(state));
                output::line(&format!("flow {id} completed"));
                output::line(&format!("result: {result}"));
            }
            status => {
                output::line(&format!("flow {id} {status}"));
                if let Some(e) = &state.error {
                    output::line(&format!("error: {}", output::one_line(e)));
                }
            }
        }
    }
}
