//! States: idempotent creation on key, reads and listing scoped to the caller's tenant.
use cairn_auth::{Principal, Role};
use cairn_contract::{InstanceId, StateId, TenantId};
use cairn_service::access::{can_see, require};

use super::App;
use crate::domain::state_key::state_key;
use crate::error::{Error, Result};
use crate::store::states::{self, StateRow};

impl App {
    pub async fn create_state(
        &self,
        who: &Principal,
        tenant_id: TenantId,
        instance_id: InstanceId,
        physical_name: &str,
    ) -> Result<(StateRow, bool)> {
        require(who, tenant_id, Role::Operator, "tenant")?;
        let key = state_key(physical_name).map_err(|e| Error::invalid_argument(e.to_string()))?;
        let mut conn = self.pool.acquire().await?;
        let (row, created) = states::state_create(
            &mut conn,
            StateId::new().uuid(),
            tenant_id.uuid(),
            instance_id.uuid(),
            &key,
        )
        .await?;
        if row.tenant_id != tenant_id.uuid() || row.instance_id != instance_id.uuid() {
            // The key belongs to someone else: do not reveal whose.
            return Err(Error::failed_precondition(format!(
                "state key {key} is owned by another instance"
            )));
        }
        if created {
            self.prefetch_config_key(row.tenant_id, row.state_id);
        }
        Ok((row, created))
    }

    pub async fn get_state(&self, who: &Principal, state_id: StateId) -> Result<StateRow> {
        let mut conn = self.pool.acquire().await?;
        let row = states::state_get(&mut conn, state_id.uuid())
            .await?
            .ok_or_else(|| Error::not_found(format!("state {state_id}")))?;
        can_see(who, row.tenant_id, &format!("state {state_id}"))?;
        Ok(row)
    }

    pub async fn list_states(
        &self,
        who: &Principal,
        tenant_id: TenantId,
        instance_id: Option<InstanceId>,
        after: Option<StateId>,
        limit: i64,
    ) -> Result<Vec<StateRow>> {
        can_see(who, tenant_id, "tenant")?;
        let mut conn = self.pool.acquire().await?;
        Ok(states::state_list(
            &mut conn,
            Some(tenant_id.uuid()),
            instance_id.map(InstanceId::uuid),
            false,
            after.map(StateId::uuid),
            limit,
        )
        .await?)
    }
}
