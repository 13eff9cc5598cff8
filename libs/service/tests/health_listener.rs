//! The plaintext, health-only listener (`CAIRN_HEALTH_ADDR`) beside a TLS gRPC listener under
//! the production profile: it answers health in plaintext with the main listener's statuses
//! (they follow the reporter, and turn NOT_SERVING when the server drains), answers nothing
//! else (UNIMPLEMENTED for reflection and the service's own RPCs), and stops with the
//! server; production still refuses a plaintext main listener.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cairn_proto::runner as pb;
use cairn_sdk::{ClientTls, endpoint};
use cairn_service::{
    Fact, GrpcServer, HealthArgs, ListenArgs, Profile, ServeError, SharedArgs, Tasks, TlsArgs,
};
use cairn_testkit::{Bearer, TestCa, TestKeys, connect_grpc};
use tonic::transport::Channel;
use tonic_health::ServingStatus as Status;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;

mod common;
use common::{ADMIN, Admin};

/// The production settings with TLS files from `ca` and a health listener at `health`.
fn production(dir: &tempfile::TempDir, ca: &TestCa, health: Option<SocketAddr>) -> SharedArgs {
    let leaf = ca.server();
    let cert = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    std::fs::write(&cert, &leaf.cert).unwrap();
    std::fs::write(&key, &leaf.key).unwrap();
    SharedArgs {
        listen: ListenArgs {
            profile: Profile::Production,
            tls: TlsArgs {
                tls_cert: Some(cert),
                tls_key: Some(key),
                tls_client_ca: None,
                tls_reload_interval: Duration::ZERO,
            },
        },
        health: HealthArgs {
            health_addr: health,
        },
        ..SharedArgs::default()
    }
}

async fn check(channel: &Channel, service: &str) -> Result<ServingStatus, tonic::Status> {
    HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: service.to_owned(),
        })
        .await
        .map(|r| r.into_inner().status())
}

#[tokio::test]
async fn the_health_listener_answers_health_only_in_plaintext_beside_production_tls() {
    cairn_testkit::init_tracing();
    let keys = TestKeys::new();
    let ca = TestCa::new("CA");
    let dir = tempfile::tempdir().unwrap();
    // Production allows the health listener in plaintext on any address.
    let shared = production(&dir, &ca, Some(SocketAddr::from(([0, 0, 0, 0], 0))));
    let mut tasks = Tasks::new();
    let server = GrpcServer::bind(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        Arc::new(keys.key_set()),
        &shared,
    )
    .await
    .unwrap()
    .add_service(Admin::default().server());
    let health_port = server.health_addr().expect("a health listener").port();
    assert_ne!(health_port, 0, "port 0 reports the bound port");
    let reporter = server.health_reporter();
    let addrs = server.spawn(&mut tasks).await.unwrap();
    assert_eq!(
        addrs.health.map(|a| a.port()),
        Some(health_port),
        "spawn reports it too"
    );
    let addr = addrs.grpc;
    let plain = connect_grpc(SocketAddr::from(([127, 0, 0, 1], health_port))).await;
    let tls = endpoint(
        &format!("https://127.0.0.1:{}", addr.port()),
        &ClientTls::default().with_ca_pem(ca.pem()),
    )
    .unwrap()
    .connect()
    .await
    .unwrap();

    // Health in plaintext, no token: the server and each added service.
    assert_eq!(check(&plain, "").await.unwrap(), ServingStatus::Serving);
    assert_eq!(check(&plain, ADMIN).await.unwrap(), ServingStatus::Serving);
    assert_eq!(
        check(&plain, "cairn.nope.v1.Nope")
            .await
            .unwrap_err()
            .code(),
        tonic::Code::NotFound
    );

    // Nothing else: the service's own RPCs (even with a token) and reflection.
    let mut admin = pb::runner_admin_client::RunnerAdminClient::with_interceptor(
        plain.clone(),
        Bearer::new(keys.service_token()),
    );
    let own = admin.list_runs(pb::ListRunsRequest {}).await.unwrap_err();
    assert_eq!(own.code(), tonic::Code::Unimplemented, "{own:?}");
    let ask = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let reflection = ServerReflectionClient::new(plain.clone())
        .server_reflection_info(tokio_stream::iter([ask.clone()]))
        .await;
    let refused = match reflection {
        Err(status) => status,
        Ok(response) => {
            let mut stream = response.into_inner();
            match stream.message().await {
                Err(status) => status,
                Ok(answer) => panic!("reflection answered on the health listener: {answer:?}"),
            }
        }
    };
    assert_eq!(refused.code(), tonic::Code::Unimplemented, "{refused:?}");
    // The main listener (TLS) still serves both.
    let mut admin_tls = pb::runner_admin_client::RunnerAdminClient::with_interceptor(
        tls.clone(),
        Bearer::new(keys.service_token()),
    );
    admin_tls.list_runs(pb::ListRunsRequest {}).await.unwrap();
    let mut listed = ServerReflectionClient::new(tls.clone())
        .server_reflection_info(tokio_stream::iter([ask]))
        .await
        .unwrap()
        .into_inner();
    assert!(listed.message().await.unwrap().is_some());

    // The statuses follow the reporter, on both listeners, for Check and Watch.
    let mut watch = HealthClient::new(plain.clone())
        .watch(HealthCheckRequest {
            service: ADMIN.to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        watch.message().await.unwrap().unwrap().status(),
        ServingStatus::Serving
    );
    reporter.set_service_status(ADMIN, Status::NotServing).await;
    assert_eq!(
        watch.message().await.unwrap().unwrap().status(),
        ServingStatus::NotServing
    );
    assert_eq!(
        check(&plain, ADMIN).await.unwrap(),
        ServingStatus::NotServing
    );
    assert_eq!(check(&tls, ADMIN).await.unwrap(), ServingStatus::NotServing);
    reporter.set_service_status(ADMIN, Status::Serving).await;
    assert_eq!(
        watch.message().await.unwrap().unwrap().status(),
        ServingStatus::Serving
    );

    // Draining: when the stop begins, a watcher of the server's status sees NOT_SERVING.
    let mut overall = HealthClient::new(plain.clone())
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        overall.message().await.unwrap().unwrap().status(),
        ServingStatus::Serving
    );
    tasks.token().cancel();
    let drained = tokio::time::timeout(Duration::from_secs(10), overall.message())
        .await
        .expect("no status after the stop began")
        .unwrap()
        .unwrap();
    assert_eq!(drained.status(), ServingStatus::NotServing);

    // It stops with the server.
    drop((watch, overall, admin, admin_tls, listed, plain, tls));
    tokio::time::timeout(Duration::from_secs(30), tasks.shutdown())
        .await
        .expect("the server did not stop");
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", health_port))
            .await
            .is_err(),
        "the health listener stops with the server"
    );
}

#[tokio::test]
async fn production_still_refuses_a_plaintext_main_listener() {
    let keys = TestKeys::new();
    let shared = SharedArgs {
        listen: ListenArgs {
            profile: Profile::Production,
            ..ListenArgs::default()
        },
        health: HealthArgs {
            health_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        },
        ..SharedArgs::default()
    };
    let Err(err) = GrpcServer::bind(
        SocketAddr::from(([0, 0, 0, 0], 0)),
        Arc::new(keys.key_set()),
        &shared,
    )
    .await
    else {
        panic!("bound a plaintext gRPC listener in production");
    };
    match err {
        ServeError::Refused(r) => assert!(
            matches!(
                r.0,
                Fact::PlaintextNonLoopback {
                    listener: "gRPC",
                    ..
                }
            ),
            "{r:?}"
        ),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn no_health_address_no_health_listener() {
    let keys = TestKeys::new();
    let ca = TestCa::new("CA");
    let dir = tempfile::tempdir().unwrap();
    let server = GrpcServer::bind(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        Arc::new(keys.key_set()),
        &production(&dir, &ca, None),
    )
    .await
    .unwrap();
    assert_eq!(server.health_addr(), None);
}
