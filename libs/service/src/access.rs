//! Who may touch a loaded record: the tenant scoping and role checks every service makes
//! in its app layer. Another tenant's record is NOT_FOUND (named after what was asked for),
//! never PERMISSION_DENIED, so nothing about other tenants leaks.
use cairn_auth::{Principal, Role};
use uuid::Uuid;

use crate::error::BaseError;

/// A principal may see a record of `tenant` if it is a service or a member of that tenant.
pub fn can_see(
    principal: &Principal,
    tenant: impl Into<Uuid>,
    what: &str,
) -> Result<(), BaseError> {
    if principal.is_service() || principal.tenant_id == Some(tenant.into()) {
        Ok(())
    } else {
        Err(BaseError::NotFound(what.to_owned()))
    }
}

/// Tenant-visible and at least `role` (services pass).
pub fn require(
    principal: &Principal,
    tenant: impl Into<Uuid>,
    role: Role,
    what: &str,
) -> Result<(), BaseError> {
    can_see(principal, tenant, what)?;
    if principal.is_service() {
        return Ok(());
    }
    Ok(principal.require_role(role)?)
}

/// Any authenticated user of at least viewer, or a service.
pub fn require_any(principal: &Principal) -> Result<(), BaseError> {
    if principal.is_service() {
        return Ok(());
    }
    Ok(principal.require_role(Role::Viewer)?)
}

/// Only services (the run lifecycle, cross-service reads).
pub fn require_service(principal: &Principal) -> Result<(), BaseError> {
    Ok(principal.require_service()?)
}

/// A human of at least `role` in `tenant`; services do not qualify (`why` says what needs
/// a human, e.g. "recovery and force-unlock need a human admin").
pub fn require_human(
    principal: &Principal,
    tenant: impl Into<Uuid>,
    role: Role,
    what: &str,
    why: &str,
) -> Result<(), BaseError> {
    can_see(principal, tenant, what)?;
    if principal.is_service() {
        return Err(BaseError::PermissionDenied(why.to_owned()));
    }
    Ok(principal.require_role(role)?)
}
