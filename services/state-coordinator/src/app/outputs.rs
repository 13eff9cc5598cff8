//! Outputs of a state's current generation, with sensitive values withheld. A generation
//! never changes once committed, so the public outputs of one are kept (bounded) and served
//! for that generation without reading its object: kept when a run's write commits (from the
//! body it checked) and when a generation is read, since the workflow asks for an upstream's
//! outputs right after its apply and once per dependent.
use std::collections::HashMap;
use std::sync::Mutex;

use cairn_auth::Principal;
use cairn_contract::StateId;
use cairn_tofu::PublicOutput;

use super::App;
use crate::error::{Error, Result};
use crate::store::generations;

impl App {
    pub async fn outputs(
        &self,
        who: &Principal,
        state_id: StateId,
    ) -> Result<(i64, Vec<PublicOutput>)> {
        let state = self.get_state(who, state_id).await?;
        if state.fenced() {
            return Err(Error::Fenced {
                state_id,
                reason: state.fence_reason.clone().unwrap_or_default(),
            });
        }
        if state.current_generation == 0 {
            return Ok((0, Vec::new()));
        }
        let mut conn = self.pool.acquire().await?;
        let g = generations::generation_get(&mut conn, state_id.uuid(), state.current_generation)
            .await?
            .ok_or_else(|| Error::internal("current generation row missing".to_owned()))?;
        drop(conn);
        let key = (g.state_id, g.generation, g.ciphertext_sha256.clone());
        if let Some(outputs) = self.outputs_cache.get(&key) {
            return Ok((state.current_generation, outputs));
        }
        let body = self.read_generation(&state, &g).await?;
        let doc = cairn_tofu::inspect_state(&body)
            .map_err(|e| Error::internal(format!("stored state does not parse: {e}")))?;
        let outputs = doc.public_outputs();
        self.outputs_cache.keep(key, outputs.clone());
        Ok((state.current_generation, outputs))
    }
}

/// A generation: state, number and the sha256 its row records for its object.
type GenerationKey = (uuid::Uuid, i64, String);

/// The public outputs of generations read before; when full it starts over.
pub struct PublicOutputsCache {
    capacity: usize,
    entries: Mutex<HashMap<GenerationKey, Vec<PublicOutput>>>,
}

impl PublicOutputsCache {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, key: &GenerationKey) -> Option<Vec<PublicOutput>> {
        self.lock().get(key).cloned()
    }

    /// The public outputs of a generation just committed (read from the body that was
    /// checked), so the first `GetOutputs` of it does not read its object back.
    pub fn committed(
        &self,
        state_id: uuid::Uuid,
        generation: i64,
        ciphertext_sha256: String,
        outputs: Vec<PublicOutput>,
    ) {
        self.keep((state_id, generation, ciphertext_sha256), outputs);
    }

    /// Forgets every kept output (what a coordinator that took none of the writes has).
    pub fn clear(&self) {
        self.lock().clear();
    }

    fn keep(&self, key: GenerationKey, outputs: Vec<PublicOutput>) {
        let mut entries = self.lock();
        if entries.len() >= self.capacity {
            entries.clear();
        }
        entries.insert(key, outputs);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<GenerationKey, Vec<PublicOutput>>> {
        // One insert, lookup or clear per use: a poisoned map is still consistent.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Default for PublicOutputsCache {
    fn default() -> Self {
        Self::new(4096)
    }
}
