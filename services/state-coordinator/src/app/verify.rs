//! VerifyAll: every generation of every state checked end to end, plus objects in storage
//! that the database does not know. A clean pass ends after-restore mode.
use std::collections::HashSet;

use cairn_auth::Principal;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::App;
use super::access::require_platform_admin;
use super::payload::{ReadFailure, object_error};
use crate::error::Result;
use crate::failpoints::VERIFY_BEFORE_END;
use crate::store::{flags, generations, states};

/// One line of the report.
#[derive(Debug, Clone, Default)]
pub struct VerifyItem {
    pub state_id: Option<Uuid>,
    pub tenant_id: Option<Uuid>,
    pub generation: i64,
    pub ok: bool,
    pub problem: String,
    pub unknown_object_key: String,
}

impl App {
    /// Streams the report into `tx`; the last item (no state id) summarises the pass.
    pub async fn verify_all(
        &self,
        who: &Principal,
        tx: mpsc::Sender<Result<VerifyItem>>,
    ) -> Result<()> {
        require_platform_admin(who)?;
        let mut all_ok = true;
        let mut conn = self.pool.acquire().await?;
        // A pass ends after-restore mode only if nobody switched it while the pass ran: an
        // admin who switched it on after this pass began (a newer restore) wants a pass that
        // saw the restored data.
        let epoch = flags::epoch(&mut conn).await?;
        let all = states::state_all_ids(&mut conn).await?;
        drop(conn);
        for state in all {
            let mut conn = self.pool.acquire().await?;
            let rows = generations::generation_list(&mut conn, state.state_id).await?;
            drop(conn);
            for g in rows {
                let checked = self.check_generation(&state, &g).await;
                if let Err(ReadFailure::Damage(p)) = &checked
                    && g.generation == state.current_generation
                    && !state.fenced()
                {
                    // Proof of damage on the current generation: fence it.
                    self.fence(
                        &state,
                        g.generation,
                        &format!("generation {}: {p}", g.generation),
                    )
                    .await?;
                }
                let problem = checked.err().map(|f| f.describe().to_owned());
                all_ok &= problem.is_none();
                let item = VerifyItem {
                    state_id: Some(state.state_id),
                    tenant_id: Some(state.tenant_id),
                    generation: g.generation,
                    ok: problem.is_none(),
                    problem: problem.unwrap_or_default(),
                    unknown_object_key: String::new(),
                };
                if tx.send(Ok(item)).await.is_err() {
                    return Ok(());
                }
            }
        }
        // A pending write may own any version of its key; everything else owns exactly the
        // version it recorded, so another version under a known key (an overwrite) counts as
        // unknown too.
        let mut conn = self.pool.acquire().await?;
        let mut known_keys: HashSet<String> = HashSet::new();
        let mut known_versions: HashSet<(String, String)> = HashSet::new();
        for (key, version) in generations::known_objects(&mut conn).await? {
            match version {
                Some(v) => known_versions.insert((key, v)),
                None => known_keys.insert(key),
            };
        }
        drop(conn);
        let stored = self.objects.list("").await.map_err(object_error)?;
        for object in stored {
            let known = known_keys.contains(&object.key)
                || known_versions.contains(&(object.key.clone(), object.version_id.clone()));
            if !known {
                all_ok = false;
                let item = VerifyItem {
                    problem: format!(
                        "object {} (version {}) is not referenced by the database; it may be newer than a restored database",
                        object.key, object.version_id
                    ),
                    unknown_object_key: object.key,
                    ..VerifyItem::default()
                };
                if tx.send(Ok(item)).await.is_err() {
                    return Ok(());
                }
            }
        }
        self.failpoints.hit(VERIFY_BEFORE_END).await?;
        if all_ok {
            let mut conn = self.pool.acquire().await?;
            if flags::end_after_restore_if_unchanged(&mut conn, epoch, "VerifyAll passed").await? {
                tracing::info!("VerifyAll passed: after-restore mode ended");
            } else if flags::after_restore(&mut conn).await? {
                tracing::warn!(
                    "VerifyAll passed, but after-restore mode was switched during the pass: it stays on until a pass that began after the switch passes"
                );
            }
        }
        let summary = VerifyItem {
            ok: all_ok,
            problem: if all_ok {
                String::new()
            } else {
                "problems found".to_owned()
            },
            ..VerifyItem::default()
        };
        let _ = tx.send(Ok(summary)).await;
        Ok(())
    }
}
