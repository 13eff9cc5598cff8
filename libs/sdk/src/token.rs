//! Access tokens for outgoing calls: a service API token is exchanged with tenancy
//! (`Tokens.ExchangeApiToken`) and the access token refreshed before it expires; an
//! access token (a JWT) given directly is used as is.
use std::fmt;
use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use cairn_proto::tenancy::ExchangeApiTokenRequest;
use cairn_proto::tenancy::tokens_client::TokensClient;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::metadata::MetadataValue;
use tonic::service::Interceptor;
use tonic::transport::Channel;

/// The variable naming the file that holds a service's API token (or an access token).
pub const SERVICE_TOKEN_FILE_VAR: &str = "CAIRN_SERVICE_TOKEN_FILE";

/// Why no access token could be had.
#[derive(Debug, thiserror::Error)]
pub enum SdkError {
    #[error("{SERVICE_TOKEN_FILE_VAR} is not set")]
    NoTokenFile,
    #[error("read token file {path}")]
    ReadTokenFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the token file holds neither a Cairn API token nor an access token")]
    UnknownCredential,
    #[error("an API token needs a channel to tenancy to be exchanged")]
    NoTenancy,
    #[error("tenancy refused the token exchange: {0}")]
    Exchange(#[source] tonic::Status),
    #[error("tenancy answered without an expiry")]
    NoExpiry,
}

/// What a caller authenticates with.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// A long-lived API token (`cairn_…`), exchanged for access tokens.
    ApiToken(String),
    /// An access token (JWT), used as is until it expires.
    AccessToken(String),
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credential::ApiToken(_) => f.write_str("ApiToken([redacted])"),
            Credential::AccessToken(_) => f.write_str("AccessToken([redacted])"),
        }
    }
}

impl Credential {
    /// Recognises a token string: `cairn_…` is an API token, three dot-separated parts a JWT.
    pub fn parse(s: &str) -> Result<Self, SdkError> {
        let s = s.trim();
        if s.starts_with("cairn_") && !s.contains(char::is_whitespace) {
            return Ok(Credential::ApiToken(s.to_owned()));
        }
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() == 3 && parts.iter().all(|p| !p.is_empty()) && s.is_ascii() {
            return Ok(Credential::AccessToken(s.to_owned()));
        }
        Err(SdkError::UnknownCredential)
    }

    /// Reads a token file.
    pub fn from_file(path: &Path) -> Result<Self, SdkError> {
        let text = std::fs::read_to_string(path).map_err(|source| SdkError::ReadTokenFile {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text)
    }
}

#[derive(Clone)]
struct Cached {
    token: Arc<str>,
    expires_at: SystemTime,
    refresh_at: SystemTime,
}

struct Inner {
    credential: Credential,
    tenancy: Option<TokensClient<Channel>>,
    cached: RwLock<Option<Cached>>,
    /// Serializes exchanges so concurrent callers share one.
    exchange: Mutex<()>,
}

/// Hands out a valid access token, exchanging and refreshing as needed. Cheap to clone.
#[derive(Clone)]
pub struct TokenSource {
    inner: Arc<Inner>,
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSource")
            .field("credential", &self.inner.credential)
            .finish_non_exhaustive()
    }
}

/// When to refresh a token valid for `lifetime`: a third of its life before expiry, at most
/// two minutes before.
fn refresh_margin(lifetime: Duration) -> Duration {
    (lifetime / 3).min(Duration::from_secs(120))
}

impl TokenSource {
    /// A source for `credential`; `tenancy` is required for an API token.
    pub fn new(credential: Credential, tenancy: Option<Channel>) -> Self {
        TokenSource {
            inner: Arc::new(Inner {
                credential,
                tenancy: tenancy.map(TokensClient::new),
                cached: RwLock::new(None),
                exchange: Mutex::new(()),
            }),
        }
    }

    /// Reads the token file named by `CAIRN_SERVICE_TOKEN_FILE`.
    pub fn from_env(tenancy: Channel) -> Result<Self, SdkError> {
        let path = std::env::var_os(SERVICE_TOKEN_FILE_VAR).ok_or(SdkError::NoTokenFile)?;
        Ok(Self::new(
            Credential::from_file(Path::new(&path))?,
            Some(tenancy),
        ))
    }

    fn cached(&self) -> Option<Cached> {
        self.inner
            .cached
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A token valid now: the access token given, the cached one while it is fresh, or a
    /// new one from tenancy.
    pub async fn access_token(&self) -> Result<Arc<str>, SdkError> {
        let api_token = match &self.inner.credential {
            Credential::AccessToken(t) => return Ok(Arc::from(t.as_str())),
            Credential::ApiToken(t) => t,
        };
        if let Some(c) = self.cached().filter(|c| SystemTime::now() < c.refresh_at) {
            return Ok(c.token);
        }
        let _guard = self.inner.exchange.lock().await;
        // Someone else may have refreshed while we waited.
        if let Some(c) = self.cached().filter(|c| SystemTime::now() < c.refresh_at) {
            return Ok(c.token);
        }
        let mut client = self.inner.tenancy.clone().ok_or(SdkError::NoTenancy)?;
        let answer = client
            .exchange_api_token(ExchangeApiTokenRequest {
                api_token: api_token.clone(),
            })
            .await
            .map_err(SdkError::Exchange)?
            .into_inner();
        let expiry = answer.expires_at.ok_or(SdkError::NoExpiry)?;
        let expires_at = SystemTime::UNIX_EPOCH
            + Duration::from_secs(u64::try_from(expiry.seconds).unwrap_or(0));
        let now = SystemTime::now();
        let lifetime = expires_at.duration_since(now).unwrap_or_default();
        let cached = Cached {
            token: Arc::from(answer.access_token),
            expires_at,
            refresh_at: now + lifetime.saturating_sub(refresh_margin(lifetime)),
        };
        *self
            .inner
            .cached
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(cached.clone());
        tracing::debug!(valid_for = ?lifetime, "exchanged the service API token for an access token");
        Ok(cached.token)
    }

    /// The token the interceptor would attach now, if any (not expired).
    pub fn current(&self) -> Option<Arc<str>> {
        match &self.inner.credential {
            Credential::AccessToken(t) => Some(Arc::from(t.as_str())),
            Credential::ApiToken(_) => self
                .cached()
                .filter(|c| SystemTime::now() < c.expires_at)
                .map(|c| c.token),
        }
    }

    /// Keeps the cached token fresh in the background until `cancel` fires, so that the
    /// (synchronous) interceptor always finds a valid one. Failures are retried with a
    /// growing delay (up to 30 s).
    pub fn spawn_refresh(&self, cancel: CancellationToken) -> JoinHandle<()> {
        let source = self.clone();
        tokio::spawn(async move {
            let mut backoff = Duration::from_millis(250);
            loop {
                let wait = match source.access_token().await {
                    Ok(_) => {
                        backoff = Duration::from_millis(250);
                        source
                            .cached()
                            .and_then(|c| c.refresh_at.duration_since(SystemTime::now()).ok())
                            .unwrap_or(Duration::from_secs(60))
                            .max(Duration::from_millis(100))
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, retry_in = ?backoff, "refreshing the access token failed");
                        let wait = backoff;
                        backoff = (backoff * 2).min(Duration::from_secs(30));
                        wait
                    }
                };
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                }
            }
        })
    }

    /// An interceptor that sets `authorization: Bearer <current token>`.
    pub fn interceptor(&self) -> TokenInterceptor {
        TokenInterceptor {
            source: self.clone(),
        }
    }

    /// Adds the bearer header to `req`, refreshing the token first if needed (for callers
    /// that prefer an async step to the interceptor).
    pub async fn authorize<T>(
        &self,
        mut req: tonic::Request<T>,
    ) -> Result<tonic::Request<T>, SdkError> {
        let token = self.access_token().await?;
        set_bearer(&mut req, &token).map_err(|_| SdkError::UnknownCredential)?;
        Ok(req)
    }
}

fn set_bearer<T>(req: &mut tonic::Request<T>, token: &str) -> Result<(), tonic::Status> {
    let value: MetadataValue<_> = format!("Bearer {token}")
        .parse()
        .map_err(|_| tonic::Status::unauthenticated("access token is not valid header text"))?;
    req.metadata_mut().insert("authorization", value);
    Ok(())
}

/// Puts the [`TokenSource`]'s current token on each request. It cannot wait, so run
/// [`TokenSource::spawn_refresh`] (or call [`TokenSource::access_token`] once) first; with
/// no valid token the call fails with UNAUTHENTICATED before leaving the process.
#[derive(Clone, Debug)]
pub struct TokenInterceptor {
    source: TokenSource,
}

impl Interceptor for TokenInterceptor {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let token = self.source.current().ok_or_else(|| {
            tonic::Status::unauthenticated("no valid access token yet (token source not refreshed)")
        })?;
        set_bearer(&mut req, &token)?;
        Ok(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_recognised_and_redacted() {
        let api = Credential::parse("cairn_0123_abc\n").unwrap();
        assert_eq!(api, Credential::ApiToken("cairn_0123_abc".into()));
        assert!(!format!("{api:?}").contains("0123"));
        assert!(matches!(
            Credential::parse("aaa.bbb.ccc"),
            Ok(Credential::AccessToken(_))
        ));
        assert!(Credential::parse("hunter2").is_err());
        assert!(Credential::parse("a..c").is_err());
    }

    #[test]
    fn margins() {
        assert_eq!(
            refresh_margin(Duration::from_secs(600)),
            Duration::from_secs(120)
        );
        assert_eq!(
            refresh_margin(Duration::from_secs(60)),
            Duration::from_secs(20)
        );
    }

    #[tokio::test]
    async fn access_token_is_used_as_is_and_api_token_needs_tenancy() {
        let jwt = TokenSource::new(Credential::AccessToken("a.b.c".into()), None);
        assert_eq!(&*jwt.access_token().await.unwrap(), "a.b.c");
        let mut i = jwt.interceptor();
        let req = i.call(tonic::Request::new(())).unwrap();
        assert_eq!(req.metadata().get("authorization").unwrap(), "Bearer a.b.c");

        let api = TokenSource::new(Credential::ApiToken("cairn_x".into()), None);
        assert!(matches!(api.access_token().await, Err(SdkError::NoTenancy)));
        let mut i = api.interceptor();
        assert_eq!(
            i.call(tonic::Request::new(())).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
    }

    #[test]
    fn token_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        std::fs::write(&path, "x.y.z\n").unwrap();
        assert_eq!(
            Credential::from_file(&path).unwrap(),
            Credential::AccessToken("x.y.z".into())
        );
        assert!(Credential::from_file(&dir.path().join("missing")).is_err());
    }
}
