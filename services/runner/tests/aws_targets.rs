//! AWS targets through the pipeline (process executor, tofu-sim behind a wrapper that records
//! each command's environment): the role is assumed through STS (moto at
//! `CAIRN_TEST_AWS_ENDPOINT`) before every command, each command's environment holds the
//! session's credentials and `AWS_REGION` and never the registry's base credentials, and the
//! base secret reaches no log line. moto accepts any role and ignores the external id, so the
//! refusals and the request itself are checked against a loopback STS peer that records each
//! request and answers AccessDenied or Throttling; an STS cut off behind the fault proxy is
//! transient. Target validation (`Sts::validate`) reports the role's account; a validation
//! request on the target's run queue, answered by a `cairn-runner serve` process, comes back
//! as `target.validated` with the account or the refusal (AccessDenied from the recording
//! peer, an STS cut off behind the fault proxy), and no log line holds the base secret.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "executor/helpers.rs"]
#[allow(dead_code)]
mod helpers;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_runner::credentials::CredentialRegistry;
use cairn_runner::executor::{Executor, ProcessConfig, ProcessExecutor, Secret};
use cairn_runner::pipeline::{
    AdmittedRun, BackendAddresses, Environment, ErrorClass, Pipeline, PipelineSettings, RunConfig,
    RunKind, RunOutcome,
};
use cairn_runner::sts::{AwsRole, BaseCredentials, Sts, StsError};
use cairn_testkit::{Fault, FaultProxy};
use helpers::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const BASE_KEY_ID: &str = "AKIACANARYBASEKEY000";
const ROLE: &str = "arn:aws:iam::210987654321:role/cairn-deploy";

fn base_secret() -> String {
    format!("canary-base-secret-{}", uuid::Uuid::new_v4().simple())
}

fn external_id() -> String {
    format!("cairn-ext-{}", uuid::Uuid::new_v4().simple())
}

/// A registry whose reference `platform` holds the base credentials, from files.
fn registry(dir: &Path, secret: &str, sts_endpoint: &str) -> CredentialRegistry {
    std::fs::write(dir.join("key-id"), BASE_KEY_ID).unwrap();
    std::fs::write(dir.join("secret"), secret).unwrap();
    CredentialRegistry::parse(
        &serde_json::json!({"entries": [
            {"tenant_id": "t1", "target_id": "aws-t", "reference": "platform",
             "vars": {"AWS_ACCESS_KEY_ID": {"file": dir.join("key-id")},
                      "AWS_SECRET_ACCESS_KEY": {"file": dir.join("secret")}}}
        ]})
        .to_string(),
    )
    .unwrap()
    .with_sts(Sts::new(Some(sts_endpoint.to_owned())))
}

/// A tofu that writes its environment to `<record>/<n>-<command>.env`, then runs tofu-sim.
fn recording_tofu(dir: &Path, record: &Path) -> PathBuf {
    let script = dir.join("tofu");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nenv > \"{}/$(date +%s%N)-$1.env\"\nexec \"{}\" \"$@\"\n",
            record.display(),
            tofu_bin().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    script
}

async fn executor(scratch: &Path, tofu: PathBuf) -> ProcessExecutor {
    ProcessExecutor::new(ProcessConfig {
        tofu_bin: tofu,
        instance: instance("aws"),
        scratch_root: scratch.to_path_buf(),
        module_library: module_library(),
        plugin_cache_dir: scratch.join("plugin-cache"),
        grace: Duration::from_secs(2),
    })
    .await
    .unwrap()
}

fn settings(log_sink: Option<mpsc::Sender<cairn_runner::executor::LogLine>>) -> PipelineSettings {
    PipelineSettings {
        timeout: Duration::from_secs(120),
        cancel: CancellationToken::new(),
        log_tail: 100,
        log_sink,
        module_library: module_library(),
        extra_env: Vec::new(),
        backend_tls: Default::default(),
    }
}

fn admitted() -> AdmittedRun {
    AdmittedRun {
        run_id: run_id(),
        attempt: 1,
        backend: BackendAddresses {
            address: "http://127.0.0.1:9/state".into(),
            lock_address: "http://127.0.0.1:9/lock".into(),
            unlock_address: "http://127.0.0.1:9/unlock".into(),
        },
        run_token: Secret::new("token-of-an-aws-run"),
        base_generation: 0,
        read_only: false,
        interrupted: false,
    }
}

/// A plan of a local network module (tofu-sim has no AWS provider: the environment is
/// what is checked) on an AWS target.
fn config(base_dir: &str, external_id: &str) -> RunConfig {
    let root = serde_json::to_vec(&serde_json::json!({
        "module": {"net": {
            "source": "./modules/local/network",
            "name": "net1",
            "base_dir": base_dir,
        }}
    }))
    .unwrap();
    RunConfig {
        kind: RunKind::Plan,
        environment: Environment::parse("staging").unwrap(),
        root_config: root,
        config_hash: "h1".into(),
        tenant_id: "t1".into(),
        target_id: "aws-t".into(),
        target_settings: BTreeMap::from([
            ("aws_region".to_owned(), "eu-west-1".to_owned()),
            ("aws_role_arn".to_owned(), ROLE.to_owned()),
            ("aws_external_id".to_owned(), external_id.to_owned()),
            ("base_dir".to_owned(), base_dir.to_owned()),
        ]),
        credential_ref: Some("platform".into()),
        sensitive_variable_refs: BTreeMap::new(),
    }
}

/// Each recorded command's environment, in order: (command, variables).
fn recorded(record: &Path) -> Vec<(String, BTreeMap<String, String>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(record)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| {
            let name = f.file_stem().unwrap().to_string_lossy();
            let command = name.split_once('-').unwrap().1.to_owned();
            let vars = std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            (command, vars)
        })
        .collect()
}

#[tokio::test]
async fn each_command_gets_a_session_of_the_role_and_never_the_base_credentials() {
    let scratch = scratch();
    let files = tempfile::tempdir().unwrap();
    let record = files.path().join("record");
    std::fs::create_dir(&record).unwrap();
    let exec = executor(scratch.path(), recording_tofu(files.path(), &record)).await;
    let secret = base_secret();
    let creds = tempfile::tempdir().unwrap();
    let registry = registry(creds.path(), &secret, &cairn_testkit::env::aws_endpoint());
    let base = tempfile::tempdir().unwrap();
    let base_dir = base.path().to_string_lossy().into_owned();
    let (tx, mut rx) = mpsc::channel(1024);
    let pipeline = Pipeline::new(&exec, &registry, settings(Some(tx)));

    let run = admitted();
    let result = pipeline
        .run(&run, &config(&base_dir, &external_id()), None)
        .await
        .unwrap();
    assert_eq!(
        result.outcome,
        RunOutcome::Succeeded,
        "{}: {:?}",
        result.message,
        result.log_tail
    );

    let commands = recorded(&record);
    let names: Vec<&str> = commands.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(names, ["init", "validate", "plan", "show", "version"]);
    let mut session_keys = Vec::new();
    for (command, vars) in &commands {
        let key = vars.get("AWS_ACCESS_KEY_ID").map(String::as_str);
        assert!(
            key.is_some_and(|k| k != BASE_KEY_ID && k.starts_with("ASIA")),
            "{command}: AWS_ACCESS_KEY_ID is {key:?}, not a session's"
        );
        assert!(
            vars.get("AWS_SESSION_TOKEN").is_some_and(|t| !t.is_empty()),
            "{command}: no session token"
        );
        assert!(
            vars.get("AWS_SECRET_ACCESS_KEY")
                .is_some_and(|s| !s.is_empty() && *s != secret),
            "{command}: the base secret reached the command"
        );
        assert_eq!(
            vars.get("AWS_REGION").map(String::as_str),
            Some("eu-west-1")
        );
        let all = format!("{vars:?}");
        assert!(
            !all.contains(&secret) && !all.contains(BASE_KEY_ID),
            "{command}"
        );
        session_keys.push(key.unwrap().to_owned());
    }
    session_keys.dedup();
    assert_eq!(session_keys.len(), 5, "a fresh session for every command");

    drop(pipeline);
    let mut logged = Vec::new();
    while let Some(line) = rx.recv().await {
        logged.push(line.text);
    }
    assert!(!logged.is_empty());
    let all = format!("{logged:?} {:?} {}", result.log_tail, result.message);
    assert!(!all.contains(&secret), "the base secret was logged");
}

/// One request a [`StsPeer`] received.
#[derive(Debug, Clone)]
struct Request {
    head: String,
    body: String,
}

/// A loopback STS peer answering every request with `status` and `body`, recording them.
struct StsPeer {
    url: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl StsPeer {
    async fn start(status: &'static str, code: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let (head, body) = loop {
                        let n = conn.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        let text = String::from_utf8_lossy(&buf).into_owned();
                        let Some((head, rest)) = text.split_once("\r\n\r\n") else {
                            continue;
                        };
                        let length = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if rest.len() >= length {
                            break (head.to_owned(), rest.to_owned());
                        }
                    };
                    seen.lock().unwrap().push(Request { head, body });
                    let reply = format!(
                        "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
                         <Error><Type>Sender</Type><Code>{code}</Code>\
                         <Message>refused by the test peer</Message></Error>\
                         <RequestId>test-request</RequestId></ErrorResponse>"
                    );
                    let response = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: text/xml\r\nContent-Length: {}\r\n\
                         Connection: close\r\n\r\n{reply}",
                        reply.len()
                    );
                    let _ = conn.write_all(response.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        Self { url, requests }
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

/// `application/x-www-form-urlencoded` fields of a body.
fn form(body: &str) -> BTreeMap<String, String> {
    fn decode(s: &str) -> String {
        let bytes = s.replace('+', " ").into_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%'
                && i + 2 < bytes.len()
                && let Ok(b) =
                    u8::from_str_radix(&String::from_utf8_lossy(&bytes[i + 1..i + 3]), 16)
            {
                out.push(b);
                i += 3;
                continue;
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    body.split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

#[tokio::test]
async fn access_denied_is_a_clear_config_error_and_the_request_carries_the_external_id() {
    let peer = StsPeer::start("403 Forbidden", "AccessDenied").await;
    let scratch = scratch();
    let files = tempfile::tempdir().unwrap();
    let record = files.path().join("record");
    std::fs::create_dir(&record).unwrap();
    let exec = executor(scratch.path(), recording_tofu(files.path(), &record)).await;
    let secret = base_secret();
    let creds = tempfile::tempdir().unwrap();
    let registry = registry(creds.path(), &secret, &peer.url);
    let (tx, mut rx) = mpsc::channel(1024);
    let pipeline = Pipeline::new(&exec, &registry, settings(Some(tx)));
    let external = external_id();

    let run = admitted();
    let result = pipeline
        .run(&run, &config("/tmp", &external), None)
        .await
        .unwrap();
    assert_eq!(result.outcome, RunOutcome::Failed);
    assert_eq!(
        result.class,
        Some(ErrorClass::Config),
        "never transient: {}",
        result.message
    );
    assert!(
        result.message.contains("AccessDenied") && result.message.contains(ROLE),
        "{}",
        result.message
    );
    assert!(recorded(&record).is_empty(), "no command ran");
    assert!(!exec.work_dir(&run.run_id).exists());

    // Asked once (the SDK does not retry a denial either), with the external id, the run's
    // session name and the command's session length (120 s + margin, raised to STS's 900).
    let requests = peer.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let fields = form(&requests[0].body);
    assert_eq!(fields.get("Action").map(String::as_str), Some("AssumeRole"));
    assert_eq!(fields.get("ExternalId"), Some(&external), "{fields:?}");
    assert_eq!(fields.get("RoleArn").map(String::as_str), Some(ROLE));
    assert_eq!(
        fields.get("RoleSessionName"),
        Some(&format!("cairn-{}", run.run_id))
    );
    assert_eq!(
        fields.get("DurationSeconds").map(String::as_str),
        Some("900")
    );
    // Signed with the base credentials (their key id), which never travel in clear.
    assert!(
        requests[0].head.contains(BASE_KEY_ID),
        "{}",
        requests[0].head
    );
    let raw = format!("{requests:?}");
    assert!(!raw.contains(&secret), "the base secret went over the wire");

    drop(pipeline);
    let mut logged = Vec::new();
    while let Some(line) = rx.recv().await {
        logged.push(line.text);
    }
    assert!(!format!("{logged:?} {:?}", result.log_tail).contains(&secret));
}

#[tokio::test]
async fn throttling_and_an_unreachable_sts_are_transient() {
    let secret = base_secret();
    let creds = tempfile::tempdir().unwrap();
    std::fs::write(creds.path().join("key-id"), BASE_KEY_ID).unwrap();
    std::fs::write(creds.path().join("secret"), &secret).unwrap();
    let base = BaseCredentials::from_vars(
        "platform",
        vec![
            ("AWS_ACCESS_KEY_ID".into(), Secret::new(BASE_KEY_ID)),
            ("AWS_SECRET_ACCESS_KEY".into(), Secret::new(secret.clone())),
        ],
    )
    .unwrap();
    let role = AwsRole {
        region: "eu-west-1".into(),
        role_arn: ROLE.into(),
        external_id: external_id(),
    };

    let throttling = StsPeer::start("400 Bad Request", "Throttling").await;
    let err = Sts::new(Some(throttling.url.clone()))
        .assume_role(&base, &role, "cairn-test", Duration::from_secs(900))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StsError::Unavailable { .. }) && err.is_transient(),
        "{err}"
    );
    assert!(!throttling.requests().is_empty());

    // Through the fault proxy in front of moto: answered, then cut off.
    let proxy = FaultProxy::start_for_url(&cairn_testkit::env::aws_endpoint())
        .await
        .unwrap();
    let sts = Sts::new(Some(format!("http://{}", proxy.addr())));
    sts.assume_role(&base, &role, "cairn-test", Duration::from_secs(900))
        .await
        .expect("moto through the proxy");
    proxy.set(Fault::Cut);
    let err = sts
        .assume_role(&base, &role, "cairn-test", Duration::from_secs(900))
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(!err.chain().contains(&secret));
}

#[tokio::test]
async fn validation_reports_the_roles_account_or_the_refusal() {
    let base = BaseCredentials::from_vars(
        "platform",
        vec![
            ("AWS_ACCESS_KEY_ID".into(), Secret::new(BASE_KEY_ID)),
            ("AWS_SECRET_ACCESS_KEY".into(), Secret::new(base_secret())),
        ],
    )
    .unwrap();
    let role = AwsRole {
        region: "eu-west-1".into(),
        role_arn: ROLE.into(),
        external_id: external_id(),
    };
    let identity = Sts::new(Some(cairn_testkit::env::aws_endpoint()))
        .validate(&base, &role, "cairn-validate-test")
        .await
        .unwrap();
    assert_eq!(identity.account_id, "210987654321");
    assert!(
        identity
            .arn
            .contains("assumed-role/cairn-deploy/cairn-validate-test"),
        "{}",
        identity.arn
    );

    let denied = StsPeer::start("403 Forbidden", "AccessDenied").await;
    let err = Sts::new(Some(denied.url.clone()))
        .validate(&base, &role, "cairn-validate-test")
        .await
        .unwrap_err();
    assert!(matches!(err, StsError::AccessDenied { .. }), "{err}");
}

/// A `cairn-runner serve` process (process executor) serving target `aws-t` of `tenant` with
/// the base credentials of reference `platform` (from files), STS at `sts_endpoint`; its
/// stdout and stderr (every log line, at debug) go to `<dir>/runner.log`.
struct ServedRunner {
    child: tokio::process::Child,
    log: PathBuf,
    bus: cairn_bus::Bus,
    instance: String,
    _keys: cairn_testkit::TestKeys,
    /// The prefix's streams live as long as the runner.
    _nats: cairn_testkit::TestNats,
}

const TARGET: &str = "aws-t";

impl ServedRunner {
    async fn start(dir: &Path, tenant: &str, secret: &str, sts_endpoint: &str) -> Self {
        let nats = cairn_testkit::connect_nats().await;
        let ns = cairn_bus::Namespace::with_prefix(&nats.prefix).unwrap();
        // The streams exist before the first request is published (connect_nats set them up).
        let bus = cairn_bus::connect(&nats.url, ns, cairn_bus::ServiceRole::Tenancy, None)
            .await
            .unwrap();
        std::fs::write(dir.join("key-id"), BASE_KEY_ID).unwrap();
        std::fs::write(dir.join("secret"), secret).unwrap();
        std::fs::write(
            dir.join("credentials.json"),
            serde_json::json!({"entries": [
                {"tenant_id": tenant, "target_id": TARGET, "reference": "platform",
                 "vars": {"AWS_ACCESS_KEY_ID": {"file": dir.join("key-id")},
                          "AWS_SECRET_ACCESS_KEY": {"file": dir.join("secret")}}}
            ]})
            .to_string(),
        )
        .unwrap();
        let keys = cairn_testkit::TestKeys::new();
        std::fs::write(dir.join("token"), keys.service_token()).unwrap();
        let work = dir.join("work");
        let spool = dir.join("spool");
        std::fs::create_dir_all(&work).unwrap();
        let instance = instance("validate").to_string();
        let log = dir.join("runner.log");
        let out = std::fs::File::create(&log).unwrap();
        let p = |p: &Path| p.to_string_lossy().into_owned();
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_cairn-runner"))
            .arg("serve")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUST_LOG", "debug")
            .env("CAIRN_RUNNER_INSTANCE", &instance)
            .env("CAIRN_NATS_URL", &nats.url)
            .env("CAIRN_NATS_PREFIX", &nats.prefix)
            // No coordinator is needed to validate a target.
            .env("CAIRN_COORDINATOR_URL", "http://127.0.0.1:9")
            .env("CAIRN_SERVICE_TOKEN_FILE", p(&dir.join("token")))
            .env("CAIRN_CREDENTIALS_FILE", p(&dir.join("credentials.json")))
            .env("CAIRN_GRPC_ADDR", "127.0.0.1:0")
            .env("CAIRN_JWT_PUBLIC_KEYS_FILE", p(keys.jwks_path()))
            .env("CAIRN_EXECUTOR", "process")
            .env("CAIRN_TOFU_BIN", p(&tofu_bin()))
            .env("CAIRN_MODULES_DIR", p(&module_library()))
            .env("CAIRN_WORK_ROOT", p(&work))
            .env("CAIRN_RUNNER_SPOOL_DIR", p(&spool))
            .env("CAIRN_RUNNER_ACK_WAIT", "3s")
            .env(cairn_runner::sts::ENDPOINT_ENV, sts_endpoint)
            .stdin(std::process::Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Self {
            child,
            log,
            bus,
            instance,
            _keys: keys,
            _nats: nats,
        }
    }

    /// Publishes a validation request on `cairn.runq.aws-t.validate` (`Nats-Msg-Id` = its
    /// validation id, as tenancy's relay does); returns the validation id.
    async fn request(&self, tenant: &str, external_id: &str) -> String {
        use prost::Message;
        let validation_id = uuid::Uuid::new_v4().to_string();
        let msg = cairn_proto::runner::TargetValidationRequest {
            validation_id: validation_id.clone(),
            tenant_id: tenant.into(),
            target_id: TARGET.into(),
            credential_ref: "platform".into(),
            region: "eu-west-1".into(),
            role_arn: ROLE.into(),
            external_id: external_id.into(),
        };
        self.bus
            .js
            .send_publish(
                self.bus.ns.runq_validate(TARGET).unwrap(),
                async_nats::jetstream::message::PublishMessage::build()
                    .payload(msg.encode_to_vec().into())
                    .message_id(&validation_id),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        validation_id
    }

    /// Waits for the `target.validated` event of `validation_id` on
    /// `cairn.events.<tenant>.target.validated`; returns it and its `Nats-Msg-Id`.
    async fn answer(
        &self,
        tenant: &str,
        validation_id: &str,
    ) -> (cairn_proto::events::Event, String) {
        use async_nats::jetstream::consumer::{AckPolicy, pull};
        use futures::StreamExt;
        use prost::Message;
        let subject = self
            .bus
            .ns
            .events_subject(tenant, "target", "validated")
            .unwrap();
        let stream = self
            .bus
            .js
            .get_stream(self.bus.ns.events_stream())
            .await
            .unwrap();
        let consumer = stream
            .create_consumer(pull::Config {
                filter_subject: subject,
                ack_policy: AckPolicy::None,
                ..Default::default()
            })
            .await
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let mut batch = consumer
                .fetch()
                .max_messages(100)
                .expires(Duration::from_millis(500))
                .messages()
                .await
                .unwrap();
            while let Some(Ok(msg)) = batch.next().await {
                let event = cairn_proto::events::Event::decode(msg.payload.clone()).unwrap();
                if event.event_id == validation_id {
                    let msg_id = msg
                        .headers
                        .as_ref()
                        .and_then(|h| h.get("Nats-Msg-Id"))
                        .map(|v| v.as_str().to_owned())
                        .unwrap_or_default();
                    return (event, msg_id);
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no answer to validation {validation_id}; runner log:\n{}",
                self.logs()
            );
        }
    }

    /// Waits until the run queue holds nothing (every request acknowledged).
    async fn drained(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let mut stream = self
                .bus
                .js
                .get_stream(self.bus.ns.runq_stream())
                .await
                .unwrap();
            if stream.info().await.unwrap().state.messages == 0 {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "requests left in the queue"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn stop(mut self) -> String {
        let _ = self.child.kill().await;
        self.logs()
    }
}

fn validated(event: &cairn_proto::events::Event) -> cairn_proto::events::TargetValidated {
    match &event.payload {
        Some(cairn_proto::events::event::Payload::TargetValidated(v)) => v.clone(),
        other => panic!("not a target.validated payload: {other:?}"),
    }
}

#[tokio::test]
async fn a_validation_request_on_the_queue_is_answered_with_the_roles_account() {
    let dir = tempfile::tempdir().unwrap();
    let tenant = uuid::Uuid::new_v4().to_string();
    let secret = base_secret();
    let runner = ServedRunner::start(
        dir.path(),
        &tenant,
        &secret,
        &cairn_testkit::env::aws_endpoint(),
    )
    .await;

    let id = runner.request(&tenant, &external_id()).await;
    let (event, msg_id) = runner.answer(&tenant, &id).await;
    assert_eq!(msg_id, id, "Nats-Msg-Id is the validation id");
    assert_eq!(
        (
            event.aggregate.as_str(),
            event.aggregate_id.as_str(),
            event.event_type.as_str()
        ),
        ("target", TARGET, "validated")
    );
    assert_eq!(event.tenant_id, tenant);
    let v = validated(&event);
    assert!(v.ok, "{v:?}");
    assert_eq!(v.validation_id, id);
    assert_eq!(v.target_id, TARGET);
    assert_eq!(v.account_id, "210987654321", "moto: the role's account");
    assert!(
        v.arn
            .contains("assumed-role/cairn-deploy/cairn-validate-aws-t"),
        "{}",
        v.arn
    );
    assert!(!v.transient && v.error.is_empty(), "{v:?}");
    assert_eq!(v.runner_instance, runner.instance);

    // Another tenant naming the same target and reference: the registry holds nothing for
    // it, a lasting failure that says so (not silence).
    let other = uuid::Uuid::new_v4().to_string();
    let id = runner.request(&other, &external_id()).await;
    let (event, _) = runner.answer(&other, &id).await;
    let v = validated(&event);
    assert!(!v.ok && !v.transient, "{v:?}");
    assert!(v.error.contains("not registered"), "{}", v.error);
    assert!(v.account_id.is_empty() && v.arn.is_empty());

    // Every request was acknowledged once its answer was confirmed.
    runner.drained().await;
    let logs = runner.stop().await;
    assert!(logs.contains("target validated"), "{logs}");
    assert!(!logs.contains(&secret), "the base secret was logged");
}

#[tokio::test]
async fn a_refused_role_is_a_lasting_failure_and_no_credential_is_logged() {
    let denied = StsPeer::start("403 Forbidden", "AccessDenied").await;
    let dir = tempfile::tempdir().unwrap();
    let tenant = uuid::Uuid::new_v4().to_string();
    let secret = base_secret();
    let runner = ServedRunner::start(dir.path(), &tenant, &secret, &denied.url).await;

    let external = external_id();
    let id = runner.request(&tenant, &external).await;
    let (event, _) = runner.answer(&tenant, &id).await;
    let v = validated(&event);
    assert!(!v.ok, "{v:?}");
    assert!(!v.transient, "AccessDenied is not worth retrying: {v:?}");
    assert!(
        v.error.contains("AccessDenied") && v.error.contains(ROLE),
        "{}",
        v.error
    );
    assert!(!v.error.contains(&secret));

    // STS was asked to assume the role with the target's external id, signed with the base
    // credentials (their key id), never sending the secret.
    let requests = denied.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let fields = form(&requests[0].body);
    assert_eq!(fields.get("Action").map(String::as_str), Some("AssumeRole"));
    assert_eq!(fields.get("ExternalId"), Some(&external));
    assert_eq!(
        fields.get("RoleSessionName").map(String::as_str),
        Some("cairn-validate-aws-t")
    );
    assert!(requests[0].head.contains(BASE_KEY_ID));
    assert!(!format!("{requests:?}").contains(&secret));

    runner.drained().await;
    let logs = runner.stop().await;
    assert!(logs.contains("target validation failed"), "{logs}");
    assert!(!logs.contains(&secret), "the base secret was logged");
}

#[tokio::test]
async fn an_unreachable_sts_is_a_transient_failure() {
    let proxy = FaultProxy::start_for_url(&cairn_testkit::env::aws_endpoint())
        .await
        .unwrap();
    proxy.set(Fault::Cut);
    let dir = tempfile::tempdir().unwrap();
    let tenant = uuid::Uuid::new_v4().to_string();
    let secret = base_secret();
    let runner = ServedRunner::start(
        dir.path(),
        &tenant,
        &secret,
        &format!("http://{}", proxy.addr()),
    )
    .await;
    let id = runner.request(&tenant, &external_id()).await;
    let (event, _) = runner.answer(&tenant, &id).await;
    let v = validated(&event);
    assert!(!v.ok && v.transient, "{v:?}");
    assert!(v.error.contains("unavailable"), "{}", v.error);

    // Healed: the next request is answered with the account.
    proxy.heal();
    let id = runner.request(&tenant, &external_id()).await;
    let (event, _) = runner.answer(&tenant, &id).await;
    assert!(validated(&event).ok, "{:?}", validated(&event));
    let logs = runner.stop().await;
    assert!(!logs.contains(&secret), "the base secret was logged");
}
