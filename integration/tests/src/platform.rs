//! The whole platform as real processes, set up the way deploy/local/run-platform.sh sets it
//! up: signing keys made by `cairn-tenancy keys generate`, the first tenant by `cairn-tenancy
//! bootstrap`, service API tokens by `cairn-tenancy service-token` (exchanged with tenancy for
//! access tokens by the runner and the workflow), the coordinator on a bucket and KMS key of
//! its own in moto, and a runner with the Docker executor and the tofu-sim image serving the
//! targets its credential registry names. One database (a schema per service), one NATS
//! prefix — or, with [`Options::nats_permissions`], a NATS server of the platform's own
//! whose users and permissions `cairn-tenancy nats credentials` generated, its streams made
//! by `cairn-tenancy nats setup` as the admin, and each service connecting as its own user.
//! Settings that bound how long a crash takes to heal (leases, ack waits, fallbacks)
//! are short, so the tests stay in CI's budget.
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use cairn_db::TestDatabase;
use cairn_testkit::{NatsServer, TempDir, TestAws, TestNats};

use crate::bins;
use crate::cli::Cli;
use crate::process::{Process, free_addr};

/// The tofu image the runner uses (built by deploy/images/tofu-sim/build.sh).
pub const TOFU_IMAGE: &str = "cairn/tofu-sim:dev";

/// A service of the platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Svc {
    Tenancy,
    Templates,
    Coordinator,
    Deployments,
    Drift,
    Runner,
}

impl Svc {
    pub const ALL: [Svc; 6] = [
        Svc::Tenancy,
        Svc::Templates,
        Svc::Coordinator,
        Svc::Deployments,
        Svc::Drift,
        Svc::Runner,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Svc::Tenancy => "tenancy",
            Svc::Templates => "templates",
            Svc::Coordinator => "state-coordinator",
            Svc::Deployments => "deployments",
            Svc::Drift => "drift",
            Svc::Runner => "runner",
        }
    }

    /// Whether it connects to NATS (templates does not).
    fn uses_nats(self) -> bool {
        self != Svc::Templates
    }
}

/// What a platform is started with.
#[derive(Debug, Clone)]
pub struct Options {
    /// The coordinator's run lease (how long a killed runner's attempt blocks its state).
    pub run_lease: &'static str,
    /// How long a job or run request may go unacknowledged before it is redelivered.
    pub ack_wait: &'static str,
    /// tofu-sim knobs for every command (CAIRN_EXECUTOR_EXTRA_ENV, one `K=V` per line).
    pub extra_env: String,
    /// Drift's CAIRN_DRIFT_CHECK_INTERVAL ("0" = scans only when triggered).
    pub drift_interval: &'static str,
    /// A NATS server of the platform's own with a user per service and its permissions
    /// (instead of a prefix on the open test server).
    pub nats_permissions: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            // Only a test that kills runners needs a lease that runs out soon (chaos sets
            // its own); elsewhere it only has to outlast a renewal on a loaded machine.
            run_lease: "30s",
            ack_wait: "8s",
            extra_env: String::new(),
            drift_interval: "0",
            nats_permissions: false,
        }
    }
}

pub struct Platform {
    pub dir: TempDir,
    /// The bootstrapped tenant and its owner's API token.
    pub tenant_id: String,
    pub owner_api_token: String,
    /// Where local targets of the tests put their files (one sub-directory per target).
    pub targets_dir: PathBuf,
    /// The runner's instance name (its containers carry it as a label).
    pub runner_instance: String,
    pub db: TestDatabase,
    pub nats: TestNats,
    pub aws: TestAws,
    procs: BTreeMap<Svc, Process>,
    grpc: BTreeMap<Svc, SocketAddr>,
    http: SocketAddr,
    served: Vec<(String, String)>,
    /// The platform's own NATS server (with [`Options::nats_permissions`]).
    pub own_nats: Option<NatsServer>,
    _work_root: tempfile::TempDir,
}

impl Platform {
    /// Starts everything but the runner (which serves targets once they exist:
    /// [`Platform::serve_targets`]).
    pub async fn start(opts: Options) -> anyhow::Result<Platform> {
        cairn_testkit::init_tracing();
        let dir = cairn_testkit::temp_dir();
        let db = cairn_testkit::fresh_database().await;
        let nats = cairn_testkit::connect_nats().await;
        let aws = TestAws::create().await;
        let targets_dir = dir.path().join("targets");
        std::fs::create_dir_all(&targets_dir)?;
        let logs = dir.path().join("logs");
        std::fs::create_dir_all(&logs)?;
        let work_root = tempfile::tempdir_in("/dev/shm").context("a work root in /dev/shm")?;

        let grpc: BTreeMap<Svc, SocketAddr> = Svc::ALL.iter().map(|s| (*s, free_addr())).collect();
        let http = free_addr();
        let url = |s: Svc| format!("http://{}", grpc[&s]);

        // Signing keys, the public key set, the first tenant and the service tokens, made by
        // tenancy's own subcommands (as run-platform.sh does).
        let tenancy_bin = bins::path("cairn-tenancy");
        let nats_dir = dir.path().join("nats");
        let own_nats = if opts.nats_permissions {
            Some(own_nats_server(&tenancy_bin, &nats_dir).await?)
        } else {
            None
        };
        let own_url = own_nats.as_ref().map(|n| n.url.clone());
        let common = |p: Process| {
            let svc = Svc::ALL
                .into_iter()
                .find(|s| s.name() == p.name)
                .expect("a process is named after its service");
            let p = p
                .env("CAIRN_DATABASE_URL", &db.runtime_url)
                .env("CAIRN_DATABASE_MIGRATE_URL", &db.migrate_url)
                .env("RUST_LOG", "info");
            match &own_url {
                None => p
                    .env("CAIRN_NATS_URL", &nats.url)
                    .env("CAIRN_NATS_PREFIX", &nats.prefix),
                Some(url) if svc.uses_nats() => p.env("CAIRN_NATS_URL", url).env(
                    "CAIRN_NATS_CREDS",
                    path(&nats_dir.join(format!("{}.creds", svc.name()))),
                ),
                Some(_) => p,
            }
        };
        let private_keys = dir.path().join("signing-keys.json");
        let jwks = dir.path().join("jwks.json");
        tool(
            &tenancy_bin,
            &[
                "keys",
                "generate",
                "--private-keys-file",
                path(&private_keys),
                "--kid",
                "e2e",
                "--activate",
            ],
            &db,
            &nats,
        )
        .await?;
        let exported = tool(
            &tenancy_bin,
            &["keys", "export", "--private-keys-file", path(&private_keys)],
            &db,
            &nats,
        )
        .await?;
        std::fs::write(&jwks, exported)?;
        let boot = tool(
            &tenancy_bin,
            &[
                "bootstrap",
                "--tenant-slug",
                "e2e",
                "--tenant-name",
                "End to end",
                "--owner-email",
                "owner@e2e.example",
                "--owner-name",
                "Owner",
            ],
            &db,
            &nats,
        )
        .await?;
        let field = |name: &str| {
            boot.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}=")))
                .map(str::to_owned)
                .with_context(|| format!("bootstrap printed no {name}=: {boot}"))
        };
        let tenant_id = field("tenant_id")?;
        let owner_api_token = field("api_token")?;
        for svc in ["runner", "deployments", "drift"] {
            let out = dir.path().join(format!("{svc}.token"));
            tool(
                &tenancy_bin,
                &["service-token", "--name", svc, "--out", path(&out)],
                &db,
                &nats,
            )
            .await?;
        }

        let jwks_s = path(&jwks).to_owned();
        let mut procs = BTreeMap::new();
        procs.insert(
            Svc::Tenancy,
            common(Process::new("tenancy", tenancy_bin.clone(), &logs))
                .arg("serve")
                .env("CAIRN_GRPC_ADDR", grpc[&Svc::Tenancy].to_string())
                .env("CAIRN_JWT_PRIVATE_KEYS_FILE", path(&private_keys))
                .env("CAIRN_JWT_PUBLIC_KEYS_FILE", &jwks_s)
                .env("CAIRN_PASSWORD_HASH_MEMORY_KIB", "256")
                .env("CAIRN_PASSWORD_HASH_ITERATIONS", "1")
                .env("CAIRN_LOGIN_ATTEMPTS_PER_MINUTE", "1000")
                .env("CAIRN_CREDENTIAL_ATTEMPTS_PER_ADDRESS_PER_MINUTE", "100000")
                .env("CAIRN_EVENT_ACK_WAIT", opts.ack_wait)
                .env("CAIRN_WEBHOOK_ALLOW_LOOPBACK", "1")
                .listens(grpc[&Svc::Tenancy]),
        );
        procs.insert(
            Svc::Templates,
            common(Process::new(
                "templates",
                bins::path("cairn-templates"),
                &logs,
            ))
            .env("CAIRN_GRPC_ADDR", grpc[&Svc::Templates].to_string())
            .env("CAIRN_JWT_PUBLIC_KEYS_FILE", &jwks_s)
            .env("CAIRN_MODULES_DIR", path(&crate::repo("modules")))
            .listens(grpc[&Svc::Templates]),
        );
        procs.insert(
            Svc::Coordinator,
            common(Process::new(
                "state-coordinator",
                bins::path("cairn-state-coordinator"),
                &logs,
            ))
            .env("CAIRN_GRPC_ADDR", grpc[&Svc::Coordinator].to_string())
            .env("CAIRN_HTTP_ADDR", http.to_string())
            .env("CAIRN_JWT_PUBLIC_KEYS_FILE", &jwks_s)
            .env("CAIRN_OBJECT_STORE", format!("s3://{}/e2e", aws.bucket))
            .env("CAIRN_S3_ENDPOINT", &aws.endpoint)
            .env("CAIRN_KMS_KEY", &aws.kms_key_id)
            .env("CAIRN_KMS_ENDPOINT", &aws.endpoint)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("CAIRN_RUN_LEASE", opts.run_lease)
            .env("CAIRN_SWEEP_INTERVAL", "2s")
            .listens(grpc[&Svc::Coordinator])
            .listens(http),
        );
        procs.insert(
            Svc::Deployments,
            common(Process::new(
                "deployments",
                bins::path("cairn-deployments"),
                &logs,
            ))
            .env("CAIRN_GRPC_ADDR", grpc[&Svc::Deployments].to_string())
            .env("CAIRN_JWT_PUBLIC_KEYS_FILE", &jwks_s)
            .env("CAIRN_TENANCY_URL", url(Svc::Tenancy))
            .env("CAIRN_TEMPLATES_URL", url(Svc::Templates))
            .env("CAIRN_COORDINATOR_URL", url(Svc::Coordinator))
            .env(
                "CAIRN_SERVICE_TOKEN_FILE",
                path(&dir.path().join("deployments.token")),
            )
            .env("CAIRN_DEPLOY_ACK_WAIT", opts.ack_wait)
            .env("CAIRN_RUN_RESULT_FALLBACK", "3s")
            .env("CAIRN_SLOT_WAIT", "500ms")
            .env("CAIRN_DEPLOY_RETRY_BACKOFF", "1s")
            .env("CAIRN_STEP_ADMIT_TIMEOUT", "3m")
            .listens(grpc[&Svc::Deployments]),
        );
        procs.insert(
            Svc::Drift,
            common(Process::new("drift", bins::path("cairn-drift"), &logs))
                .env("CAIRN_GRPC_ADDR", grpc[&Svc::Drift].to_string())
                .env("CAIRN_JWT_PUBLIC_KEYS_FILE", &jwks_s)
                .env("CAIRN_TENANCY_URL", url(Svc::Tenancy))
                .env("CAIRN_COORDINATOR_URL", url(Svc::Coordinator))
                .env(
                    "CAIRN_SERVICE_TOKEN_FILE",
                    path(&dir.path().join("drift.token")),
                )
                .env("CAIRN_DRIFT_CHECK_INTERVAL", opts.drift_interval)
                .env("CAIRN_DRIFT_TICK", "500ms")
                .env("CAIRN_DRIFT_ACK_WAIT", opts.ack_wait)
                .listens(grpc[&Svc::Drift]),
        );
        let runner_instance = format!("e2e-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        procs.insert(
            Svc::Runner,
            common(Process::new("runner", bins::path("cairn-runner"), &logs))
                .arg("serve")
                .env("CAIRN_GRPC_ADDR", grpc[&Svc::Runner].to_string())
                .env("CAIRN_JWT_PUBLIC_KEYS_FILE", &jwks_s)
                .env("CAIRN_RUNNER_INSTANCE", &runner_instance)
                .env("CAIRN_COORDINATOR_URL", url(Svc::Coordinator))
                .env("CAIRN_TENANCY_URL", url(Svc::Tenancy))
                .env(
                    "CAIRN_SERVICE_TOKEN_FILE",
                    path(&dir.path().join("runner.token")),
                )
                .env(
                    "CAIRN_CREDENTIALS_FILE",
                    path(&dir.path().join("credentials.json")),
                )
                .env("CAIRN_EXECUTOR", "docker")
                .env("CAIRN_TOFU_IMAGE", TOFU_IMAGE)
                .env("CAIRN_DOCKER_NETWORK", "host")
                .env("CAIRN_MODULES_DIR", path(&crate::repo("modules")))
                .env("CAIRN_WORK_ROOT", path(work_root.path()))
                .env(
                    "CAIRN_RUNNER_SPOOL_DIR",
                    path(&dir.path().join("runner-spool")),
                )
                .env("CAIRN_RUNNER_CONCURRENCY", "4")
                .env("CAIRN_RUNNER_ACK_WAIT", opts.ack_wait)
                .env("CAIRN_TOFU_TIMEOUT", "3m")
                .env("CAIRN_TOFU_GRACE", "2s")
                .env("CAIRN_EXECUTOR_EXTRA_ENV", &opts.extra_env)
                .listens(grpc[&Svc::Runner]),
        );

        let mut platform = Platform {
            dir,
            tenant_id,
            owner_api_token,
            targets_dir,
            runner_instance,
            db,
            nats,
            aws,
            procs,
            grpc,
            http,
            served: Vec::new(),
            own_nats,
            _work_root: work_root,
        };
        for svc in [
            Svc::Tenancy,
            Svc::Templates,
            Svc::Coordinator,
            Svc::Deployments,
            Svc::Drift,
        ] {
            platform.start_service(svc).await?;
        }
        Ok(platform)
    }

    /// The gRPC URL of a service.
    pub fn url(&self, svc: Svc) -> String {
        format!("http://{}", self.grpc[&svc])
    }

    /// The coordinator's OpenTofu HTTP backend.
    pub fn backend_addr(&self) -> SocketAddr {
        self.http
    }

    /// Writes the runner's credential registry for `(target id, credential reference)` pairs
    /// (each also resolving the demo database password reference) and (re)starts the runner.
    pub async fn serve_targets(&mut self, targets: &[(String, String)]) -> anyhow::Result<()> {
        self.served = targets.to_vec();
        let secrets = self.dir.path().join("secrets");
        std::fs::create_dir_all(&secrets)?;
        std::fs::write(secrets.join("target"), "local-target-credential\n")?;
        std::fs::write(secrets.join("db"), "e2e-db-password\n")?;
        let mut entries = Vec::new();
        for (target_id, credential_ref) in targets {
            entries.push(serde_json::json!({
                "tenant_id": self.tenant_id, "target_id": target_id, "reference": credential_ref,
                "vars": {"LOCAL_TARGET_TOKEN": {"file": secrets.join("target")}}}));
            entries.push(serde_json::json!({
                "tenant_id": self.tenant_id, "target_id": target_id,
                "reference": crate::DB_PASSWORD_REF,
                "vars": {"DB_ADMIN_PASSWORD": {"file": secrets.join("db")}}}));
        }
        std::fs::write(
            self.dir.path().join("credentials.json"),
            serde_json::json!({ "entries": entries }).to_string(),
        )?;
        self.process(Svc::Runner).kill().await;
        self.start_service(Svc::Runner).await
    }

    pub fn process(&mut self, svc: Svc) -> &mut Process {
        self.procs
            .get_mut(&svc)
            .expect("every service has a process")
    }

    pub async fn start_service(&mut self, svc: Svc) -> anyhow::Result<()> {
        self.process(svc).start().await
    }

    /// SIGKILL one service.
    pub async fn kill(&mut self, svc: Svc) {
        self.process(svc).kill().await;
    }

    /// SIGKILL one service and start it again.
    pub async fn restart(&mut self, svc: Svc) -> anyhow::Result<()> {
        self.process(svc).restart().await
    }

    /// Every service that should run still runs (none exited on its own).
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        let runner_wanted = !self.served.is_empty();
        for svc in Svc::ALL {
            if svc == Svc::Runner && !runner_wanted {
                continue;
            }
            let p = self.process(svc);
            if !p.is_running() {
                bail!("{} exited:\n{}", p.name, p.log_tail(30));
            }
        }
        Ok(())
    }

    /// A CLI user with a config directory of their own whose current context points at this
    /// platform (set with `cairn context set` / `context use`, as a user would).
    pub async fn cli(&self, user: &str) -> Cli {
        let cli = Cli::new(
            bins::path("cairn"),
            &self.dir.path().join(format!("cli-{user}")),
        );
        let (t, tp, st, r, d, dr) = (
            self.url(Svc::Tenancy),
            self.url(Svc::Templates),
            self.url(Svc::Coordinator),
            self.url(Svc::Runner),
            self.url(Svc::Deployments),
            self.url(Svc::Drift),
        );
        cli.run(&[
            "context",
            "set",
            "e2e",
            "--tenancy",
            &t,
            "--templates",
            &tp,
            "--state",
            &st,
            "--runner",
            &r,
            "--deployments",
            &d,
            "--drift",
            &dr,
        ])
        .await
        .ok();
        cli.run(&["context", "use", "e2e"]).await.ok();
        cli
    }

    /// The last lines of every service's log (printed when a test fails).
    pub fn log_tails(&self, lines: usize) -> String {
        self.procs
            .values()
            .map(|p| {
                format!(
                    "===== {} ({})\n{}\n",
                    p.name,
                    p.log_path().display(),
                    p.log_tail(lines)
                )
            })
            .collect()
    }
}

impl Drop for Platform {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.log_tails(40));
            // The logs outlive the test's temporary directory, for a look afterwards.
            let keep = std::env::temp_dir()
                .join(format!("cairn-e2e-logs-{}", uuid::Uuid::new_v4().simple()));
            if std::fs::create_dir_all(&keep).is_ok() {
                for p in self.procs.values() {
                    if let Some(name) = p.log_path().file_name() {
                        let _ = std::fs::copy(p.log_path(), keep.join(name));
                    }
                }
                eprintln!("service logs kept in {}", keep.display());
            }
        }
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("test paths are UTF-8")
}

/// A NATS server of the platform's own, as run-platform.sh starts it: the users and the
/// server configuration from `cairn-tenancy nats credentials` (in `dir`), then the streams
/// from `cairn-tenancy nats setup` with the admin's credentials.
async fn own_nats_server(tenancy_bin: &Path, dir: &Path) -> anyhow::Result<NatsServer> {
    tool_env(
        tenancy_bin,
        &["nats", "credentials", "--dir", path(dir)],
        &[],
    )
    .await?;
    let config = std::fs::read_to_string(dir.join("nats-server.conf"))
        .context("read the generated nats-server.conf")?;
    let server = NatsServer::start(&config).await;
    tool_env(
        tenancy_bin,
        &["nats", "setup"],
        &[
            ("CAIRN_NATS_URL", &server.url),
            ("CAIRN_NATS_CREDS", path(&dir.join("admin.creds"))),
        ],
    )
    .await?;
    Ok(server)
}

/// Runs one of tenancy's subcommands and returns what it printed on stdout.
async fn tool(
    bin: &Path,
    args: &[&str],
    db: &TestDatabase,
    nats: &TestNats,
) -> anyhow::Result<String> {
    tool_env(
        bin,
        args,
        &[
            ("CAIRN_DATABASE_URL", &db.runtime_url),
            ("CAIRN_DATABASE_MIGRATE_URL", &db.migrate_url),
            ("CAIRN_NATS_URL", &nats.url),
            ("CAIRN_NATS_PREFIX", &nats.prefix),
        ],
    )
    .await
}

/// Runs one of tenancy's subcommands with `env` (and no other `CAIRN_NATS_*`).
async fn tool_env(bin: &Path, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<String> {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(bin)
            .args(args)
            .env_remove("CAIRN_NATS_PREFIX")
            .env_remove("CAIRN_NATS_CREDS")
            .envs(env.iter().copied())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .context("a tenancy subcommand hung")??;
    if !out.status.success() {
        bail!(
            "{} {args:?}: {}\n{}",
            bin.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
