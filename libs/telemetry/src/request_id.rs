//! Request ids: every request through [`RequestIdLayer`] carries an `x-request-id` header
//! (the caller's, when it is sane, or a new UUID v4), runs inside a `request` span that
//! records it, and the response echoes it back. With traces on, the span continues the
//! caller's trace (`traceparent`/`tracestate` headers or gRPC metadata).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{HeaderValue, Request, Response};
use pin_project_lite::pin_project;
use tower::{Layer, Service};
use tracing::Instrument as _;
use tracing::instrument::Instrumented;

/// The header carrying the request id, on requests and responses.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Longest caller-supplied id that is kept; longer ones are replaced.
const MAX_LEN: usize = 128;

/// The id of one request. Also stored in the request's extensions for handlers.
#[derive(Clone, PartialEq, Eq)]
pub struct RequestId {
    text: String,
    header: HeaderValue,
}

impl RequestId {
    /// A fresh random id (UUID v4, hyphenated).
    pub fn generate() -> Self {
        let text = uuid::Uuid::new_v4().to_string();
        let header = HeaderValue::from_str(&text).expect("a UUID is a valid header value");
        Self { text, header }
    }

    /// Accepts a caller-supplied id: 1 to 128 visible ASCII characters (no spaces), so it is
    /// safe to log and to echo.
    pub fn parse(value: &HeaderValue) -> Option<Self> {
        let bytes = value.as_bytes();
        let sane = !bytes.is_empty()
            && bytes.len() <= MAX_LEN
            && bytes.iter().all(|b| b.is_ascii_graphic());
        if !sane {
            return None;
        }
        let text = value.to_str().ok()?.to_owned();
        Some(Self {
            text,
            header: value.clone(),
        })
    }

    /// The id of `request`, or `None` if it has not passed through [`RequestIdLayer`].
    pub fn of<B>(request: &Request<B>) -> Option<&RequestId> {
        request.extensions().get::<RequestId>()
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn header_value(&self) -> &HeaderValue {
        &self.header
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RequestId").field(&self.text).finish()
    }
}

/// Tower layer adding [`RequestIdService`] around an `http` service.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestIdLayer;

impl RequestIdLayer {
    pub fn new() -> Self {
        Self
    }
}

impl<S> Layer<S> for RequestIdLayer {
    type Service = RequestIdService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestIdService { inner }
    }
}

/// See [`RequestIdLayer`].
#[derive(Debug, Clone)]
pub struct RequestIdService<S> {
    inner: S,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RequestIdService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = RequestIdFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        let id = request
            .headers()
            .get(REQUEST_ID_HEADER)
            .and_then(RequestId::parse)
            .unwrap_or_else(RequestId::generate);
        request
            .headers_mut()
            .insert(REQUEST_ID_HEADER, id.header_value().clone());
        let span = tracing::info_span!(
            "request",
            request_id = %id,
            method = %request.method(),
            path = %request.uri().path(),
        );
        if crate::trace::enabled() {
            let headers = request.headers();
            crate::TraceContext::from_headers(|name| {
                headers.get(name).and_then(|value| value.to_str().ok())
            })
            .parent(&span);
        }
        let header = id.header_value().clone();
        request.extensions_mut().insert(id);
        let future = {
            let _entered = span.enter();
            self.inner.call(request)
        };
        RequestIdFuture {
            inner: future.instrument(span),
            header,
        }
    }
}

pin_project! {
    /// Response future of [`RequestIdService`]: runs the inner future in the request span and
    /// copies the id onto the response.
    pub struct RequestIdFuture<F> {
        #[pin]
        inner: Instrumented<F>,
        header: HeaderValue,
    }
}

impl<F, ResBody, E> Future for RequestIdFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = Result<Response<ResBody>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut result = ready!(this.inner.poll(cx));
        if let Ok(response) = &mut result {
            response
                .headers_mut()
                .insert(REQUEST_ID_HEADER, this.header.clone());
        }
        Poll::Ready(result)
    }
}
