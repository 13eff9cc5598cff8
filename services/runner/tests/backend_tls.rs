//! tofu verifying the coordinator's https state backend: a real coordinator whose public
//! backend URL is https (its HTTP backend behind the platform's own TLS acceptor,
//! `cairn_service::ServerTls`, with certificates made here and mTLS required), runs through
//! the Docker executor and the tofu-sim image. With the CA and the runner's client identity
//! the apply commits its state; without the CA (the image has no system roots) or with a
//! wrong one the run fails with the verification error and nothing is committed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mod.rs"]
mod common;
#[path = "executor/helpers.rs"]
#[allow(dead_code)]
mod helpers;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use cairn_proto::state as pb;
use cairn_runner::credentials::CredentialRegistry;
use cairn_runner::executor::{DockerExecutor, Secret};
use cairn_runner::pipeline::{BackendTls, Pipeline, PipelineSettings, RunOutcome, RunResult};
use cairn_service::ServerTls;
use cairn_state_coordinator::Config;
use cairn_state_coordinator::testing::{Fixtures, aws_edges, start, test_config};
use cairn_testkit::{TestCa as Ca, TestKeys};
use futures::StreamExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// The coordinator's HTTP backend served over TLS on `addr`: the platform's acceptor, a
/// client certificate of the CA required, each connection spliced to the coordinator's
/// listener.
struct TlsBackend {
    addr: SocketAddr,
    stop: CancellationToken,
    _files: tempfile::TempDir,
}

impl Drop for TlsBackend {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl TlsBackend {
    async fn bind(ca: &Ca) -> (TlsBackend, TcpListener, ServerTls) {
        let files = tempfile::tempdir().unwrap();
        let server = ca.server_named("coordinator");
        let path = |name: &str| -> PathBuf { files.path().join(name) };
        std::fs::write(path("tls.crt"), &server.cert).unwrap();
        std::fs::write(path("tls.key"), &server.key).unwrap();
        std::fs::write(path("client-ca.crt"), ca.pem()).unwrap();
        let tls = ServerTls::load(
            &path("tls.crt"),
            &path("tls.key"),
            Some(&path("client-ca.crt")),
        )
        .unwrap();
        assert!(tls.requires_client_certificate());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let front = TlsBackend {
            addr,
            stop: CancellationToken::new(),
            _files: files,
        };
        (front, listener, tls)
    }

    fn serve(&self, listener: TcpListener, tls: ServerTls, upstream: SocketAddr) {
        let mut incoming = tls
            .incoming(listener, &[b"http/1.1"], self.stop.clone())
            .unwrap();
        tokio::spawn(async move {
            while let Some(Ok(mut conn)) = incoming.next().await {
                tokio::spawn(async move {
                    if let Ok(mut up) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
                    }
                });
            }
        });
    }
}

/// A coordinator handing out `https://` backend addresses, its backend behind TLS.
struct Env {
    coord: common::Coordinator,
    _backend: TlsBackend,
    ca: Ca,
    exec: DockerExecutor,
    base: tempfile::TempDir,
    _scratch: tempfile::TempDir,
    _creds: tempfile::TempDir,
    creds_file: PathBuf,
}

impl Env {
    async fn new() -> Env {
        cairn_testkit::init_tracing();
        let ca = Ca::new("cairn-test-ca");
        let (backend, listener, tls) = TlsBackend::bind(&ca).await;
        let db = cairn_testkit::fresh_database().await;
        let aws = cairn_testkit::TestAws::create().await;
        let nats = cairn_testkit::connect_nats().await;
        let keys = TestKeys::new();
        let config = Config {
            public_http_url: Some(format!("https://{}", backend.addr)),
            ..test_config(&db, &nats, &aws, &keys)
        };
        let edges = aws_edges(&aws, &aws.endpoint, &aws.endpoint);
        let (server, grpc) = start(config, edges).await;
        backend.serve(listener, tls, server.http_addr());
        let fx = Fixtures::new(grpc.clone(), keys.service_token());
        let coord = common::Coordinator {
            server,
            grpc,
            keys,
            db,
            aws,
            nats,
            tenant: fx.tenant,
            instance: fx.instance,
            fx,
        };
        let creds = tempfile::tempdir().unwrap();
        let creds_file = creds.path().join("key");
        std::fs::write(&creds_file, "canary-credential-tls").unwrap();
        let scratch = helpers::scratch();
        let exec = helpers::docker_executor(
            helpers::instance("tls"),
            scratch.path(),
            helpers::module_library(),
        )
        .await;
        Env {
            coord,
            _backend: backend,
            ca,
            exec,
            base: tempfile::tempdir().unwrap(),
            _scratch: scratch,
            _creds: creds,
            creds_file,
        }
    }

    fn registry(&self) -> CredentialRegistry {
        CredentialRegistry::parse(
            &serde_json::json!({"entries": [
                {"tenant_id": self.coord.tenant.to_string(), "target_id": "local",
                 "reference": "deploy", "vars": {"LOCAL_API_KEY": {"file": self.creds_file}}}
            ]})
            .to_string(),
        )
        .unwrap()
    }

    /// The runner's client identity under the test CA.
    fn identity(&self) -> (String, Secret) {
        let client = self.ca.client_named("runner");
        (client.cert, Secret::new(client.key))
    }

    fn root(&self) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "terraform": {"backend": {"http": {}}},
            "module": {"net": {
                "source": "./modules/local/network",
                "name": "net1",
                "base_dir": self.base_dir(),
            }}
        }))
        .unwrap()
    }

    fn base_dir(&self) -> String {
        self.base.path().to_string_lossy().into_owned()
    }

    /// An apply (planning itself) of a new state with `tls`, finished with its outcome.
    async fn apply(&self, state_id: &str, tls: BackendTls) -> (RunResult, pb::FinishRunResponse) {
        let id = self
            .coord
            .register(
                state_id,
                pb::RunKind::Apply,
                "staging",
                self.root(),
                &self.base_dir(),
                None,
            )
            .await;
        let (admitted, config) = self.coord.admit(&id).await;
        assert!(
            admitted.backend.address.starts_with("https://127.0.0.1:"),
            "{:?}",
            admitted.backend
        );
        assert!(admitted.backend.is_https());
        let registry = self.registry();
        let pipeline = Pipeline::new(
            &self.exec,
            &registry,
            PipelineSettings {
                timeout: Duration::from_secs(120),
                cancel: CancellationToken::new(),
                log_tail: 100,
                log_sink: None,
                module_library: helpers::module_library(),
                extra_env: Vec::new(),
                backend_tls: tls,
            },
        );
        let result = pipeline.run(&admitted, &config, None).await.unwrap();
        let outcome = match result.outcome {
            RunOutcome::Succeeded => pb::RunOutcome::Succeeded,
            _ => pb::RunOutcome::Failed,
        };
        let finished = self.coord.finish(&admitted, outcome, "done").await;
        (result, finished)
    }
}

#[tokio::test]
async fn with_the_ca_and_the_client_identity_a_docker_apply_commits_over_tls() {
    let env = Env::new().await;
    let state_id = env.coord.create_state("net-tls").await;
    let identity = env.identity();
    let key = identity.1.expose().to_owned();
    let tls = BackendTls::new(Some(env.ca.pem()), Some(identity));
    let (applied, finished) = env.apply(&state_id, tls).await;
    assert_eq!(
        applied.outcome,
        RunOutcome::Succeeded,
        "{}: {:#?}",
        applied.message,
        applied.log_tail
    );
    assert!(finished.final_generation >= 1, "{finished:?}");
    let state = env.coord.state(&state_id).await;
    assert_eq!(state.current_generation, finished.final_generation);
    assert!(env.base.path().join("net1/network.json").is_file());
    // The key never shows, whole or by line.
    let tail = applied.log_tail.join("\n");
    for line in key.lines().filter(|l| l.len() > 20) {
        assert!(!tail.contains(line), "{tail}");
    }
}

#[tokio::test]
async fn without_the_ca_or_with_a_wrong_one_the_run_fails_and_commits_nothing() {
    let env = Env::new().await;
    let state_id = env.coord.create_state("net-untrusted").await;
    let wrong = Ca::new("someone-else");
    for (what, tls) in [
        // No CA: tofu's system roots, and the tofu-sim image (FROM scratch) has none.
        ("no CA", BackendTls::new(None, Some(env.identity()))),
        (
            "a wrong CA",
            BackendTls::new(Some(wrong.pem()), Some(env.identity())),
        ),
    ] {
        let (applied, finished) = env.apply(&state_id, tls).await;
        assert_eq!(applied.outcome, RunOutcome::Failed, "{what}: {applied:?}");
        let said = format!("{}\n{}", applied.message, applied.log_tail.join("\n"));
        assert!(
            said.contains(
                "tls: failed to verify certificate: x509: certificate signed by unknown authority"
            ),
            "{what}: {said}"
        );
        assert_eq!(finished.final_generation, 0, "{what}: {finished:?}");
        assert_eq!(env.coord.state(&state_id).await.current_generation, 0);
        assert!(!env.base.path().join("net1/network.json").exists());
    }
}
