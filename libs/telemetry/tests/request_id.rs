//! RequestIdLayer around `tower::service_fn` services.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use cairn_telemetry::{REQUEST_ID_HEADER, RequestId, RequestIdLayer};
use http::{HeaderValue, Request, Response, StatusCode};
use tower::{Layer, Service, ServiceExt, service_fn};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt};
use uuid::Uuid;

/// Echoes what the handler saw: the header, the extension and the current span's name.
async fn echo(request: Request<String>) -> Result<Response<String>, Infallible> {
    let header = request
        .headers()
        .get(REQUEST_ID_HEADER)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let extension = RequestId::of(&request).unwrap().as_str().to_owned();
    assert_eq!(header, extension, "header and extension agree");
    tokio::task::yield_now().await;
    let span = tracing::Span::current()
        .metadata()
        .map(|m| m.name())
        .unwrap_or("none");
    Ok(Response::new(format!("{header}|{span}")))
}

fn request(id: Option<&str>) -> Request<String> {
    let mut builder = Request::builder()
        .method("POST")
        .uri("http://coordinator/v1/states/s-1?ID=abc");
    if let Some(id) = id {
        builder = builder.header(REQUEST_ID_HEADER, id);
    }
    builder.body(String::from("{}")).unwrap()
}

fn response_id(response: &Response<String>) -> &str {
    response
        .headers()
        .get(REQUEST_ID_HEADER)
        .unwrap()
        .to_str()
        .unwrap()
}

#[tokio::test]
async fn a_missing_id_is_generated_and_echoed() {
    let service = RequestIdLayer::new().layer(service_fn(echo));
    let response = service.oneshot(request(None)).await.unwrap();
    let id = response_id(&response).to_owned();
    let parsed = Uuid::parse_str(&id).unwrap();
    assert_eq!(parsed.get_version_num(), 4);
    let seen = response.body().split('|').next().unwrap();
    assert_eq!(seen, id, "the handler saw the id the response carries");
}

#[tokio::test]
async fn each_request_gets_its_own_id() {
    let mut service = RequestIdLayer::new().layer(service_fn(echo));
    let first = service
        .ready()
        .await
        .unwrap()
        .call(request(None))
        .await
        .unwrap();
    let second = service
        .ready()
        .await
        .unwrap()
        .call(request(None))
        .await
        .unwrap();
    assert_ne!(response_id(&first), response_id(&second));
}

#[tokio::test]
async fn a_sane_caller_id_is_kept() {
    let service = RequestIdLayer::new().layer(service_fn(echo));
    let response = service
        .oneshot(request(Some("run-42/attempt-1:lock")))
        .await
        .unwrap();
    assert_eq!(response_id(&response), "run-42/attempt-1:lock");
    assert!(response.body().starts_with("run-42/attempt-1:lock|"));
}

#[tokio::test]
async fn an_unusable_caller_id_is_replaced() {
    let long = "x".repeat(129);
    for bad in ["", "has space", long.as_str()] {
        let service = RequestIdLayer::new().layer(service_fn(echo));
        let response = service.oneshot(request(Some(bad))).await.unwrap();
        let id = response_id(&response);
        assert_ne!(id, bad);
        assert!(Uuid::parse_str(id).is_ok(), "{bad:?} replaced by {id}");
    }
    let exactly_max = "y".repeat(128);
    let service = RequestIdLayer::new().layer(service_fn(echo));
    let response = service.oneshot(request(Some(&exactly_max))).await.unwrap();
    assert_eq!(response_id(&response), exactly_max);

    let non_ascii = HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap();
    assert_eq!(RequestId::parse(&non_ascii), None);
}

#[tokio::test]
async fn the_response_id_replaces_one_set_by_the_handler() {
    let inner = service_fn(|_request: Request<String>| async {
        Ok::<_, Infallible>(
            Response::builder()
                .header(REQUEST_ID_HEADER, "from-handler")
                .body(String::new())
                .unwrap(),
        )
    });
    let response = RequestIdLayer::new()
        .layer(inner)
        .oneshot(request(Some("from-caller")))
        .await
        .unwrap();
    let values: Vec<_> = response
        .headers()
        .get_all(REQUEST_ID_HEADER)
        .iter()
        .collect();
    assert_eq!(values, [HeaderValue::from_static("from-caller")]);
}

#[tokio::test]
async fn errors_pass_through_untouched() {
    let inner = service_fn(|_request: Request<String>| async {
        Err::<Response<String>, _>("backend down")
    });
    let error = RequestIdLayer::new()
        .layer(inner)
        .oneshot(request(None))
        .await
        .unwrap_err();
    assert_eq!(error, "backend down");
}

/// An inner service that is never ready: readiness must be forwarded, not assumed.
#[derive(Clone)]
struct NotReady;

impl Service<Request<String>> for NotReady {
    type Response = Response<String>;
    type Error = &'static str;
    type Future = std::future::Ready<Result<Response<String>, &'static str>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Err("overloaded"))
    }

    fn call(&mut self, _request: Request<String>) -> Self::Future {
        std::future::ready(Ok(Response::new(String::new())))
    }
}

#[tokio::test]
async fn readiness_is_forwarded() {
    let mut service = RequestIdLayer::new().layer(NotReady);
    assert_eq!(service.ready().await.err(), Some("overloaded"));
}

/// A span's name and its fields rendered with `Debug`.
type RecordedSpan = (String, BTreeMap<String, String>);

/// Records the name and fields of every span created.
#[derive(Clone, Default)]
struct SpanRecorder(Arc<Mutex<Vec<RecordedSpan>>>);

struct FieldVisitor<'a>(&'a mut BTreeMap<String, String>);

impl Visit for FieldVisitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for SpanRecorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: LayerContext<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut FieldVisitor(&mut fields));
        self.0
            .lock()
            .unwrap()
            .push((attrs.metadata().name().to_owned(), fields));
    }
}

#[tokio::test]
async fn the_handler_runs_inside_a_request_span_with_id_method_and_path() {
    let recorder = SpanRecorder::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(recorder.clone()));

    // Checked in the synchronous part of `call` too, not only while the future is polled.
    let inner = service_fn(|request: Request<String>| {
        let span_at_call = tracing::Span::current()
            .metadata()
            .map(|m| m.name())
            .unwrap_or("none");
        assert_eq!(span_at_call, "request");
        echo(request)
    });
    let response = RequestIdLayer::new()
        .layer(inner)
        .oneshot(request(Some("trace-me")))
        .await
        .unwrap();
    assert_eq!(
        response.body(),
        "trace-me|request",
        "polled inside the span, also after a yield"
    );

    let spans = recorder.0.lock().unwrap().clone();
    assert_eq!(spans.len(), 1, "{spans:?}");
    let (name, fields) = &spans[0];
    assert_eq!(name, "request");
    assert_eq!(fields["request_id"], "trace-me");
    assert_eq!(fields["method"], "POST");
    assert_eq!(
        fields["path"], "/v1/states/s-1",
        "the path without the query (it may carry a lock id)"
    );
    assert_eq!(response.status(), StatusCode::OK);
}
