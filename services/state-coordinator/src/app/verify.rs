//! VerifyAll: every generation of every state checked end to end, plus objects in storage
//! that the database does not know. A clean pass ends after-restore mode.
use std::collections::HashSet;

use cairn_auth::Principal;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::App;
use super::access::require_platform_admin;
use crate::error::{Error, Result};
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
        let all = states::state_all_ids(&mut conn).await?;
        drop(conn);
        for state in all {
            let mut conn = self.pool.acquire().await?;
            let rows = generations::generation_list(&mut conn, state.state_id).await?;
            drop(conn);
            for g in rows {
                let problem = self.verify_generation(&state, &g).await;
                if let Some(p) = &problem
                    && g.generation == state.current_generation
                    && !state.fenced()
                    && !p.starts_with("object storage:")
                    && !p.starts_with("key management:")
                {
                    // Proof of damage on the current generation: fence it.
                    self.fence(
                        &state,
                        g.generation,
                        &format!("generation {}: {p}", g.generation),
                    )
                    .await?;
                }
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
        let mut conn = self.pool.acquire().await?;
        let known: HashSet<String> = generations::known_objects(&mut conn)
            .await?
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        drop(conn);
        let stored = self
            .objects
            .list("")
            .await
            .map_err(|e| Error::Unavailable(format!("object storage: {e}")))?;
        for object in stored {
            if !known.contains(&object.key) {
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
        if all_ok {
            let mut conn = self.pool.acquire().await?;
            if flags::after_restore(&mut conn).await? {
                flags::set_after_restore(&mut conn, false, "VerifyAll passed").await?;
                tracing::info!("VerifyAll passed: after-restore mode ended");
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
