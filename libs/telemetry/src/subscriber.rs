//! The process-wide subscriber of a Cairn binary: one JSON object per line on stdout, each
//! carrying the service name, filtered by `RUST_LOG`; given an [`OtlpExport`] (libs/service
//! makes one from `CAIRN_OTLP_ENDPOINT` and its client TLS settings), the same spans are also
//! exported as OpenTelemetry traces ([`crate::trace`]).

use std::sync::OnceLock;

use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::format::{Format, Json, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::filter;
use crate::trace::OtlpExport;

/// Why the subscriber could not be installed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TelemetryError {
    /// `RUST_LOG` holds directives that do not parse.
    #[error("RUST_LOG={value:?} is not a valid filter: {message}")]
    InvalidFilter { value: String, message: String },
    /// Something other than [`init`] already installed a global subscriber (or `log` logger).
    #[error("a global tracing subscriber is already installed: {message}")]
    AlreadyInstalled { message: String },
    /// An exporter could not be built for `CAIRN_OTLP_ENDPOINT`.
    #[error("CAIRN_OTLP_ENDPOINT={endpoint:?}: {message}")]
    Exporter { endpoint: String, message: String },
}

/// Installs the JSON subscriber for `service_name` (the `service` field of every line),
/// without trace export ([`init_with_otlp`] exports).
///
/// Idempotent: only the first call installs anything; later calls (with any name) return the
/// first call's result.
pub fn init(service_name: &str) -> Result<(), TelemetryError> {
    init_with_otlp(service_name, None)
}

/// [`init`], and with `export` the OTLP exporter sending over its channel (then call it
/// inside a Tokio runtime; `None`: no traces). Shares [`init`]'s once-only install.
pub fn init_with_otlp(
    service_name: &str,
    export: Option<OtlpExport>,
) -> Result<(), TelemetryError> {
    static INSTALLED: OnceLock<Result<(), TelemetryError>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let filter = filter::from_env()?;
            let otlp = export
                .map(|export| {
                    let endpoint = export.endpoint().to_owned();
                    crate::trace::otlp_layer(service_name, export).map_err(|error| {
                        TelemetryError::Exporter {
                            endpoint,
                            message: error.to_string(),
                        }
                    })
                })
                .transpose()?;
            tracing_subscriber::registry()
                .with(filter)
                .with(json_layer(service_name, std::io::stdout))
                .with(otlp)
                .try_init()
                .map_err(|error| TelemetryError::AlreadyInstalled {
                    message: error.to_string(),
                })
        })
        .clone()
}

/// The JSON formatting layer, writing to `make_writer`.
pub(crate) fn json_layer<S, W>(service_name: &str, make_writer: W) -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let inner = tracing_subscriber::fmt::format()
        .json()
        .with_current_span(true)
        .with_span_list(true);
    tracing_subscriber::fmt::layer()
        .json()
        .with_ansi(false)
        .event_format(WithService::new(service_name, inner))
        .with_writer(make_writer)
}

/// Wraps the JSON event format and adds `"service":"<name>"` as the first field of each line.
/// Event fields stay under `"fields"`, so an event field called `service` cannot clash.
struct WithService {
    /// `"service":"<escaped name>"`, ready to splice in.
    field: String,
    inner: Format<Json>,
}

impl WithService {
    fn new(service_name: &str, inner: Format<Json>) -> Self {
        let name = serde_json::Value::String(service_name.to_owned());
        Self {
            field: format!("\"service\":{name}"),
            inner,
        }
    }
}

impl<S, N> FormatEvent<S, N> for WithService
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
    Format<Json>: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let mut line = String::new();
        self.inner
            .format_event(ctx, Writer::new(&mut line), event)?;
        let Some(rest) = line.strip_prefix('{') else {
            return writer.write_str(&line);
        };
        writer.write_char('{')?;
        writer.write_str(&self.field)?;
        if !rest.starts_with('}') {
            writer.write_char(',')?;
        }
        writer.write_str(rest)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io;
    use std::sync::{Arc, Mutex};

    use serde_json::Value;

    use super::*;

    /// Collects everything the layer writes.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'w self) -> Self::Writer {
            self.clone()
        }
    }

    fn lines_written_by(service: &str, emit: impl FnOnce()) -> Vec<Value> {
        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::registry().with(json_layer(service, buffer.clone()));
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = buffer.0.lock().unwrap().clone();
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    #[test]
    fn every_line_is_json_with_the_service_name() {
        let lines = lines_written_by("state-coordinator", || {
            let span = tracing::info_span!("request", request_id = "r-1", path = "/v1/states/x");
            let _entered = span.enter();
            tracing::info!(generation = 7, "committed");
            tracing::warn!(service = "not the service name", "field called service");
        });
        assert_eq!(lines.len(), 2, "{lines:?}");

        let first = &lines[0];
        assert_eq!(first["service"], "state-coordinator");
        assert_eq!(first["level"], "INFO");
        assert_eq!(first["fields"]["message"], "committed");
        assert_eq!(first["fields"]["generation"], 7);
        assert_eq!(first["span"]["name"], "request");
        assert_eq!(first["span"]["request_id"], "r-1");
        assert_eq!(first["spans"][0]["path"], "/v1/states/x");
        assert!(first["timestamp"].is_string());

        let second = &lines[1];
        assert_eq!(second["service"], "state-coordinator");
        assert_eq!(second["fields"]["service"], "not the service name");
    }

    #[test]
    fn service_names_are_escaped() {
        let lines = lines_written_by("odd \"name\"\n", || tracing::error!("x"));
        assert_eq!(lines[0]["service"], "odd \"name\"\n");
        assert_eq!(lines[0]["level"], "ERROR");
    }
}
