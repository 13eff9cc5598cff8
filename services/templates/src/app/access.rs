//! Who may do what: tenant scoping and role checks on loaded records.
use cairn_auth::{Principal, Role};
use uuid::Uuid;

use crate::error::{Error, Result};

/// A principal may see a record of `tenant` if it is a service or a member of that tenant.
/// Another tenant's record is NOT_FOUND, never PERMISSION_DENIED.
pub fn can_see(principal: &Principal, tenant: Uuid, what: &str) -> Result<()> {
    if principal.is_service() || principal.tenant_id == Some(tenant) {
        Ok(())
    } else {
        Err(Error::NotFound(what.to_owned()))
    }
}

/// Tenant-visible and at least `role` (services pass).
pub fn require(principal: &Principal, tenant: Uuid, role: Role, what: &str) -> Result<()> {
    can_see(principal, tenant, what)?;
    if principal.is_service() {
        return Ok(());
    }
    principal.require_role(role).map_err(Error::from)
}

/// Any authenticated principal with at least viewer (or a service).
pub fn require_any(principal: &Principal) -> Result<()> {
    if principal.is_service() {
        return Ok(());
    }
    principal.require_role(Role::Viewer).map_err(Error::from)
}
