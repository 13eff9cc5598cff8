//! An in-process OTLP/gRPC trace receiver: the collector a test points `CAIRN_OTLP_ENDPOINT`
//! (or [`cairn_telemetry::init_with_otlp`]) at, keeping every span it is sent; in plaintext
//! ([`OtlpReceiver::start`]) or over TLS ([`OtlpReceiver::start_tls`], optionally requiring a
//! client certificate).
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use tokio::task::JoinHandle;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

use crate::TestCert;

/// How long [`OtlpReceiver::wait_for`] waits for the spans it is asked for.
const WAIT: Duration = Duration::from_secs(30);

/// One span as received.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// The exporting process's `service.name`.
    pub service: String,
    pub name: String,
    /// Hex, as in `traceparent`.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// The trace ids of the span's links.
    pub linked_trace_ids: Vec<String>,
    /// String-valued attributes (tracing fields), as key and value.
    pub attributes: Vec<(String, String)>,
}

impl ReceivedSpan {
    /// The attribute `key`, if it was a string.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The receiver; stops serving when dropped.
pub struct OtlpReceiver {
    addr: SocketAddr,
    tls: bool,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    task: JoinHandle<()>,
}

impl OtlpReceiver {
    /// Serves on a free loopback port, in plaintext.
    pub async fn start() -> Self {
        Self::serve(None).await
    }

    /// Serves on a free loopback port over TLS with `server` (a [`crate::TestCa`]
    /// certificate for `localhost` and `127.0.0.1`); with `client_ca` (PEM) it requires a
    /// client certificate signed by it (mTLS).
    pub async fn start_tls(server: &TestCert, client_ca: Option<&str>) -> Self {
        let mut tls =
            ServerTlsConfig::new().identity(Identity::from_pem(&server.cert, &server.key));
        if let Some(ca) = client_ca {
            tls = tls.client_ca_root(Certificate::from_pem(ca));
        }
        Self::serve(Some(tls)).await
    }

    async fn serve(tls: Option<ServerTlsConfig>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the OTLP receiver");
        let addr = listener.local_addr().expect("the receiver's address");
        let spans = Arc::new(Mutex::new(Vec::new()));
        let service = TraceServiceServer::new(Collector {
            spans: spans.clone(),
        });
        let with_tls = tls.is_some();
        let mut server = tonic::transport::Server::builder();
        if let Some(tls) = tls {
            server = server
                .tls_config(tls)
                .expect("the OTLP receiver's TLS settings");
        }
        let task = tokio::spawn(async move {
            let served = server
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await;
            if let Err(error) = served {
                panic!("the OTLP receiver stopped: {error}");
            }
        });
        Self {
            addr,
            tls: with_tls,
            spans,
            task,
        }
    }

    /// Installs this process's subscriber with an exporter sending here in plaintext
    /// ([`cairn_telemetry::init_with_otlp`]; once per process, so once per test under nextest).
    pub fn install(&self, service_name: &str) {
        assert!(
            !self.tls,
            "install exports in plaintext: export to a TLS receiver with the client TLS settings"
        );
        let channel = tonic::transport::Endpoint::from_shared(self.endpoint())
            .expect("the receiver's endpoint")
            .timeout(cairn_telemetry::trace::EXPORT_TIMEOUT)
            .connect_lazy();
        cairn_telemetry::init_with_otlp(
            service_name,
            Some(cairn_telemetry::OtlpExport::new(self.endpoint(), channel)),
        )
        .expect("install the OTLP exporter");
    }

    /// `http://127.0.0.1:<port>`, or `https://127.0.0.1:<port>` over TLS.
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().expect("spans lock").clone()
    }

    /// Flushes this process's exporter and waits until the spans received satisfy `done`
    /// (`what` names it in the panic when they do not within 30 s); returns them all.
    pub async fn wait_for(
        &self,
        what: &str,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Vec<ReceivedSpan> {
        let deadline = Instant::now() + WAIT;
        loop {
            cairn_telemetry::trace::flush().await;
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} among the {} spans received: {:#?}",
                spans.len(),
                spans
                    .iter()
                    .map(|s| (&s.service, &s.name, &s.trace_id))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Collector {
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut received = Vec::new();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| string_value(kv.value.as_ref()?.value.as_ref()?))
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    received.push(ReceivedSpan {
                        service: service.clone(),
                        name: span.name,
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        linked_trace_ids: span.links.iter().map(|l| hex(&l.trace_id)).collect(),
                        attributes: span
                            .attributes
                            .iter()
                            .filter_map(|kv| {
                                let value = string_value(kv.value.as_ref()?.value.as_ref()?)?;
                                Some((kv.key.clone(), value))
                            })
                            .collect(),
                    });
                }
            }
        }
        self.spans.lock().expect("spans lock").extend(received);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

fn string_value(value: &Value) -> Option<String> {
    match value {
        Value::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
