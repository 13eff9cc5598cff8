//! Real crashes: the `cairn-deployments` binary runs as a child process (the coordinator,
//! tenancy, templates and the runner stay in this process) and is SIGKILLed right after a
//! step transition commits — which one is drawn from a seeded generator (the seed is
//! printed; `CAIRN_CRASH_SEED=<n>` repeats a run) — then started again, 20 times, while
//! deployments of two web-stack instances go on. Afterwards every deployment is terminal
//! and succeeded, each resource a deployment changed was applied by exactly one run with
//! one attempt at the coordinator (none for the resources it skipped), and no slot is held.
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cairn_proto::deployments as pb;
use pb::DeploymentStatus as S;
use sqlx::Connection;
use uuid::Uuid;

use crate::rig::*;

const KILLS: usize = 20;

/// splitmix64: a small seeded generator (the test needs reproducible choices only).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: i64, hi: i64) -> i64 {
        let span = u64::try_from(hi - lo + 1).unwrap();
        lo + i64::try_from(self.next() % span).unwrap()
    }
}

fn seed() -> u64 {
    match std::env::var("CAIRN_CRASH_SEED") {
        Ok(s) => s.trim().parse().expect("CAIRN_CRASH_SEED is a number"),
        Err(_) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            u64::try_from(nanos % u128::from(u64::MAX)).unwrap()
        }
    }
}

/// The deployments binary as a child process, with the rig's settings as `CAIRN_*`.
struct Binary {
    child: Option<Child>,
    config: cairn_deployments::Config,
    log: PathBuf,
    starts: usize,
}

impl Binary {
    fn start(&mut self) {
        let c = &self.config;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let d = |d: Duration| format!("{}ms", d.as_millis());
        let child = Command::new(env!("CARGO_BIN_EXE_cairn-deployments"))
            .env("CAIRN_GRPC_ADDR", c.grpc_addr.to_string())
            .env("CAIRN_DATABASE_URL", &c.db.database_url)
            .env(
                "CAIRN_DATABASE_MIGRATE_URL",
                c.db.database_migrate_url.clone().unwrap(),
            )
            .env("CAIRN_DATABASE_SCHEMA", c.db.schema("deployments"))
            .env("CAIRN_NATS_URL", &c.nats.nats_url)
            .env("CAIRN_NATS_PREFIX", c.nats.nats_prefix.clone().unwrap())
            .env("CAIRN_JWT_PUBLIC_KEYS_FILE", &c.jwks.jwt_public_keys_file)
            .env("CAIRN_TENANCY_URL", &c.peers.tenancy_url)
            .env("CAIRN_TEMPLATES_URL", &c.templates_url)
            .env("CAIRN_COORDINATOR_URL", &c.peers.coordinator_url)
            .env("CAIRN_SERVICE_TOKEN_FILE", &c.peers.service_token_file)
            .env("CAIRN_DEPLOY_PARALLELISM", c.deploy_parallelism.to_string())
            .env("CAIRN_DEPLOY_RETRIES", c.deploy_retries.to_string())
            .env("CAIRN_DEPLOY_WORKERS", c.deploy_workers.to_string())
            // A killed worker's job is handed out again one second after its last heartbeat.
            .env("CAIRN_DEPLOY_ACK_WAIT", "1s")
            .env("CAIRN_DEPLOY_RETRY_BACKOFF", d(c.deploy_retry_backoff))
            .env("CAIRN_RUN_RESULT_FALLBACK", d(c.run_result_fallback))
            .env("CAIRN_SLOT_WAIT", d(c.slot_wait))
            .env("CAIRN_STEP_ADMIT_TIMEOUT", d(c.step_admit_timeout))
            .env("CAIRN_APPROVAL_TTL", d(c.approval_ttl))
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start cairn-deployments");
        self.child = Some(child);
        self.starts += 1;
    }

    /// SIGKILL, and reaped.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL cairn-deployments");
            child.wait().unwrap();
        }
    }

    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until the binary answers (a fresh process: migrations, consumers, then gRPC).
async fn serving(rig: &Rig, bin: &Binary) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (mut i, _) = rig.clients();
        let answer = i
            .list_instances(pb::ListInstancesRequest {
                tenant_id: rig.tenant.to_string(),
                ..Default::default()
            })
            .await;
        if answer.is_ok() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "cairn-deployments does not answer: {answer:?}\n{}",
            bin.tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn params(app: &str) -> String {
    format!(
        r#"{{"app_name": "{app}", "db_admin_password": "arn:aws:secretsmanager:us-east-1:000000000000:secret:shop-db"}}"#
    )
}

async fn rows(url: &str, schema: &str, sql: &str) -> Vec<sqlx::postgres::PgRow> {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("SET search_path = {schema}")))
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_all(&mut conn)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_killed_at_step_boundaries_converges_applying_nothing_twice() {
    use sqlx::Row;
    let seed = seed();
    println!("CAIRN_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let rig = rig(Opts {
        deployments_in_process: false,
        resource_delay: Some("200ms"),
        ..Opts::default()
    })
    .await;
    let logs = cairn_testkit::temp_dir();
    let mut bin = Binary {
        child: None,
        config: rig.config.clone(),
        log: logs.path().join("deployments.log"),
        starts: 0,
    };
    bin.start();
    serving(&rig, &bin).await;
    let names = ["one", "two"];
    for name in names {
        rig.create_instance(name, "staging", &params(name)).await;
    }

    let step_events = "SELECT count(*) FROM deployment_events WHERE kind = 'step'";
    let open = "SELECT count(*) FROM deployments WHERE status IN ('queued', 'running')";
    let mut ids: Vec<String> = Vec::new();
    let mut round = 0;
    let mut kills = 0;
    // Drawn once the first deployments' steps exist (their creation is no transition).
    let mut next_kill: Option<i64> = None;
    let deadline = Instant::now() + Duration::from_secs(400);
    while kills < KILLS {
        if rig.scalar(open).await == 0 {
            // A round: every instance deploys again with one parameter changed (the first
            // round creates everything).
            round += 1;
            let patch = if round == 1 {
                String::new()
            } else {
                format!(r#"{{"replicas": {}}}"#, round % 9 + 1)
            };
            for name in names {
                ids.push(rig.request(name, pb::DeploymentKind::Deploy, &patch).await);
            }
        }
        // Kill right after the drawn step transition committed.
        let seen = rig.scalar(step_events).await;
        let drawn = *next_kill.get_or_insert_with(|| seen + rng.between(1, 5));
        if seen >= drawn {
            bin.kill();
            kills += 1;
            println!("kill {kills}: after step event {seen} (drawn {drawn}), round {round}");
            next_kill = Some(seen + rng.between(1, 5));
            bin.start();
            serving(&rig, &bin).await;
            continue;
        }
        assert!(
            Instant::now() < deadline,
            "{kills} kills in time\n{}",
            bin.tail()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // The last process lives: everything converges.
    for id in &ids {
        let d = rig.settled(id).await;
        assert_eq!(status(&d), S::Succeeded, "{d:#?}\n{}", bin.tail());
    }
    assert_eq!(bin.starts, KILLS + 1);
    assert_eq!(rig.scalar(open).await, 0);
    assert_eq!(rig.scalar("SELECT count(*) FROM target_slots").await, 0);
    for name in names {
        let i = rig.instance(name).await;
        assert_eq!(i.status, pb::InstanceStatus::Active as i32, "{i:#?}");
        assert!(i.active_deployment_id.is_empty());
    }

    // Per deployment and resource: the apply step's runs, and how the coordinator saw them.
    let applies = rows(
        &rig.db.admin_url,
        "deployments",
        "SELECT s.deployment_id, s.resource, s.status, r.run_id
           FROM steps s LEFT JOIN step_runs r ON r.step_id = s.step_id AND r.kind = 'apply'
          WHERE s.kind = 'apply'",
    )
    .await;
    let coordinator: HashMap<Uuid, (String, i64)> = rows(
        &rig.coord_db.admin_url,
        "state",
        "SELECT r.run_id, r.status, (SELECT count(*) FROM attempts a WHERE a.run_id = r.run_id)
           FROM runs r WHERE r.kind = 'apply'",
    )
    .await
    .iter()
    .map(|row| (row.get(0), (row.get(1), row.get(2))))
    .collect();
    let mut per_resource: BTreeMap<(Uuid, String), (String, Vec<Uuid>)> = BTreeMap::new();
    for row in &applies {
        let entry = per_resource
            .entry((row.get(0), row.get(1)))
            .or_insert_with(|| (row.get(2), Vec::new()));
        if let Some(run) = row.get::<Option<Uuid>, _>(3) {
            entry.1.push(run);
        }
    }
    assert_eq!(per_resource.len(), ids.len() * 4, "{per_resource:#?}");
    let mut applied = 0;
    for ((deployment, resource), (status, runs)) in &per_resource {
        let succeeded: Vec<&Uuid> = runs
            .iter()
            .filter(|r| coordinator.get(r).is_some_and(|(s, _)| s == "succeeded"))
            .collect();
        match status.as_str() {
            "succeeded" => {
                assert_eq!(
                    succeeded.len(),
                    1,
                    "{resource} of {deployment}: runs {runs:?} at the coordinator {coordinator:?}"
                );
                applied += 1;
            }
            "skipped" => assert!(runs.is_empty(), "{resource} of {deployment}: {runs:?}"),
            other => panic!("{resource} of {deployment} ended {other}"),
        }
        for run in runs {
            let (_, attempts) = &coordinator[run];
            assert_eq!(
                *attempts, 1,
                "run {run} of {resource} was admitted {attempts} times"
            );
        }
    }
    // Nothing else applied at the coordinator.
    assert_eq!(coordinator.len(), applied, "{coordinator:?}");
    println!(
        "{} deployments, {applied} resource applies, {KILLS} kills",
        ids.len()
    );
}
