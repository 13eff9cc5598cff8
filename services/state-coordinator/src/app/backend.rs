//! The OpenTofu HTTP backend's use cases: read, write, lock and unlock a state with a run
//! token. Every validity check happens at LOCK, before tofu changes anything.
use bytes::Bytes;
use cairn_contract::{RefusalReason, StateId};
use cairn_proto::events::{self, event::Payload};
use cairn_storage::DataKey;
use cairn_tofu::{PublicOutput, StateHeader};
use uuid::Uuid;

use super::App;
use super::events::{generation_committed, record};
use super::payload::{Integrity, ReadFailure, aad_generation, context, object_error};
use super::read_ahead::CurrentObject;
use super::spare_keys::Waited;
use crate::domain::token::hash_token;
use crate::domain::write_rules::{CurrentHeader, Incoming, WriteContext, WriteDecision, decide};
use crate::domain::{content_md5, object_keys};
use crate::error::{Error, Result};
use crate::failpoints::{AFTER_COMMIT, AFTER_PENDING, AFTER_PUT, BEFORE_COMMIT};
use crate::store::attempts::AttemptRow;
use crate::store::backend::{self as hot, ReadByToken, WriteChecks};
use crate::store::generations::{GenerationRow, NewGeneration};
use crate::store::states::StateRow;
use crate::store::{attempts, generations, locks, pending, states};

/// The attempt a run token belongs to, checked against the state in the URL.
#[derive(Debug, Clone)]
pub struct Caller {
    pub attempt: AttemptRow,
}

/// Result of a LOCK.
#[derive(Debug)]
pub enum LockResult {
    Acquired,
}

const ACTOR_RUN: &str = "run-token";

impl App {
    /// Resolves a run token (LOCK, UNLOCK). A token of another state is PERMISSION_DENIED
    /// (403), never 404.
    pub async fn backend_caller(&self, token: &str, state_id: StateId) -> Result<Caller> {
        let hash = hash_token(token);
        let mut conn = self.pool.acquire().await?;
        let attempt = attempts::attempt_by_token(&mut conn, &hash)
            .await?
            .ok_or_else(unknown_token)?;
        drop(conn);
        check_caller(&attempt, state_id)?;
        self.link_run_trace(attempt.run_id).await;
        // LOCK comes first in a run: its GETs and POSTs may then start work ahead.
        let tenant = states::state_get(&mut *self.pool.acquire().await?, attempt.state_id)
            .await?
            .map(|s| s.tenant_id);
        if let Some(tenant) = tenant {
            self.read_ahead
                .authenticated(&hash, attempt.state_id, tenant);
        }
        Ok(Caller { attempt })
    }

    /// A GET's one read: resolves the run token together with the state and its current
    /// generation row. When the token authenticated for this state before, the object last
    /// seen as the state's current one is fetched meanwhile.
    pub async fn backend_read(&self, token: &str, state_id: StateId) -> Result<BackendRead> {
        let hash = hash_token(token);
        let guess = self.read_ahead.guess(&hash, state_id.uuid());
        let read = async {
            let mut conn = self.pool.acquire().await?;
            hot::read_by_token(&mut conn, &hash)
                .await
                .map_err(Error::from)
        };
        let fetch = async {
            let object = guess?;
            let bytes = match self.cached_object(state_id.uuid(), &object).await {
                Some(bytes) => bytes,
                None => self
                    .objects
                    .get(&object.object_key, &object.object_version)
                    .await
                    .ok()?,
            };
            Some((object, bytes))
        };
        let (read, fetched) = tokio::join!(read, fetch);
        let read = read?.ok_or_else(unknown_token)?;
        check_caller(&read.attempt, state_id)?;
        self.link_run_trace(read.attempt.run_id).await;
        self.read_ahead
            .authenticated(&hash, read.state.state_id, read.state.tenant_id);
        Ok(BackendRead { read, fetched })
    }

    /// The sealed object kept for `object` of `state_id`, once the object store confirms
    /// that version still exists with that length (else it is forgotten, and the caller
    /// reads the store, which says what is wrong).
    async fn cached_object(&self, state_id: Uuid, object: &CurrentObject) -> Option<Bytes> {
        let bytes = self.sealed_cache.get(state_id, object)?;
        let len = u64::try_from(bytes.len()).ok()?;
        if self
            .objects
            .confirm(&object.object_key, &object.object_version, len)
            .await
        {
            metrics::counter!(crate::metrics::SEALED_CACHE_READS, "result" => "hit").increment(1);
            Some(bytes)
        } else {
            metrics::counter!(crate::metrics::SEALED_CACHE_READS, "result" => "unconfirmed")
                .increment(1);
            self.sealed_cache.forget(state_id);
            None
        }
    }

    /// A POST's one read: resolves the run token together with everything the write is
    /// checked against. When the token authenticated for this state before, the write's
    /// data key is asked for meanwhile: it waits with the state's spare keys, and the write
    /// takes it once its checks passed (a write refused before leaves it to the state's next
    /// write).
    pub async fn backend_write_checks(
        &self,
        token: &str,
        state_id: StateId,
    ) -> Result<WriteChecks> {
        let hash = hash_token(token);
        if let Some(tenant) = self.read_ahead.known(&hash, state_id.uuid()) {
            self.ask_write_key_ahead(tenant, state_id.uuid());
        }
        let checks = {
            let mut conn = self.pool.acquire().await?;
            hot::write_checks_by_token(&mut conn, &hash).await?
        }
        .ok_or_else(unknown_token)?;
        check_caller(&checks.attempt, state_id)?;
        self.link_run_trace(checks.attempt.run_id).await;
        self.read_ahead
            .authenticated(&hash, checks.state.state_id, checks.state.tenant_id);
        Ok(checks)
    }

    /// Links the current span (a backend request) to the trace its run was registered in:
    /// tofu's HTTP backend sends no trace headers. Reads the stored context only when traces
    /// are on; a failed read leaves the span unlinked.
    async fn link_run_trace(&self, run_id: Uuid) {
        if !cairn_telemetry::trace::enabled() {
            return;
        }
        let Ok(mut conn) = self.pool.acquire().await else {
            return;
        };
        if let Ok(traceparent) = crate::store::runs::run_traceparent(&mut conn, run_id).await {
            cairn_telemetry::TraceContext::from_traceparent(traceparent)
                .link(&tracing::Span::current());
        }
    }

    async fn load_state(&self, state_id: Uuid) -> Result<StateRow> {
        let mut conn = self.pool.acquire().await?;
        states::state_get(&mut conn, state_id)
            .await?
            .ok_or_else(|| Error::internal(format!("state {state_id} of a live attempt vanished")))
    }

    fn fenced(state: &StateRow) -> Error {
        Error::Fenced {
            state_id: state.state_id.into(),
            reason: state.fence_reason.clone().unwrap_or_default(),
        }
    }

    /// Reads a generation's payload; on proof of damage fences the state (only if it is
    /// still at the generation we saw) and returns `Fenced`.
    pub async fn read_generation(&self, state: &StateRow, g: &GenerationRow) -> Result<Vec<u8>> {
        self.read_generation_fetched(state, g, None).await
    }

    /// [`Self::read_generation`] with the object's bytes possibly fetched already.
    async fn read_generation_fetched(
        &self,
        state: &StateRow,
        g: &GenerationRow,
        fetched: Option<Bytes>,
    ) -> Result<Vec<u8>> {
        cairn_telemetry::metrics::timed(
            crate::metrics::READ_DURATION,
            &[],
            self.read_generation_timed(state, g, fetched),
        )
        .await
    }

    async fn read_generation_timed(
        &self,
        state: &StateRow,
        g: &GenerationRow,
        fetched: Option<Bytes>,
    ) -> Result<Vec<u8>> {
        let generation = g.generation;
        let opened = self
            .open_generation_fetched(state, g, Integrity::Tag, fetched)
            .await;
        match opened {
            Ok(bytes) => Ok(bytes),
            Err(ReadFailure::Unavailable(m)) => Err(Error::unavailable(m)),
            Err(ReadFailure::Internal(m)) => Err(Error::internal(m)),
            Err(ReadFailure::Damage(reason)) => {
                let reason = format!("generation {generation}: {reason}");
                self.fence(state, g.generation, &reason).await?;
                // The fence only applies while the state is still at the generation we read;
                // a reader that raced a commit must not report a fence that did not happen.
                let now = self.load_state(state.state_id).await?;
                if now.fenced() {
                    Err(Self::fenced(&now))
                } else {
                    Err(Error::unavailable(format!(
                        "generation {generation} changed while it was read (the state is now at generation {}); retry",
                        now.current_generation
                    )))
                }
            }
        }
    }

    /// Sets `recovery_required` with a conditional update and publishes the event.
    pub async fn fence(&self, state: &StateRow, seen_generation: i64, reason: &str) -> Result<()> {
        let (tenant, sid) = (state.tenant_id, state.state_id);
        let fenced = cairn_db::transaction!(&self.pool, |conn| {
            let fenced = states::state_fence(conn, sid, seen_generation, reason).await?;
            if fenced {
                let payload = Payload::RecoveryRequired(events::RecoveryRequired {
                    state_id: sid.to_string(),
                    generation: u64::try_from(seen_generation).unwrap_or(0),
                    reason: reason.to_owned(),
                });
                record(conn, tenant, sid, "state-coordinator", payload).await?;
            }
            Ok::<_, Error>(fenced)
        })?;
        if fenced {
            metrics::counter!(crate::metrics::FENCES).increment(1);
            tracing::error!(state_id = %sid, generation = seen_generation, %reason, "state fenced: recovery required");
            self.outbox_notify.notify_one();
        }
        Ok(())
    }

    /// GET: the current generation, or `None` (404) when the state has none at all.
    pub async fn backend_get(&self, read: BackendRead) -> Result<Option<Vec<u8>>> {
        let BackendRead { read, fetched } = read;
        // The data key of the write that follows is asked for once the object is read: tofu
        // works between its read and its write, so the key is there in time either way, and
        // asked for earlier it competed with the read where the object store and the key
        // manager share a host (the bench on moto: a 1 MB GET slower, README Benchmarks).
        let write_follows = write_follows(&read);
        let ReadByToken {
            attempt,
            state,
            current,
            ..
        } = read;
        if state.fenced() {
            return Err(Self::fenced(&state));
        }
        let g = match current {
            None if state.current_generation == 0 => {
                if write_follows {
                    self.ask_write_key_ahead(state.tenant_id, state.state_id);
                }
                return Ok(None);
            }
            None => return Err(Error::internal("current generation row missing".to_owned())),
            Some(g) => g,
        };
        // What was fetched ahead is used only if it is this generation's object; else the
        // object kept from its write or an earlier read, once confirmed.
        let object = CurrentObject::of(&g);
        let fetched = match fetched.and_then(|(o, bytes)| o.is(&g).then_some(bytes)) {
            Some(bytes) => Some(bytes),
            None => self.cached_object(state.state_id, &object).await,
        };
        let keep = fetched
            .as_ref()
            .filter(|b| b.len() <= self.sealed_cache.max_entry())
            .cloned();
        let body = match self.read_generation_fetched(&state, &g, fetched).await {
            Ok(body) => body,
            Err(e) => {
                self.sealed_cache.forget(state.state_id);
                return Err(e);
            }
        };
        if let Some(bytes) = keep {
            self.sealed_cache
                .keep(state.state_id, object.clone(), bytes);
        }
        if write_follows {
            self.ask_write_key_ahead(state.tenant_id, state.state_id);
        }
        self.read_ahead.current_is(state.state_id, object);
        // Only this attempt moves its own mark, and only forward: when it already names this
        // generation (the attempt wrote or read it before), there is nothing to record.
        if attempt.last_seen_generation != state.current_generation {
            let mut conn = self.pool.acquire().await?;
            attempts::attempt_saw(&mut conn, attempt.attempt_id, state.current_generation).await?;
        }
        Ok(Some(body))
    }

    /// LOCK: token, attempt, lease, fence and staleness are checked here; the refusal reason
    /// is recorded on the attempt.
    pub async fn backend_lock(
        &self,
        caller: &Caller,
        lock_id: &str,
        info: &serde_json::Value,
    ) -> Result<LockResult> {
        if caller.attempt.read_only {
            return Err(Error::permission_denied(
                "read-only run token (preview/drift) cannot lock".to_owned(),
            ));
        }
        if lock_id.is_empty() {
            return Err(Error::invalid_argument(
                "LockInfo needs a non-empty ID".to_owned(),
            ));
        }
        let attempt_id = caller.attempt.attempt_id;
        cairn_db::transaction!(&self.pool, |conn| {
            let attempt = attempts::attempt_get_for_update(conn, attempt_id)
                .await?
                .ok_or_else(|| Error::unauthenticated("unknown run attempt".to_owned()))?;
            if let Some(reason) = attempt.dead_reason() {
                return Err(Error::unauthenticated(format!(
                    "run token refused: {reason}"
                )));
            }
            let state = states::state_get_for_update(conn, attempt.state_id)
                .await?
                .ok_or_else(|| Error::internal("state vanished".to_owned()))?;
            let refusal = if state.fenced() {
                Some(Self::fenced(&state))
            } else if state.current_generation != attempt.base_generation {
                Some(Error::Stale {
                    current: u64::try_from(state.current_generation).unwrap_or(0),
                    base: u64::try_from(attempt.base_generation).unwrap_or(0),
                })
            } else {
                None
            };
            if let Some(refusal) = refusal {
                // The attempt records the reason's code (`fenced`, `stale`): it is what
                // FinishRunResponse.refusal_reason returns and clients decide on. The
                // human message goes to the log.
                let reason = refusal.reason().map_or("", RefusalReason::code);
                attempts::attempt_refuse(conn, attempt_id, reason).await?;
                tracing::warn!(attempt_id = %attempt_id, reason, error = %refusal, "LOCK refused");
                return Ok(Err(refusal));
            }
            locks::lock_release_dead(conn, state.state_id).await?;
            let holder =
                locks::lock_acquire(conn, state.state_id, lock_id, attempt_id, info).await?;
            if holder.attempt_id == attempt_id && holder.lock_id == lock_id {
                Ok(Ok(LockResult::Acquired))
            } else {
                Ok(Err(Error::Locked {
                    lock_id: holder.lock_id,
                    holder: holder.info,
                }))
            }
        })?
    }

    /// UNLOCK by the holder (also when repeated). The attempt's last written generation
    /// becomes final. Force-unlock is never accepted here.
    pub async fn backend_unlock(&self, caller: &Caller, lock_id: &str) -> Result<()> {
        if caller.attempt.read_only {
            return Err(Error::permission_denied(
                "read-only run token (preview/drift) cannot unlock".to_owned(),
            ));
        }
        let attempt_id = caller.attempt.attempt_id;
        let state_id = caller.attempt.state_id;
        cairn_db::transaction!(&self.pool, |conn| {
            match locks::lock_get(conn, state_id).await? {
                None => {}
                Some(held) if held.attempt_id == attempt_id && held.lock_id == lock_id => {
                    locks::lock_release(conn, state_id, lock_id, Some(attempt_id)).await?;
                }
                Some(held) => {
                    return Err(Error::Locked {
                        lock_id: held.lock_id,
                        holder: held.info,
                    });
                }
            }
            if let Some(attempt) = attempts::attempt_get_for_update(conn, attempt_id).await?
                && let Some(g) = attempt.last_written_generation
            {
                generations::generation_mark_final(conn, state_id, g).await?;
            }
            Ok(())
        })
    }

    /// POST: writes a new generation through pending row → put → compare-and-set commit.
    ///
    /// Once the checks that need only the database passed, two halves run at once: the body
    /// is checked (Content-MD5, parse, SHA-256; a large body's on the low-priority threads,
    /// app::beside, so they use the time the write waits and never hold a core its seal or
    /// put needs), and the write's data key (taken from the state's spare keys, waiting for
    /// it if it is still on its way, or asked for now) and its pending row are had at once,
    /// then a sealed copy of the body is put under the pending row while its ciphertext is
    /// hashed. The commit waits for both. A body refused after its copy was stored costs
    /// the copy's deletion, and its data key seals the state's next write.
    pub async fn backend_post(
        &self,
        checks: WriteChecks,
        lock_id: &str,
        body: Bytes,
        content_md5: Option<Vec<u8>>,
    ) -> Result<u64> {
        let state = &checks.state;
        self.write_allowed(&checks, lock_id, body.len())?;

        // The write this will be if it commits: the next generation, under a new object key.
        let target = u64::try_from(state.current_generation + 1)
            .map_err(|_| Error::internal("generation out of range".to_owned()))?;
        let pending_id = Uuid::now_v7();
        let object_key = object_keys::generation_key(&state.key, target, pending_id);
        let write = async {
            let stored = async {
                match self.ready_copy(&checks, pending_id, &object_key).await {
                    Ok(key) => {
                        self.store_copy(state, target, &object_key, key, body.clone())
                            .await
                    }
                    Err(failed) => failed,
                }
            };
            // The copy's half first: its database insert and its wait for the key start
            // before a small body is checked on this task.
            let (stored, checked_body) =
                tokio::join!(stored, self.check_body(body.clone(), content_md5));
            self.decide_run_write(
                &checks,
                target,
                pending_id,
                object_key,
                checked_body,
                stored,
            )
            .await
        };
        cairn_telemetry::metrics::timed(crate::metrics::WRITE_DURATION, &[("via", "run")], write)
            .await
    }

    /// What the sealed copy of a POST needs before it is made, had at once: the write's
    /// data key and its pending row. On a failure, what became of the row and the key.
    async fn ready_copy(
        &self,
        checks: &WriteChecks,
        pending_id: Uuid,
        object_key: &str,
    ) -> std::result::Result<DataKey, StoredCopy> {
        let state = &checks.state;
        let recorded = async {
            let mut conn = self.pool.acquire().await?;
            pending::pending_insert(
                &mut conn,
                &pending::NewPending {
                    pending_id,
                    state_id: state.state_id,
                    attempt_id: Some(checks.attempt.attempt_id),
                    target_generation: state.current_generation + 1,
                    object_key,
                },
            )
            .await
            .map_err(Error::from)
        };
        let (key, recorded) = tokio::join!(self.data_key_for_write(state), recorded);
        // The database's problems are answered before the key manager's.
        match (key, recorded) {
            (Ok(key), Ok(())) => Ok(key),
            (key, Err(error)) => Err(StoredCopy::Failed {
                error,
                row: Row::None,
                key: key.ok(),
            }),
            (Err(error), Ok(())) => Err(StoredCopy::Failed {
                error,
                row: Row::Unused,
                key: None,
            }),
        }
    }

    /// The speculative half of a POST once its key and pending row are had: the body sealed
    /// into a copy and put while the ciphertext is hashed. What it did is kept in the answer
    /// whatever failed, for the commit or its cleanup.
    async fn store_copy(
        &self,
        state: &StateRow,
        target: u64,
        object_key: &str,
        key: DataKey,
        body: Bytes,
    ) -> StoredCopy {
        match self
            .seal_and_put(state, target, object_key, &key, body)
            .await
        {
            Ok(copy) => StoredCopy::Stored { key, copy },
            Err(error) => StoredCopy::Failed {
                error,
                row: Row::Used,
                key: Some(key),
            },
        }
    }

    /// Seals a copy of `body` for generation `target` and puts it under `object_key` (never
    /// used before) while the ciphertext is hashed.
    async fn seal_and_put(
        &self,
        state: &StateRow,
        target: u64,
        object_key: &str,
        key: &DataKey,
        body: Bytes,
    ) -> Result<PutCopy> {
        let size = body.len();
        let sealed = {
            let plaintext_key = key.plaintext.clone();
            let aad = aad_generation(state.state_id, target);
            self.body_work(Lane::CriticalPath, body, move |body| {
                cairn_storage::seal(plaintext_key.expose(), &aad, &body)
                    .map_err(|e| Error::internal(format!("seal payload: {e}")))
            })
            .await?
        };
        let ciphertext = Bytes::from(sealed.ciphertext);
        self.key_cache.remember(
            &key.key_id,
            &key.wrapped,
            &context(state.tenant_id, state.state_id),
            &key.plaintext,
        );
        self.failpoints.hit(AFTER_PENDING).await?;

        let hashing = self.body_work(Lane::Beside, ciphertext.clone(), |c| {
            Ok::<_, Error>(cairn_storage::sha256_hex(&c))
        });
        let keep = (ciphertext.len() <= self.sealed_cache.max_entry()).then(|| ciphertext.clone());
        let (put, hashed) = tokio::join!(self.objects.put_new(object_key, ciphertext), hashing);
        let version = put.map_err(object_error)?;
        let ciphertext_sha256 = hashed?;
        self.failpoints.hit(AFTER_PUT).await?;
        Ok(PutCopy {
            nonce: sealed.nonce,
            version_id: version.version_id,
            ciphertext_sha256,
            size,
            ciphertext: keep,
        })
    }

    /// The POST's two halves met: refuse (the body's problems first, then the database's,
    /// the key manager's and the object store's; a refused body's stored copy deleted) or
    /// commit.
    async fn decide_run_write(
        &self,
        checks: &WriteChecks,
        target: u64,
        pending_id: Uuid,
        object_key: String,
        checked_body: Result<CheckedBody>,
        stored: StoredCopy,
    ) -> Result<u64> {
        let state = &checks.state;
        let body = match checked_body {
            Ok(body) => body,
            Err(e) => {
                self.abandon_copy(state.state_id, pending_id, &object_key, stored)
                    .await;
                return Err(e);
            }
        };
        let (copy, key) = match stored {
            StoredCopy::Stored { key, copy } => (copy, key),
            StoredCopy::Failed { error, row, key } => {
                self.release_failed_copy(state.state_id, pending_id, row, key)
                    .await;
                return Err(error);
            }
        };

        let current = match (
            checks.current_serial,
            checks.current_lineage.as_deref(),
            checks.current_plaintext_sha256.as_deref(),
        ) {
            (Some(serial), Some(lineage), Some(plaintext_sha256)) => Some(CurrentHeader {
                serial: u64::try_from(serial).unwrap_or(0),
                lineage,
                plaintext_sha256,
            }),
            _ => None,
        };
        let decision = decide(
            &WriteContext {
                current_generation: u64::try_from(state.current_generation).unwrap_or(0),
                attempt_last_seen: u64::try_from(checks.attempt.last_seen_generation).unwrap_or(0),
                current,
            },
            &Incoming {
                serial: body.header.serial,
                lineage: &body.header.lineage,
                plaintext_sha256: &body.plaintext_sha256,
            },
        );
        let refusal = match decision {
            WriteDecision::Commit { target_generation } if target_generation == target => None,
            WriteDecision::Commit { .. } => Some(Err(Error::internal(
                "the write rules chose another generation than the next".to_owned(),
            ))),
            WriteDecision::AlreadyCommitted { generation } => Some(Ok(generation)),
            WriteDecision::Reject(conflict) => Some(Err(conflict.into())),
        };
        if let Some(answer) = refusal {
            let stored = StoredCopy::Stored { key, copy };
            self.abandon_copy(state.state_id, pending_id, &object_key, stored)
                .await;
            return answer;
        }
        self.commit_run_write(
            state,
            &checks.attempt,
            RunWrite {
                key,
                body,
                copy,
                target,
                pending_id,
                object_key,
            },
        )
        .await?;
        Ok(target)
    }

    /// Undoes the stored half of a refused POST: its object deleted, then its pending row
    /// dropped (kept for the sweeper when the deletion failed: an object is never left
    /// without a row); its data key kept for the state's next write (the deleted copy was
    /// sealed under a nonce of its own and is no generation).
    async fn abandon_copy(
        &self,
        state_id: Uuid,
        pending_id: Uuid,
        object_key: &str,
        stored: StoredCopy,
    ) {
        match stored {
            StoredCopy::Stored { key, copy } => {
                self.spare_keys.keep(state_id, key);
                match self.objects.delete(object_key, &copy.version_id).await {
                    Ok(()) => self.forget_pending(pending_id).await,
                    Err(e) => {
                        tracing::warn!(%pending_id, error = %e, "could not delete the copy of a refused write; the sweeper will");
                    }
                }
            }
            StoredCopy::Failed { row, key, .. } => {
                self.release_failed_copy(state_id, pending_id, row, key)
                    .await;
            }
        }
    }

    /// What a copy that failed to be stored leaves: its data key kept for the state's next
    /// write; a row nothing was done under dropped now, one whose copy failed on the way
    /// (sealing, the put, a crash point) left for the sweeper with whatever object it left.
    async fn release_failed_copy(
        &self,
        state_id: Uuid,
        pending_id: Uuid,
        row: Row,
        key: Option<DataKey>,
    ) {
        if let Some(key) = key {
            self.spare_keys.keep(state_id, key);
        }
        if row == Row::Unused {
            self.forget_pending(pending_id).await;
        }
    }

    /// Drops the pending row of a write refused before its object was put (best effort: the
    /// sweeper removes a row left behind).
    async fn forget_pending(&self, pending_id: Uuid) {
        let forgotten = async {
            let mut conn = self.pool.acquire().await?;
            pending::pending_consume(&mut conn, pending_id).await
        };
        if let Err(e) = forgotten.await {
            tracing::warn!(%pending_id, error = %e, "could not drop the pending row of a refused write");
        }
    }

    /// Whether this attempt may write this body now (read-only tokens, the size limit, the
    /// fence, the lock), from the checks read alone.
    fn write_allowed(&self, checks: &WriteChecks, lock_id: &str, size: usize) -> Result<()> {
        if checks.attempt.read_only {
            return Err(Error::permission_denied(
                "read-only run token (preview/drift) cannot write state".to_owned(),
            ));
        }
        if size > self.settings.max_state_bytes {
            return Err(Error::TooLarge {
                size,
                limit: self.settings.max_state_bytes,
            });
        }
        if checks.state.fenced() {
            return Err(Self::fenced(&checks.state));
        }
        match (checks.lock_attempt_id, checks.lock_id.as_deref()) {
            (Some(holder), Some(held))
                if holder == checks.attempt.attempt_id && held == lock_id =>
            {
                Ok(())
            }
            // The ID sent is not quoted: an answer never echoes what the request carried.
            _ => {
                let sent = if lock_id.is_empty() {
                    "none was given"
                } else {
                    "another was given"
                };
                Err(Error::failed_precondition(format!(
                    "write requires ?ID= of the lock this run attempt holds ({sent})"
                )))
            }
        }
    }

    /// Asks the key manager for the data key of `state_id`'s next write without waiting for
    /// it: the write takes it from the spare keys (app::spare_keys). Nothing is asked when
    /// the state already has a key waiting.
    fn ask_write_key_ahead(&self, tenant_id: Uuid, state_id: Uuid) {
        let Some(deliver) = self.spare_keys.promise(state_id) else {
            return;
        };
        let keys = self.keys.clone();
        tokio::spawn(async move {
            let answer = keys.generate_data_key(&context(tenant_id, state_id)).await;
            if let Err(e) = &answer {
                tracing::debug!(%state_id, error = %e, "data key asked ahead");
            }
            // Nobody may take it any more (the promise expired or was pushed out).
            drop(deliver.send(answer));
        });
    }

    /// The data key of a write: the state's spare key (waited for while it is on its way),
    /// or a new one from the key manager.
    async fn data_key_for_write(&self, state: &StateRow) -> Result<DataKey> {
        let (tenant_id, state_id) = (state.tenant_id, state.state_id);
        if let Some(spare) = self.spare_keys.take(state_id) {
            match spare.key().await {
                Waited::Key(key) => return Ok(key),
                Waited::Failed(e) => return Err(key_management(&e)),
                Waited::Nothing => {}
            }
        }
        self.keys
            .generate_data_key(&context(tenant_id, state_id))
            .await
            .map_err(|e| key_management(&e))
    }

    /// A run's write once its copy is stored and its body checked: the one-statement commit.
    async fn commit_run_write(
        &self,
        state: &StateRow,
        attempt: &AttemptRow,
        w: RunWrite,
    ) -> Result<()> {
        let RunWrite {
            key,
            body,
            copy,
            target,
            pending_id,
            object_key,
        } = w;
        let generation =
            i64::try_from(target).map_err(|_| Error::internal("generation overflow".to_owned()))?;
        let serial = i64::try_from(body.header.serial)
            .map_err(|_| Error::invalid_argument("serial out of range".to_owned()))?;
        let new_gen = NewGeneration {
            state_id: state.state_id,
            generation,
            object_key: object_key.clone(),
            object_version: copy.version_id,
            ciphertext_sha256: copy.ciphertext_sha256,
            plaintext_sha256: body.plaintext_sha256,
            size: i64::try_from(copy.size + cairn_storage::envelope::TAG_BYTES).unwrap_or(i64::MAX),
            key_id: key.key_id,
            wrapped_key: key.wrapped,
            nonce: copy.nonce.to_vec(),
            tofu_serial: serial,
            lineage: body.header.lineage,
            run_id: Some(attempt.run_id),
            attempt: Some(attempt.attempt),
            is_final: false,
            recovered_from: None,
        };
        let row = cairn_bus::new_event(
            cairn_bus::ServiceRole::StateCoordinator,
            state.tenant_id,
            cairn_bus::Aggregate::State,
            state.state_id,
            "generation_committed",
            ACTOR_RUN,
            generation_committed(
                state.state_id,
                target,
                Some(attempt.run_id),
                u32::try_from(attempt.attempt).unwrap_or(0),
                body.header.serial,
                0,
            ),
        )
        .and_then(|event| cairn_bus::outbox_row(&event))
        .map_err(|e| Error::internal(format!("outbox event: {e}")))?;
        self.failpoints.hit(BEFORE_COMMIT).await?;
        let outcome = {
            let mut conn = self.pool.acquire().await?;
            hot::commit_run_write(&mut conn, attempt.attempt_id, pending_id, &new_gen, row).await?
        };
        if !outcome.advanced {
            return self
                .refused_commit(state, attempt, outcome, pending_id, &new_gen)
                .await;
        }
        let object = CurrentObject {
            generation,
            object_key: new_gen.object_key,
            object_version: new_gen.object_version,
        };
        if let Some(ciphertext) = copy.ciphertext {
            self.sealed_cache
                .keep(state.state_id, object.clone(), ciphertext);
        }
        self.read_ahead.current_is(state.state_id, object);
        if let Some(outputs) = body.outputs {
            self.outputs_cache.committed(
                state.state_id,
                generation,
                new_gen.ciphertext_sha256,
                outputs,
            );
        }
        self.outbox_notify.notify_one();
        metrics::counter!(crate::metrics::GENERATIONS_COMMITTED, "via" => "run").increment(1);
        self.failpoints.hit(AFTER_COMMIT).await?;
        tracing::info!(state_id = %state.state_id, generation = target, size = copy.size, "generation committed");
        Ok(())
    }

    /// Why a run's commit did not advance the state, as the error to answer; or `Ok` when an
    /// identical write of the same attempt won (tofu re-sends a write after a 5xx or a
    /// timeout, possibly while the first request is still committing): then this request's
    /// pending row and object go.
    async fn refused_commit(
        &self,
        state: &StateRow,
        attempt: &AttemptRow,
        outcome: hot::CommitOutcome,
        pending_id: Uuid,
        new_gen: &NewGeneration,
    ) -> Result<()> {
        let mut conn = self.pool.acquire().await?;
        if !outcome.attempt_live {
            let now = attempts::attempt_get(&mut conn, attempt.run_id, attempt.attempt).await?;
            return Err(match now.as_ref().and_then(AttemptRow::dead_reason) {
                Some(reason) => Error::unauthenticated(format!("run token refused: {reason}")),
                None => Error::unauthenticated("unknown run attempt".to_owned()),
            });
        }
        if !outcome.lock_held {
            return Err(Error::failed_precondition(
                "the lock of this run attempt was released".to_owned(),
            ));
        }
        if !outcome.pending_found {
            return Err(Error::unavailable(
                "the pending write was swept before it committed; retry".to_owned(),
            ));
        }
        let now = states::state_get(&mut conn, state.state_id).await?;
        if let Some(s) = &now
            && !s.fenced()
            && s.current_generation == new_gen.generation
            && let Some(g) =
                generations::generation_get(&mut conn, state.state_id, new_gen.generation).await?
            && g.run_id == new_gen.run_id
            && g.attempt == new_gen.attempt
            && g.tofu_serial == new_gen.tofu_serial
            && g.lineage == new_gen.lineage
            && g.plaintext_sha256 == new_gen.plaintext_sha256
        {
            if pending::pending_consume(&mut conn, pending_id).await? {
                drop(conn);
                self.delete_objects(&[(
                    new_gen.object_key.clone(),
                    new_gen.object_version.clone(),
                )])
                .await;
            }
            tracing::info!(state_id = %state.state_id, generation = new_gen.generation, "re-sent write was already committed");
            return Ok(());
        }
        Err(match now {
            Some(s) if s.fenced() => Self::fenced(&s),
            Some(s) => Error::aborted(format!(
                "lost the race: the state moved to generation {} meanwhile",
                s.current_generation
            )),
            None => Error::internal("state vanished".to_owned()),
        })
    }

    /// The write path shared by POST and rollback recovery.
    pub(crate) async fn write_generation(&self, state: &StateRow, w: WriteSpec<'_>) -> Result<()> {
        cairn_telemetry::metrics::timed(
            crate::metrics::WRITE_DURATION,
            &[("via", "recovery")],
            self.write_generation_timed(state, w),
        )
        .await
    }

    async fn write_generation_timed(&self, state: &StateRow, w: WriteSpec<'_>) -> Result<()> {
        let ctx = context(state.tenant_id, state.state_id);
        let sealed = self
            .seal(&ctx, &aad_generation(state.state_id, w.target), w.body)
            .await?;
        let pending_id = Uuid::now_v7();
        let object_key = object_keys::generation_key(&state.key, w.target, pending_id);
        let target = i64::try_from(w.target)
            .map_err(|_| Error::internal("generation overflow".to_owned()))?;

        // 1. pending row
        {
            let mut conn = self.pool.acquire().await?;
            pending::pending_insert(
                &mut conn,
                &pending::NewPending {
                    pending_id,
                    state_id: state.state_id,
                    attempt_id: w.attempt.map(|a| a.attempt_id),
                    target_generation: target,
                    object_key: &object_key,
                },
            )
            .await?;
        }
        self.failpoints.hit(AFTER_PENDING).await?;

        // 2. the object, under a key never used before
        let size = sealed.ciphertext.len();
        let version = self
            .objects
            .put_new(&object_key, sealed.ciphertext.clone())
            .await
            .map_err(object_error)?;
        self.failpoints.hit(AFTER_PUT).await?;

        // 3. commit: consume pending, compare-and-set, insert generation, outbox event
        let serial = i64::try_from(w.serial)
            .map_err(|_| Error::invalid_argument("serial out of range".to_owned()))?;
        let new_gen = NewGeneration {
            state_id: state.state_id,
            generation: target,
            object_key: object_key.clone(),
            object_version: version.version_id.clone(),
            ciphertext_sha256: sealed.ciphertext_sha256.clone(),
            plaintext_sha256: sealed.plaintext_sha256.clone(),
            size: i64::try_from(size).unwrap_or(i64::MAX),
            key_id: sealed.key_id.clone(),
            wrapped_key: sealed.wrapped_key.clone(),
            nonce: sealed.nonce.clone(),
            tofu_serial: serial,
            lineage: w.lineage.to_owned(),
            run_id: w.attempt.map(|a| a.run_id),
            attempt: w.attempt.map(|a| a.attempt),
            is_final: w.recovered_from.is_some(),
            recovered_from: w.recovered_from,
        };
        let attempt_id = w.attempt.map(|a| a.attempt_id);
        let fp = self.failpoints.clone();
        let committed = cairn_db::transaction!(&self.pool, |conn| {
            if let Some(attempt_id) = attempt_id {
                let checked =
                    attempts::attempt_get_for_update_with_lock(conn, attempt_id, state.state_id)
                        .await?
                        .ok_or_else(|| Error::unauthenticated("unknown run attempt".to_owned()))?;
                if let Some(reason) = checked.attempt.dead_reason() {
                    return Err(Error::unauthenticated(format!(
                        "run token refused: {reason}"
                    )));
                }
                if checked.lock_attempt_id != Some(attempt_id) {
                    return Err(Error::failed_precondition(
                        "the lock of this run attempt was released".to_owned(),
                    ));
                }
            }
            if !pending::pending_consume(conn, pending_id).await? {
                return Err(Error::unavailable(
                    "the pending write was swept before it committed; retry".to_owned(),
                ));
            }
            let advanced = if w.recovered_from.is_some() {
                let cleared =
                    states::state_clear_fence(conn, state.state_id, target - 1, target).await?;
                if cleared {
                    super::recovery::fence_live_writers(conn, state.state_id).await?;
                }
                cleared
            } else {
                states::state_advance(conn, state.state_id, target - 1, target).await?
            };
            if !advanced {
                let now = states::state_get(conn, state.state_id).await?;
                // tofu re-sends a write after a 5xx or a timeout, possibly while the first
                // request is still committing: when that identical write won, this one
                // succeeds too (its pending row goes with this transaction, its object below).
                if let Some(s) = &now
                    && w.attempt.is_some()
                    && !s.fenced()
                    && s.current_generation == target
                    && let Some(g) =
                        generations::generation_get(conn, state.state_id, target).await?
                    && g.run_id == new_gen.run_id
                    && g.attempt == new_gen.attempt
                    && g.tofu_serial == new_gen.tofu_serial
                    && g.lineage == new_gen.lineage
                    && g.plaintext_sha256 == new_gen.plaintext_sha256
                {
                    return Ok(false);
                }
                return Err(match now {
                    Some(s) if s.fenced() && w.recovered_from.is_none() => Self::fenced(&s),
                    Some(s) => Error::aborted(format!(
                        "lost the race: the state moved to generation {} meanwhile",
                        s.current_generation
                    )),
                    None => Error::internal("state vanished".to_owned()),
                });
            }
            generations::generation_insert(conn, &new_gen).await?;
            if let Some(attempt_id) = attempt_id {
                attempts::attempt_wrote(conn, attempt_id, target).await?;
            }
            let payload = match w.recovered_from {
                None => generation_committed(
                    state.state_id,
                    w.target,
                    w.attempt.map(|a| a.run_id),
                    w.attempt
                        .map_or(0, |a| u32::try_from(a.attempt).unwrap_or(0)),
                    w.serial,
                    0,
                ),
                Some(from) => Payload::Recovered(events::Recovered {
                    state_id: state.state_id.to_string(),
                    new_generation: w.target,
                    recovered_from: u64::try_from(from).unwrap_or(0),
                    reason: w.reason.to_owned(),
                }),
            };
            record(conn, state.tenant_id, state.state_id, w.actor, payload).await?;
            fp.hit(BEFORE_COMMIT).await?;
            Ok(true)
        })?;
        if !committed {
            self.delete_objects(&[(object_key, version.version_id)])
                .await;
            tracing::info!(state_id = %state.state_id, generation = w.target, "re-sent write was already committed");
            return Ok(());
        }
        self.outbox_notify.notify_one();
        metrics::counter!(crate::metrics::GENERATIONS_COMMITTED, "via" => "recovery").increment(1);
        self.failpoints.hit(AFTER_COMMIT).await?;
        tracing::info!(state_id = %state.state_id, generation = w.target, size, "generation committed");
        Ok(())
    }
}

/// A data key that could not be had: the key manager is unavailable (never a fence).
fn key_management(e: &cairn_storage::KeyError) -> Error {
    Error::unavailable(format!("key management: {e}"))
}

fn unknown_token() -> Error {
    Error::unauthenticated("unknown run token".to_owned())
}

/// A token that resolved to `attempt` may act on `state_id` only while the attempt is live
/// and only on its own state (another state's is 403, never 404).
fn check_caller(attempt: &AttemptRow, state_id: StateId) -> Result<()> {
    if let Some(reason) = attempt.dead_reason() {
        return Err(Error::unauthenticated(format!(
            "run token refused: {reason}"
        )));
    }
    if attempt.state_id != state_id.uuid() {
        return Err(Error::permission_denied(
            "this run token is not valid for this state".to_owned(),
        ));
    }
    Ok(())
}

/// Whether a GET comes before a write of the same run: tofu reads the state before it
/// writes, and only an apply or destroy attempt holding the state's lock writes. A plan, a
/// preview or drift run reads and never writes.
fn write_follows(read: &ReadByToken) -> bool {
    read.run_kind.changes_state() && read.lock_attempt_id == Some(read.attempt.attempt_id)
}

/// A GET's read and the object fetched meanwhile, if any (its bytes, and which object).
pub struct BackendRead {
    pub read: ReadByToken,
    pub fetched: Option<(CurrentObject, Bytes)>,
}

/// A run's write once it is decided: what `commit_run_write` needs.
struct RunWrite {
    key: DataKey,
    body: CheckedBody,
    copy: PutCopy,
    target: u64,
    pending_id: Uuid,
    object_key: String,
}

/// What the stored half of a POST did.
enum StoredCopy {
    /// The sealed copy is stored under its pending row, sealed with `key`.
    Stored { key: DataKey, copy: PutCopy },
    /// It is not: why, what became of its pending row, and the data key if one came.
    Failed {
        error: Error,
        row: Row,
        key: Option<DataKey>,
    },
}

/// The pending row of a POST's copy that failed to be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    /// Not inserted.
    None,
    /// Inserted, and nothing was done under it (no data key came).
    Unused,
    /// Inserted, and the copy was sealed and put (or tried to be) under it.
    Used,
}

/// A sealed copy put under its new key.
struct PutCopy {
    nonce: [u8; cairn_storage::NONCE_BYTES],
    version_id: String,
    ciphertext_sha256: String,
    /// The plaintext's length.
    size: usize,
    /// The sealed bytes, when small enough for the sealed cache (kept at commit).
    ciphertext: Option<Bytes>,
}

/// Bodies up to this size are hashed and sealed on the request's own task; larger ones are
/// sealed on a blocking thread and hashed on a low-priority one, so a large body's CPU work
/// overlaps with the network waits of others.
const INLINE_WORK_BYTES: usize = 256 * 1024;

/// Where a body's CPU work runs when it is too large to run inline.
#[derive(Debug, Clone, Copy)]
enum Lane {
    /// The blocking pool, at normal priority: work the write waits for next (the seal).
    CriticalPath,
    /// The low-priority threads (app::beside): work a write's commit waits for but its
    /// seal and put do not.
    Beside,
}

/// What a POST body is: the Content-MD5 it was sent with checked, the state document
/// validated and its header read, its sha256.
#[derive(Debug)]
struct CheckedBody {
    header: StateHeader,
    plaintext_sha256: String,
    /// The document's root outputs without sensitive values, for a body of at most
    /// [`COMMIT_OUTPUTS_MAX_BYTES`]: what `GetOutputs` answers for the generation once it
    /// commits (the workflow asks for them right after an apply). A larger document's are
    /// read from its object when asked for (no second copy of a large output in memory).
    outputs: Option<Vec<PublicOutput>>,
}

/// Documents up to this size have their public outputs kept when their write commits.
const COMMIT_OUTPUTS_MAX_BYTES: usize = 1024 * 1024;

impl App {
    /// The body's checks, in the order a refusal names them: Content-MD5 (a body that is
    /// not what was sent is that, whatever else is wrong with it), then the state document.
    async fn check_body(&self, body: Bytes, content_md5: Option<Vec<u8>>) -> Result<CheckedBody> {
        self.body_work(Lane::Beside, body, move |body| {
            content_md5::check(content_md5.as_deref(), &body)?;
            let doc = cairn_tofu::inspect_state(&body)
                .map_err(|e| Error::invalid_argument(state_error(&e)))?;
            Ok::<_, Error>(CheckedBody {
                header: doc.header().clone(),
                plaintext_sha256: cairn_storage::sha256_hex(&body),
                outputs: (body.len() <= COMMIT_OUTPUTS_MAX_BYTES).then(|| doc.public_outputs()),
            })
        })
        .await
    }

    /// Runs `work` on `bytes` inline when they are small, else on `lane`.
    async fn body_work<T, E>(
        &self,
        lane: Lane,
        bytes: Bytes,
        work: impl FnOnce(Bytes) -> std::result::Result<T, E> + Send + 'static,
    ) -> Result<T>
    where
        T: Send + 'static,
        E: Into<Error> + Send + 'static,
    {
        if bytes.len() <= INLINE_WORK_BYTES {
            return work(bytes).map_err(Into::into);
        }
        match lane {
            Lane::CriticalPath => match tokio::task::spawn_blocking(move || work(bytes)).await {
                Ok(done) => done.map_err(Into::into),
                Err(_) => Err(Error::internal(
                    "a blocking task of the write path failed".to_owned(),
                )),
            },
            Lane::Beside => self
                .beside
                .run(move || work(bytes))
                .await?
                .map_err(Into::into),
        }
    }
}

/// Why a state document was refused, without quoting it: serde's messages inside
/// `StateError` can carry the values of the document's header fields (a 400 body never
/// echoes what the request carried).
fn state_error(e: &cairn_tofu::StateError) -> String {
    use cairn_tofu::StateError as E;
    match e {
        E::NotJson { line, column, .. } => {
            format!("state document is not valid JSON at line {line}, column {column}")
        }
        E::InvalidField { kind, field, .. } => {
            format!("state document: field \"{field}\" of the {kind} is invalid")
        }
        E::UnsupportedEncryptionVersion { .. } => {
            "state document: the encryption envelope's encryption_version is not \"v0\"".to_owned()
        }
        E::Schema { .. } => "state document does not match the version 4 schema".to_owned(),
        // The other variants name fields and numbers only.
        other => format!("state document: {other}"),
    }
}

/// What to write in `write_generation`.
pub(crate) struct WriteSpec<'a> {
    pub target: u64,
    pub body: &'a [u8],
    pub serial: u64,
    pub lineage: &'a str,
    pub attempt: Option<&'a AttemptRow>,
    pub recovered_from: Option<i64>,
    pub actor: &'a str,
    /// Why (recovery only).
    pub reason: &'a str,
}
