//! The per-request cost of the libs/auth layer: the same gRPC call (grpc.health.v1 Check)
//! against two servers on loopback, one behind `AuthLayer` (EdDSA verification of a bearer
//! token on every request) and one without, interleaved in one run; plus the layer alone
//! in process (tower `oneshot` around a no-op service) and the bare verification.
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

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn micros(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
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

async fn run(iterations: usize) {
    let key = SigningKey::generate("bench").unwrap();
    let keys = Arc::new(KeySet::from_signing_keys(std::slice::from_ref(&key)).unwrap());
    let token = key
        .sign(&Claims::new_user(
            "bench-user",
            uuid::Uuid::new_v4(),
            Role::Operator,
            Duration::from_secs(600),
        ))
        .unwrap();
    let bearer: MetadataValue<_> = format!("Bearer {token}").parse().unwrap();

    let with = serve(Some(AuthLayer::new(Arc::clone(&keys)))).await;
    let without = serve(None).await;
    let channel = |addr: SocketAddr| async move {
        Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap()
    };
    let mut authed = HealthClient::new(channel(with).await);
    let mut plain = HealthClient::new(channel(without).await);

    // The unauthenticated call is refused by the layer (sanity check).
    let refused = authed
        .check(HealthCheckRequest::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);

    let request = |with_token: bool| {
        let mut r = tonic::Request::new(HealthCheckRequest::default());
        if with_token {
            r.metadata_mut().insert("authorization", bearer.clone());
        }
        r
    };
    for _ in 0..2_000 {
        authed.check(request(true)).await.unwrap();
        plain.check(request(true)).await.unwrap();
    }
    let mut t_with = Vec::with_capacity(iterations);
    let mut t_without = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let r = request(true);
        let t = Instant::now();
        authed.check(r).await.unwrap();
        t_with.push(t.elapsed());
        let r = request(true);
        let t = Instant::now();
        plain.check(r).await.unwrap();
        t_without.push(t.elapsed());
    }

    // The layer alone, in process, around a service that answers at once.
    let inner = tower::service_fn(|_req: http::Request<()>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
    });
    let svc = AuthLayer::new(Arc::clone(&keys)).layer(inner);
    let header = http::HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
    let mut t_layer = Vec::with_capacity(iterations);
    let mut t_noop = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let mut req = http::Request::new(());
        req.headers_mut()
            .insert(http::header::AUTHORIZATION, header.clone());
        let t = Instant::now();
        let resp = svc.clone().oneshot(req).await.unwrap();
        t_layer.push(t.elapsed());
        assert_eq!(resp.status(), http::StatusCode::OK);
        let req = http::Request::new(());
        let t = Instant::now();
        let _ = inner.oneshot(req).await.unwrap();
        t_noop.push(t.elapsed());
    }
    let mut t_verify = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        keys.verify(&token).unwrap();
        t_verify.push(t.elapsed());
    }

    let w = stats(t_with);
    let o = stats(t_without);
    let l = stats(t_layer);
    let n = stats(t_noop);
    let v = stats(t_verify);
    let delta = w.p50.saturating_sub(o.p50);
    println!("# Auth layer benchmark ({iterations} requests each, interleaved, loopback)\n");
    println!("| measurement | p50 µs | p90 µs | p99 µs |");
    println!("|---|---|---|---|");
    println!(
        "| gRPC Health.Check with AuthLayer | {} | {} | {} |",
        micros(w.p50),
        micros(w.p90),
        micros(w.p99)
    );
    println!(
        "| gRPC Health.Check without | {} | {} | {} |",
        micros(o.p50),
        micros(o.p90),
        micros(o.p99)
    );
    println!(
        "| AuthLayer alone (tower oneshot) | {} | {} | {} |",
        micros(l.p50),
        micros(l.p90),
        micros(l.p99)
    );
    println!(
        "| no-op service alone | {} | {} | {} |",
        micros(n.p50),
        micros(n.p90),
        micros(n.p99)
    );
    println!(
        "| KeySet::verify alone | {} | {} | {} |",
        micros(v.p50),
        micros(v.p90),
        micros(v.p99)
    );
    println!();
    println!(
        "Cost of the auth layer per request at p50: {} µs end to end, {} µs in process (goal < 50 µs): {}",
        micros(delta),
        micros(l.p50.saturating_sub(n.p50)),
        if delta < Duration::from_micros(50) {
            "met"
        } else {
            "NOT met"
        }
    );
}
