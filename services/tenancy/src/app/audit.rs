//! Reading the audit log: a tenant's admins see its entries; platform admins may read all.
use cairn_auth::{Principal, Role};

use super::App;
use super::access::{self, is_platform_admin};
use crate::domain::audit::{AuditFilter, TenantScope};
use crate::error::Result;
use crate::store;
use crate::store::audit::AuditRow;

impl App {
    pub async fn list_audit(&self, who: &Principal, filter: AuditFilter) -> Result<Vec<AuditRow>> {
        match filter.scope {
            TenantScope::Tenant(tenant) => {
                if !is_platform_admin(who) {
                    access::member(who, tenant, Role::Admin, "tenant")?;
                }
            }
            TenantScope::All => access::require_platform_admin(who)?,
        }
        let mut conn = self.pool.acquire().await?;
        Ok(store::audit::audit_list(&mut conn, &filter).await?)
    }
}
