//! Quarantine: an `errored.tfstate` a runner hands in is sealed and kept for an admin;
//! it is never printed or served as state.
use cairn_auth::Principal;
use cairn_contract::RunId;
use cairn_service::access::require_service;
use uuid::Uuid;

use super::App;
use super::payload::{aad_named, context, object_error};
use crate::domain::object_keys;
use crate::error::{Error, Result};
use crate::store::{attempts, quarantine, runs};

impl App {
    pub async fn quarantine(
        &self,
        who: &Principal,
        run_id: RunId,
        attempt: i32,
        state: Vec<u8>,
    ) -> Result<Uuid> {
        require_service(who)?;
        if state.is_empty() || state.len() > self.settings.max_state_bytes {
            return Err(Error::invalid_argument(
                "state must be non-empty and within the size limit".to_owned(),
            ));
        }
        let mut conn = self.pool.acquire().await?;
        let run = runs::run_get(&mut conn, run_id.uuid())
            .await?
            .ok_or_else(|| Error::not_found(format!("run {run_id}")))?;
        // Any attempt of the run may hand its file in, a revoked, superseded or finished
        // one too: what tofu left behind is kept whoever wrote it.
        attempts::attempt_get(&mut conn, run_id.uuid(), attempt)
            .await?
            .ok_or_else(|| Error::not_found(format!("attempt {attempt} of run {run_id}")))?;
        // A re-send after a lost response gets the id of what was stored the first time.
        let plaintext_sha256 = cairn_storage::sha256_hex(&state);
        if let Some(id) =
            quarantine::quarantine_find(&mut conn, run_id.uuid(), attempt, &plaintext_sha256)
                .await?
        {
            tracing::info!(%run_id, attempt, quarantine_id = %id, "errored state already quarantined");
            return Ok(id);
        }
        drop(conn);
        let id = Uuid::now_v7();
        let sealed = self
            .seal(
                &context(run.tenant_id, run.state_id),
                &aad_named("quarantine", id),
                &state,
            )
            .await?;
        let key = object_keys::quarantine_key(run.state_id, id);
        let version = self
            .objects
            .put_new(&key, sealed.ciphertext.clone())
            .await
            .map_err(object_error)?;
        let mut conn = self.pool.acquire().await?;
        let (id, ours) = quarantine::quarantine_insert(
            &mut conn,
            &quarantine::NewQuarantine {
                quarantine_id: id,
                state_id: run.state_id,
                run_id: run_id.uuid(),
                attempt,
                object_key: &key,
                object_version: &version.version_id,
                key_id: &sealed.key_id,
                wrapped_key: &sealed.wrapped_key,
                nonce: &sealed.nonce,
                plaintext_sha256: &sealed.plaintext_sha256,
            },
        )
        .await?;
        drop(conn);
        if !ours {
            // A concurrent re-send stored the same file first: ours is not referenced.
            self.delete_objects(&[(key, version.version_id)]).await;
            return Ok(id);
        }
        tracing::warn!(%run_id, attempt, quarantine_id = %id, "errored state quarantined");
        Ok(id)
    }
}
