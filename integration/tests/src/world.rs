//! What is really there after the platform ran: the files a local target holds, the tofu
//! containers a runner left, the rows that must be gone (locks, slots), the generations each
//! state holds, and a state's outputs as the coordinator serves them.
use std::collections::BTreeMap;
use std::path::Path;

use cairn_sdk::proto::state as spb;
use serde_json::Value;
use sqlx::PgPool;

/// Every file under `dir` (relative path → content), recursively.
pub fn files(dir: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                out.insert(rel.display().to_string(), text);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The containers (running or not) a runner instance started.
pub async fn containers_of(runner_instance: &str) -> Vec<String> {
    let out = tokio::process::Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=cairn.runner_instance={runner_instance}"),
        ])
        .output()
        .await
        .expect("run docker ps");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .filter(|l| !l.is_empty())
        .collect()
}

/// Reads of the platform's database (as its owner), for the outcomes no API shows directly.
pub struct Rows {
    pool: PgPool,
}

impl Rows {
    pub async fn connect(db: &cairn_db::TestDatabase) -> Rows {
        let pool = PgPool::connect(&db.migrate_url)
            .await
            .expect("connect to the platform database");
        Rows { pool }
    }

    pub async fn count(&self, sql: &'static str) -> i64 {
        sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(&self.pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// State locks held.
    pub async fn locks(&self) -> i64 {
        self.count("SELECT count(*) FROM state.locks").await
    }

    /// Deployment slots taken on targets.
    pub async fn slots(&self) -> i64 {
        self.count("SELECT count(*) FROM deployments.target_slots")
            .await
    }

    /// Deployments not in a terminal status.
    pub async fn unfinished_deployments(&self) -> i64 {
        self.count(
            "SELECT count(*) FROM deployments.deployments \
             WHERE status NOT IN ('succeeded', 'failed', 'cancelled', 'rejected', 'expired')",
        )
        .await
    }

    /// Generations that repeat a (state, lineage, serial) — one write stored twice.
    pub async fn duplicated_serials(&self) -> i64 {
        self.count(
            "SELECT count(*) FROM (SELECT 1 FROM state.generations \
             GROUP BY state_id, lineage, tofu_serial HAVING count(*) > 1) d",
        )
        .await
    }

    /// States whose current generation is not their newest stored one, or whose numbering
    /// has a hole (a generation lost).
    pub async fn inconsistent_states(&self) -> i64 {
        self.count(
            "SELECT count(*) FROM state.states s WHERE s.current_generation <> \
             (SELECT coalesce(max(g.generation), 0) FROM state.generations g WHERE g.state_id = s.state_id)",
        )
        .await
    }

    /// Uncommitted writes left behind.
    pub async fn pending_objects(&self) -> i64 {
        self.count("SELECT count(*) FROM state.pending_objects")
            .await
    }
}

/// A state's outputs (name → value; sensitive ones absent) as the coordinator serves them.
pub async fn outputs(cairn: &cairn_sdk::Cairn, state_id: &str) -> BTreeMap<String, Value> {
    let r = cairn
        .runs()
        .get_outputs(spb::GetOutputsRequest {
            state_id: state_id.to_owned(),
        })
        .await
        .unwrap_or_else(|e| panic!("GetOutputs {state_id}: {e}"));
    r.outputs
        .into_iter()
        .filter(|o| !o.sensitive)
        .filter_map(|o| Some((o.name, serde_json::from_str(&o.value_json).ok()?)))
        .collect()
}
