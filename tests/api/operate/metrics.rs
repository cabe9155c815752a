//! `GET /metrics` (docs/operating.md, "Metrics"): what a flow with retries
//! moves, how requests are labelled (route templates, never raw paths or
//! flow ids), the read token it needs when tokens are configured, and that
//! each engine counts only its own work.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;
use tartan_server::ApiSecurity;

use crate::helpers::{
    json_reply, noted, spawn_app, start_secured, sync_step, Backend, StepServer, TestApp, TestDb,
};
use tartan_testkit::both_backends;

both_backends!(
    a_flow_with_retries_moves_the_counters_it_should,
    an_async_step_counts_its_acceptance_and_its_webhooks,
    a_bulk_job_counts_its_creation_its_flows_and_its_end,
);

const READER: &str = "metrics-reader-token-0123";
const FULL: &str = "metrics-full-token-4567";
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A sample's labels and value.
type Sample = (BTreeMap<String, String>, f64);

/// One scrape: every sample by metric name.
#[derive(Debug)]
struct Scrape {
    samples: HashMap<String, Vec<Sample>>,
}

impl Scrape {
    /// Parse the OpenMetrics text format: `# ...` lines are metadata, the
    /// last one `# EOF`; every other line is `name{k="v",...} value` (label
    /// values escape `\`, `"` and newlines).
    fn parse(text: &str) -> Result<Scrape, String> {
        let mut samples: HashMap<String, Vec<Sample>> = HashMap::new();
        if text.lines().last() != Some("# EOF") {
            return Err("the exposition does not end with # EOF".into());
        }
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name_end = line.find(['{', ' ']).ok_or_else(|| format!("no value: {line}"))?;
            let name = &line[..name_end];
            let mut labels = BTreeMap::new();
            let mut rest = &line[name_end..];
            if let Some(after) = rest.strip_prefix('{') {
                let mut chars = after.char_indices();
                let mut key = String::new();
                loop {
                    match chars.next() {
                        Some((i, '}')) if key.is_empty() => {
                            rest = &after[i + 1..];
                            break;
                        }
                        Some((_, ',')) if key.is_empty() => {}
                        Some((_, '=')) => {
                            if chars.next().map(|(_, c)| c) != Some('"') {
                                return Err(format!("unquoted label value: {line}"));
                            }
                            let mut value = String::new();
                            loop {
                                match chars.next() {
                                    Some((_, '\\')) => match chars.next() {
                                        Some((_, 'n')) => value.push('\n'),
                                        Some((_, c)) => value.push(c),
                                        None => return Err(format!("cut off: {line}")),
                                    },
                                    Some((_, '"')) => break,
                                    Some((_, c)) => value.push(c),
                                    None => return Err(format!("cut off: {line}")),
                                }
                            }
                            labels.insert(std::mem::take(&mut key), value);
                        }
                        Some((_, c)) => key.push(c),
                        None => return Err(format!("labels not closed: {line}")),
                    }
                }
            }
            let value = rest
                .split_whitespace()
                .next()
                .ok_or_else(|| format!("no value: {line}"))?;
            let value: f64 = value
                .parse()
                .map_err(|e| format!("value {value:?}: {e}: {line}"))?;
            samples.entry(name.to_string()).or_default().push((labels, value));
        }
        Ok(Scrape { samples })
    }

    /// The sample of `name` whose labels are exactly `labels`; 0 when there
    /// is none (a series appears when first counted).
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let wanted: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples
            .get(name)
            .and_then(|s| s.iter().find(|(l, _)| *l == wanted))
            .map_or(0.0, |(_, v)| *v)
    }

    /// Whether any sample of `name` exists.
    fn has(&self, name: &str) -> bool {
        self.samples.contains_key(name)
    }

    /// Every label value of every sample.
    fn label_values(&self) -> impl Iterator<Item = &str> {
        self.samples
            .values()
            .flatten()
            .flat_map(|(labels, _)| labels.values().map(String::as_str))
    }
}

/// `GET /metrics`, checked and parsed.
async fn scrape(app: &TestApp, token: Option<&str>) -> Scrape {
    let mut req = app.client.get(app.url("/metrics"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("GET /metrics: {e}"));
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert_eq!(content_type, OPENMETRICS);
    let text = resp.text().await.unwrap_or_default();
    Scrape::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Scrape until `done` holds (bounded): the writer counts a decision as it
/// answers the commit, a moment after another reader may see it.
async fn scrape_until(app: &TestApp, done: impl Fn(&Scrape) -> bool) -> Scrape {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let s = scrape(app, None).await;
        if done(&s) || std::time::Instant::now() > until {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn a_flow_with_retries_moves_the_counters_it_should(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // 503 twice, then the outputs.
    let svc = StepServer::start(|_, n| {
        if n < 2 {
            json_reply(503, json!({"detail": "busy"}))
        } else {
            json_reply(200, json!({"out": "done"}))
        }
    })
    .await;
    let mut step = sync_step("flaky", &svc.url("/flaky"), &[], &["out"]);
    step["work_config"] = json!({"max_retries": 3, "init_backoff": 20, "backoff_type": "fixed"});
    let r = app.register(&step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);

    let before = scrape(&app, None).await;
    assert_eq!(before.value("tartan_flows_started_total", &[]), 0.0);
    let r = app
        .start_flow(&json!({"id": "metered-flow", "goals": ["flaky"]}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let flow = app.wait_for_flow("metered-flow").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(svc.requests().len(), 3);

    let completed = [("status", "completed")];
    let s = scrape_until(&app, |s| {
        s.value("tartan_flows_finished_total", &completed) >= 1.0
            && s.value("tartan_flows_active", &[]) == 0.0
    })
    .await;
    assert_eq!(s.value("tartan_flows_started_total", &[]), 1.0);
    assert_eq!(s.value("tartan_flows_finished_total", &completed), 1.0);
    assert_eq!(
        s.value("tartan_flows_finished_total", &[("status", "failed")]),
        0.0
    );
    assert_eq!(s.value("tartan_flows_active", &[]), 0.0);
    let attempts = |outcome| {
        s.value(
            "tartan_attempts_total",
            &[("step", "flaky"), ("call", "work"), ("outcome", outcome)],
        )
    };
    assert_eq!(attempts("retryable"), 2.0);
    assert_eq!(attempts("success"), 1.0);
    assert_eq!(attempts("permanent"), 0.0);
    let flaky_work = [("step", "flaky"), ("call", "work")];
    assert_eq!(s.value("tartan_attempt_duration_seconds_count", &flaky_work), 3.0);
    assert!(s.value("tartan_attempt_duration_seconds_sum", &flaky_work) > 0.0);
    assert_eq!(s.value("tartan_retries_scheduled_total", &[]), 2.0);
    // Both retries were started by their timers, and none is left.
    assert_eq!(s.value("tartan_retry_timer_lateness_seconds_count", &[]), 2.0);
    assert_eq!(s.value("tartan_retries_pending", &[]), 0.0);
    assert_eq!(s.value("tartan_calls_in_flight", &[]), 0.0);
    // Start, three results, two retries due: six decisions at least, each
    // in some batch of the writer.
    assert!(s.value("tartan_commit_batch_size_sum", &[]) >= 6.0);
    assert!(s.value("tartan_commit_duration_seconds_count", &[]) >= 1.0);
    assert!(s.has("tartan_leases_taken_over_total") && s.has("tartan_leases_lost_total"));
    let started = [("route", "/engine/flow"), ("method", "POST"), ("status", "201")];
    assert_eq!(s.value("tartan_http_requests_total", &started), 1.0);
    assert_eq!(
        s.value(
            "tartan_http_request_duration_seconds_count",
            &[("route", "/engine/flow"), ("method", "POST")]
        ),
        1.0
    );
    // The flow was read by its id: the route template is the label.
    let by_id = [
        ("route", "/engine/flow/{id}"),
        ("method", "GET"),
        ("status", "200"),
    ];
    assert!(s.value("tartan_http_requests_total", &by_id) >= 1.0);

    // Refused starts, by reason; a path no route matches; a forged webhook.
    let r = app
        .start_flow(&json!({"id": "metered-flow", "goals": ["flaky"], "labels": {"team": "x"}}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{:?}", r.body);
    let r = app
        .start_flow(&json!({"id": "lost", "goals": ["no-such-step"]}))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:?}", r.body);
    let r = app
        .send(axum::http::Method::POST, "/engine/flow", Some("{not json".into()))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    let r = app.get("/no/such/route/metered-flow").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = app
        .post("/webhook/metered-flow/flaky/some-token/forged", &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);

    let s = scrape(&app, None).await;
    let refused = |reason| s.value("tartan_flow_starts_refused_total", &[("reason", reason)]);
    assert_eq!(refused("exists"), 1.0);
    assert_eq!(refused("unknown_goal"), 1.0);
    assert_eq!(refused("invalid"), 1.0);
    assert_eq!(
        s.value("tartan_flows_started_total", &[]),
        1.0,
        "refusals start nothing"
    );
    let unmatched = [("route", "unmatched"), ("method", "GET"), ("status", "404")];
    assert_eq!(s.value("tartan_http_requests_total", &unmatched), 1.0);
    assert_eq!(
        s.value(
            "tartan_webhooks_total",
            &[("kind", "result"), ("result", "forbidden")]
        ),
        1.0
    );
    // No label carries a flow id or a raw path.
    let leaked: Vec<&str> = s
        .label_values()
        .filter(|v| v.contains("metered-flow") || v.contains("/no/such"))
        .collect();
    assert!(leaked.is_empty(), "labels with a flow id or raw path: {leaked:?}");
}

/// An async step: its call counts as `accepted`, its webhook and a late
/// heartbeat by how they were answered.
async fn an_async_step_counts_its_acceptance_and_its_webhooks(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(202, json!({}))).await;
    let mut step = sync_step("later", &svc.url("/later"), &[], &["out"]);
    step["type"] = json!("async");
    let r = app.register(&step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let r = app
        .start_flow(&json!({"id": "async-flow", "goals": ["later"]}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let calls = noted(&svc.received, 1).await;
    let hook = calls
        .first()
        .and_then(|c| c.headers.get("argyll-webhook-url"))
        .and_then(|v| v.to_str().ok())
        .map(String::from)
        .unwrap_or_else(|| panic!("no webhook URL in {calls:?}"));
    let post = |url: String| {
        let client = app.client.clone();
        async move {
            let resp = client
                .post(url)
                .json(&json!({"out": "done"}))
                .send()
                .await
                .unwrap_or_else(|e| panic!("webhook: {e}"));
            resp.status().as_u16()
        }
    };
    assert_eq!(post(hook.clone()).await, 200);
    assert_eq!(app.wait_for_flow("async-flow").await["status"], "completed");
    // Nothing waits for a heartbeat any more.
    assert_eq!(post(format!("{hook}/heartbeat")).await, 409);

    let s = scrape_until(&app, |s| {
        s.value("tartan_flows_finished_total", &[("status", "completed")]) >= 1.0
    })
    .await;
    let attempts = |outcome| {
        s.value(
            "tartan_attempts_total",
            &[("step", "later"), ("call", "work"), ("outcome", outcome)],
        )
    };
    assert_eq!(attempts("accepted"), 1.0);
    assert_eq!(attempts("success"), 0.0, "the call only accepted the work");
    let webhooks = |kind, result| s.value("tartan_webhooks_total", &[("kind", kind), ("result", result)]);
    assert_eq!(webhooks("result", "ok"), 1.0);
    assert_eq!(webhooks("heartbeat", "conflict"), 1.0);
    assert_eq!(webhooks("result", "forbidden"), 0.0);
    // Webhook routes are labelled by their template too.
    let delivered = [
        ("route", "/webhook/{flow}/{step}/{token}/{signature}"),
        ("method", "POST"),
        ("status", "200"),
    ];
    assert_eq!(s.value("tartan_http_requests_total", &delivered), 1.0);
}

/// With tokens configured, `/metrics` needs one (a read token is enough);
/// and each engine has its own registry: a flow on one moves nothing on
/// another in the same process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_a_token_and_each_engine_counts_its_own() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let security = ApiSecurity::new(&[FULL.into()], &[READER.into()], &[])
        .unwrap_or_else(|e| panic!("security settings: {e}"));
    let secured = start_secured(db, "secured", security).await;
    for token in [None, Some("not-a-token")] {
        let mut req = secured.client.get(secured.url("/metrics"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.unwrap_or_else(|e| panic!("GET /metrics: {e}"));
        assert_eq!(
            resp.status(),
            reqwest::StatusCode::UNAUTHORIZED,
            "token {token:?}"
        );
        let body = resp.text().await.unwrap_or_default();
        assert!(!body.contains("tartan_"), "a refusal shows no metrics: {body}");
    }
    let s = scrape(&secured, Some(READER)).await;
    assert!(s.has("tartan_flows_started_total"));
    // The refusals above were counted under the route, not as raw paths.
    let refused = [("route", "/metrics"), ("method", "GET"), ("status", "401")];
    assert_eq!(s.value("tartan_http_requests_total", &refused), 2.0);

    // A flow on another engine of this process.
    let Some(other) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": "x"}))).await;
    let r = other
        .register(&sync_step("once", &svc.url("/once"), &[], &["out"]))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let r = other
        .start_flow(&json!({"id": "elsewhere", "goals": ["once"]}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(other.wait_for_flow("elsewhere").await["status"], "completed");
    let theirs = scrape_until(&other, |s| s.value("tartan_flows_started_total", &[]) >= 1.0).await;
    assert_eq!(theirs.value("tartan_flows_started_total", &[]), 1.0);
    let ours = scrape(&secured, Some(FULL)).await;
    assert_eq!(ours.value("tartan_flows_started_total", &[]), 0.0);
    assert_eq!(
        ours.value(
            "tartan_attempts_total",
            &[("step", "once"), ("call", "work"), ("outcome", "success")]
        ),
        0.0
    );
}

/// A bulk retry of three failed flows: the job is counted when created and
/// when it ends, and each flow by how it went.
async fn a_bulk_job_counts_its_creation_its_flows_and_its_end(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(400, json!({"detail": "no"}))).await;
    let step = sync_step("refused", &svc.url("/refused"), &[], &["out"]);
    let r = app.register(&step).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    for i in 0..3 {
        let id = format!("bulk-metered-{i}");
        let r = app.start_flow(&json!({"id": id, "goals": ["refused"]})).await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
        assert_eq!(app.wait_for_flow(&id).await["status"], "failed");
    }
    let r = app
        .post(
            "/engine/bulk/retry",
            &json!({"filter": {"id_prefix": "bulk-metered-"}, "rate": 1000}),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    let retry = [("action", "retry")];
    let ended = [("action", "retry"), ("status", "completed")];
    let done = [("action", "retry"), ("result", "done")];
    let s = scrape_until(&app, |s| s.value("tartan_bulk_jobs_ended_total", &ended) >= 1.0).await;
    assert_eq!(s.value("tartan_bulk_jobs_created_total", &retry), 1.0);
    assert_eq!(s.value("tartan_bulk_jobs_ended_total", &ended), 1.0);
    assert_eq!(s.value("tartan_bulk_flows_total", &done), 3.0);
    assert_eq!(
        s.value(
            "tartan_bulk_flows_total",
            &[("action", "retry"), ("result", "failed")]
        ),
        0.0
    );
    assert_eq!(
        s.value("tartan_bulk_jobs_created_total", &[("action", "cancel")]),
        0.0
    );
}

#[tokio::test]
async fn the_build_and_the_process_are_in_the_metrics() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    // The OpenMetrics document still parses, the info family included.
    scrape(&app, None).await;
    let text = metrics_text(&app).await;
    let value = |name: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
    };
    assert!(
        text.contains(&format!(
            "tartan_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
    assert!(value("process_resident_memory_bytes") > 1_000_000.0);
    assert!(value("process_open_fds") > 2.0);
    assert!(value("process_max_fds") >= value("process_open_fds"));
    assert!(value("process_cpu_seconds_total") > 0.0);
}

/// Every family docs/operating.md lists, as a fresh process exposes it:
/// named in a `# TYPE` line before anything happened, and the series of
/// known label values at zero, so that a dashboard's rate or an alert's
/// ratio is 0, not absent, on an idle engine.
#[tokio::test]
async fn a_fresh_process_exposes_every_family_and_its_known_series_at_zero() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let text = metrics_text(&app).await;
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operating.md")).unwrap();
    let table = docs
        .split("### What is measured")
        .nth(1)
        .and_then(|rest| rest.split("\n### ").next())
        .expect("docs/operating.md, \"What is measured\"");
    // Each row's first cell names one family or several (`a`, `b`), as
    // exposed: a counter with `_total` and an info with `_info`, which the
    // `# TYPE` line leaves out.
    let mut families = Vec::new();
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        let first = row.split('|').nth(1).unwrap_or_default();
        for name in first.split('`').skip(1).step_by(2) {
            families.push(
                name.trim_end_matches("_total")
                    .trim_end_matches("_info")
                    .to_string(),
            );
        }
    }
    assert!(families.len() > 40, "{families:?}");
    for family in &families {
        let described = text
            .lines()
            .any(|l| l.strip_prefix("# TYPE ").and_then(|t| t.split(' ').next()) == Some(family));
        assert!(described, "no `# TYPE {family}` in a fresh scrape:\n{text}");
    }
    for series in [
        r#"tartan_flows_finished_total{status="failed"} 0"#,
        r#"tartan_flow_starts_refused_total{reason="unavailable"} 0"#,
        r#"tartan_webhooks_total{kind="result",result="forbidden"} 0"#,
        r#"tartan_bulk_flows_total{action="retry",result="failed"} 0"#,
        r#"tartan_catalog_reloads_total{reason="other_process"} 0"#,
        r#"tartan_commit_errors_total{kind="unavailable"} 0"#,
        "tartan_database_unavailable 0",
        "tartan_database_outages_total 0",
        "tartan_flows_lost_total 0",
        r#"tartan_db_pool_max_connections{pool="api"} "#,
        r#"tartan_db_pool_connections{pool="write",state="in_use"} "#,
    ] {
        assert!(text.contains(series), "no {series} in a fresh scrape:\n{text}");
    }
}

/// `GET /metrics`, as text.
async fn metrics_text(app: &TestApp) -> String {
    app.client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}
