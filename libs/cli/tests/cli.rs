//! The real `cairn` binary against tenancy, templates, deployments and drift started
//! in-process on port 0 (fresh databases, one signing key), with a context file of its own
//! pointing at them. Drift listens on a NATS prefix of its own, so it sees only the events a
//! test publishes to it (as deployments would): an instance it was not told about is one
//! drift never saw.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use cairn_testkit::{TempDir, TestKeys, TestNats};
use serde_json::Value;

const PARAMS: &str =
    r#"{"db_admin_password": "arn:aws:secretsmanager:us-east-1:000000000000:secret:shop-db"}"#;
const PASSWORD: &str = "correct horse battery staple";

struct Platform {
    _tenancy: cairn_tenancy::Server,
    _templates: cairn_templates::Server,
    _deployments: cairn_deployments::Server,
    _drift: cairn_drift::Server,
    _dbs: Vec<cairn_db::TestDatabase>,
    _nats: TestNats,
    /// Drift's own NATS prefix.
    drift_nats: TestNats,
    _keys: TestKeys,
    dir: TempDir,
    api_token: String,
    tenancy_url: String,
    templates_url: String,
    deployments_url: String,
    drift_url: String,
    /// A loopback HTTP receiver for webhook deliveries (answers 200).
    hook_url: String,
}

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn db_args(db: &cairn_db::TestDatabase, schema: &str) -> cairn_service::DbArgs {
    cairn_service::DbArgs {
        database_url: db.runtime_url.clone(),
        database_migrate_url: Some(db.migrate_url.clone()),
        database_schema: Some(schema.to_owned()),
    }
}

fn nats_args(nats: &TestNats) -> cairn_service::NatsArgs {
    cairn_service::NatsArgs {
        nats_url: nats.url.clone(),
        nats_prefix: Some(nats.prefix.clone()),
        nats_creds: None,
    }
}

async fn platform() -> Platform {
    cairn_testkit::init_tracing();
    let keys = TestKeys::new();
    let nats = cairn_testkit::connect_nats().await;
    let dir = cairn_testkit::temp_dir();

    let tenancy_db = cairn_testkit::fresh_database().await;
    let keys_file = dir.path().join("jwt-private-keys.json");
    cairn_tenancy::keys::Signer::from_keys(vec![keys.signing_key().clone()])
        .unwrap()
        .save(&keys_file)
        .unwrap();
    let tenancy = cairn_tenancy::Server::start(cairn_tenancy::Config {
        db: db_args(&tenancy_db, "tenancy"),
        nats: nats_args(&nats),
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        shared: Default::default(),
        jwt_private_keys_file: keys_file,
        access_token_ttl: Duration::from_secs(300),
        login_attempts_per_minute: 1000,
        credential_attempts_per_address_per_minute: 10_000,
        password_hash_memory_kib: 256,
        password_hash_iterations: 1,
        event_ack_wait: Duration::from_secs(5),
        webhooks: cairn_tenancy::WebhookArgs {
            webhook_allow_loopback: true,
            webhook_timeout: Duration::from_secs(5),
            webhook_retry_base: Duration::from_millis(100),
            webhook_retry_max: Duration::from_secs(1),
            webhook_poll_interval: Duration::from_millis(100),
            ..Default::default()
        },
    })
    .await
    .expect("start tenancy");
    let boot = cairn_tenancy::app::bootstrap::bootstrap(
        &tenancy.app().pool,
        &cairn_tenancy::domain::names::Slug::parse("tenant-a").unwrap(),
        "Tenant A",
        &cairn_tenancy::domain::names::Email::parse("owner-a@example.com").unwrap(),
        "Owner A",
    )
    .await
    .expect("bootstrap tenancy");

    let templates_db = cairn_testkit::fresh_database().await;
    let templates = cairn_templates::Server::start(cairn_templates::Config {
        db: db_args(&templates_db, "templates"),
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        shared: Default::default(),
        jwks: cairn_service::JwksArgs {
            jwt_public_keys_file: keys.jwks_path().to_owned(),
        },
        modules_dir: repo("modules"),
        template_max_bytes: 256 * 1024,
        template_max_resources: 100,
    })
    .await
    .expect("start templates");

    let deployments_db = cairn_testkit::fresh_database().await;
    let token_file = dir.path().join("deployments.token");
    std::fs::write(&token_file, keys.service_token_as("deployments")).unwrap();
    // Parsed from flags, so settings added later keep their defaults here.
    let config = <cairn_deployments::Config as clap::Parser>::try_parse_from([
        "cairn-deployments".to_owned(),
        format!("--database-url={}", deployments_db.runtime_url),
        format!("--database-migrate-url={}", deployments_db.migrate_url),
        "--database-schema=deployments".to_owned(),
        format!("--nats-url={}", nats.url),
        format!("--nats-prefix={}", nats.prefix),
        format!("--jwt-public-keys-file={}", keys.jwks_path().display()),
        "--grpc-addr=127.0.0.1:0".to_owned(),
        format!("--tenancy-url=http://{}", tenancy.grpc_addr()),
        format!("--templates-url=http://{}", templates.grpc_addr()),
        "--coordinator-url=http://127.0.0.1:9".to_owned(),
        format!("--service-token-file={}", token_file.display()),
        // The API only: no worker takes the jobs (no coordinator or runner here).
        "--deploy-workers=0".to_owned(),
    ])
    .expect("deployments config");
    let deployments = cairn_deployments::Server::start(config)
        .await
        .expect("start deployments");

    let drift_db = cairn_testkit::fresh_database().await;
    let drift_nats = cairn_testkit::connect_nats().await;
    let drift_token = dir.path().join("drift.token");
    std::fs::write(&drift_token, keys.service_token_as("drift")).unwrap();
    // Parsed from flags, so settings added later keep their defaults here.
    let drift_config = <cairn_drift::Config as clap::Parser>::try_parse_from([
        "cairn-drift".to_owned(),
        "--grpc-addr=127.0.0.1:0".to_owned(),
        format!("--database-url={}", drift_db.runtime_url),
        format!("--database-migrate-url={}", drift_db.migrate_url),
        "--database-schema=drift".to_owned(),
        format!("--nats-url={}", drift_nats.url),
        format!("--nats-prefix={}", drift_nats.prefix),
        format!("--jwt-public-keys-file={}", keys.jwks_path().display()),
        format!("--tenancy-url=http://{}", tenancy.grpc_addr()),
        // No coordinator or runner here: a scan that starts ends check_failed.
        "--coordinator-url=http://127.0.0.1:9".to_owned(),
        format!("--service-token-file={}", drift_token.display()),
        // No scheduled scans: only TriggerScan queues one.
        "--drift-check-interval=0s".to_owned(),
        "--drift-tick=200ms".to_owned(),
        "--drift-ack-wait=5s".to_owned(),
    ])
    .expect("drift config");
    let drift = cairn_drift::Server::start(drift_config)
        .await
        .expect("start drift");

    Platform {
        tenancy_url: format!("http://{}", tenancy.grpc_addr()),
        templates_url: format!("http://{}", templates.grpc_addr()),
        deployments_url: format!("http://{}", deployments.grpc_addr()),
        drift_url: format!("http://{}", drift.grpc_addr()),
        hook_url: hook_receiver(),
        api_token: boot.api_token.expose().to_owned(),
        _tenancy: tenancy,
        _templates: templates,
        _deployments: deployments,
        _drift: drift,
        _dbs: vec![tenancy_db, templates_db, deployments_db, drift_db],
        _nats: nats,
        drift_nats,
        _keys: keys,
        dir,
    }
}

/// A config directory whose default context points at the platform.
fn config_dir(p: &Platform, name: &str) -> PathBuf {
    let dir = p.dir.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "current_context = \"test\"\n\n[contexts.test]\ntenancy = \"{}\"\ntemplates = \"{}\"\ndeployments = \"{}\"\ndrift = \"{}\"\nstate = \"http://127.0.0.1:9\"\n",
            p.tenancy_url, p.templates_url, p.deployments_url, p.drift_url
        ),
    )
    .unwrap();
    dir
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }

    #[track_caller]
    fn ok(self) -> Run {
        assert_eq!(
            self.code, 0,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }

    /// Failed with `code` and exactly one `error: …` line on stderr.
    #[track_caller]
    fn one_line_error(&self, code: i32) -> &str {
        assert_eq!(
            self.code, code,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "stderr is not one line: {}", self.stderr);
        assert!(lines[0].starts_with("error: "), "{}", self.stderr);
        assert!(
            !self.stderr.contains("Status {"),
            "a debug dump: {}",
            self.stderr
        );
        lines[0]
    }
}

/// Runs `cairn` with `dir` as its config directory (and no CAIRN_API_TOKEN unless given).
async fn cairn(dir: &Path, args: &[&str], stdin: Option<&str>, token: Option<&str>) -> Run {
    let dir = dir.to_owned();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let stdin = stdin.map(str::to_owned);
    let token = token.map(str::to_owned);
    tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn"));
        cmd.args(&args)
            .env("CAIRN_CONFIG_DIR", &dir)
            .env_remove("CAIRN_API_TOKEN")
            .env_remove("CAIRN_CONTEXT")
            .env_remove("CAIRN_TENANT")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if let Some(t) = token {
            cmd.env("CAIRN_API_TOKEN", t);
        }
        let mut child = cmd.spawn().expect("spawn cairn");
        {
            use std::io::Write;
            let mut pipe = child.stdin.take().unwrap();
            if let Some(input) = stdin {
                pipe.write_all(input.as_bytes()).unwrap();
            }
        }
        let Output {
            status,
            stdout,
            stderr,
        } = child.wait_with_output().unwrap();
        Run {
            code: status.code().unwrap_or(-1),
            stdout: String::from_utf8(stdout).unwrap(),
            stderr: String::from_utf8(stderr).unwrap(),
        }
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn the_cli_drives_tenancy_templates_and_instances() {
    let p = platform().await;
    let a = config_dir(&p, "a");
    let token_file = p.dir.path().join("api-token");
    std::fs::write(&token_file, format!("{}\n", p.api_token)).unwrap();

    // Login stores the credential 0600; whoami reads it back.
    cairn(
        &a,
        &["login", "--api-token-file", token_file.to_str().unwrap()],
        None,
        None,
    )
    .await
    .ok();
    let creds = a.join("credentials.toml");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&creds).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let me = cairn(&a, &["whoami", "-o", "json"], None, None)
        .await
        .ok()
        .json();
    assert_eq!(me["tenant_slug"], "tenant-a");
    assert_eq!(me["role"], "owner");
    assert_eq!(me["email"], "owner-a@example.com");
    assert_eq!(me["context"], "test");
    let tenant_a = me["tenant_id"].as_str().unwrap().to_owned();
    let table = cairn(&a, &["whoami"], None, None).await.ok();
    assert!(table.stdout.contains("tenant-a"), "{}", table.stdout);

    // CAIRN_API_TOKEN works without a login.
    let fresh = config_dir(&p, "fresh");
    let me2 = cairn(&fresh, &["whoami", "-o", "json"], None, Some(&p.api_token))
        .await
        .ok()
        .json();
    assert_eq!(me2["tenant_id"], tenant_a.as_str());

    // Targets.
    let base = p.dir.path().join("base");
    std::fs::create_dir_all(&base).unwrap();
    let created = cairn(
        &a,
        &[
            "targets",
            "create",
            "local",
            "--local-dir",
            base.to_str().unwrap(),
            "--max-concurrent",
            "2",
            "-o",
            "json",
        ],
        None,
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(created["name"], "local");
    assert_eq!(created["provider"], "local");
    assert_eq!(created["base_dir"], base.to_str().unwrap());
    assert_eq!(created["max_concurrent_deployments"], 2);
    assert_eq!(created["enabled"], true);
    let target_id = created["target_id"].as_str().unwrap().to_owned();
    let list = cairn(&a, &["targets", "list", "-o", "json"], None, None)
        .await
        .ok()
        .json();
    let list = list.as_array().expect("an array");
    assert_eq!(list.len(), 1);
    for field in [
        "target_id",
        "tenant_id",
        "name",
        "provider",
        "base_dir",
        "credential_ref",
        "max_concurrent_deployments",
        "enabled",
        "created_at",
    ] {
        assert!(
            list[0].get(field).is_some(),
            "targets list has no {field}: {}",
            list[0]
        );
    }
    let by_id = cairn(
        &a,
        &["targets", "get", &target_id, "-o", "json"],
        None,
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(by_id["name"], "local");
    let table = cairn(&a, &["targets", "list"], None, None).await.ok();
    assert!(table.stdout.starts_with("TARGET_ID"), "{}", table.stdout);

    // Templates: create with a document, publish again (idempotent), validate.
    let doc = repo("modules/examples/web-stack/template.yaml");
    let published = cairn(
        &a,
        &[
            "templates",
            "create",
            "web-stack",
            "-f",
            doc.to_str().unwrap(),
            "-o",
            "json",
        ],
        None,
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(published["template"]["name"], "web-stack");
    assert_eq!(published["version"]["number"], 1);
    assert_eq!(published["created"], true);
    let again = cairn(
        &a,
        &[
            "templates",
            "publish",
            "web-stack",
            "-f",
            doc.to_str().unwrap(),
            "-o",
            "json",
        ],
        None,
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(again["created"], false);
    assert_eq!(again["version"]["number"], 1);
    let versions = cairn(
        &a,
        &["templates", "versions", "web-stack", "-o", "json"],
        None,
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(versions.as_array().unwrap().len(), 1);
    let valid = cairn(
        &a,
        &[
            "templates",
            "validate",
            "-f",
            doc.to_str().unwrap(),
            "-o",
            "json",
        ],
        None,
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(valid["valid"], true);

    // A malformed document: `file:line:col: message` lines and a non-zero exit.
    let bad = p.dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "name: broken\nresources:\n  web:\n    module: local/no-such-module\n    inputs: {}\n",
    )
    .unwrap();
    let run = cairn(
        &a,
        &["templates", "validate", "-f", bad.to_str().unwrap()],
        None,
        None,
    )
    .await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    let prefix = format!("{}:", bad.display());
    let problems: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .collect();
    assert!(
        !problems.is_empty(),
        "no file:line:col lines: {}",
        run.stderr
    );
    for line in &problems {
        let rest = &line[prefix.len()..];
        let mut parts = rest.splitn(3, ':');
        let (l, c) = (parts.next().unwrap(), parts.next().unwrap());
        assert!(l.parse::<u32>().unwrap() >= 1, "{line}");
        assert!(c.parse::<u32>().unwrap() >= 1, "{line}");
        assert!(parts.next().unwrap().starts_with(' '), "{line}");
    }
    let run = cairn(
        &a,
        &[
            "templates",
            "publish",
            "web-stack",
            "-f",
            bad.to_str().unwrap(),
        ],
        None,
        None,
    )
    .await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.lines().any(|l| l.starts_with(&prefix)),
        "{}",
        run.stderr
    );
    let garbage = p.dir.path().join("garbage.yaml");
    std::fs::write(&garbage, "resources: [\n  : :\n").unwrap();
    let run = cairn(
        &a,
        &["templates", "validate", "-f", garbage.to_str().unwrap()],
        None,
        None,
    )
    .await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .lines()
            .any(|l| l.starts_with(&format!("{}:", garbage.display()))),
        "{}",
        run.stderr
    );

    // Instances by name.
    let params = p.dir.path().join("params.json");
    std::fs::write(&params, PARAMS).unwrap();
    let inst = cairn(
        &a,
        &[
            "instances",
            "create",
            "shop",
            "--template",
            "web-stack@1",
            "--target",
            "local",
            "--env",
            "Staging",
            "--params-file",
            params.to_str().unwrap(),
            "--param",
            "replicas=2",
            "-o",
            "json",
        ],
        None,
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(inst["name"], "shop");
    assert_eq!(inst["environment"], "staging");
    assert_eq!(inst["status"], "pending");
    assert_eq!(inst["parameters"]["replicas"], 2);
    let instance_id = inst["instance_id"].as_str().unwrap().to_owned();
    let got = cairn(&a, &["instances", "get", "shop", "-o", "json"], None, None)
        .await
        .ok()
        .json();
    assert_eq!(got["instance_id"], instance_id.as_str());
    assert_eq!(got["target_id"], target_id.as_str());
    assert!(
        got["resources"].is_array() && got["outputs"].is_array(),
        "{got}"
    );
    let listed = cairn(&a, &["instances", "list", "-o", "json"], None, None)
        .await
        .ok()
        .json();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let updated = cairn(
        &a,
        &[
            "instances",
            "update",
            "shop",
            "--param",
            "replicas=3",
            "-o",
            "json",
        ],
        None,
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(updated["parameters"]["replicas"], 3);
    let deps = cairn(
        &a,
        &["deployments", "list", "--instance", "shop", "-o", "json"],
        None,
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(deps, serde_json::json!([]));
    let run = cairn(&a, &["instances", "get", "nope"], None, None).await;
    assert!(
        run.one_line_error(1).contains("NOT_FOUND"),
        "{}",
        run.stderr
    );

    // A wrong token: one line, non-zero.
    let run = cairn(
        &fresh,
        &["whoami"],
        None,
        Some("cairn_00000000000000000000000000000000_nope"),
    )
    .await;
    let line = run.one_line_error(1);
    assert!(line.contains("UNAUTHENTICATED"), "{line}");
    let run = cairn(&fresh, &["targets", "list"], None, Some("not-a-token")).await;
    run.one_line_error(2);

    // Another tenant's ids are NOT_FOUND: tenant B's owner logs in with a password.
    let b_tenant = cairn(
        &a,
        &[
            "tenants",
            "create",
            "tenant-b",
            "--owner-email",
            "owner-b@example.com",
            "--owner-password-stdin",
            "-o",
            "json",
        ],
        Some(&format!("{PASSWORD}\n")),
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(b_tenant["slug"], "tenant-b");
    let b = config_dir(&p, "b");
    cairn(
        &b,
        &[
            "login",
            "--tenant",
            "tenant-b",
            "--email",
            "owner-b@example.com",
            "--password-stdin",
        ],
        Some(&format!("{PASSWORD}\n")),
        None,
    )
    .await
    .ok();
    let me_b = cairn(&b, &["whoami", "-o", "json"], None, None)
        .await
        .ok()
        .json();
    assert_eq!(me_b["tenant_slug"], "tenant-b");
    for args in [
        vec!["instances", "get", instance_id.as_str()],
        vec!["targets", "get", target_id.as_str()],
        vec![
            "templates",
            "get",
            published["template"]["template_id"].as_str().unwrap(),
        ],
    ] {
        let run = cairn(&b, &args, None, None).await;
        let line = run.one_line_error(1);
        assert!(line.contains("NOT_FOUND"), "{args:?}: {line}");
    }
    let empty = cairn(&b, &["instances", "list", "-o", "json"], None, None)
        .await
        .ok()
        .json();
    assert_eq!(empty, serde_json::json!([]));

    // Usage errors exit 2; completions print a script.
    let run = cairn(&a, &["instances", "create", "x"], None, None).await;
    assert_eq!(run.code, 2);
    let run = cairn(
        &a,
        &["instances", "update", "shop", "--param", "novalue"],
        None,
        None,
    )
    .await;
    run.one_line_error(2);
    let run = cairn(&a, &["completions", "bash"], None, None).await.ok();
    assert!(run.stdout.contains("_cairn"), "{}", run.stdout);
}

#[tokio::test]
async fn an_unreachable_service_is_one_line() {
    let dir = cairn_testkit::temp_dir();
    std::fs::write(
        dir.path().join("config.toml"),
        "current_context = \"x\"\n[contexts.x]\ntenancy = \"http://127.0.0.1:9\"\n",
    )
    .unwrap();
    let run = cairn(dir.path(), &["whoami"], None, Some("cairn_abc_def")).await;
    let line = run.one_line_error(1);
    assert!(
        line.contains("tenancy at http://127.0.0.1:9") && line.contains("UNAVAILABLE"),
        "{line}"
    );
    let run = cairn(dir.path(), &["whoami"], None, None).await;
    assert!(run.one_line_error(1).contains("not logged in"));
    let run = cairn(dir.path(), &["--context", "nope", "whoami"], None, None).await;
    run.one_line_error(2);
}

/// A loopback HTTP server that answers every request 200 (a webhook receiver); its URL.
fn hook_receiver() -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                let _ = reader.get_mut().write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
            });
        }
    });
    url
}

/// Runs `args` until `done` holds of its JSON output (at most 30 s); the last output.
async fn wait_json(dir: &Path, args: &[&str], done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let run = cairn(dir, args, None, None).await;
        if run.code == 0 {
            let v = run.json();
            if done(&v) {
                return v;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("{args:?} never reached the expected state: {v}");
            }
        } else if tokio::time::Instant::now() > deadline {
            panic!("{args:?} kept failing: {}", run.stderr);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Publishes an event to drift's namespace, as deployments' relay does.
async fn publish_to_drift(
    p: &Platform,
    tenant: &str,
    aggregate: cairn_bus::Aggregate,
    id: &str,
    event_type: &str,
    payload: cairn_proto::events::event::Payload,
) {
    let ns = cairn_bus::Namespace::with_prefix(&p.drift_nats.prefix).unwrap();
    let event = cairn_bus::new_event(
        cairn_bus::ServiceRole::Deployments,
        tenant,
        aggregate,
        id,
        event_type,
        "svc:deployments",
        payload,
    )
    .unwrap();
    cairn_bus::publish_event(&p.drift_nats.jetstream, &ns, &event)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_cli_drives_drift_webhooks_and_outputs() {
    use cairn_proto::events::{self as epb, event::Payload};

    let p = platform().await;
    let a = config_dir(&p, "a");
    let token_file = p.dir.path().join("api-token");
    std::fs::write(&token_file, format!("{}\n", p.api_token)).unwrap();
    cairn(
        &a,
        &["login", "--api-token-file", token_file.to_str().unwrap()],
        None,
        None,
    )
    .await
    .ok();
    let me = cairn(&a, &["whoami", "-o", "json"], None, None)
        .await
        .ok()
        .json();
    let tenant_a = me["tenant_id"].as_str().unwrap().to_owned();

    // A fresh platform has no findings, open or resolved.
    for args in [
        vec!["drift", "findings", "-o", "json"],
        vec!["drift", "findings", "--open", "-o", "json"],
        vec!["drift", "findings", "--resolved", "-o", "json"],
    ] {
        let v = cairn(&a, &args, None, None).await.ok().json();
        assert_eq!(v, serde_json::json!([]), "{args:?}");
    }
    let table = cairn(&a, &["drift", "findings"], None, None).await.ok();
    assert_eq!(table.stdout.trim(), "(none)");

    // An instance (never deployed).
    let base = p.dir.path().join("base");
    std::fs::create_dir_all(&base).unwrap();
    cairn(
        &a,
        &[
            "targets",
            "create",
            "local",
            "--local-dir",
            base.to_str().unwrap(),
        ],
        None,
        None,
    )
    .await
    .ok();
    let doc = repo("modules/examples/web-stack/template.yaml");
    cairn(
        &a,
        &[
            "templates",
            "create",
            "web-stack",
            "-f",
            doc.to_str().unwrap(),
        ],
        None,
        None,
    )
    .await
    .ok();
    let params = p.dir.path().join("params.json");
    std::fs::write(&params, PARAMS).unwrap();
    let inst = cairn(
        &a,
        &[
            "instances",
            "create",
            "shop",
            "--template",
            "web-stack",
            "--target",
            "local",
            "--env",
            "staging",
            "--params-file",
            params.to_str().unwrap(),
            "-o",
            "json",
        ],
        None,
        None,
    )
    .await
    .ok()
    .json();
    let instance_id = inst["instance_id"].as_str().unwrap().to_owned();

    // `instances get` of a pending instance: no resources and no outputs yet (their
    // rendering, drift status and `(sensitive)`/`(unavailable: …)` are unit-tested in
    // views.rs: no runner runs here).
    let got = cairn(&a, &["instances", "get", "shop", "-o", "json"], None, None)
        .await
        .ok()
        .json();
    assert_eq!(got["resources"], serde_json::json!([]), "{got}");
    assert_eq!(got["outputs"], serde_json::json!([]), "{got}");
    let table = cairn(&a, &["instances", "get", "shop"], None, None)
        .await
        .ok();
    assert!(table.stdout.contains("outputs:"), "{}", table.stdout);

    // Drift never saw it: one line, NOT_FOUND, non-zero, for every drift command.
    for args in [
        vec!["drift", "status", "shop"],
        vec!["drift", "status", instance_id.as_str()],
        vec!["drift", "scan", "shop"],
        vec!["drift", "ignore", "shop", "--path", "tags.*"],
        vec!["drift", "findings", "--instance", "shop"],
    ] {
        let run = cairn(&a, &args, None, None).await;
        let line = run.one_line_error(1);
        assert!(line.contains("NOT_FOUND"), "{args:?}: {line}");
        assert!(line.contains("shop"), "{args:?}: {line}");
    }
    let run = cairn(&a, &["drift", "status", "nope"], None, None).await;
    assert!(run.one_line_error(1).contains("NOT_FOUND"));
    let run = cairn(&a, &["drift", "ignore", "shop"], None, None).await;
    assert_eq!(run.code, 2, "--path or --clear is required: {}", run.stderr);

    // Deployments reports the instance and an applied resource; drift tracks them.
    let web = "network".to_owned();
    publish_to_drift(
        &p,
        &tenant_a,
        cairn_bus::Aggregate::Instance,
        &instance_id,
        "created",
        Payload::Instance(epb::InstanceChange {
            instance_id: instance_id.clone(),
            name: "shop".into(),
            ..Default::default()
        }),
    )
    .await;
    publish_to_drift(
        &p,
        &tenant_a,
        cairn_bus::Aggregate::Resource,
        &instance_id,
        "applied",
        Payload::Resource(epb::ResourceChange {
            instance_id: instance_id.clone(),
            resource: web.clone(),
            state_id: uuid_v4(),
            run_id: uuid_v4(),
            target_id: got["target_id"].as_str().unwrap().to_owned(),
            environment: "staging".into(),
            deployment_id: uuid_v4(),
        }),
    )
    .await;
    let status = wait_json(&a, &["drift", "status", "shop", "-o", "json"], |v| {
        v["resources"].as_array().is_some_and(|r| !r.is_empty())
    })
    .await;
    assert_eq!(status["instance_id"], instance_id.as_str());
    assert_eq!(status["instance_name"], "shop");
    assert_eq!(status["status"], "unknown");
    assert_eq!(status["ignore_rules"], serde_json::json!([]));
    let r = &status["resources"][0];
    assert_eq!(r["resource"], web.as_str());
    assert_eq!(r["status"], "unknown");
    assert_eq!(r["last_scan_at"], Value::Null);
    for field in ["next_scan_at", "error_class", "scanning", "finding_id"] {
        assert!(r.get(field).is_some(), "no {field}: {r}");
    }
    let table = cairn(&a, &["drift", "status", "shop"], None, None)
        .await
        .ok();
    assert!(
        table.stdout.starts_with("instance shop (") && table.stdout.contains("LAST_SCAN_AT"),
        "{}",
        table.stdout
    );

    // Ignore rules replace the set; status shows them.
    let rules = cairn(
        &a,
        &[
            "drift",
            "ignore",
            "shop",
            "--path",
            "tags.LastSeen",
            "--path",
            "tags.*",
            "-o",
            "json",
        ],
        None,
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(rules["instance_id"], instance_id.as_str());
    let mut set: Vec<String> = rules["ignore_rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_owned())
        .collect();
    set.sort();
    assert_eq!(set, ["tags.*", "tags.LastSeen"]);
    let status = cairn(&a, &["drift", "status", "shop", "-o", "json"], None, None)
        .await
        .ok()
        .json();
    assert_eq!(status["ignore_rules"].as_array().unwrap().len(), 2);
    let cleared = cairn(
        &a,
        &["drift", "ignore", "shop", "--clear", "-o", "json"],
        None,
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(cleared["ignore_rules"], serde_json::json!([]));

    // A scan on demand: the one tracked resource is queued; a resource it does not have
    // queues nothing.
    let none = cairn(
        &a,
        &[
            "drift",
            "scan",
            "shop",
            "--resource",
            "no-such",
            "-o",
            "json",
        ],
        None,
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(none["queued"], 0);
    assert_eq!(none["resource"], "no-such");
    let scan = cairn(&a, &["drift", "scan", "shop", "-o", "json"], None, None)
        .await
        .ok()
        .json();
    assert_eq!(scan["queued"], 1, "{scan}");
    assert_eq!(scan["instance_name"], "shop");
    assert_eq!(scan["resource"], Value::Null);
    let findings = cairn(
        &a,
        &["drift", "findings", "--instance", "shop", "-o", "json"],
        None,
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(findings, serde_json::json!([]));

    // Webhooks: create prints the secret once (and says so), list never shows it.
    let created = cairn(
        &a,
        &[
            "webhooks",
            "create",
            "--url",
            &p.hook_url,
            "--events",
            "deployment.succeeded,instance.drift_detected",
            "-o",
            "json",
        ],
        None,
        None,
    )
    .await
    .ok()
    .json();
    let secret = created["secret"].as_str().unwrap().to_owned();
    assert!(secret.len() >= 16, "{created}");
    assert_eq!(created["url"], p.hook_url.as_str());
    assert_eq!(
        created["event_types"],
        serde_json::json!(["deployment.succeeded", "instance.drift_detected"])
    );
    assert_eq!(created["enabled"], true);
    let hook_id = created["webhook_id"].as_str().unwrap().to_owned();
    let second = cairn(
        &a,
        &[
            "webhooks",
            "create",
            "--url",
            &p.hook_url,
            "--events",
            "deployment.failed",
        ],
        None,
        None,
    )
    .await
    .ok();
    assert!(second.stderr.contains("shown once"), "{}", second.stderr);
    let run = cairn(
        &a,
        &[
            "webhooks",
            "create",
            "--url",
            &p.hook_url,
            "--events",
            "no.such_event",
        ],
        None,
        None,
    )
    .await;
    assert!(
        run.one_line_error(1).contains("INVALID_ARGUMENT"),
        "{}",
        run.stderr
    );
    let listed = cairn(&a, &["webhooks", "list", "-o", "json"], None, None)
        .await
        .ok();
    assert!(!listed.stdout.contains(&secret), "{}", listed.stdout);
    let listed = listed.json();
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2);
    let mine = listed
        .iter()
        .find(|w| w["webhook_id"] == hook_id.as_str())
        .expect("the created webhook is listed");
    assert!(mine.get("secret").is_none(), "{mine}");
    assert_eq!(mine["url"], p.hook_url.as_str());
    let table = cairn(&a, &["webhooks", "list"], None, None).await.ok();
    assert!(table.stdout.starts_with("WEBHOOK_ID"), "{}", table.stdout);

    // A test queues a ping; the receiver answers 200 and the attempt says so.
    let ping = cairn(
        &a,
        &["webhooks", "test", &hook_id, "-o", "json"],
        None,
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(ping["event_type"], "ping", "{ping}");
    assert_eq!(ping["webhook_id"], hook_id.as_str());
    let ping_id = ping["delivery_id"].as_str().unwrap().to_owned();
    let deliveries = wait_json(
        &a,
        &["webhooks", "deliveries", &hook_id, "-o", "json"],
        |v| {
            v.as_array().is_some_and(|d| {
                d.iter()
                    .any(|d| d["delivery_id"] == ping_id.as_str() && d["status"] == "delivered")
            })
        },
    )
    .await;
    let delivered = deliveries
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["delivery_id"] == ping_id.as_str())
        .unwrap();
    let attempt = &delivered["attempt_log"][0];
    assert_eq!(attempt["response_code"], 200, "{delivered}");
    assert_eq!(attempt["outcome"], "delivered", "{delivered}");
    assert!(attempt["latency_ms"].is_u64(), "{delivered}");
    let table = cairn(&a, &["webhooks", "deliveries", &hook_id], None, None)
        .await
        .ok();
    let row = table
        .stdout
        .lines()
        .find(|l| l.contains(&ping_id))
        .unwrap_or_else(|| panic!("no row of the ping: {}", table.stdout));
    assert!(
        row.contains("ping") && row.contains("delivered") && row.contains("200"),
        "{row}"
    );

    // Another tenant's webhook id is NOT_FOUND, on one line.
    cairn(
        &a,
        &[
            "tenants",
            "create",
            "tenant-b",
            "--owner-email",
            "owner-b@example.com",
            "--owner-password-stdin",
        ],
        Some(&format!("{PASSWORD}\n")),
        None,
    )
    .await
    .ok();
    let b = config_dir(&p, "b");
    cairn(
        &b,
        &[
            "login",
            "--tenant",
            "tenant-b",
            "--email",
            "owner-b@example.com",
            "--password-stdin",
        ],
        Some(&format!("{PASSWORD}\n")),
        None,
    )
    .await
    .ok();
    for args in [
        vec!["webhooks", "deliveries", hook_id.as_str()],
        vec!["webhooks", "test", hook_id.as_str()],
        vec!["webhooks", "delete", hook_id.as_str()],
        vec!["drift", "status", instance_id.as_str()],
    ] {
        let run = cairn(&b, &args, None, None).await;
        let line = run.one_line_error(1);
        assert!(line.contains("NOT_FOUND"), "{args:?}: {line}");
    }
    let theirs = cairn(&b, &["webhooks", "list", "-o", "json"], None, None)
        .await
        .ok()
        .json();
    assert_eq!(theirs, serde_json::json!([]));
    let theirs = cairn(&b, &["drift", "findings", "-o", "json"], None, None)
        .await
        .ok()
        .json();
    assert_eq!(theirs, serde_json::json!([]));

    // Delete, then it is gone.
    let deleted = cairn(
        &a,
        &["webhooks", "delete", &hook_id, "-o", "json"],
        None,
        None,
    )
    .await
    .ok()
    .json();
    assert_eq!(deleted["deleted"], true);
    let listed = cairn(&a, &["webhooks", "list", "-o", "json"], None, None)
        .await
        .ok()
        .json();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let run = cairn(&a, &["webhooks", "deliveries", &hook_id], None, None).await;
    assert!(
        run.one_line_error(1).contains("NOT_FOUND"),
        "{}",
        run.stderr
    );

    // Completions know the new commands.
    let run = cairn(&a, &["completions", "bash"], None, None).await.ok();
    for word in ["drift", "webhooks", "findings", "deliveries", "ignore"] {
        assert!(run.stdout.contains(word), "completions lack {word}");
    }
}

fn uuid_v4() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Publishes a runner's answer to `validation_id` on the platform's events stream (as the
/// runner serving the target does; tenancy's events consumer stores it).
async fn answer_validation(
    p: &Platform,
    tenant: &str,
    target_id: &str,
    validation_id: &str,
    ok: bool,
) {
    use cairn_proto::events::{self as epb, event::Payload};
    let ns = cairn_bus::Namespace::with_prefix(&p._nats.prefix).unwrap();
    let mut event = cairn_bus::new_event(
        cairn_bus::ServiceRole::Runner,
        tenant,
        cairn_bus::Aggregate::Target,
        target_id,
        "validated",
        "svc:runner",
        Payload::TargetValidated(epb::TargetValidated {
            validation_id: validation_id.to_owned(),
            target_id: target_id.to_owned(),
            ok,
            account_id: if ok {
                "210987654321".into()
            } else {
                String::new()
            },
            arn: if ok {
                "arn:aws:sts::210987654321:assumed-role/cairn-deploy/cairn-validate-x".into()
            } else {
                String::new()
            },
            error: if ok {
                String::new()
            } else {
                "STS refused to let the platform's credentials assume the role (AccessDenied)"
                    .into()
            },
            transient: false,
            runner_instance: "runner-cli-test".into(),
        }),
    )
    .unwrap();
    event.event_id = validation_id.to_owned();
    cairn_bus::publish_event(&p._nats.jetstream, &ns, &event)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_cli_shows_and_validates_aws_targets() {
    let p = platform().await;
    let a = config_dir(&p, "aws");
    let token_file = p.dir.path().join("aws-api-token");
    std::fs::write(&token_file, format!("{}\n", p.api_token)).unwrap();
    cairn(
        &a,
        &["login", "--api-token-file", token_file.to_str().unwrap()],
        None,
        None,
    )
    .await
    .ok();
    let token = None;
    let role = "arn:aws:iam::210987654321:role/cairn-deploy";

    // Created with region, role and credential reference; the external id is tenancy's.
    let created = cairn(
        &a,
        &[
            "targets",
            "create",
            "aws-prod",
            "--aws-region",
            "eu-west-1",
            "--aws-role-arn",
            role,
            "--credential-ref",
            "platform-aws",
            "-o",
            "json",
        ],
        None,
        token,
    )
    .await
    .ok()
    .json();
    assert_eq!(created["provider"], "aws");
    assert_eq!(created["region"], "eu-west-1");
    assert_eq!(created["role_arn"], role);
    assert_eq!(created["credential_ref"], "platform-aws");
    assert_eq!(created["base_dir"], Value::Null);
    assert_eq!(created["last_validation"], Value::Null);
    let external_id = created["external_id"].as_str().unwrap().to_owned();
    assert!(external_id.starts_with("cairn-"), "{created}");
    let target_id = created["target_id"].as_str().unwrap().to_owned();
    let tenant = created["tenant_id"].as_str().unwrap().to_owned();

    // A usage error: a region without a role.
    let run = cairn(
        &a,
        &["targets", "create", "half", "--aws-region", "eu-west-1"],
        None,
        token,
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.stderr);

    // Validate without waiting: the target with its new validation, pending.
    let queued = cairn(
        &a,
        &["targets", "validate", "aws-prod", "-o", "json"],
        None,
        token,
    )
    .await
    .ok()
    .json();
    let v = &queued["last_validation"];
    assert_eq!(v["status"], "pending", "{queued}");
    assert_eq!(queued["external_id"], external_id.as_str());
    let first = v["validation_id"].as_str().unwrap().to_owned();
    for field in [
        "validation_id",
        "status",
        "account_id",
        "arn",
        "error",
        "transient",
        "runner_instance",
        "requested_at",
        "finished_at",
    ] {
        assert!(
            v.get(field).is_some(),
            "last_validation has no {field}: {v}"
        );
    }
    assert_eq!(v["finished_at"], Value::Null);

    // The runner's answer: shown by get (JSON and table) and list.
    answer_validation(&p, &tenant, &target_id, &first, true).await;
    let got = wait_json(&a, &["targets", "get", "aws-prod", "-o", "json"], |t| {
        t["last_validation"]["status"] == "succeeded"
    })
    .await;
    assert_eq!(got["last_validation"]["account_id"], "210987654321");
    assert_eq!(got["last_validation"]["runner_instance"], "runner-cli-test");
    assert_eq!(got["last_validation"]["error"], Value::Null);
    let table = cairn(&a, &["targets", "get", "aws-prod"], None, token)
        .await
        .ok();
    for shown in [
        external_id.as_str(),
        role,
        "eu-west-1",
        "succeeded",
        "210987654321",
    ] {
        assert!(table.stdout.contains(shown), "{shown}: {}", table.stdout);
    }
    let list = cairn(&a, &["targets", "list", "-o", "json"], None, token)
        .await
        .ok()
        .json();
    assert_eq!(list[0]["external_id"], external_id.as_str());
    assert_eq!(list[0]["last_validation"]["status"], "succeeded");
    let table = cairn(&a, &["targets", "list"], None, token).await.ok();
    let header = table.stdout.lines().next().unwrap();
    for column in [
        "TARGET_ID",
        "REGION",
        "ROLE_ARN",
        "EXTERNAL_ID",
        "VALIDATION",
    ] {
        assert!(header.contains(column), "{header}");
    }
    assert!(table.stdout.contains(&external_id), "{}", table.stdout);
    assert!(table.stdout.contains("succeeded"), "{}", table.stdout);

    // --wait: waits for the answer to its own request; a refusal exits 1 with the error.
    for (ok, code) in [(false, 1), (true, 0)] {
        let waiting = {
            let a = a.clone();
            tokio::spawn(async move {
                cairn(
                    &a,
                    &["targets", "validate", "aws-prod", "--wait", "-o", "json"],
                    None,
                    None,
                )
                .await
            })
        };
        let seen = wait_json(&a, &["targets", "get", "aws-prod", "-o", "json"], |t| {
            t["last_validation"]["status"] == "pending"
                && t["last_validation"]["validation_id"] != first.as_str()
        })
        .await;
        let id = seen["last_validation"]["validation_id"]
            .as_str()
            .unwrap()
            .to_owned();
        answer_validation(&p, &tenant, &target_id, &id, ok).await;
        let run = waiting.await.unwrap();
        let shown = run.json();
        assert_eq!(shown["last_validation"]["validation_id"], id.as_str());
        if ok {
            run.ok();
            assert_eq!(shown["last_validation"]["status"], "succeeded");
        } else {
            let line = run.one_line_error(code);
            assert!(line.contains("AccessDenied"), "{line}");
            assert_eq!(shown["last_validation"]["status"], "failed");
            assert_eq!(shown["last_validation"]["transient"], false);
        }
    }

    // Nobody answers: --wait gives up at its deadline, saying so.
    let run = cairn(
        &a,
        &[
            "targets",
            "validate",
            "aws-prod",
            "--wait",
            "--wait-timeout",
            "1s",
        ],
        None,
        token,
    )
    .await;
    let line = run.one_line_error(1);
    assert!(line.contains("still pending"), "{line}");

    // A local target cannot be validated: tenancy refuses, one line, exit 1.
    let base = p.dir.path().join("aws-test-base");
    std::fs::create_dir_all(&base).unwrap();
    cairn(
        &a,
        &[
            "targets",
            "create",
            "local",
            "--local-dir",
            base.to_str().unwrap(),
        ],
        None,
        token,
    )
    .await
    .ok();
    let run = cairn(&a, &["targets", "validate", "local"], None, token).await;
    let line = run.one_line_error(1);
    assert!(line.contains("AWS"), "{line}");
}
