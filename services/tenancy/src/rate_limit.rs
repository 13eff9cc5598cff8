//! Login rate limiting: a keyed token bucket (per email in the app layer) and a wrapper of
//! a gRPC service that limits its credential RPCs per peer address.
use std::collections::HashMap;
use std::convert::Infallible;
use std::hash::Hash;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::server::TcpConnectInfo;
use tower::Service;

/// How many attempts a key may make: `burst` at once, refilled at `per_minute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    pub per_minute: u32,
    pub burst: u32,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Keys tracked before idle (full) buckets are dropped.
const PRUNE_ABOVE: usize = 10_000;

/// A token bucket per key.
#[derive(Debug)]
pub struct KeyedLimiter<K> {
    quota: Quota,
    buckets: Mutex<HashMap<K, Bucket>>,
}

impl<K: Eq + Hash + Clone> KeyedLimiter<K> {
    pub fn new(quota: Quota) -> Self {
        KeyedLimiter {
            quota,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn refill(&self, bucket: &mut Bucket, now: Instant) {
        let rate = f64::from(self.quota.per_minute) / 60.0;
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(f64::from(self.quota.burst));
        bucket.at = now;
    }

    /// Takes one attempt for `key`; `Err(wait)` when none is left.
    pub fn check(&self, key: &K) -> Result<(), Duration> {
        let now = Instant::now();
        // A poisoned lock only means another thread panicked mid-update; the map is still
        // a valid cache of buckets.
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if buckets.len() > PRUNE_ABOVE {
            let burst = f64::from(self.quota.burst);
            let quota = self.quota;
            buckets.retain(|_, b| {
                let rate = f64::from(quota.per_minute) / 60.0;
                b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate < burst
            });
        }
        let bucket = buckets.entry(key.clone()).or_insert(Bucket {
            tokens: f64::from(self.quota.burst),
            at: now,
        });
        self.refill(bucket, now);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let rate = f64::from(self.quota.per_minute.max(1)) / 60.0;
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / rate))
        }
    }
}

/// One of the service's gRPC services with some of its paths limited per peer IP address;
/// over the quota the answer is RESOURCE_EXHAUSTED without calling the service. It keeps the
/// inner service's name, so it is added to the server (and reported by health) as that one.
#[derive(Clone)]
pub struct PeerRateLimit<S> {
    inner: S,
    limiter: Arc<KeyedLimiter<IpAddr>>,
    paths: Arc<[&'static str]>,
}

impl<S> PeerRateLimit<S> {
    /// Limits `paths` of `inner` to `quota` per peer address.
    pub fn new(inner: S, quota: Quota, paths: &[&'static str]) -> Self {
        PeerRateLimit {
            inner,
            limiter: Arc::new(KeyedLimiter::new(quota)),
            paths: paths.into(),
        }
    }

    /// The wait before `req`'s peer may try again, when `req` is over its quota.
    fn refused<B>(&self, req: &http::Request<B>) -> Option<Duration> {
        let path = req.uri().path();
        if !self.paths.contains(&path) {
            return None;
        }
        let ip = req
            .extensions()
            .get::<TcpConnectInfo>()
            .and_then(|info| info.remote_addr())?
            .ip();
        let wait = self.limiter.check(&ip).err()?;
        tracing::warn!(peer = %ip, path, "credential attempts rate-limited");
        Some(wait)
    }
}

impl<S: NamedService> NamedService for PeerRateLimit<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for PeerRateLimit<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        match self.refused(&req) {
            Some(wait) => {
                let status = tonic::Status::resource_exhausted(format!(
                    "too many attempts from this address; retry in {}s",
                    wait.as_secs().max(1)
                ));
                Box::pin(std::future::ready(Ok(status.into_http())))
            }
            None => Box::pin(self.inner.call(req)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_allows_burst_then_refuses_per_key() {
        let l = KeyedLimiter::new(Quota {
            per_minute: 1,
            burst: 3,
        });
        for _ in 0..3 {
            assert!(l.check(&"a").is_ok());
        }
        let wait = l.check(&"a").unwrap_err();
        assert!(wait > Duration::from_secs(30), "{wait:?}");
        assert!(l.check(&"b").is_ok());
    }
}
