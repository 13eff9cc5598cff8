//! A tower layer for gRPC servers that authenticates every request with a bearer token.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower::{Layer, Service};

use crate::error::AuthError;
use crate::keyset::KeySet;
use crate::principal::Principal;

/// Wraps a service so that each request must carry `authorization: Bearer <jwt>` signed by
/// a key of the [`KeySet`]. The verified [`Principal`] is inserted into the request
/// extensions; a request without a valid token is answered with gRPC UNAUTHENTICATED and
/// never reaches the inner service, unless its path starts with an allowlisted prefix.
/// A token the key set has verified before is answered from its cache
/// ([`KeySet::with_token_cache`]) until the token expires.
#[derive(Clone)]
pub struct AuthLayer {
    keys: Arc<KeySet>,
    public_prefixes: Arc<[String]>,
}

impl AuthLayer {
    pub fn new(keys: Arc<KeySet>) -> Self {
        AuthLayer {
            keys,
            public_prefixes: Arc::from(Vec::new()),
        }
    }

    /// Lets requests whose path starts with one of `prefixes` through without a token (and
    /// without a principal), e.g. `/grpc.health.v1.Health/` and `/grpc.reflection.`.
    /// Replaces any earlier allowlist.
    pub fn allow_unauthenticated<I, S>(mut self, prefixes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.public_prefixes = prefixes.into_iter().map(Into::into).collect();
        self
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = AuthService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AuthService {
            inner,
            keys: Arc::clone(&self.keys),
            public_prefixes: Arc::clone(&self.public_prefixes),
        }
    }
}

/// The service produced by [`AuthLayer`].
#[derive(Clone)]
pub struct AuthService<S> {
    inner: S,
    keys: Arc<KeySet>,
    public_prefixes: Arc<[String]>,
}

impl<S> AuthService<S> {
    fn is_public(&self, path: &str) -> bool {
        self.public_prefixes
            .iter()
            .any(|prefix| path.starts_with(prefix.as_str()))
    }
}

/// The response future of [`AuthService`].
pub type AuthFuture<R, E> = Pin<Box<dyn Future<Output = Result<R, E>> + Send>>;

impl<S, B, ResBody> Service<http::Request<B>> for AuthService<S>
where
    S: Service<http::Request<B>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: Default + Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = AuthFuture<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        if !self.is_public(req.uri().path()) {
            match authenticate(&self.keys, req.headers()) {
                Ok(principal) => {
                    req.extensions_mut().insert(principal);
                }
                Err(err) => {
                    tracing::debug!(path = req.uri().path(), error = %err, "request not authenticated");
                    let response = tonic::Status::from(err).into_http::<ResBody>();
                    return Box::pin(std::future::ready(Ok(response)));
                }
            }
        }
        Box::pin(self.inner.call(req))
    }
}

/// Reads and verifies the bearer token of a request's headers.
pub fn authenticate(keys: &KeySet, headers: &http::HeaderMap) -> Result<Principal, AuthError> {
    let value = headers
        .get(http::header::AUTHORIZATION)
        .ok_or(AuthError::MissingToken)?;
    let value = value
        .to_str()
        .map_err(|_| AuthError::MalformedAuthorization)?;
    let (scheme, token) = value
        .split_once(' ')
        .ok_or(AuthError::MalformedAuthorization)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::MalformedAuthorization);
    }
    let token = token.trim();
    if token.is_empty() {
        return Err(AuthError::MissingToken);
    }
    keys.verify(token)
}

/// The principal the [`AuthLayer`] attached to a request (tonic copies the HTTP extensions
/// into the `tonic::Request`). UNAUTHENTICATED if there is none, e.g. on an allowlisted path
/// or a server built without the layer.
pub fn principal<T>(req: &tonic::Request<T>) -> Result<&Principal, tonic::Status> {
    req.extensions()
        .get::<Principal>()
        .ok_or_else(|| tonic::Status::unauthenticated("request carries no verified principal"))
}
