//! [`Cairn`]: one client for the whole platform. It holds a lazily connected channel per
//! service, the caller's [`TokenSource`] and the call policy (a deadline per call, retry
//! with backoff on UNAVAILABLE for idempotent RPCs), and hands out the typed service
//! clients of [`crate::rpc`].
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tonic::metadata::MetadataValue;
use tonic::transport::Channel;

use crate::claims::AccessClaims;
use crate::endpoints::{Endpoint, Endpoints};
use crate::error::{Error, connection_failed};
use crate::rpc::{self, Rpc};
use crate::tls::{ClientTls, TlsSettingError};
use crate::token::{Credential, TokenSource};

/// How calls are made.
#[derive(Debug, Clone)]
pub struct CallOptions {
    /// The deadline of one try of a unary call (sent as `grpc-timeout` and enforced here).
    pub deadline: Duration,
    /// Tries of an idempotent call that meets UNAVAILABLE (1 = no retry).
    pub max_attempts: u32,
    /// The first backoff; it doubles per try (with jitter) up to `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// How long to wait for a TCP connection to a service.
    pub connect_timeout: Duration,
    /// The largest answer decoded (tonic's own default is 4 MiB; a resolved root config or
    /// a saved plan can be larger). Services calling each other raise it to `usize::MAX`.
    pub max_decoding_message_size: usize,
}

/// The default [`CallOptions::max_decoding_message_size`].
pub const DEFAULT_MAX_DECODING_MESSAGE_SIZE: usize = 64 * 1024 * 1024;

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            deadline: Duration::from_secs(30),
            max_attempts: 4,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            max_decoding_message_size: DEFAULT_MAX_DECODING_MESSAGE_SIZE,
        }
    }
}

impl CallOptions {
    /// The wait before try `attempt + 1` (attempt counts from 1), with up to 25 % jitter.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let base = self
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)))
            .min(self.max_backoff);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        base + base.mul_f64(f64::from(nanos % 1000) / 4000.0)
    }
}

struct Inner {
    endpoints: Endpoints,
    options: CallOptions,
    tokens: Option<TokenSource>,
    channels: HashMap<Endpoint, Channel>,
}

/// The platform client. Cheap to clone; channels connect on first use.
#[derive(Clone)]
pub struct Cairn {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Cairn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cairn")
            .field("endpoints", &self.inner.endpoints)
            .field("tokens", &self.inner.tokens)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Cairn`].
#[derive(Debug, Default)]
pub struct CairnBuilder {
    endpoints: Endpoints,
    options: CallOptions,
    credential: Option<Credential>,
    tokens: Option<TokenSource>,
    tls: Option<ClientTls>,
    channels: HashMap<Endpoint, Channel>,
}

impl CairnBuilder {
    pub fn endpoints(mut self, endpoints: Endpoints) -> Self {
        self.endpoints = endpoints;
        self
    }

    pub fn endpoint(mut self, endpoint: Endpoint, url: impl Into<String>) -> Self {
        self.endpoints.set(endpoint, url);
        self
    }

    pub fn options(mut self, options: CallOptions) -> Self {
        self.options = options;
        self
    }

    /// Calls authenticate with `credential` (an API token is exchanged with tenancy).
    pub fn credential(mut self, credential: Credential) -> Self {
        self.credential = Some(credential);
        self
    }

    /// Calls authenticate with an existing token source (a service's own).
    pub fn token_source(mut self, tokens: TokenSource) -> Self {
        self.tokens = Some(tokens);
        self
    }

    /// Calls to `endpoint` go over `channel` (one the caller built and shares, e.g. a
    /// service's peer channel), instead of one made from the endpoint's URL. The URL is
    /// still what errors name.
    pub fn channel(mut self, endpoint: Endpoint, url: impl Into<String>, channel: Channel) -> Self {
        self.endpoints.set(endpoint, url);
        self.channels.insert(endpoint, channel);
        self
    }

    /// How `https://` endpoints are verified (default: [`ClientTls::from_env`]).
    pub fn tls(mut self, tls: ClientTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Checks every endpoint URL; connects nothing yet (call it inside a Tokio runtime).
    pub fn build(self) -> Result<Cairn, Error> {
        let tls = match self.tls {
            Some(tls) => tls,
            None => ClientTls::from_env().map_err(Error::Tls)?,
        };
        let mut channels = self.channels;
        for endpoint in Endpoint::ALL {
            if channels.contains_key(&endpoint) {
                continue;
            }
            let url = self.endpoints.url(endpoint).to_owned();
            let channel = crate::tls::endpoint(&url, &tls)
                .map_err(|e| match e {
                    TlsSettingError::InvalidUrl { .. } => Error::InvalidEndpoint {
                        endpoint,
                        url: url.clone(),
                    },
                    other => Error::Tls(other),
                })?
                .connect_timeout(self.options.connect_timeout)
                .tcp_nodelay(true)
                .connect_lazy();
            channels.insert(endpoint, channel);
        }
        let tokens = match (self.tokens, self.credential) {
            (Some(t), _) => Some(t),
            (None, Some(c)) => Some(TokenSource::new(
                c,
                channels.get(&Endpoint::Tenancy).cloned(),
            )),
            (None, None) => None,
        };
        Ok(Cairn {
            inner: Arc::new(Inner {
                endpoints: self.endpoints,
                options: self.options,
                tokens,
                channels,
            }),
        })
    }
}

impl Cairn {
    pub fn builder() -> CairnBuilder {
        CairnBuilder::default()
    }

    /// A client of the local ports with `credential`.
    pub fn local(credential: Credential) -> Result<Cairn, Error> {
        Self::builder().credential(credential).build()
    }

    pub fn endpoints(&self) -> &Endpoints {
        &self.inner.endpoints
    }

    pub fn options(&self) -> &CallOptions {
        &self.inner.options
    }

    /// The largest answer a typed client decodes.
    pub(crate) fn max_decoding_message_size(&self) -> usize {
        self.inner.options.max_decoding_message_size
    }

    /// The token source, if the client has a credential.
    pub fn token_source(&self) -> Option<&TokenSource> {
        self.inner.tokens.as_ref()
    }

    /// The channel to `endpoint`.
    pub fn channel(&self, endpoint: Endpoint) -> Result<Channel, Error> {
        self.inner
            .channels
            .get(&endpoint)
            .cloned()
            .ok_or_else(|| Error::InvalidEndpoint {
                endpoint,
                url: self.inner.endpoints.url(endpoint).to_owned(),
            })
    }

    /// A valid access token now (exchanging or refreshing as needed).
    pub async fn access_token(&self) -> Result<Arc<str>, Error> {
        let tokens = self.inner.tokens.as_ref().ok_or(Error::NoCredential)?;
        tokens.access_token().await.map_err(|err| match err {
            // Tenancy could not be reached: say where, like any other call.
            crate::token::SdkError::Exchange(status) if connection_failed(&status) => {
                self.status_error(Rpc::ExchangeApiToken, status)
            }
            other => Error::Credential(other),
        })
    }

    /// Who the credential speaks for: the claims of the current access token (decoded, not
    /// verified: the services verify it).
    pub async fn identity(&self) -> Result<AccessClaims, Error> {
        let token = self.access_token().await?;
        AccessClaims::decode_unverified(&token)
            .map_err(|_| Error::Credential(crate::token::SdkError::UnknownCredential))
    }

    /// A request for `rpc` with its deadline and (unless public) the bearer token.
    pub(crate) async fn request<T>(
        &self,
        rpc: Rpc,
        message: T,
    ) -> Result<tonic::Request<T>, Error> {
        let mut req = self.stream_request(rpc, message).await?;
        req.set_timeout(self.inner.options.deadline);
        Ok(req)
    }

    /// A request for a streaming `rpc`: the bearer token, no deadline on the stream (the
    /// caller bounds the wait for its first answer).
    pub(crate) async fn stream_request<T>(
        &self,
        rpc: Rpc,
        message: T,
    ) -> Result<tonic::Request<T>, Error> {
        let mut req = tonic::Request::new(message);
        // The caller's trace continues in the service called (nothing when traces are off).
        for (name, value) in cairn_telemetry::TraceContext::current().headers() {
            if let Ok(value) = value.parse() {
                req.metadata_mut().insert(name, value);
            }
        }
        if !rpc.is_public() {
            let token = self.access_token().await?;
            let value: MetadataValue<_> = format!("Bearer {token}")
                .parse()
                .map_err(|_| Error::Credential(crate::token::SdkError::UnknownCredential))?;
            req.metadata_mut().insert("authorization", value);
        }
        Ok(req)
    }

    pub(crate) fn status_error(&self, rpc: Rpc, status: tonic::Status) -> Error {
        Error::Status {
            rpc,
            endpoint: rpc.endpoint(),
            url: self.inner.endpoints.url(rpc.endpoint()).to_owned(),
            status,
        }
    }

    /// One unary call: deadline per try; retried with backoff when `rpc` is idempotent and
    /// the try got no answer ([`connection_failed`](crate::connection_failed)). Only a try
    /// that may be followed by another sends a copy of the message (a saved plan can be
    /// large); the last one sends the message itself.
    pub(crate) async fn unary<Req, Resp, F, Fut>(
        &self,
        rpc: Rpc,
        message: Req,
        call: F,
    ) -> Result<Resp, Error>
    where
        Req: Clone,
        F: Fn(tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let options = &self.inner.options;
        if rpc.idempotency().retry_safe() {
            for attempt in 1..options.max_attempts {
                match self.try_once(rpc, message.clone(), &call).await? {
                    Ok(resp) => return Ok(resp),
                    Err(status) if connection_failed(&status) => {
                        let wait = options.backoff(attempt);
                        tracing::debug!(%rpc, attempt, ?wait, message = status.message(), "no answer; retrying");
                        tokio::time::sleep(wait).await;
                    }
                    Err(status) => return Err(self.status_error(rpc, status)),
                }
            }
        }
        self.try_once(rpc, message, &call)
            .await?
            .map_err(|status| self.status_error(rpc, status))
    }

    /// One try of a unary call within the deadline: the answer or the status it failed with
    /// (the outer error: no request could be made, e.g. no access token).
    async fn try_once<Req, Resp, F, Fut>(
        &self,
        rpc: Rpc,
        message: Req,
        call: &F,
    ) -> Result<Result<Resp, tonic::Status>, Error>
    where
        F: Fn(tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let deadline = self.inner.options.deadline;
        let req = self.request(rpc, message).await?;
        Ok(match tokio::time::timeout(deadline, call(req)).await {
            Ok(Ok(resp)) => Ok(resp.into_inner()),
            Ok(Err(status)) => Err(status),
            Err(_) => Err(tonic::Status::deadline_exceeded(format!(
                "no answer within {deadline:?}"
            ))),
        })
    }

    pub fn tenants(&self) -> rpc::Tenants {
        rpc::Tenants {
            cairn: self.clone(),
        }
    }
    pub fn users(&self) -> rpc::Users {
        rpc::Users {
            cairn: self.clone(),
        }
    }
    pub fn tokens(&self) -> rpc::Tokens {
        rpc::Tokens {
            cairn: self.clone(),
        }
    }
    pub fn targets(&self) -> rpc::Targets {
        rpc::Targets {
            cairn: self.clone(),
        }
    }
    pub fn audit(&self) -> rpc::Audit {
        rpc::Audit {
            cairn: self.clone(),
        }
    }
    pub fn templates(&self) -> rpc::Templates {
        rpc::Templates {
            cairn: self.clone(),
        }
    }
    pub fn resolver(&self) -> rpc::Resolver {
        rpc::Resolver {
            cairn: self.clone(),
        }
    }
    pub fn states(&self) -> rpc::States {
        rpc::States {
            cairn: self.clone(),
        }
    }
    pub fn runs(&self) -> rpc::Runs {
        rpc::Runs {
            cairn: self.clone(),
        }
    }
    pub fn recovery(&self) -> rpc::Recovery {
        rpc::Recovery {
            cairn: self.clone(),
        }
    }
    pub fn instances(&self) -> rpc::Instances {
        rpc::Instances {
            cairn: self.clone(),
        }
    }
    pub fn deployments(&self) -> rpc::Deployments {
        rpc::Deployments {
            cairn: self.clone(),
        }
    }
    pub fn webhooks(&self) -> rpc::Webhooks {
        rpc::Webhooks {
            cairn: self.clone(),
        }
    }
    pub fn drift(&self) -> rpc::Drift {
        rpc::Drift {
            cairn: self.clone(),
        }
    }
    pub fn runner_admin(&self) -> rpc::RunnerAdmin {
        rpc::RunnerAdmin {
            cairn: self.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn backoff_grows_and_is_capped() {
        let o = CallOptions::default();
        assert!(o.backoff(1) >= Duration::from_millis(200));
        assert!(o.backoff(1) < Duration::from_millis(260));
        assert!(o.backoff(3) >= Duration::from_millis(800));
        assert!(o.backoff(30) <= Duration::from_millis(6250));
    }

    #[tokio::test]
    async fn bad_urls_are_refused() {
        let err = Cairn::builder()
            .endpoint(Endpoint::Templates, "not a url")
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("templates endpoint"), "{err}");
    }

    /// A server that takes each connection, reads what the client sends first and closes it
    /// without an answer: every try of a call breaks under it. Counts the connections.
    async fn breaking_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = std::sync::Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = socket.read(&mut buf).await;
                drop(socket);
            }
        });
        (url, accepted)
    }

    /// The error of `ListTemplates` (idempotent) against templates at `url`, with
    /// `max_attempts` tries 1 ms apart.
    async fn list_templates_error(url: &str, max_attempts: u32) -> Error {
        let cairn = Cairn::builder()
            .endpoint(Endpoint::Templates, url)
            .credential(Credential::AccessToken("a.b.c".into()))
            .options(CallOptions {
                max_attempts,
                initial_backoff: Duration::from_millis(1),
                ..CallOptions::default()
            })
            .build()
            .unwrap();
        cairn
            .templates()
            .list_templates(Default::default())
            .await
            .unwrap_err()
    }

    #[tokio::test]
    async fn an_idempotent_call_whose_connection_breaks_is_tried_again() {
        let (url, accepted) = breaking_server().await;
        let err = list_templates_error(&url, 3).await;
        let Error::Status { status, .. } = &err else {
            panic!("not a status: {err}");
        };
        assert!(connection_failed(status), "{err}");
        assert_eq!(
            accepted.load(std::sync::atomic::Ordering::SeqCst),
            3,
            "each try on a connection of its own: {err}"
        );
    }

    #[tokio::test]
    async fn an_unreachable_service_is_unavailable_after_retries() {
        let err = list_templates_error("http://127.0.0.1:9", 2).await;
        assert_eq!(err.code(), Code::Unavailable);
        assert!(
            err.to_string()
                .starts_with("templates at http://127.0.0.1:9:"),
            "{err}"
        );
        assert!(!err.to_string().contains('\n'));

        let anon = Cairn::builder().build().unwrap();
        let err = anon
            .templates()
            .list_templates(Default::default())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::NoCredential), "{err}");
    }
}
