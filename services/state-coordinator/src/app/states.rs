//! States: idempotent creation on key, reads and listing scoped to the caller's tenant.
use cairn_auth::{Principal, Role};
use uuid::Uuid;

use super::App;
use super::access::{can_see, require};
use crate::domain::ids::state_key;
use crate::error::{Error, Result};
use crate::store::states::{self, StateRow};

impl App {
    pub async fn create_state(
        &self,
        who: &Principal,
        tenant_id: Uuid,
        instance_id: Uuid,
        physical_name: &str,
    ) -> Result<(StateRow, bool)> {
        require(who, tenant_id, Role::Operator, "tenant")?;
        let key = state_key(physical_name).map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let mut conn = self.pool.acquire().await?;
        let (row, created) =
            states::state_create(&mut conn, Uuid::now_v7(), tenant_id, instance_id, &key).await?;
        if row.tenant_id != tenant_id || row.instance_id != instance_id {
            // The key belongs to someone else: do not reveal whose.
            return Err(Error::FailedPrecondition(format!(
                "state key {key} is owned by another instance"
            )));
        }
        Ok((row, created))
    }

    pub async fn get_state(&self, who: &Principal, state_id: Uuid) -> Result<StateRow> {
        let mut conn = self.pool.acquire().await?;
        let row = states::state_get(&mut conn, state_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("state {state_id}")))?;
        can_see(who, row.tenant_id, &format!("state {state_id}"))?;
        Ok(row)
    }

    pub async fn list_states(
        &self,
        who: &Principal,
        tenant_id: Uuid,
        instance_id: Option<Uuid>,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<StateRow>> {
        can_see(who, tenant_id, "tenant")?;
        let mut conn = self.pool.acquire().await?;
        Ok(
            states::state_list(&mut conn, Some(tenant_id), instance_id, false, after, limit)
                .await?,
        )
    }
}
