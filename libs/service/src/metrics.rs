//! Prometheus metrics, wired once for every service: [`MetricsArgs`] (`CAIRN_METRICS_ADDR`,
//! part of [`crate::SharedArgs`] like the TLS settings; unset, no listener and no recorder, so
//! every `metrics::counter!` is a no-op), the
//! process-wide recorder ([`install`], idempotent: tests start several services in one
//! process), the `GET /metrics` listener (served by [`crate::GrpcServer`] through
//! [`HttpListener`], so it has the gRPC listener's TLS and the production profile refuses it
//! in plaintext like any other), and the two per-request layers:
//!
//! - [`GrpcMetricsLayer`] (in every [`crate::GrpcServer`]): `cairn_grpc_requests_total
//!   {service,method,code}` and `cairn_grpc_request_duration_seconds{service,method}`. The
//!   code is the response's `grpc-status`: from the headers of a trailers-only response
//!   (tonic's errors), else from the trailers at the end of the body, so a streaming call is
//!   counted, with its whole duration, when its stream ends. A call whose response or stream
//!   is dropped before its status (the client went away, the request timeout fired) counts
//!   as `CANCELLED`; a body that ends without trailers as `UNKNOWN`. Only methods of the
//!   platform's descriptor sets (cairn, health, reflection) get their own labels; any other
//!   path is `unknown`, so a caller cannot make new series.
//! - [`HttpMetricsLayer`] (the coordinator's OpenTofu backend): `<prefix>_requests_total
//!   {method,status}` and `<prefix>_request_duration_seconds{method}`, timed until the
//!   response body has been sent.
//!
//! Durations are histograms with one set of buckets from 1 ms to 1 h ([`DURATION_BUCKETS`]),
//! fine enough for an RPC and wide enough for a tofu apply.
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use pin_project_lite::pin_project;
use prost::Message as _;

pub use cairn_telemetry::metrics::{Kind, Metric, describe};

use crate::grpc::{Listen, ServeError};
use crate::http::HttpListener;
use crate::tasks::Tasks;

/// Calls handled by a gRPC server.
pub const GRPC_REQUESTS: &str = "cairn_grpc_requests_total";
/// How long a gRPC call took (a streaming one: until its stream ended).
pub const GRPC_REQUEST_DURATION: &str = "cairn_grpc_request_duration_seconds";

/// What libs/service records.
pub const METRICS: &[Metric] = &[
    Metric::counter(
        GRPC_REQUESTS,
        "gRPC calls handled, by service, method and status code",
    ),
    Metric::histogram(
        GRPC_REQUEST_DURATION,
        "gRPC call latency in seconds (streaming calls: until the stream ends)",
    ),
];

/// Upper bounds of every duration histogram (seconds).
pub const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// How often histogram samples are folded in when nobody scrapes (memory stays bounded).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Where the service serves its metrics.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MetricsArgs {
    /// Prometheus metrics listen address (`GET /metrics`, with the gRPC listener's TLS);
    /// unset: no metrics.
    #[arg(long, env = "CAIRN_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
}

/// Why metrics could not be set up.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MetricsError {
    #[error("install the Prometheus recorder: {0}")]
    Install(String),
}

static HANDLE: OnceLock<Result<PrometheusHandle, String>> = OnceLock::new();

/// Installs the process-wide Prometheus recorder (once; later calls return the same handle)
/// and describes libs/service's own metrics. Fails if another recorder was installed first.
pub fn install() -> Result<&'static PrometheusHandle, MetricsError> {
    let installed = HANDLE.get_or_init(|| {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), DURATION_BUCKETS)
            .map_err(|e| e.to_string())?
            .install_recorder()
            .map_err(|e| e.to_string())?;
        let upkeep = handle.clone();
        std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || {
                loop {
                    #[allow(
                        clippy::disallowed_methods,
                        reason = "its own thread, not a tokio worker: it lives as long as the process"
                    )]
                    std::thread::sleep(UPKEEP_EVERY);
                    upkeep.run_upkeep();
                }
            })
            .map_err(|e| format!("start the upkeep thread: {e}"))?;
        Ok(handle)
    });
    let handle = installed
        .as_ref()
        .map_err(|e| MetricsError::Install(e.clone()))?;
    describe(METRICS);
    Ok(handle)
}

/// The current metrics in Prometheus' text format; `None` before [`install`].
pub fn render() -> Option<String> {
    HANDLE.get()?.as_ref().ok().map(PrometheusHandle::render)
}

/// The `/metrics` route.
pub fn router(handle: &'static PrometheusHandle) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || async move {
            (
                [(
                    http::header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                )],
                handle.render(),
            )
        }),
    )
}

/// A bound metrics listener and the recorder it renders.
pub(crate) struct MetricsListener {
    listener: HttpListener,
    handle: &'static PrometheusHandle,
}

impl MetricsListener {
    /// Installs the recorder, describes `catalogues`, and binds `args.metrics_addr` with
    /// `listen`'s TLS (the profile refuses plaintext); `None` when it is unset (the
    /// catalogues are still described to a recorder a test installed).
    pub(crate) async fn bind(
        args: &MetricsArgs,
        listen: &Listen,
        catalogues: &[&[Metric]],
    ) -> Result<Option<Self>, ServeError> {
        let handle = match args.metrics_addr {
            Some(_) => Some(install().map_err(ServeError::Metrics)?),
            None => None,
        };
        for c in catalogues {
            describe(c);
        }
        let (Some(addr), Some(handle)) = (args.metrics_addr, handle) else {
            return Ok(None);
        };
        let listener = HttpListener::bind_as("metrics", addr, listen.clone()).await?;
        Ok(Some(MetricsListener { listener, handle }))
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    pub(crate) fn spawn(self, tasks: &mut Tasks) -> Result<SocketAddr, ServeError> {
        self.listener.spawn(router(self.handle), tasks)
    }
}

/// The gRPC status code's name as the gRPC specification spells it (`NOT_FOUND`): the
/// SDK's, so a metric label and a client's error message name a code alike.
pub use cairn_sdk::code_name;

/// `/package.Service/Method` → (service, method) for every method the platform serves.
type Methods = HashMap<String, (&'static str, &'static str)>;

/// The methods of the cairn, health and reflection descriptor sets, decoded once. The names
/// are leaked once per process (a few hundred short strings) so labels borrow them.
fn known_methods() -> &'static Methods {
    static KNOWN: OnceLock<Methods> = OnceLock::new();
    KNOWN.get_or_init(|| {
        let sets: [&[u8]; 3] = [
            cairn_proto::FILE_DESCRIPTOR_SET,
            tonic_health::pb::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
        ];
        let mut known = Methods::new();
        for bytes in sets {
            let Ok(set) = prost_types::FileDescriptorSet::decode(bytes) else {
                tracing::warn!(
                    "a gRPC descriptor set does not decode; its methods are counted as unknown"
                );
                continue;
            };
            for file in &set.file {
                for svc in &file.service {
                    let service = match file.package() {
                        "" => svc.name().to_owned(),
                        p => format!("{p}.{}", svc.name()),
                    };
                    let service: &'static str = Box::leak(service.into_boxed_str());
                    for m in &svc.method {
                        let method: &'static str = Box::leak(m.name().to_owned().into_boxed_str());
                        known.insert(format!("/{service}/{method}"), (service, method));
                    }
                }
            }
        }
        known
    })
}

/// The labels of a gRPC path: its service and method, or `unknown` for both.
fn grpc_labels(path: &str) -> (&'static str, &'static str) {
    known_methods()
        .get(path)
        .copied()
        .unwrap_or(("unknown", "unknown"))
}

/// One call being measured; records itself once (dropped unrecorded: `CANCELLED`).
struct GrpcCall {
    service: &'static str,
    method: &'static str,
    start: Instant,
}

impl GrpcCall {
    fn record(self, code: &'static str) {
        metrics::counter!(GRPC_REQUESTS, "service" => self.service, "method" => self.method, "code" => code)
            .increment(1);
        metrics::histogram!(GRPC_REQUEST_DURATION, "service" => self.service, "method" => self.method)
            .record(self.start.elapsed().as_secs_f64());
    }
}

/// The code of a `grpc-status` value (absent or unparsable: `None`).
fn status_of(headers: &HeaderMap) -> Option<&'static str> {
    headers
        .get("grpc-status")
        .map(|v| code_name(tonic::Code::from_bytes(v.as_bytes())))
}

/// One HTTP request being measured; records itself once, when its response body is done.
struct HttpCall {
    requests: &'static str,
    duration: &'static str,
    method: &'static str,
    status: String,
    start: Instant,
}

impl HttpCall {
    fn record(self) {
        metrics::counter!(self.requests, "method" => self.method, "status" => self.status)
            .increment(1);
        metrics::histogram!(self.duration, "method" => self.method)
            .record(self.start.elapsed().as_secs_f64());
    }
}

/// What a metered body records when it ends.
enum Pending {
    Grpc(GrpcCall),
    Http(HttpCall),
}

impl Pending {
    /// The body ended (`trailers` if it had some) or was dropped first (`ended` false).
    fn finish(self, trailers: Option<&HeaderMap>, ended: bool) {
        match self {
            Pending::Grpc(call) => {
                let code = match (trailers.and_then(status_of), ended) {
                    (Some(code), _) => code,
                    (None, true) => "UNKNOWN",
                    (None, false) => "CANCELLED",
                };
                call.record(code);
            }
            Pending::Http(call) => call.record(),
        }
    }
}

pin_project! {
    /// A response body that records its call when it ends (or is dropped).
    pub struct MeteredBody<B> {
        #[pin]
        inner: B,
        pending: Option<Pending>,
    }

    impl<B> PinnedDrop for MeteredBody<B> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(p) = this.project().pending.take() {
                p.finish(None, false);
            }
        }
    }
}

impl<B> http_body::Body for MeteredBody<B>
where
    B: http_body::Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = self.project();
        let frame = ready!(this.inner.poll_frame(cx));
        match &frame {
            Some(Ok(f)) => {
                if let Some(trailers) = f.trailers_ref()
                    && let Some(p) = this.pending.take()
                {
                    p.finish(Some(trailers), true);
                }
            }
            Some(Err(_)) | None => {
                if let Some(p) = this.pending.take() {
                    p.finish(None, true);
                }
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Tower layer counting and timing gRPC calls (see the [module documentation](self)).
#[derive(Debug, Clone, Copy, Default)]
pub struct GrpcMetricsLayer;

impl<S> tower::Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcMetrics { inner }
    }
}

/// See [`GrpcMetricsLayer`].
#[derive(Debug, Clone)]
pub struct GrpcMetrics<S> {
    inner: S,
}

impl<S, ReqBody, ResBody> tower::Service<Request<ReqBody>> for GrpcMetrics<S>
where
    S: tower::Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<MeteredBody<ResBody>>;
    type Error = S::Error;
    type Future = MeteredFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (service, method) = grpc_labels(request.uri().path());
        let call = GrpcCall {
            service,
            method,
            start: Instant::now(),
        };
        MeteredFuture {
            inner: self.inner.call(request),
            pending: Some(Pending::Grpc(call)),
        }
    }
}

pin_project! {
    /// The response future of the metering layers.
    pub struct MeteredFuture<F> {
        #[pin]
        inner: F,
        pending: Option<Pending>,
    }

    impl<F> PinnedDrop for MeteredFuture<F> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(p) = this.project().pending.take() {
                p.finish(None, false);
            }
        }
    }
}

impl<F, ResBody, E> Future for MeteredFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = Result<Response<MeteredBody<ResBody>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        let pending = this.pending.take();
        Poll::Ready(match result {
            Ok(response) => {
                let pending = match pending {
                    // A trailers-only response (tonic's errors): the status is here already.
                    Some(Pending::Grpc(call)) => match status_of(response.headers()) {
                        Some(code) => {
                            call.record(code);
                            None
                        }
                        None => Some(Pending::Grpc(call)),
                    },
                    Some(Pending::Http(mut call)) => {
                        call.status = response.status().as_u16().to_string();
                        Some(Pending::Http(call))
                    }
                    None => None,
                };
                Ok(response.map(|inner| MeteredBody { inner, pending }))
            }
            Err(e) => {
                match pending {
                    Some(Pending::Grpc(call)) => call.record("UNKNOWN"),
                    Some(Pending::Http(mut call)) => {
                        call.status = "error".to_owned();
                        call.record();
                    }
                    None => {}
                }
                Err(e)
            }
        })
    }
}

/// Tower layer counting and timing HTTP requests as `<prefix>_requests_total{method,status}`
/// and `<prefix>_request_duration_seconds{method}`; methods outside `methods` are `OTHER`.
#[derive(Debug, Clone, Copy)]
pub struct HttpMetricsLayer {
    requests: &'static str,
    duration: &'static str,
    methods: &'static [&'static str],
}

impl HttpMetricsLayer {
    /// The names of the two metrics and the methods labelled as themselves.
    pub const fn new(
        requests: &'static str,
        duration: &'static str,
        methods: &'static [&'static str],
    ) -> Self {
        HttpMetricsLayer {
            requests,
            duration,
            methods,
        }
    }
}

impl<S> tower::Layer<S> for HttpMetricsLayer {
    type Service = HttpMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        HttpMetrics {
            inner,
            layer: *self,
        }
    }
}

/// See [`HttpMetricsLayer`].
#[derive(Debug, Clone)]
pub struct HttpMetrics<S> {
    inner: S,
    layer: HttpMetricsLayer,
}

impl<S, ReqBody, ResBody> tower::Service<Request<ReqBody>> for HttpMetrics<S>
where
    S: tower::Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<MeteredBody<ResBody>>;
    type Error = S::Error;
    type Future = MeteredFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let method = self
            .layer
            .methods
            .iter()
            .copied()
            .find(|m| *m == request.method().as_str())
            .unwrap_or("OTHER");
        let call = HttpCall {
            requests: self.layer.requests,
            duration: self.layer.duration,
            method,
            // A request dropped before its response: the client went away.
            status: "cancelled".to_owned(),
            start: Instant::now(),
        };
        MeteredFuture {
            inner: self.inner.call(request),
            pending: Some(Pending::Http(call)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_methods_come_from_the_descriptor_sets() {
        assert_eq!(
            grpc_labels("/cairn.state.v1.States/GetState"),
            ("cairn.state.v1.States", "GetState")
        );
        assert_eq!(
            grpc_labels("/grpc.health.v1.Health/Check"),
            ("grpc.health.v1.Health", "Check")
        );
        assert_eq!(
            grpc_labels("/cairn.state.v1.States/NoSuchMethod"),
            ("unknown", "unknown")
        );
        assert_eq!(grpc_labels("/x"), ("unknown", "unknown"));
    }

    #[test]
    fn every_code_has_its_specification_name() {
        assert_eq!(code_name(tonic::Code::from_i32(0)), "OK");
        assert_eq!(code_name(tonic::Code::from_i32(5)), "NOT_FOUND");
        assert_eq!(code_name(tonic::Code::from_i32(16)), "UNAUTHENTICATED");
        assert_eq!(
            code_name(tonic::Code::from_bytes(b"not a number")),
            "UNKNOWN"
        );
    }
}
