//! TLS on the scaffold's listeners with real handshakes against certificates made here
//! (rcgen): the right CA is accepted and a wrong one refused, mTLS refuses a client without
//! a certificate, the HTTP listener takes the same TLS, a SIGHUP rotation leaves open
//! connections alone while new handshakes see the new certificate, and the production
//! profile refuses plaintext listeners.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_sdk::{ClientTls, endpoint};
use cairn_service::http::HttpListener;
use cairn_service::{Fact, GrpcServer, Listen, Profile, Refusal, ServeError, ServerTls, Tasks};
use cairn_testkit::{TestCa as Ca, TestCert as Leaf, TestKeys};
use futures::FutureExt;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// The server's certificate files, rewritten in place by a rotation.
struct Files {
    _dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
    client_ca: PathBuf,
}

impl Files {
    fn new(leaf: &Leaf) -> Files {
        let dir = tempfile::tempdir().unwrap();
        let files = Files {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            client_ca: dir.path().join("client-ca.crt"),
            _dir: dir,
        };
        files.write(leaf);
        files
    }

    fn write(&self, leaf: &Leaf) {
        std::fs::write(&self.cert, &leaf.cert).unwrap();
        std::fs::write(&self.key, &leaf.key).unwrap();
    }

    fn tls(&self, client_ca: Option<&Ca>) -> ServerTls {
        let ca_path = client_ca.map(|ca| {
            std::fs::write(&self.client_ca, ca.pem()).unwrap();
            self.client_ca.as_path()
        });
        ServerTls::load(&self.cert, &self.key, ca_path).unwrap()
    }
}

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

async fn serve(keys: &TestKeys, tls: ServerTls) -> (SocketAddr, Tasks) {
    let mut tasks = Tasks::new();
    let listen = Listen {
        profile: Profile::Production,
        tls: Some(tls),
    };
    let server = GrpcServer::bind_with(loopback(), Arc::new(keys.key_set()), listen)
        .await
        .unwrap();
    let addr = server.spawn(&mut tasks).await.unwrap().grpc;
    (addr, tasks)
}

/// One health check over a fresh connection (a new handshake).
async fn check(addr: SocketAddr, tls: &ClientTls) -> Result<ServingStatus, String> {
    let channel = endpoint(&format!("https://127.0.0.1:{}", addr.port()), tls)
        .unwrap()
        .connect()
        .await
        .map_err(|e| format!("{}", cairn_telemetry::Chain(&e)))?;
    health(&channel).await
}

async fn health(channel: &tonic::transport::Channel) -> Result<ServingStatus, String> {
    let reply = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .map_err(|s| format!("{s}"))?;
    Ok(reply.into_inner().status())
}

fn trusting(ca: &Ca) -> ClientTls {
    ClientTls::default().with_ca_pem(ca.pem())
}

#[tokio::test]
async fn a_tls_call_works_with_the_right_ca_and_is_refused_with_a_wrong_one() {
    cairn_testkit::init_tracing();
    let keys = TestKeys::new();
    let ca = Ca::new("right CA");
    let files = Files::new(&ca.server());
    let (addr, tasks) = serve(&keys, files.tls(None)).await;

    assert_eq!(
        check(addr, &trusting(&ca)).await,
        Ok(ServingStatus::Serving)
    );

    let err = check(addr, &trusting(&Ca::new("wrong CA")))
        .await
        .unwrap_err();
    assert!(err.contains("certificate"), "{err}");

    // Plaintext to a TLS listener gets no answer either.
    let plain = endpoint(
        &format!("http://127.0.0.1:{}", addr.port()),
        &ClientTls::default(),
    )
    .unwrap()
    .connect()
    .await;
    if let Ok(channel) = plain {
        assert!(health(&channel).await.is_err());
    }
    tasks.shutdown().await;
}

#[tokio::test]
async fn mtls_refuses_a_client_without_a_certificate_and_accepts_one_signed_by_the_client_ca() {
    cairn_testkit::init_tracing();
    let keys = TestKeys::new();
    let server_ca = Ca::new("server CA");
    let client_ca = Ca::new("client CA");
    let files = Files::new(&server_ca.server());
    let tls = files.tls(Some(&client_ca));
    assert!(tls.requires_client_certificate());
    let (addr, tasks) = serve(&keys, tls).await;

    // Without a certificate: the handshake (or the first call on it) is refused.
    assert!(check(addr, &trusting(&server_ca)).await.is_err());

    // With one signed by another CA: refused too.
    let stranger = Ca::new("stranger").client();
    let wrong = trusting(&server_ca).with_identity_pem(&stranger.cert, &stranger.key);
    assert!(check(addr, &wrong).await.is_err());

    // With one signed by the client CA: served.
    let client = client_ca.client();
    let right = trusting(&server_ca).with_identity_pem(&client.cert, &client.key);
    assert_eq!(check(addr, &right).await, Ok(ServingStatus::Serving));
    tasks.shutdown().await;
}

#[tokio::test]
async fn sighup_rotates_the_certificate_for_new_handshakes_and_open_connections_continue() {
    cairn_testkit::init_tracing();
    let keys = TestKeys::new();
    let old_ca = Ca::new("old CA");
    let new_ca = Ca::new("new CA");
    let files = Files::new(&old_ca.server());
    let (addr, tasks) = serve(&keys, files.tls(None)).await;

    // An open connection (trusting only the old CA) with a stream on it.
    let open = endpoint(
        &format!("https://127.0.0.1:{}", addr.port()),
        &trusting(&old_ca),
    )
    .unwrap()
    .connect()
    .await
    .unwrap();
    let mut watch = HealthClient::new(open.clone())
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let first = watch.message().await.unwrap().unwrap();
    assert_eq!(first.status(), ServingStatus::Serving);

    // Rotate the files to a certificate of the new CA and signal the process.
    files.write(&new_ca.server());
    rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::HUP).unwrap();

    // New handshakes see the new certificate once the reload has happened: wait for it.
    let mut seen = check(addr, &trusting(&new_ca)).await;
    for _ in 0..200 {
        if seen.is_ok() {
            break;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        seen = check(addr, &trusting(&new_ca)).await;
    }
    assert_eq!(seen, Ok(ServingStatus::Serving));
    let err = check(addr, &trusting(&old_ca)).await.unwrap_err();
    assert!(err.contains("certificate"), "{err}");

    // The open connection was not dropped: a call on it still works (a reconnect would
    // have had to verify the new certificate against the old CA, and failed).
    assert_eq!(health(&open).await, Ok(ServingStatus::Serving));
    // ... and its stream is still open: neither ended nor failed, just waiting for news.
    assert!(
        watch.message().now_or_never().is_none(),
        "the open stream ended"
    );
    drop(watch);
    drop(open);
    tasks.shutdown().await;
}

/// Waits (polling, up to 20 s) until a new handshake verifies against `ca`.
async fn until_served_by(addr: SocketAddr, ca: &Ca) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while check(addr, &trusting(ca)).await.is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the listener never presented the new certificate"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn changed_certificate_files_are_reloaded_without_a_signal_and_a_half_written_pair_waits() {
    cairn_testkit::init_tracing();
    let keys = TestKeys::new();
    let old_ca = Ca::new("old CA");
    let new_ca = Ca::new("new CA");
    let files = Files::new(&old_ca.server());
    let tls = ServerTls::load_watching(
        &files.cert,
        &files.key,
        None,
        std::time::Duration::from_millis(20),
    )
    .unwrap();
    let (addr, tasks) = serve(&keys, tls).await;
    assert_eq!(
        check(addr, &trusting(&old_ca)).await,
        Ok(ServingStatus::Serving)
    );

    // Only the certificate is renewed so far: its key does not fit the old key file, so the
    // reload fails and the old certificate keeps serving (the watcher has seen the change).
    let next = new_ca.server();
    std::fs::write(&files.cert, &next.cert).unwrap();
    // Over a second (fifty poll periods) every new handshake still gets the old one.
    for _ in 0..10 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(
            check(addr, &trusting(&old_ca)).await,
            Ok(ServingStatus::Serving),
            "a half-written pair replaced the certificate"
        );
    }
    // The key arrives: that change completes the pair and new handshakes get it.
    std::fs::write(&files.key, &next.key).unwrap();
    until_served_by(addr, &new_ca).await;
    let err = check(addr, &trusting(&old_ca)).await.unwrap_err();
    assert!(err.contains("certificate"), "{err}");
    tasks.shutdown().await;
}

#[tokio::test]
async fn a_failed_reload_keeps_the_current_certificate() {
    let ca = Ca::new("CA");
    let files = Files::new(&ca.server());
    let tls = files.tls(None);
    std::fs::write(&files.key, "not a key").unwrap();
    assert!(tls.reload().is_err());
    let keys = TestKeys::new();
    let (addr, tasks) = serve(&keys, tls).await;
    assert_eq!(
        check(addr, &trusting(&ca)).await,
        Ok(ServingStatus::Serving)
    );
    tasks.shutdown().await;
}

#[tokio::test]
async fn the_http_listener_takes_the_same_tls() {
    cairn_testkit::init_tracing();
    let ca = Ca::new("CA");
    let files = Files::new(&ca.server());
    let listen = Listen {
        profile: Profile::Production,
        tls: Some(files.tls(None)),
    };
    let mut tasks = Tasks::new();
    let http = HttpListener::bind(loopback(), listen).await.unwrap();
    assert_eq!(http.scheme(), "https");
    let router = axum::Router::new().route("/ping", axum::routing::get(|| async { "pong" }));
    let addr = http.spawn(router, &mut tasks).unwrap();

    // A raw rustls client: HTTP/1.1 over TLS, verified against the CA.
    let answer = https_get(addr, &ca.pem(), "/ping").await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("pong"), "{answer}");
    assert!(
        https_get(addr, &Ca::new("wrong").pem(), "/ping")
            .await
            .is_err()
    );
    tasks.shutdown().await;
}

async fn https_get(addr: SocketAddr, ca_pem: &str, path: &str) -> Result<String, String> {
    use rustls::pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(cairn_service::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    tls.write_all(
        format!("GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let mut out = String::new();
    tls.read_to_string(&mut out)
        .await
        .map_err(|e| e.to_string())?;
    Ok(out)
}

fn refusal(err: ServeError) -> Refusal {
    match err {
        ServeError::Refused(r) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn production_refuses_a_grpc_listener_without_tls() {
    let keys = TestKeys::new();
    let listen = Listen {
        profile: Profile::Production,
        tls: None,
    };
    let Err(err) = GrpcServer::bind_with(loopback(), Arc::new(keys.key_set()), listen).await else {
        panic!("bound without TLS in production");
    };
    let r = refusal(err);
    assert!(
        matches!(
            r.0,
            Fact::NoTls {
                listener: "gRPC",
                ..
            }
        ),
        "{r:?}"
    );
    assert!(
        r.to_string().starts_with(
            "CAIRN_PROFILE=production refuses the gRPC listener 127.0.0.1:0 without TLS"
        ),
        "{r}"
    );
    // The local profile keeps today's behaviour.
    let local = Listen::default();
    let server = GrpcServer::bind_with(loopback(), Arc::new(keys.key_set()), local).await;
    assert!(server.is_ok());
}

#[tokio::test]
async fn production_refuses_a_plaintext_listener_on_a_non_loopback_address() {
    let listen = Listen {
        profile: Profile::Production,
        tls: None,
    };
    let any = SocketAddr::from(([0, 0, 0, 0], 0));
    let Err(err) = HttpListener::bind(any, listen).await else {
        panic!("bound in plaintext on 0.0.0.0 in production");
    };
    let r = refusal(err);
    assert!(
        matches!(
            r.0,
            Fact::PlaintextNonLoopback {
                listener: "HTTP backend",
                ..
            }
        ),
        "{r:?}"
    );
    assert!(
        r.to_string()
            .contains("in plaintext on a non-loopback address"),
        "{r}"
    );
}

#[test]
fn production_refuses_to_start_without_tls_settings() {
    let mut args = cairn_service::ListenArgs {
        profile: Profile::Production,
        ..Default::default()
    };
    let r = args.check().unwrap_err();
    assert_eq!(r.0, Fact::TlsNotConfigured);
    assert!(r.to_string().contains("CAIRN_TLS_CERT"), "{r}");
    args.tls.tls_cert = Some(PathBuf::from("/tls.crt"));
    args.tls.tls_key = Some(PathBuf::from("/tls.key"));
    assert_eq!(args.check(), Ok(()));
    args.profile = Profile::Local;
    args.tls = Default::default();
    assert_eq!(args.check(), Ok(()));
}

#[test]
fn half_tls_settings_are_refused() {
    let ca = Ca::new("CA");
    let files = Files::new(&ca.server());
    let args = cairn_service::TlsArgs {
        tls_cert: Some(files.cert.clone()),
        ..Default::default()
    };
    assert!(args.load().is_err());
    let missing = cairn_service::TlsArgs {
        tls_cert: Some(Path::new("/nonexistent/tls.crt").to_path_buf()),
        tls_key: Some(files.key.clone()),
        tls_client_ca: None,
        tls_reload_interval: std::time::Duration::ZERO,
    };
    let err = missing.load().unwrap_err();
    assert!(err.to_string().contains("CAIRN_TLS_CERT"), "{err}");
}
