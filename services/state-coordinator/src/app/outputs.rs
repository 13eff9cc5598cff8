//! Outputs of a state's current generation, with sensitive values withheld.
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
        let body = self.read_generation(&state, &g).await?;
        let doc = cairn_tofu::inspect_state(&body)
            .map_err(|e| Error::internal(format!("stored state does not parse: {e}")))?;
        Ok((state.current_generation, doc.public_outputs()))
    }
}
