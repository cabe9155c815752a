//! Logs and OpenTelemetry traces (docs/operating.md, "Logs" and "Traces").
//! Traces are off unless an OTLP endpoint is set in the standard variables;
//! then spans are batched and exported over OTLP/HTTP from the SDK's own
//! thread, and the `tracing` spans of API requests join them through
//! `tracing-opentelemetry`, so that log lines carry their trace and span.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{InstrumentationScope, Key, KeyValue, Value};
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// How long the spans still queued at exit may take to be sent.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(5);

/// The service name when neither `OTEL_SERVICE_NAME` nor
/// `OTEL_RESOURCE_ATTRIBUTES` names one.
const SERVICE_NAME: &str = "tartan";

/// Holds the exporter while the process runs; dropping it sends what is
/// queued, within `SHUTDOWN_BOUND`.
pub struct TraceGuard {
    provider: SdkTracerProvider,
    endpoint: String,
    protocol: Protocol,
}

impl TraceGuard {
    /// The tracer the engine makes its spans with.
    pub fn tracer(&self) -> tartan_engine::Tracer {
        self.provider.tracer_with_scope(
            InstrumentationScope::builder("tartan")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        )
    }

    /// Says where spans go: once logging is set up.
    pub fn log_export(&self) {
        tracing::info!(endpoint = %self.endpoint, protocol = ?self.protocol, "exporting traces over OTLP/HTTP");
    }
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        // Blocks this thread (not the exporter's) for at most the bound.
        if let Err(e) = self.provider.shutdown_with_timeout(SHUTDOWN_BOUND) {
            tracing::warn!("traces not all exported at exit: {e}");
        }
    }
}

/// Set up trace export from the environment: `None` (and no exporter, no
/// spans) unless `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is set, or when `OTEL_SDK_DISABLED=true`.
/// The exporter and the SDK read the other standard variables themselves
/// (headers, timeout, sampler, batch sizes, resource attributes).
pub fn init_traces(node_id: &str) -> Result<Option<TraceGuard>> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let endpoint = match (
        var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        var("OTEL_EXPORTER_OTLP_ENDPOINT"),
    ) {
        (Some(traces), _) => traces,
        (None, Some(base)) => format!("{}/v1/traces", base.trim_end_matches('/')),
        (None, None) => return Ok(None),
    };
    // The exporter crate does not read the protocol variables itself.
    let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"));
    let protocol = match protocol.as_deref().map(str::trim) {
        None | Some("http/protobuf") => Protocol::HttpBinary,
        Some("http/json") => Protocol::HttpJson,
        Some(other) => bail!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={other:?} is not supported: traces are exported over \
             OTLP/HTTP, as http/protobuf (the default) or http/json"
        ),
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .build()
        .context("setting up the OTLP trace exporter")?;
    // The release and the engine every span comes from, unless the
    // environment (`OTEL_RESOURCE_ATTRIBUTES`) says otherwise.
    let detected = Resource::builder().build();
    let named = detected
        .get(&Key::from_static_str("service.name"))
        .is_some_and(|name| name != Value::from("unknown_service"));
    let mut builder = Resource::builder();
    if !named {
        builder = builder.with_service_name(SERVICE_NAME);
    }
    for (key, value) in [
        ("service.version", env!("CARGO_PKG_VERSION")),
        ("service.instance.id", node_id),
    ] {
        if detected.get(&Key::from_static_str(key)).is_none() {
            builder = builder.with_attribute(KeyValue::new(key, value.to_string()));
        }
    }
    let resource = builder.build();
    // The batch processor: a bounded queue (OTEL_BSP_MAX_QUEUE_SIZE, spans
    // beyond it are dropped) emptied by a thread of its own, so a slow or
    // unreachable collector never holds up the engine.
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    Ok(Some(TraceGuard {
        provider,
        endpoint,
        protocol,
    }))
}

/// Argyll's `LOG_LEVEL` as a filter, when `RUST_LOG` is not set: `debug`,
/// `info`, `warn` or `error`, anything else `info` as in Argyll. Its
/// `debug` is Tartan's own (the libraries' debug lines are not Argyll's).
fn argyll_level() -> EnvFilter {
    let level = std::env::var("LOG_LEVEL")
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    EnvFilter::new(match level.as_str() {
        "debug" => {
            "info,tartan=debug,tartan_core=debug,tartan_engine=debug,tartan_server=debug,tartan_store=debug"
        }
        "warn" => "warn",
        "error" => "error",
        _ => "info",
    })
}

/// One line per request (the server's request log) and everything else, as
/// text or as JSON objects (`TARTAN_LOG_FORMAT`); `RUST_LOG` filters. With
/// `traces`, the `tracing` spans that pass the filter (each API request's,
/// at DEBUG for probes) are exported too, and the lines in them name the
/// span's trace and span ids.
pub fn init_logging(format: LogFormat, traces: Option<&TraceGuard>) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| argyll_level());
    let bridge = traces.map(|t| {
        tracing_opentelemetry::layer()
            .with_tracer(t.tracer())
            // Where in Tartan's code a span was made says nothing to an
            // operator; the route and method do.
            .with_location(false)
            .with_threads(false)
    });
    let registry = tracing_subscriber::registry().with(filter).with(bridge);
    let fmt = tracing_subscriber::fmt::layer();
    match format {
        LogFormat::Json => registry
            .with(
                fmt.json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_span_list(false),
            )
            .init(),
        LogFormat::Text => registry
            .with(fmt.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout())))
            .init(),
    }
}
