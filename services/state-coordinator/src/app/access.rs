//! The coordinator's own access checks. Tenant scoping and role checks are
//! `cairn_service::access` (another tenant's record is NOT_FOUND, never PERMISSION_DENIED).
use cairn_auth::{Principal, Role};
use uuid::Uuid;

use crate::error::{Error, Result};

/// Platform-wide operations (VerifyAll, after-restore mode) need this scope with admin.
pub use cairn_auth::PLATFORM_ADMIN_SCOPE;

/// Admin of the tenant; services do not qualify (recovery is a human decision).
pub fn require_admin(principal: &Principal, tenant: impl Into<Uuid>, what: &str) -> Result<()> {
    Ok(cairn_service::access::require_human(
        principal,
        tenant,
        Role::Admin,
        what,
        "recovery and force-unlock need a human admin",
    )?)
}

pub fn require_platform_admin(principal: &Principal) -> Result<()> {
    if principal.is_platform_admin() {
        Ok(())
    } else {
        Err(Error::permission_denied(format!(
            "needs an admin with scope {PLATFORM_ADMIN_SCOPE}"
        )))
    }
}
