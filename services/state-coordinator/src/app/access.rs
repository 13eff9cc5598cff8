//! Who may do what: tenant scoping and role checks on loaded records.
use cairn_auth::{Principal, Role};
use uuid::Uuid;

use crate::error::{Error, Result};

/// Platform-wide operations (VerifyAll, after-restore mode) need this scope with admin.
pub use cairn_auth::PLATFORM_ADMIN_SCOPE;

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

/// Admin of the tenant; services do not qualify (recovery is a human decision).
pub fn require_admin(principal: &Principal, tenant: Uuid, what: &str) -> Result<()> {
    can_see(principal, tenant, what)?;
    if principal.is_service() {
        return Err(Error::PermissionDenied(
            "recovery and force-unlock need a human admin".to_owned(),
        ));
    }
    principal.require_role(Role::Admin).map_err(Error::from)
}

pub fn require_service(principal: &Principal) -> Result<()> {
    principal.require_service().map_err(Error::from)
}

pub fn require_platform_admin(principal: &Principal) -> Result<()> {
    if principal.is_platform_admin() {
        Ok(())
    } else {
        Err(Error::PermissionDenied(format!(
            "needs an admin with scope {PLATFORM_ADMIN_SCOPE}"
        )))
    }
}
