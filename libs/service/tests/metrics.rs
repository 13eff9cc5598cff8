//! The scaffold's metrics, scraped over HTTP from the `/metrics` listener of a real gRPC
//! server on loopback: a call that succeeds, calls that fail (in the trailers, and
//! trailers-only from the auth layer and the service), and a server stream the client drops,
//! each counted with its code once the call has ended, and their latency histogram moved.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cairn_proto::runner as pb;
use cairn_service::metrics::{GRPC_REQUEST_DURATION, GRPC_REQUESTS};
use cairn_service::{GrpcServer, MetricsArgs, SharedArgs, Tasks};
use cairn_testkit::metrics::{sample, scrape};
use cairn_testkit::{Bearer, TestKeys, connect_grpc};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

mod common;
use common::{ADMIN, Admin};

const HEALTH: &str = "grpc.health.v1.Health";

fn calls(text: &str, service: &str, method: &str, code: &str) -> f64 {
    sample(
        text,
        GRPC_REQUESTS,
        &[("service", service), ("method", method), ("code", code)],
    )
}

fn timed(text: &str, service: &str, method: &str) -> f64 {
    sample(
        text,
        &format!("{GRPC_REQUEST_DURATION}_count"),
        &[("service", service), ("method", method)],
    )
}

/// Scrapes until `done` holds (the server records a dropped stream when it notices).
async fn scrape_until(addr: SocketAddr, done: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = scrape(addr).await.unwrap();
        if done(&text) {
            return text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the metrics never showed it:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn grpc_calls_are_counted_by_code_and_timed() {
    cairn_testkit::init_tracing();
    let keys = TestKeys::new();
    let mut tasks = Tasks::new();
    let server = GrpcServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(keys.key_set()),
        &SharedArgs::default(),
    )
    .await
    .unwrap()
    .metrics(
        &MetricsArgs {
            metrics_addr: Some("127.0.0.1:0".parse().unwrap()),
        },
        &[],
    )
    .await
    .unwrap()
    .add_service(
        Admin {
            cancel_code: tonic::Code::FailedPrecondition,
        }
        .server(),
    );
    let metrics = server.metrics_addr().expect("a metrics listener");
    let addrs = server.spawn(&mut tasks).await.unwrap();
    assert_eq!(
        addrs.metrics,
        Some(metrics),
        "spawn reports the bound metrics address"
    );
    let channel = connect_grpc(addrs.grpc).await;
    let before = scrape(metrics).await.unwrap();

    // OK (status in the trailers), FAILED_PRECONDITION (the service's error: trailers-only)
    // and UNAUTHENTICATED (the auth layer's, before the service).
    let mut admin = pb::runner_admin_client::RunnerAdminClient::with_interceptor(
        channel.clone(),
        Bearer::new(keys.service_token()),
    );
    admin.list_runs(pb::ListRunsRequest {}).await.unwrap();
    let failed = admin
        .cancel_run(pb::CancelRunRequest::default())
        .await
        .unwrap_err();
    assert_eq!(failed.code(), tonic::Code::FailedPrecondition);
    let mut anonymous = pb::runner_admin_client::RunnerAdminClient::new(channel.clone());
    let refused = anonymous
        .list_runs(pb::ListRunsRequest {})
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);

    // A server stream: counted when it ends, here when the client drops it.
    let mut health = HealthClient::new(channel.clone());
    let mut watch = health
        .watch(HealthCheckRequest {
            service: ADMIN.into(),
        })
        .await
        .unwrap()
        .into_inner();
    watch.message().await.unwrap().expect("the first status");
    let during = scrape(metrics).await.unwrap();
    assert_eq!(
        calls(&during, HEALTH, "Watch", "CANCELLED"),
        calls(&before, HEALTH, "Watch", "CANCELLED"),
        "an open stream is not counted yet"
    );
    drop(watch);

    let after = scrape_until(metrics, |t| {
        calls(t, HEALTH, "Watch", "CANCELLED") > calls(&before, HEALTH, "Watch", "CANCELLED")
    })
    .await;
    let delta = |service, method, code| {
        calls(&after, service, method, code) - calls(&before, service, method, code)
    };
    assert_eq!(delta(ADMIN, "ListRuns", "OK"), 1.0, "{after}");
    assert_eq!(delta(ADMIN, "CancelRun", "FAILED_PRECONDITION"), 1.0);
    assert_eq!(delta(ADMIN, "ListRuns", "UNAUTHENTICATED"), 1.0);
    assert_eq!(delta(ADMIN, "CancelRun", "OK"), 0.0);
    assert_eq!(
        timed(&after, ADMIN, "ListRuns") - timed(&before, ADMIN, "ListRuns"),
        2.0
    );
    assert_eq!(
        timed(&after, ADMIN, "CancelRun") - timed(&before, ADMIN, "CancelRun"),
        1.0
    );
    assert!(timed(&after, HEALTH, "Watch") > timed(&before, HEALTH, "Watch"));
    assert!(after.contains(&format!("# TYPE {GRPC_REQUEST_DURATION} histogram")));
    assert!(after.contains(&format!("{GRPC_REQUEST_DURATION}_bucket{{")));

    drop((admin, anonymous, health, channel));
    tasks.shutdown().await;
    assert!(
        tokio::net::TcpStream::connect(metrics).await.is_err(),
        "the metrics listener stops with the server"
    );
}

#[tokio::test]
async fn no_metrics_address_no_listener() {
    let keys = TestKeys::new();
    let server = GrpcServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(keys.key_set()),
        &SharedArgs::default(),
    )
    .await
    .unwrap()
    .metrics(&MetricsArgs::default(), &[])
    .await
    .unwrap();
    assert_eq!(server.metrics_addr(), None);
}
