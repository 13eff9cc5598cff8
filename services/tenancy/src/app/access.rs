//! Who may do what: tenant scoping (another tenant's objects are NOT_FOUND), role checks and
//! the RPCs open to service principals.
use cairn_auth::{Principal, Role};
use uuid::Uuid;

use crate::domain::ids::UserId;
use crate::error::{Error, Result};

/// Platform-wide operations (creating tenants, reading every tenant's audit log) need an
/// admin or owner whose token carries this scope.
pub use cairn_auth::PLATFORM_ADMIN_SCOPE;

/// A user of `tenant` with at least `min`. Services are refused (the RPC is not marked for
/// services); another tenant's user gets NOT_FOUND for `what`.
pub fn member(principal: &Principal, tenant: Uuid, min: Role, what: &str) -> Result<()> {
    if principal.is_service() {
        return Err(Error::PermissionDenied(
            "service principals may not call this".to_owned(),
        ));
    }
    if principal.tenant_id != Some(tenant) {
        return Err(Error::NotFound(what.to_owned()));
    }
    principal.require_role(min).map_err(Error::from)
}

/// [`member`], or any service principal (for the RPCs marked for services).
pub fn member_or_service(principal: &Principal, tenant: Uuid, min: Role, what: &str) -> Result<()> {
    if principal.is_service() {
        return Ok(());
    }
    member(principal, tenant, min, what)
}

/// A platform admin: a user of at least admin with [`PLATFORM_ADMIN_SCOPE`].
pub fn is_platform_admin(principal: &Principal) -> bool {
    principal.is_platform_admin()
}

pub fn require_platform_admin(principal: &Principal) -> Result<()> {
    if is_platform_admin(principal) {
        Ok(())
    } else {
        Err(Error::PermissionDenied(format!(
            "needs an admin with scope {PLATFORM_ADMIN_SCOPE}"
        )))
    }
}

/// The calling user's id (user principals' subject is their user id).
pub fn user_id(principal: &Principal) -> Result<UserId> {
    if principal.is_service() {
        return Err(Error::PermissionDenied(
            "service principals may not call this".to_owned(),
        ));
    }
    UserId::parse("subject", &principal.subject)
        .map_err(|_| Error::PermissionDenied("the token's subject is not a user".to_owned()))
}
