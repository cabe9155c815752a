//! The live view of a flow (`flow start --watch`, `flow watch`, `flow events
//! --follow`): its history first, then its event stream
//! (`GET /engine/flow/{id}/stream`, resumed with `Last-Event-ID` after a
//! `dropped` message or a lost connection). A server without the stream
//! route is polled instead. Rendered as one line per event (plain), JSON
//! lines, or a per-step table redrawn in place on a terminal.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::client::{exit, problem, shorten, CliError, Client};
use super::output::{self, Format};

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

/// A flow's events after `after`, every page.
pub async fn history(client: &Client, id: &str, mut after: u64) -> Result<Vec<Value>, CliError> {
    let mut events = Vec::new();
    loop {
        let mut url = client.url(&["engine", "flow", id, "events"]);
        url.set_query(Some(&format!("after={after}&limit=1000")));
        let page = client.send(Method::GET, url, None).await?;
        let got = page["events"].as_array().cloned().unwrap_or_default();
        if let Some(last) = got.last().and_then(|e| e["sequence"].as_u64()) {
            after = last;
        }
        let empty = got.is_empty();
        events.extend(got);
        if page["next"].is_null() || empty {
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
    Ok(match output::s(&state, "status") {
        "completed" => exit::OK,
        "failed" => exit::FLOW_FAILED,
        "cancelled" => exit::FLOW_CANCELLED,
        _ => exit::ERROR,
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
    State(Value),
    /// Reconnect from the last event seen.
    Resume,
    /// The server has no stream route: poll.
    NoStream,
}

impl Watcher {
    async fn run(&mut self, client: &Client, id: &str) -> Result<Value, CliError> {
        let mut failures = 0;
        let mut streaming = true;
        loop {
            for event in history(client, id, self.last_seq).await? {
                self.event(&event);
            }
            if self.view.over {
                return client.get(&["engine", "flow", id]).await;
            }
            if !streaming {
                self.pause(POLL).await;
                continue;
            }
            let before = self.last_seq;
            match self.stream(client, id).await {
                Ok(Ended::State(state)) => return Ok(state),
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
                    match message.event.as_str() {
                        "state" => {
                            if let Ok(state) = serde_json::from_str::<Value>(&message.data) {
                                return Ok(Ended::State(state));
                            }
                            return Ok(Ended::Resume);
                        }
                        "dropped" => return Ok(Ended::Resume),
                        _ => {
                            if let Ok(event) = serde_json::from_str::<Value>(&message.data) {
                                self.event(&event);
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

    /// One event: into the view, and printed unless seen already.
    fn event(&mut self, event: &Value) {
        let seq = event["sequence"].as_u64().unwrap_or(0);
        if seq != 0 && seq <= self.last_seq {
            return;
        }
        self.last_seq = self.last_seq.max(seq);
        let line = self.view.apply(event);
        if seq != 0 && seq <= self.quiet_until {
            return;
        }
        match self.mode {
            Mode::Plain => output::line(&line),
            Mode::JsonLines => output::json_line(event),
            Mode::Tty => self.redraw(),
        }
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
    fn finish(&mut self, state: &Value) {
        if self.mode == Mode::JsonLines {
            return;
        }
        self.view.status = output::s(state, "status").to_string();
        self.redraw();
        let id = &self.view.flow_id;
        match output::s(state, "status") {
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
                if let Some(e) = state["error"].as_str() {
                    output::line(&format!("error: {}", output::one_line(e)));
                }
            }
        }
    }
}

/// One step as the events tell it.
#[derive(Debug, Default)]
struct StepView {
    status: String,
    /// By token: each work item's latest.
    items: BTreeMap<String, ItemView>,
    note: String,
    done_ms: Option<u64>,
}

#[derive(Debug, Default, Clone)]
struct ItemView {
    status: String,
    attempt: u64,
    error: Option<String>,
    next_retry_at: Option<DateTime<Utc>>,
    started_at: Option<DateTime<Utc>>,
}

/// What the events of a flow say so far.
#[derive(Debug)]
pub struct View {
    flow_id: String,
    status: String,
    order: Vec<String>,
    steps: BTreeMap<String, StepView>,
    result: Option<Value>,
    error: Option<String>,
    started: Option<DateTime<Utc>>,
    /// When it completed, failed or was cancelled: the elapsed time stops.
    ended: Option<DateTime<Utc>>,
    /// `flow_deactivated` seen: nothing more will happen.
    over: bool,
}

fn time(event: &Value) -> Option<DateTime<Utc>> {
    event["timestamp"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
}

fn secs(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

impl View {
    pub fn new(flow_id: &str) -> View {
        View {
            flow_id: flow_id.to_string(),
            status: "active".into(),
            order: Vec::new(),
            steps: BTreeMap::new(),
            result: None,
            error: None,
            started: None,
            ended: None,
            over: false,
        }
    }

    fn step(&mut self, id: &str) -> &mut StepView {
        if !self.steps.contains_key(id) {
            self.order.push(id.to_string());
        }
        self.steps.entry(id.to_string()).or_insert_with(|| StepView {
            status: "pending".into(),
            ..StepView::default()
        })
    }

    /// Take in one event; answer its plain line:
    /// `HH:MM:SS.mmm <what happened>` (UTC).
    pub fn apply(&mut self, event: &Value) -> String {
        let at = time(event);
        let kind = output::s(event, "type");
        let d = &event["data"];
        let step_id = output::s(d, "step_id").to_string();
        let token = output::s(d, "token").to_string();
        let attempt = d["attempt"].as_u64().unwrap_or(0);
        let error = output::one_line(output::s(d, "error"));
        let class = output::s(d, "class").to_string();
        let http = d["http_status"].as_u64().map(|s| format!("HTTP {s}"));
        let flow = self.flow_id.clone();
        let item = |view: &mut View, f: &dyn Fn(&mut ItemView)| {
            let s = view.step(&step_id);
            let it = s.items.entry(token.clone()).or_default();
            f(it);
        };
        if matches!(kind, "flow_completed" | "flow_failed" | "flow_cancelled") {
            self.ended = at;
        }
        let text = match kind {
            "flow_started" => {
                self.started = at;
                for id in super::plan::order(&d["plan"]) {
                    self.step(&id);
                }
                let goals: Vec<String> = d["plan"]["goals"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(output::cell)
                    .collect();
                format!("flow {flow} started (goals: {})", goals.join(", "))
            }
            "step_started" => {
                let n = d["work_items"].as_object().map_or(0, |m| m.len());
                self.step(&step_id).status = "active".into();
                if n > 1 {
                    format!("step {step_id} started ({n} work items)")
                } else {
                    format!("step {step_id} started")
                }
            }
            "work_started" => {
                item(self, &|it| {
                    it.status = "running".into();
                    it.attempt = attempt;
                    it.next_retry_at = None;
                    it.started_at = at;
                });
                format!("step {step_id} attempt {attempt} started")
            }
            "work_accepted" => {
                item(self, &|it| it.status = "accepted".into());
                format!("step {step_id} attempt {attempt} accepted (async)")
            }
            "work_heartbeat" => format!("step {step_id} heartbeat"),
            "work_succeeded" => {
                item(self, &|it| {
                    it.status = "succeeded".into();
                    it.error = None;
                });
                let http = http.map(|h| format!(" ({h})")).unwrap_or_default();
                format!("step {step_id} attempt {attempt} succeeded{http}")
            }
            "work_not_completed" => {
                let e = error.clone();
                item(self, &|it| {
                    it.status = "failed".into();
                    it.error = Some(e.clone());
                });
                format!("step {step_id} attempt {attempt} failed (retryable: {error})")
            }
            "work_retry_scheduled" => {
                let next = d["next_retry_at"]
                    .as_str()
                    .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| t.with_timezone(&Utc));
                item(self, &|it| {
                    it.status = "retrying".into();
                    it.next_retry_at = next;
                });
                let delay = d["delay_ms"].as_u64().unwrap_or(0);
                let when = next
                    .map(|t| format!(" (at {})", t.format("%H:%M:%S%.3f")))
                    .unwrap_or_default();
                format!("step {step_id} retry in {}{when}", secs(delay))
            }
            "work_failed" => {
                let e = error.clone();
                item(self, &|it| {
                    it.status = "failed".into();
                    it.error = Some(e.clone());
                });
                let why = output::s(d, "retry_state");
                let why = if why.is_empty() {
                    String::new()
                } else {
                    format!(", no retry: {why}")
                };
                format!("step {step_id} attempt {attempt} failed ({class}: {error}{why})")
            }
            "work_timed_out" => {
                let e = error.clone();
                item(self, &|it| {
                    it.status = "timed out".into();
                    it.error = Some(e.clone());
                });
                format!("step {step_id} work timed out: {error}")
            }
            "work_cancelled" => {
                item(self, &|it| it.status = "cancelled".into());
                format!("step {step_id} work cancelled: {}", output::s(d, "reason"))
            }
            "work_late_result" => format!("step {step_id} late result for attempt {attempt} ignored"),
            "attribute_set" => format!(
                "attribute {} = {}",
                output::s(d, "key"),
                shorten(&d["value"].to_string(), 200)
            ),
            "step_completed" => {
                let ms = d["duration"].as_u64();
                let s = self.step(&step_id);
                s.status = "completed".into();
                s.done_ms = ms;
                match ms {
                    Some(ms) => format!("step {step_id} completed in {ms}ms"),
                    None => format!("step {step_id} completed"),
                }
            }
            "step_failed" | "step_timed_out" => {
                let s = self.step(&step_id);
                s.status = if kind == "step_failed" {
                    "failed"
                } else {
                    "timed out"
                }
                .into();
                s.note = error.clone();
                format!("step {step_id} {}: {error}", s.status)
            }
            "step_skipped" | "step_cancelled" => {
                let reason = output::one_line(output::s(d, "reason"));
                let s = self.step(&step_id);
                s.status = if kind == "step_skipped" {
                    "skipped"
                } else {
                    "cancelled"
                }
                .into();
                s.note = reason.clone();
                format!("step {step_id} {}: {reason}", s.status)
            }
            "comp_started" => format!("step {step_id} compensation attempt {attempt} started"),
            "comp_succeeded" => format!("step {step_id} compensation attempt {attempt} succeeded"),
            "comp_retry_scheduled" => format!(
                "step {step_id} compensation failed ({error}), retry in {}",
                secs(d["delay_ms"].as_u64().unwrap_or(0))
            ),
            "comp_failed" => format!("step {step_id} compensation attempt {attempt} failed: {error}"),
            "flow_completed" => {
                self.status = "completed".into();
                self.result = Some(d["result"].clone());
                format!("flow {flow} completed, result: {}", d["result"])
            }
            "flow_failed" => {
                self.status = "failed".into();
                self.error = Some(error.clone());
                format!("flow {flow} failed: {error}")
            }
            "flow_timed_out" => format!(
                "flow {flow} timed out: {}",
                output::one_line(output::s(&d["problem"], "detail"))
            ),
            "flow_cancelled" => {
                self.status = "cancelled".into();
                format!(
                    "flow {flow} cancelled: {}",
                    output::one_line(output::s(d, "reason"))
                )
            }
            "flow_retried" => {
                // A failed or cancelled flow runs again: not over any more.
                self.over = false;
                self.status = "active".into();
                self.ended = None;
                self.error = None;
                self.result = None;
                let steps: Vec<String> = d["steps"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(output::cell)
                    .collect();
                for id in &steps {
                    let s = self.step(id);
                    s.status = "pending".into();
                    s.items.clear();
                    s.note.clear();
                    s.done_ms = None;
                }
                let attempts = if d["reset_attempts"] == false {
                    "kept"
                } else {
                    "reset"
                };
                format!(
                    "flow {flow} retried (steps: {}; attempts {attempts})",
                    steps.join(", ")
                )
            }
            "flow_deactivated" => {
                self.over = true;
                if let Some(s) = d["status"].as_str() {
                    self.status = s.to_string();
                }
                format!("flow {flow} deactivated ({})", self.status)
            }
            other => {
                let about = if step_id.is_empty() {
                    String::new()
                } else {
                    format!(" step {step_id}")
                };
                format!("{other}{about}")
            }
        };
        let at = at.map_or_else(
            || "--:--:--.---".to_string(),
            |t| t.format("%H:%M:%S%.3f").to_string(),
        );
        format!("{at} {text}")
    }

    /// The terminal view: one row per step, the retry countdowns at `now`.
    pub fn table(&self, now: DateTime<Utc>) -> String {
        let elapsed = self
            .started
            .map(|s| secs((self.ended.unwrap_or(now) - s).num_milliseconds().max(0) as u64))
            .unwrap_or_default();
        let mut table = output::Table::new(&["STEP", "STATUS", "ITEMS", "ATTEMPT", "NOTE"]);
        for id in &self.order {
            let Some(s) = self.steps.get(id) else { continue };
            // The item that says most: one still going, else the last seen.
            let latest = s
                .items
                .values()
                .find(|it| matches!(it.status.as_str(), "running" | "retrying" | "accepted"))
                .or_else(|| s.items.values().last());
            let done = s.items.values().filter(|it| it.status == "succeeded").count();
            let mut status = s.status.clone();
            let note = match (s.status.as_str(), latest) {
                ("completed", _) => s.done_ms.map(|ms| format!("done in {ms}ms")).unwrap_or_default(),
                ("active", Some(it)) => {
                    status = it.status.clone();
                    match it.status.as_str() {
                        "retrying" => {
                            let left = it
                                .next_retry_at
                                .map(|t| (t - now).num_milliseconds().max(0) as u64)
                                .unwrap_or(0);
                            format!(
                                "{} — retry in {}",
                                it.error.clone().unwrap_or_default(),
                                secs(left)
                            )
                        }
                        "running" | "accepted" => it
                            .started_at
                            .map(|t| format!("for {}", secs((now - t).num_milliseconds().max(0) as u64)))
                            .unwrap_or_default(),
                        _ => it.error.clone().unwrap_or_default(),
                    }
                }
                _ => s.note.clone(),
            };
            table.row(vec![
                id.clone(),
                status,
                if s.items.is_empty() {
                    String::new()
                } else {
                    format!("{done}/{}", s.items.len())
                },
                latest.map(|it| it.attempt.to_string()).unwrap_or_default(),
                shorten(&note, 200),
            ]);
        }
        // The table escapes its cells; the head is escaped here.
        let mut head = format!(
            "flow {}  {}  {elapsed}\n",
            output::escape(&self.flow_id),
            output::escape(&self.status)
        );
        if let Some(e) = &self.error {
            head.push_str(&format!("error: {}\n", output::escape(&shorten(e, 200))));
        }
        head + &table.render()
    }
}
