//! The per-request cost of the libs/auth layer, all measurements interleaved in one run:
//!
//! - end to end: the same gRPC call (grpc.health.v1 Check) on loopback against three servers,
//!   behind `AuthLayer` with the key set's verified-token cache (the default), behind
//!   `AuthLayer` with the cache off (an Ed25519 check on every request), and without the layer;
//! - in process: the layer alone (tower `oneshot` around a no-op service) with a cached token,
//!   with a fresh token on every request (the cold path with the cache on: miss, verify,
//!   insert, evictions once the cache is full), with the cache off, and the no-op alone;
//! - `KeySet::verify` alone, cached and with the cache off.
//!
//! Run: `cargo bench -p cairn-tenancy --bench auth_layer` (optionally `-- <iterations>`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_auth::{AuthLayer, Claims, KeySet, Role, SigningKey};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Server};
use tonic_health::ServingStatus;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tower::{Layer, ServiceExt};

/// The in-process goal for a cached token (issue 17).
const CACHED_GOAL: Duration = Duration::from_micros(5);
/// The end-to-end goal of the layer (issue 6).
const END_TO_END_GOAL: Duration = Duration::from_micros(50);

async fn serve(auth: Option<AuthLayer>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    let incoming = TcpListenerStream::new(listener);
    match auth {
        Some(layer) => {
            let router = Server::builder().layer(layer).add_service(health);
            tokio::spawn(router.serve_with_incoming(incoming));
        }
        None => {
            let router = Server::builder().add_service(health);
            tokio::spawn(router.serve_with_incoming(incoming));
        }
    }
    addr
}

async fn client(addr: SocketAddr) -> HealthClient<Channel> {
    HealthClient::new(
        Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap(),
    )
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn micros(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 10.0 {
        format!("{us:.2}")
    } else {
        format!("{us:.1}")
    }
}

/// `a - b` in µs, signed: below the noise of loopback calls the difference can be negative.
fn difference(a: Duration, b: Duration) -> String {
    format!("{:+.1}", (a.as_secs_f64() - b.as_secs_f64()) * 1e6)
}

struct Stats {
    p50: Duration,
    p90: Duration,
    p99: Duration,
}

fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort_unstable();
    Stats {
        p50: percentile(&v, 0.5),
        p90: percentile(&v, 0.9),
        p99: percentile(&v, 0.99),
    }
}

fn row(name: &str, s: &Stats) {
    println!(
        "| {name} | {} | {} | {} |",
        micros(s.p50),
        micros(s.p90),
        micros(s.p99)
    );
}

fn verdict(cost: Duration, goal: Duration) -> &'static str {
    if cost <= goal { "met" } else { "NOT met" }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn main() {
    let iterations: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run(iterations));
}

fn user_token(key: &SigningKey) -> String {
    key.sign(&Claims::new_user(
        "bench-user",
        uuid::Uuid::new_v4(),
        Role::Operator,
        Duration::from_secs(600),
    ))
    .unwrap()
}

async fn run(iterations: usize) {
    let load_before = load_average();
    let key = SigningKey::generate("bench").unwrap();
    let key_set = || KeySet::from_signing_keys(std::slice::from_ref(&key)).unwrap();
    let cached_keys = Arc::new(key_set());
    let uncached_keys = Arc::new(key_set().with_token_cache(0));
    let token = user_token(&key);
    let bearer: MetadataValue<_> = format!("Bearer {token}").parse().unwrap();

    let with_cache = serve(Some(AuthLayer::new(Arc::clone(&cached_keys)))).await;
    let with_uncached = serve(Some(AuthLayer::new(Arc::clone(&uncached_keys)))).await;
    let without = serve(None).await;
    let mut authed = client(with_cache).await;
    let mut authed_uncached = client(with_uncached).await;
    let mut plain = client(without).await;

    // The unauthenticated call is refused by the layer (sanity check).
    let refused = authed
        .check(HealthCheckRequest::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);

    let request = || {
        let mut r = tonic::Request::new(HealthCheckRequest::default());
        r.metadata_mut().insert("authorization", bearer.clone());
        r
    };
    for _ in 0..2_000 {
        authed.check(request()).await.unwrap();
        authed_uncached.check(request()).await.unwrap();
        plain.check(request()).await.unwrap();
    }
    let mut t_with = Vec::with_capacity(iterations);
    let mut t_with_uncached = Vec::with_capacity(iterations);
    let mut t_without = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let r = request();
        let t = Instant::now();
        authed.check(r).await.unwrap();
        t_with.push(t.elapsed());
        let r = request();
        let t = Instant::now();
        authed_uncached.check(r).await.unwrap();
        t_with_uncached.push(t.elapsed());
        let r = request();
        let t = Instant::now();
        plain.check(r).await.unwrap();
        t_without.push(t.elapsed());
    }

    // The layer alone, in process, around a service that answers at once. The fresh-token
    // runs get their own key set (cache on), so they do not push the cached token out.
    let inner = tower::service_fn(|_req: http::Request<()>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
    });
    let fresh_keys = Arc::new(key_set());
    let layer_cached = AuthLayer::new(Arc::clone(&cached_keys)).layer(inner);
    let layer_fresh = AuthLayer::new(Arc::clone(&fresh_keys)).layer(inner);
    let layer_uncached = AuthLayer::new(Arc::clone(&uncached_keys)).layer(inner);
    let header = |token: &str| http::HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
    let same = header(&token);
    let fresh: Vec<http::HeaderValue> =
        (0..iterations).map(|_| header(&user_token(&key))).collect();
    let authorized = |value: &http::HeaderValue| {
        let mut req = http::Request::new(());
        req.headers_mut()
            .insert(http::header::AUTHORIZATION, value.clone());
        req
    };
    let mut t_layer_cached = Vec::with_capacity(iterations);
    let mut t_layer_fresh = Vec::with_capacity(iterations);
    let mut t_layer_uncached = Vec::with_capacity(iterations);
    let mut t_noop = Vec::with_capacity(iterations);
    for fresh_value in &fresh {
        for (svc, value, out) in [
            (&layer_cached, &same, &mut t_layer_cached),
            (&layer_fresh, fresh_value, &mut t_layer_fresh),
            (&layer_uncached, &same, &mut t_layer_uncached),
        ] {
            let req = authorized(value);
            let t = Instant::now();
            let resp = svc.clone().oneshot(req).await.unwrap();
            out.push(t.elapsed());
            assert_eq!(resp.status(), http::StatusCode::OK);
            assert!(resp.headers().get("grpc-status").is_none(), "refused");
        }
        let req = http::Request::new(());
        let t = Instant::now();
        let _ = inner.oneshot(req).await.unwrap();
        t_noop.push(t.elapsed());
    }
    let fresh_cached_at_end = fresh_keys.cached_tokens();

    let mut t_verify_cached = Vec::with_capacity(iterations);
    let mut t_verify_uncached = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        cached_keys.verify(&token).unwrap();
        t_verify_cached.push(t.elapsed());
        let t = Instant::now();
        uncached_keys.verify(&token).unwrap();
        t_verify_uncached.push(t.elapsed());
    }

    let w = stats(t_with);
    let wu = stats(t_with_uncached);
    let o = stats(t_without);
    let lc = stats(t_layer_cached);
    let lf = stats(t_layer_fresh);
    let lu = stats(t_layer_uncached);
    let n = stats(t_noop);
    let vc = stats(t_verify_cached);
    let vu = stats(t_verify_uncached);
    println!(
        "# Auth layer benchmark ({iterations} requests each, interleaved, loopback; \
         token cache capacity {})\n",
        cached_keys.token_cache_capacity()
    );
    println!("| measurement | p50 µs | p90 µs | p99 µs |");
    println!("|---|---|---|---|");
    row("gRPC Health.Check with AuthLayer, cached token", &w);
    row("gRPC Health.Check with AuthLayer, cache off", &wu);
    row("gRPC Health.Check without AuthLayer", &o);
    row("AuthLayer alone, cached token", &lc);
    row("AuthLayer alone, fresh token per request", &lf);
    row("AuthLayer alone, cache off", &lu);
    row("no-op service alone", &n);
    row("KeySet::verify, cached token", &vc);
    row("KeySet::verify, cache off", &vu);
    println!();
    let e2e_cached = w.p50.saturating_sub(o.p50);
    let in_cached = lc.p50.saturating_sub(n.p50);
    let in_fresh = lf.p50.saturating_sub(n.p50);
    let in_uncached = lu.p50.saturating_sub(n.p50);
    println!(
        "Cost of the auth layer per request at p50, end to end: {} µs with the cache, {} µs \
         with it off (goal < {} µs: {})",
        difference(w.p50, o.p50),
        difference(wu.p50, o.p50),
        micros(END_TO_END_GOAL),
        verdict(e2e_cached, END_TO_END_GOAL)
    );
    println!(
        "In process: {} µs for a cached token (goal ≤ {} µs: {}); cold path {} µs with a \
         fresh token per request (cache on, {fresh_cached_at_end} tokens cached at the end), \
         {} µs with the cache off",
        micros(in_cached),
        micros(CACHED_GOAL),
        verdict(in_cached, CACHED_GOAL),
        micros(in_fresh),
        micros(in_uncached)
    );
    println!(
        "Load average (1, 5, 15 min): {load_before} before, {} after",
        load_average()
    );
}
