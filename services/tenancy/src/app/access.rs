//! Who may do what in tenancy, on top of the shared checks of `cairn_service::access`:
//! membership (services refused), membership or a service (the RPCs marked for services),
//! and the platform admin.
use cairn_auth::{Principal, Role};
use cairn_service::access;
use uuid::Uuid;

use crate::domain::ids::UserId;
use crate::error::{Error, Result};

/// Platform-wide operations (creating tenants, reading every tenant's audit log) need an
/// admin or owner whose token carries this scope.
pub use cairn_auth::PLATFORM_ADMIN_SCOPE;

const SERVICES_REFUSED: &str = "service principals may not call this";

/// A user of `tenant` with at least `min`. Services are refused (the RPC is not marked for
/// services); another tenant's user gets NOT_FOUND for `what`.
pub fn member(principal: &Principal, tenant: impl Into<Uuid>, min: Role, what: &str) -> Result<()> {
    Ok(access::require_human(
        principal,
        tenant,
        min,
        what,
        SERVICES_REFUSED,
    )?)
}

/// [`member`], or any service principal (for the RPCs marked for services).
pub fn member_or_service(
    principal: &Principal,
    tenant: impl Into<Uuid>,
    min: Role,
    what: &str,
) -> Result<()> {
    Ok(access::require(principal, tenant, min, what)?)
}

/// A platform admin: a user of at least admin with [`PLATFORM_ADMIN_SCOPE`].
pub fn is_platform_admin(principal: &Principal) -> bool {
    principal.is_platform_admin()
}

pub fn require_platform_admin(principal: &Principal) -> Result<()> {
    if is_platform_admin(principal) {
        Ok(())
    } else {
        Err(Error::permission_denied(format!(
            "needs an admin with scope {PLATFORM_ADMIN_SCOPE}"
        )))
    }
}

/// The calling user's id (user principals' subject is their user id).
pub fn user_id(principal: &Principal) -> Result<UserId> {
    if principal.is_service() {
        return Err(Error::permission_denied(SERVICES_REFUSED));
    }
    UserId::parse("subject", &principal.subject)
        .map_err(|_| Error::permission_denied("the token's subject is not a user"))
}
