//! Traces: OpenTelemetry spans exported over OTLP/gRPC when `CAIRN_OTLP_ENDPOINT` is set (on
//! an [`OtlpExport`]: the channel to the collector, built by the caller with its TLS
//! settings — libs/service does, with `cairn_sdk::endpoint`), and
//! the W3C trace context ([`TraceContext`]) that carries a trace from one service to the next
//! in gRPC metadata, HTTP headers, NATS message headers and database rows.
//!
//! Without an endpoint nothing is installed: [`TraceContext::current`] is empty and
//! [`TraceContext::parent`] does nothing, at the cost of one atomic load.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator as _};
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_otlp::{WithExportConfig as _, WithTonicConfig as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// The setting naming the OTLP/gRPC collector (`https://host:4317`, `http://127.0.0.1:4317`);
/// unset: no traces.
pub const OTLP_ENDPOINT_VAR: &str = "CAIRN_OTLP_ENDPOINT";
/// How long one export may take: the exporter's timeout, and the one an [`OtlpExport`]'s
/// channel must carry too (the exporter cannot impose its own on a given channel).
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// The W3C header with the trace id, parent span id and flags.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C header with vendor-specific trace state.
pub const TRACESTATE: &str = "tracestate";

/// How long flushing at exit may take before spans are dropped.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

static ENABLED: AtomicBool = AtomicBool::new(false);
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Where spans go: the collector's URL (for messages) and the gRPC channel to it, which
/// carries its TLS (plaintext for `http://`, verified TLS for `https://`) and
/// [`EXPORT_TIMEOUT`]. This crate builds no channel itself: the TLS settings belong to the
/// caller (libs/service's, through `cairn_sdk::endpoint`).
#[derive(Debug, Clone)]
pub struct OtlpExport {
    endpoint: String,
    channel: tonic::transport::Channel,
}

impl OtlpExport {
    /// Export to `endpoint` over `channel`.
    pub fn new(endpoint: impl Into<String>, channel: tonic::transport::Channel) -> Self {
        Self {
            endpoint: endpoint.into(),
            channel,
        }
    }

    /// The collector's URL.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

/// The exporter for `service_name` sending over `export`, installed as the process's tracer
/// provider with the W3C propagator; returns the layer that turns `tracing` spans into
/// OpenTelemetry spans. Needs a Tokio runtime (the gRPC channel's worker runs on it).
pub(crate) fn otlp_layer<S>(
    service_name: &str,
    export: OtlpExport,
) -> Result<impl Layer<S> + use<S>, opentelemetry_otlp::ExporterBuildError>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_channel(export.channel)
        .with_timeout(EXPORT_TIMEOUT)
        .build()?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service_name.to_owned())
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("cairn");
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    // Only the first install wins (init is idempotent); a second provider is never built.
    let _first = PROVIDER.set(provider);
    ENABLED.store(true, Ordering::Release);
    Ok(tracing_opentelemetry::layer().with_tracer(tracer))
}

/// Whether spans are being exported.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Acquire)
}

/// Exports every span ended so far (tests: before asserting what a collector received).
/// A no-op without an exporter.
pub async fn flush() {
    if let Some(provider) = PROVIDER.get() {
        let provider = provider.clone();
        // The batch processor blocks its caller until its own thread has exported.
        let _flushed = tokio::task::spawn_blocking(move || provider.force_flush()).await;
    }
}

/// Flushes the spans still queued and stops the exporter; call once when the service stops.
pub async fn shutdown() {
    if let Some(provider) = PROVIDER.get() {
        let provider = provider.clone();
        let result =
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT))
                .await;
        if let Ok(Err(error)) = result {
            eprintln!("traces: flushing at exit: {error}");
        }
    }
}

/// A span's W3C trace context as header values: what one service hands the next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceContext {
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// The context of the current span (empty when traces are off or there is no span).
    pub fn current() -> Self {
        if !enabled() {
            return Self::default();
        }
        Self::of(&tracing::Span::current())
    }

    /// The context of `span` (empty when traces are off).
    pub fn of(span: &tracing::Span) -> Self {
        let mut context = Self::default();
        if !enabled() {
            return context;
        }
        let otel = span.context();
        if !otel.span().span_context().is_valid() {
            return context;
        }
        TraceContextPropagator::new().inject_context(&otel, &mut context);
        context
    }

    /// Reads the two headers through `get` (a header map, metadata, message headers).
    pub fn from_headers<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Self {
        Self {
            traceparent: get(TRACEPARENT).map(str::to_owned),
            tracestate: get(TRACESTATE).map(str::to_owned),
        }
    }

    /// A stored `traceparent` alone (a database column).
    pub fn from_traceparent(traceparent: Option<String>) -> Self {
        Self {
            traceparent,
            tracestate: None,
        }
    }

    /// The headers to send: (name, value) for each one present.
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            (TRACEPARENT, self.traceparent.as_deref()),
            (TRACESTATE, self.tracestate.as_deref()),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.map(|v| (name, v)))
    }

    pub fn is_empty(&self) -> bool {
        self.traceparent.is_none()
    }

    /// Makes `span` a child of this context (a request or message from another service).
    /// Nothing happens when traces are off or the context is empty or malformed.
    pub fn parent(&self, span: &tracing::Span) {
        if let Some(remote) = self.remote() {
            let _not_started = span.set_parent(remote);
        }
    }

    /// Links `span` to this context (work on behalf of a trace that has no parent to give,
    /// like tofu's backend calls on behalf of a registered run).
    pub fn link(&self, span: &tracing::Span) {
        if let Some(remote) = self.remote() {
            span.add_link(remote.span().span_context().clone());
        }
    }

    fn remote(&self) -> Option<opentelemetry::Context> {
        if !enabled() || self.is_empty() {
            return None;
        }
        let context = TraceContextPropagator::new().extract(self);
        context.span().span_context().is_valid().then_some(context)
    }
}

impl Injector for TraceContext {
    fn set(&mut self, key: &str, value: String) {
        match key {
            TRACEPARENT => self.traceparent = Some(value),
            TRACESTATE => self.tracestate = Some(value),
            _ => {}
        }
    }
}

impl Extractor for TraceContext {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => self.traceparent.as_deref(),
            TRACESTATE => self.tracestate.as_deref(),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        self.headers().map(|(name, _)| name).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_means_empty_and_no_op() {
        // No exporter is installed in this test binary.
        assert!(TraceContext::current().is_empty());
        let context = TraceContext::from_headers(|name| {
            (name == TRACEPARENT)
                .then_some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        });
        assert_eq!(context.headers().count(), 1);
        context.parent(&tracing::Span::none());
        assert!(context.remote().is_none());
    }
}
