//! The scaffold's gRPC server on loopback, called by real clients: the bound address, health
//! for each added service, the auth layer with its public paths, request ids, and a graceful
//! stop that closes the listener.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use cairn_proto::runner as pb;
use cairn_service::{GrpcServer, SharedArgs, Tasks};
use cairn_testkit::{Bearer, TestKeys, connect_grpc};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

mod common;
use common::{ADMIN, Admin};

async fn start(keys: &TestKeys) -> (std::net::SocketAddr, Tasks) {
    let mut tasks = Tasks::new();
    let server = GrpcServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(keys.key_set()),
        &SharedArgs::default(),
    )
    .await
    .unwrap()
    .add_service(Admin::default().server());
    let bound = server.local_addr();
    let addrs = server.spawn(&mut tasks).await.unwrap();
    assert_eq!(addrs.metrics, None);
    assert_eq!(addrs.health, None);
    let addr = addrs.grpc;
    assert_eq!(addr, bound);
    assert_ne!(addr.port(), 0, "port 0 reports the bound port");
    (addr, tasks)
}

#[tokio::test]
async fn serves_health_auth_and_request_ids_then_stops() {
    cairn_testkit::init_tracing();
    let keys = TestKeys::new();
    let (addr, tasks) = start(&keys).await;
    let channel = connect_grpc(addr).await;

    // Health needs no token and reports the added service serving; unknown is NOT_FOUND.
    let mut health = HealthClient::new(channel.clone());
    let status = health
        .check(HealthCheckRequest {
            service: ADMIN.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status;
    assert_eq!(status, ServingStatus::Serving as i32);
    let unknown = health
        .check(HealthCheckRequest {
            service: "cairn.nope.v1.Nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);

    // The service itself needs a token.
    let mut anonymous = pb::runner_admin_client::RunnerAdminClient::new(channel.clone());
    let refused = anonymous
        .list_runs(pb::ListRunsRequest {})
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);

    // With one it answers, and the response echoes the caller's request id.
    let mut admin = pb::runner_admin_client::RunnerAdminClient::with_interceptor(
        channel.clone(),
        Bearer::new(keys.service_token()),
    );
    let mut request = tonic::Request::new(pb::ListRunsRequest {});
    request
        .metadata_mut()
        .insert("x-request-id", "req-42".parse().unwrap());
    let response = admin.list_runs(request).await.unwrap();
    assert_eq!(
        response
            .metadata()
            .get("x-request-id")
            .unwrap()
            .to_str()
            .unwrap(),
        "req-42"
    );
    // Without one, the server makes one up.
    let response = admin.list_runs(pb::ListRunsRequest {}).await.unwrap();
    assert!(response.metadata().get("x-request-id").is_some());

    // A graceful stop returns once the server has stopped; the port no longer accepts.
    drop((health, anonymous, admin, channel));
    tasks.shutdown().await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}
