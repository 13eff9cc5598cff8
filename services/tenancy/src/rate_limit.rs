//! Login rate limiting: a keyed token bucket (per email in the app layer) and a tower layer
//! that limits the credential RPCs per peer address.
use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tonic::transport::server::TcpConnectInfo;
use tower::{Layer, Service};

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

/// Limits requests to the given gRPC paths per peer IP address; over the quota the answer
/// is RESOURCE_EXHAUSTED without calling the service.
#[derive(Clone)]
pub struct PeerRateLimitLayer {
    limiter: Arc<KeyedLimiter<IpAddr>>,
    paths: Arc<[&'static str]>,
}

impl PeerRateLimitLayer {
    pub fn new(quota: Quota, paths: &[&'static str]) -> Self {
        PeerRateLimitLayer {
            limiter: Arc::new(KeyedLimiter::new(quota)),
            paths: paths.into(),
        }
    }
}

impl<S> Layer<S> for PeerRateLimitLayer {
    type Service = PeerRateLimit<S>;
    fn layer(&self, inner: S) -> Self::Service {
        PeerRateLimit {
            inner,
            limiter: Arc::clone(&self.limiter),
            paths: Arc::clone(&self.paths),
        }
    }
}

#[derive(Clone)]
pub struct PeerRateLimit<S> {
    inner: S,
    limiter: Arc<KeyedLimiter<IpAddr>>,
    paths: Arc<[&'static str]>,
}

type BoxFuture<R, E> = Pin<Box<dyn Future<Output = Result<R, E>> + Send>>;

impl<S, B, ResBody> Service<http::Request<B>> for PeerRateLimit<S>
where
    S: Service<http::Request<B>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: Default + Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if self.paths.contains(&req.uri().path()) {
            let peer = req
                .extensions()
                .get::<TcpConnectInfo>()
                .and_then(|info| info.remote_addr())
                .map(|addr| addr.ip());
            if let Some(ip) = peer
                && let Err(wait) = self.limiter.check(&ip)
            {
                tracing::warn!(peer = %ip, path = req.uri().path(), "credential attempts rate-limited");
                let status = tonic::Status::resource_exhausted(format!(
                    "too many attempts from this address; retry in {}s",
                    wait.as_secs().max(1)
                ));
                return Box::pin(std::future::ready(Ok(status.into_http::<ResBody>())));
            }
        }
        Box::pin(self.inner.call(req))
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
