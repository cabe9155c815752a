//! OpenTelemetry traces (docs/operating.md, "Traces"): a flow keeps the trace
//! it was started in (or one of its own), its spans are exported over
//! OTLP/HTTP to a receiver on 127.0.0.1:0, and its step calls carry the
//! trace in their `traceparent`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::helpers::*;
use tartan_testkit::both_backends;

both_backends!(
    spans_and_step_calls_follow_the_flows_trace,
    without_export_step_calls_still_carry_the_flows_trace
);

/// A collector that takes the request and never answers: flows run on as
/// if there were none (the exporter has a thread of its own and a bounded
/// queue; spans beyond it are dropped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_holds_nothing_up() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(std::future::pending::<&'static str>),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpJson)
        .with_endpoint(format!("http://{addr}/v1/traces"))
        .with_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let batches = BatchConfigBuilder::default()
        .with_max_queue_size(16)
        .with_max_export_batch_size(4)
        .with_scheduled_delay(Duration::from_millis(10))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(
            BatchSpanProcessor::builder(exporter)
                .with_batch_config(batches)
                .build(),
        )
        .build();
    let tracer = opentelemetry::trace::TracerProvider::tracer(&provider, "tartan-test");
    let app = start_on_with(db, "stuck-collector", move |c| c.tracer = Some(tracer)).await;
    let svc = two_steps(&app).await;
    // Far more spans than the queue holds, while every export hangs.
    for i in 0..20 {
        start_with(&app, &format!("f{i}"), None).await;
    }
    assert_eq!(svc.requests().len(), 40);
}

/// An OTLP/HTTP receiver (JSON encoding): every span exported to it, with
/// the attributes of its resource.
struct Collector {
    addr: std::net::SocketAddr,
    spans: Arc<Mutex<Vec<(Value, Value)>>>,
}

impl Collector {
    async fn start() -> Collector {
        let spans: Arc<Mutex<Vec<(Value, Value)>>> = Arc::default();
        let kept = spans.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: Bytes| {
                let kept = kept.clone();
                async move {
                    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
                    for rs in request["resourceSpans"].as_array().into_iter().flatten() {
                        for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                            for span in ss["spans"].as_array().into_iter().flatten() {
                                kept.push((rs["resource"].clone(), span.clone()));
                            }
                        }
                    }
                    axum::Json(json!({}))
                }
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Collector { addr, spans }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The spans of flow `flow_id` received so far.
    fn spans_of(&self, flow_id: &str) -> Vec<Value> {
        self.spans
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, s)| attr(s, "tartan.flow_id").as_deref() == Some(flow_id))
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// The span received with id `id`, whatever its flow.
    fn span_with_id(&self, id: &str) -> Option<Value> {
        let spans = self.spans.lock().unwrap();
        spans
            .iter()
            .find(|(_, s)| s["spanId"] == id)
            .map(|(_, s)| s.clone())
    }

    /// Wait (bounded) for a span that `matches`.
    async fn wait_for_span(&self, matches: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..200 {
            let found = self
                .spans
                .lock()
                .unwrap()
                .iter()
                .find(|(_, s)| matches(s))
                .map(|(_, s)| s.clone());
            if let Some(span) = found {
                return span;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no such span arrived: {:#?}", self.spans.lock().unwrap());
    }

    /// Wait (bounded) until `done` holds for flow `flow_id`'s spans.
    async fn wait_for(&self, flow_id: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        for _ in 0..200 {
            let spans = self.spans_of(flow_id);
            if done(&spans) {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("spans of {flow_id} never arrived: {:#?}", self.spans_of(flow_id));
    }
}

/// Wait (bounded) for a JSON log line of `bin` that `matches`.
async fn wait_for_line(bin: &crate::helpers::Binary, matches: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..200 {
        let found = bin
            .log
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| matches(l));
        if let Some(line) = found {
            return line;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no such line: {:#?}", bin.log.lock().unwrap());
}

/// A span attribute, as text (OTLP/JSON writes integers as strings).
fn attr(span: &Value, key: &str) -> Option<String> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .and_then(|a| {
            let v = &a["value"];
            v["stringValue"]
                .as_str()
                .or_else(|| v["intValue"].as_str())
                .map(str::to_string)
                .or_else(|| v["intValue"].as_i64().map(|i| i.to_string()))
        })
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

/// The `traceparent` fields of the calls a step server got for `flow_id`:
/// (trace id, parent id, flags).
fn step_traceparents(svc: &StepServer, flow_id: &str) -> Vec<(String, String, String)> {
    svc.requests()
        .iter()
        .filter(|r| r.headers["argyll-flow-id"] == flow_id)
        .map(|r| {
            let header = r.headers["traceparent"].to_str().unwrap();
            let parts: Vec<&str> = header.split('-').collect();
            assert_eq!(parts.len(), 4, "{header}");
            assert_eq!(parts[0], "00", "{header}");
            (parts[1].to_string(), parts[2].to_string(), parts[3].to_string())
        })
        .collect()
}

/// A provider of the test's own, exporting to `collector` in small, quick
/// batches: engines in one process each get theirs, no global one.
fn provider(collector: &Collector) -> SdkTracerProvider {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpJson)
        .with_endpoint(format!("{}/v1/traces", collector.endpoint()))
        .build()
        .unwrap();
    let batches = BatchConfigBuilder::default()
        .with_scheduled_delay(Duration::from_millis(50))
        .build();
    SdkTracerProvider::builder()
        .with_span_processor(
            BatchSpanProcessor::builder(exporter)
                .with_batch_config(batches)
                .build(),
        )
        .build()
}

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

async fn start_with(app: &TestApp, id: &str, traceparent: Option<&str>) {
    let mut req = app
        .client
        .post(app.url("/engine/flow"))
        .header("Content-Type", "application/json")
        .body(json!({"id": id, "goals": ["b"], "init": {"seed": ["s"]}}).to_string());
    if let Some(t) = traceparent {
        req = req.header("traceparent", t);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 201, "{:?}", resp.text().await);
    let flow = app.wait_for_flow(id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
}

/// Every span of one flow: its start, its decisions and its two calls all in
/// one trace; decisions and calls children of the start; each call's
/// `traceparent` names the trace and the call's span. Returns the trace id
/// and the start span's parent.
async fn check_flow(collector: &Collector, svc: &StepServer, flow_id: &str) -> (String, String) {
    let spans = collector
        .wait_for(flow_id, |s| {
            named(s, "tartan.step.call").len() == 2
                && named(s, "tartan.flow.start").len() == 1
                && named(s, "tartan.flow.decide").len() >= 2
        })
        .await;
    let trace = spans[0]["traceId"].as_str().unwrap().to_string();
    assert_eq!(trace.len(), 32);
    assert!(
        spans.iter().all(|s| s["traceId"] == trace.as_str()),
        "one trace for flow {flow_id}: {spans:#?}"
    );
    let start = named(&spans, "tartan.flow.start")[0];
    let start_id = start["spanId"].as_str().unwrap();
    // Internal: the request it came in is the server's span, made by the
    // binary's bridge (the_binary_exports_and_a_flows_trace_survives_a_restart).
    assert_eq!(start["kind"], 1, "{start:#}");
    assert_eq!(attr(start, "http.route"), None, "{start:#}");
    for s in named(&spans, "tartan.flow.decide") {
        assert_eq!(
            s["parentSpanId"], start_id,
            "a decision is a child of the start: {s:#}"
        );
    }
    let decisions = named(&spans, "tartan.flow.decide");
    // A tree: the start made `a`'s call; the decision on `a`'s result made
    // `b`'s, so `b`'s call is that decision's child.
    let call_of = |step: &str| {
        named(&spans, "tartan.step.call")
            .into_iter()
            .find(|c| attr(c, "tartan.step_id").as_deref() == Some(step))
            .unwrap()
    };
    assert_eq!(call_of("a")["parentSpanId"], start_id, "{:#}", call_of("a"));
    let recorded_a = decisions
        .iter()
        .find(|d| {
            attr(d, "tartan.command").as_deref() == Some("record")
                && attr(d, "tartan.step_id").as_deref() == Some("a")
        })
        .unwrap();
    assert_eq!(
        call_of("b")["parentSpanId"],
        recorded_a["spanId"],
        "b's call is a child of the decision on a's result: {:#}",
        call_of("b")
    );
    for step in ["a", "b"] {
        assert!(
            decisions
                .iter()
                .any(|d| attr(d, "tartan.command").as_deref() == Some("record")
                    && attr(d, "tartan.step_id").as_deref() == Some(step)
                    && attr(d, "tartan.attempt").as_deref() == Some("1")
                    && attr(d, "tartan.token").is_some()),
            "the decision on {step}'s result names it: {decisions:#?}"
        );
    }
    let calls = named(&spans, "tartan.step.call");
    let mut steps: Vec<String> = calls.iter().map(|s| attr(s, "tartan.step_id").unwrap()).collect();
    steps.sort();
    assert_eq!(steps, ["a", "b"]);
    for call in &calls {
        assert_eq!(attr(call, "tartan.attempt").as_deref(), Some("1"), "{call:#}");
        assert_eq!(attr(call, "tartan.token").map(|t| t.len()), Some(36), "{call:#}");
        assert_eq!(attr(call, "http.response.status_code").as_deref(), Some("200"));
        // The HTTP semantic conventions of a client call; the endpoint as
        // registered, no input value in it.
        assert_eq!(attr(call, "http.request.method").as_deref(), Some("POST"));
        assert_eq!(attr(call, "server.address").as_deref(), Some("127.0.0.1"));
        assert!(attr(call, "server.port").is_some(), "{call:#}");
        assert_eq!(attr(call, "url.scheme").as_deref(), Some("http"));
        assert!(
            attr(call, "url.template").is_some_and(|t| t.ends_with("/a") || t.ends_with("/b")),
            "{call:#}"
        );
    }
    let sent = step_traceparents(svc, flow_id);
    assert_eq!(sent.len(), 2);
    for (trace_id, parent, flags) in &sent {
        assert_eq!(trace_id, &trace, "the step is told the flow's trace");
        assert_eq!(flags, "01");
        assert!(
            calls.iter().any(|c| c["spanId"] == parent.as_str()),
            "the step's parent is its call's span: {parent}"
        );
    }
    (trace, start["parentSpanId"].as_str().unwrap_or("").to_string())
}

/// Two steps, `a` then `b`, on a step server of their own.
async fn two_steps(app: &TestApp) -> StepServer {
    let svc = StepServer::start(|r, _| {
        let key = r.path.trim_start_matches('/').to_string();
        json_reply(200, json!({ key: "done" }))
    })
    .await;
    for step in [
        sync_step("a", &svc.url("/a"), &["seed"], &["a"]),
        sync_step("b", &svc.url("/b"), &["a"], &["b"]),
    ] {
        assert_eq!(app.register(&step).await.status, 201);
    }
    svc
}

async fn without_export_step_calls_still_carry_the_flows_trace(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = two_steps(&app).await;
    start_with(
        &app,
        "traced",
        Some(&format!("00-{CALLER_TRACE}-{CALLER_SPAN}-00")),
    )
    .await;
    let sent = step_traceparents(&svc, "traced");
    assert_eq!(sent.len(), 2);
    for (trace, parent, flags) in &sent {
        assert_eq!(trace, CALLER_TRACE);
        assert_eq!(flags, "00", "the caller's sampled flag");
        assert_ne!(parent, CALLER_SPAN, "each call is a span of its own");
    }
    assert_ne!(sent[0].1, sent[1].1);
    // The caller's tracestate is kept with the flow and sent with its calls.
    let resp = app
        .client
        .post(app.url("/engine/flow"))
        .header("Content-Type", "application/json")
        .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .header("tracestate", "vendor=abc")
        .header("tracestate", "other=x1")
        .body(json!({"id": "stated", "goals": ["b"], "init": {"seed": ["s"]}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    assert_eq!(app.wait_for_flow("stated").await["status"], "completed");
    assert_eq!(app.flow("stated").await["trace"]["state"], "vendor=abc,other=x1");
    let states: Vec<String> = svc
        .requests()
        .iter()
        .filter(|r| r.headers["argyll-flow-id"] == "stated")
        .map(|r| r.headers["tracestate"].to_str().unwrap().to_string())
        .collect();
    assert_eq!(states, ["vendor=abc,other=x1", "vendor=abc,other=x1"]);
    start_with(&app, "own", Some("00-not-a-traceparent-01")).await;
    let sent = step_traceparents(&svc, "own");
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].0, sent[1].0, "one trace per flow: {sent:?}");
    assert_ne!(sent[0].0, CALLER_TRACE);
    assert_eq!(app.flow("own").await["trace"]["trace_id"], sent[0].0.as_str());
}

async fn spans_and_step_calls_follow_the_flows_trace(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let collector = Collector::start().await;
    let provider = provider(&collector);
    let tracer = opentelemetry::trace::TracerProvider::tracer(&provider, "tartan-test");
    let app = start_on_with(db, "traces", move |c| c.tracer = Some(tracer)).await;
    let svc = two_steps(&app).await;

    // The caller's trace: continued, under the caller's span.
    let caller = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    start_with(&app, "traced", Some(&caller)).await;
    let (trace, parent) = check_flow(&collector, &svc, "traced").await;
    assert_eq!(trace, CALLER_TRACE);
    assert_eq!(parent, CALLER_SPAN, "the start is a child of the caller's span");
    assert_eq!(app.flow("traced").await["trace"]["trace_id"], CALLER_TRACE);

    // None: a trace of the flow's own, its start the root.
    start_with(&app, "own", None).await;
    let (own, parent) = check_flow(&collector, &svc, "own").await;
    assert_ne!(own, CALLER_TRACE);
    assert_eq!(parent, "", "the start is the root");

    // An invalid one is ignored: the same as none.
    start_with(
        &app,
        "bad",
        Some(&format!("00-{}-{CALLER_SPAN}-01", &CALLER_TRACE[..30])),
    )
    .await;
    let (bad, parent) = check_flow(&collector, &svc, "bad").await;
    assert_ne!(bad, CALLER_TRACE);
    assert_ne!(bad, own, "each flow has a trace of its own");
    assert_eq!(parent, "");

    // A caller that does not sample: its steps are told so, and the
    // flow's spans are not exported (the default sampler follows the parent).
    let unsampled = "0af7651916cd43dd8448eb211c80319c";
    start_with(
        &app,
        "unsampled",
        Some(&format!("00-{unsampled}-b7ad6b7169203331-00")),
    )
    .await;
    let sent = step_traceparents(&svc, "unsampled");
    assert_eq!(sent.len(), 2);
    assert!(
        sent.iter().all(|(t, _, flags)| t == unsampled && flags == "00"),
        "{sent:?}"
    );
    let flushed = tokio::task::spawn_blocking({
        let provider = provider.clone();
        move || provider.force_flush()
    })
    .await
    .unwrap();
    assert!(flushed.is_ok(), "{flushed:?}");
    assert!(collector.spans_of("unsampled").is_empty());
}

/// The binary, configured by the standard variables alone: spans reach the
/// collector under the service name `tartan`, and a flow's trace outlives
/// a SIGKILL: the retry made by the next process carries it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_exports_and_a_flows_trace_survives_a_restart() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let collector = Collector::start().await;
    let endpoint = collector.endpoint();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ("TARTAN_LOG_FORMAT", "json"),
    ];
    // The first call fails with 503; the retry, 1.5 s later, succeeds.
    let svc = StepServer::start(|_, n| {
        if n == 0 {
            json_reply(503, json!({"detail": "warming up"}))
        } else {
            json_reply(200, json!({"out": "ok"}))
        }
    })
    .await;
    let engine = spawn_binary_with(&db, "traced-node", &env).await;
    let mut step = sync_step("flaky", &svc.url("/flaky"), &["seed"], &["out"]);
    step["work_config"] = json!({"max_retries": 3, "init_backoff": 1500, "backoff_type": "fixed"});
    assert_eq!(
        call(&engine, reqwest::Method::POST, "/engine/step", Some(step))
            .await
            .0,
        201
    );
    let resp = reqwest::Client::new()
        .post(format!("http://{}/engine/flow", engine.addr))
        .header("Content-Type", "application/json")
        .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .body(json!({"id": "r", "goals": ["flaky"], "init": {"seed": ["s"]}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    // The first call's span is exported before the process is killed.
    let first = collector
        .wait_for("r", |s| {
            named(s, "tartan.step.call")
                .iter()
                .any(|c| attr(c, "http.response.status_code").as_deref() == Some("503"))
        })
        .await;
    assert!(first.iter().all(|s| s["traceId"] == CALLER_TRACE), "{first:#?}");
    let first_engine_log = engine.log.lock().unwrap().clone();
    let mut engine = engine;
    engine.child.kill().await.expect("SIGKILL");

    let engine = spawn_binary_with(&db, "traced-node", &env).await;
    let flow = wait_for_terminal(&engine, "r").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let sent = step_traceparents(&svc, "r");
    assert_eq!(sent.len(), 2);
    assert!(sent.iter().all(|(t, _, _)| t == CALLER_TRACE), "{sent:?}");
    let spans = collector
        .wait_for("r", |s| {
            named(s, "tartan.step.call")
                .iter()
                .any(|c| attr(c, "tartan.attempt").as_deref() == Some("2"))
        })
        .await;
    assert!(spans.iter().all(|s| s["traceId"] == CALLER_TRACE), "{spans:#?}");
    let retry = named(&spans, "tartan.step.call")
        .into_iter()
        .find(|c| attr(c, "tartan.attempt").as_deref() == Some("2"))
        .unwrap();
    assert_eq!(
        sent[1].1,
        retry["spanId"].as_str().unwrap(),
        "the retry's parent is its span"
    );
    let start = named(&spans, "tartan.flow.start")[0];
    // The start is a child of the request's span (its `tracing` span,
    // exported through the bridge), itself the caller's child.
    let request = collector
        .span_with_id(start["parentSpanId"].as_str().unwrap())
        .unwrap_or_else(|| panic!("the start's parent is the request's span: {start:#}"));
    assert_eq!(request["name"], "POST /engine/flow", "{request:#}");
    assert_eq!(request["kind"], 2, "a server span: {request:#}");
    assert_eq!(request["traceId"], CALLER_TRACE);
    assert_eq!(request["parentSpanId"], CALLER_SPAN);
    assert_eq!(attr(&request, "http.request.method").as_deref(), Some("POST"));
    assert_eq!(attr(&request, "http.route").as_deref(), Some("/engine/flow"));
    assert_eq!(
        attr(&request, "http.response.status_code").as_deref(),
        Some("201")
    );
    // The first process's JSON line of that request names its trace, and
    // the flow's start span within it.
    let line = first_engine_log
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["message"] == "request" && l["route"] == "/engine/flow")
        .unwrap_or_else(|| panic!("no request line: {first_engine_log:#?}"));
    assert_eq!(line["trace_id"], CALLER_TRACE, "{line}");
    assert_eq!(line["span"]["trace_id"], CALLER_TRACE, "{line}");
    assert_eq!(line["span"]["span_id"], start["spanId"], "{line}");
    // Any other request's lines name the request's own span.
    let (status, _) = call(&engine, reqwest::Method::GET, "/engine/flow/r", None).await;
    assert_eq!(status, 200);
    let read = collector
        .wait_for_span(|s| s["name"] == "GET /engine/flow/{id}")
        .await;
    assert_eq!(attr(&read, "http.response.status_code").as_deref(), Some("200"));
    let line = wait_for_line(&engine, |l| {
        l["message"] == "request" && l["route"] == "/engine/flow/{id}"
    })
    .await;
    assert_eq!(line["span"]["trace_id"], read["traceId"], "{line}");
    assert_eq!(line["span"]["span_id"], read["spanId"], "{line}");
    // After the restart, still in the flow's tree: the retry is the child
    // of the decision that found it due, itself a child of the start.
    let due = named(&spans, "tartan.flow.decide")
        .into_iter()
        .find(|d| d["spanId"] == retry["parentSpanId"])
        .unwrap_or_else(|| panic!("the retry's parent is a decision: {spans:#?}"));
    assert_eq!(
        attr(due, "tartan.command").as_deref(),
        Some("retry_due"),
        "{due:#}"
    );
    assert_eq!(due["parentSpanId"], start["spanId"]);
    let resources = collector.spans.lock().unwrap();
    let resource = |key: &str| {
        resources[0].0["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["key"] == key)
            .map(|a| a["value"]["stringValue"].clone())
    };
    assert_eq!(resource("service.name"), Some(json!("tartan")));
    assert_eq!(
        resource("service.version"),
        Some(json!(env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(resource("service.instance.id"), Some(json!("traced-node")));
}

/// Traces go over OTLP/HTTP only: a gRPC protocol is refused at start
/// rather than sent to a port that does not speak it.
#[tokio::test]
async fn a_grpc_protocol_is_refused_at_start() {
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ];
    let (ok, _, stderr) = serve_refusing(&UNUSED_SERVER, &env).await;
    assert!(!ok, "grpc was accepted");
    assert!(stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL"), "{stderr}");
}
