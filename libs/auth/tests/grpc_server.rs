//! The layer inside a real tonic server on loopback, called by a real gRPC client.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::{Arc, Mutex};

use cairn_auth::{AuthLayer, Claims, KeySet, Role, SigningKey, principal};
use common::FIVE_MIN;
use tonic::transport::{Channel, Server};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};
use uuid::Uuid;

/// Subjects the server-side interceptor saw, `None` where no principal arrived.
type Seen = Arc<Mutex<Vec<Option<String>>>>;

/// Starts a health server behind `layer` on an ephemeral port.
async fn serve(layer: AuthLayer, seen: Seen) -> Channel {
    let health = HealthServer::with_interceptor(
        HealthService::from_health_reporter(HealthReporter::new()),
        move |req: tonic::Request<()>| {
            let subject = principal(&req).ok().map(|p| p.subject.clone());
            seen.lock().unwrap().push(subject);
            Ok(req)
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(health)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

async fn check(channel: Channel, token: Option<String>) -> Result<i32, tonic::Status> {
    let mut client = HealthClient::with_interceptor(channel, move |mut req: tonic::Request<()>| {
        if let Some(token) = &token {
            req.metadata_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        Ok(req)
    });
    client
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .map(|r| r.into_inner().status)
}

#[tokio::test]
async fn tonic_server_authenticates_and_hands_the_principal_to_handlers() {
    let key = SigningKey::generate("k1").unwrap();
    let keys = Arc::new(KeySet::from_signing_keys(std::slice::from_ref(&key)).unwrap());
    let seen = Seen::default();
    let channel = serve(AuthLayer::new(keys), Arc::clone(&seen)).await;

    let err = check(channel.clone(), None).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated, "{err:?}");
    let err = check(channel.clone(), Some("garbage".into()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated, "{err:?}");
    assert!(
        seen.lock().unwrap().is_empty(),
        "rejected calls reached the handler"
    );

    let token = key
        .sign(&Claims::new_user(
            "carol",
            Uuid::new_v4(),
            Role::Viewer,
            FIVE_MIN,
        ))
        .unwrap();
    let status = check(channel, Some(token)).await.unwrap();
    assert_eq!(status, ServingStatus::Serving as i32);
    assert_eq!(*seen.lock().unwrap(), vec![Some("carol".to_owned())]);
}

#[tokio::test]
async fn tonic_server_lets_allowlisted_health_checks_through() {
    let key = SigningKey::generate("k1").unwrap();
    let keys = Arc::new(KeySet::from_signing_keys(&[key]).unwrap());
    let seen = Seen::default();
    let layer = AuthLayer::new(keys).allow_unauthenticated(["/grpc.health.v1.Health/"]);
    let channel = serve(layer, Arc::clone(&seen)).await;

    let status = check(channel, None).await.unwrap();
    assert_eq!(status, ServingStatus::Serving as i32);
    assert_eq!(*seen.lock().unwrap(), vec![None]);
}
