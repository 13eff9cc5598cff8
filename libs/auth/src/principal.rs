//! The authenticated caller of a request and the checks handlers run against it.

use uuid::Uuid;

use crate::claims::Claims;
use crate::error::AuthError;
use crate::role::Role;

/// Who is calling, taken from a verified access token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub subject: String,
    /// The user's tenant; `None` for a service principal.
    pub tenant_id: Option<Uuid>,
    pub role: Role,
    pub scopes: Vec<String>,
    /// The token's `jti`.
    pub token_id: String,
}

impl Principal {
    /// Builds a principal from claims, checking the rules that do not depend on time.
    pub fn from_claims(claims: Claims) -> Result<Self, AuthError> {
        let tenant_id = claims.check_shape()?;
        Ok(Principal {
            subject: claims.sub,
            tenant_id,
            role: claims.role,
            scopes: claims.scopes,
            token_id: claims.jti,
        })
    }

    /// The principal of claims that passed [`Claims::check_shape`], which gave `tenant_id`.
    pub(crate) fn from_verified(claims: &Claims, tenant_id: Option<Uuid>) -> Self {
        Principal {
            subject: claims.sub.clone(),
            tenant_id,
            role: claims.role,
            scopes: claims.scopes.clone(),
            token_id: claims.jti.clone(),
        }
    }

    /// True for a service principal.
    pub fn is_service(&self) -> bool {
        self.role.is_service()
    }

    /// Requires a user role of at least `min` (or, if `min` is `Service`, a service).
    /// A service principal never satisfies a user role.
    pub fn require_role(&self, min: Role) -> Result<(), AuthError> {
        if self.role.satisfies(min) {
            Ok(())
        } else {
            Err(AuthError::InsufficientRole {
                required: min,
                actual: self.role,
            })
        }
    }

    /// Requires a service principal.
    pub fn require_service(&self) -> Result<(), AuthError> {
        if self.is_service() {
            Ok(())
        } else {
            Err(AuthError::ServiceRequired)
        }
    }

    /// Requires that a user principal belongs to `tenant`. Services act across tenants and
    /// pass. Another tenant's caller gets an error that maps to NOT_FOUND, so the existence
    /// of other tenants' objects is not revealed.
    pub fn require_tenant(&self, tenant: Uuid) -> Result<(), AuthError> {
        match (self.role, self.tenant_id) {
            (Role::Service, _) => Ok(()),
            (
                Role::Viewer | Role::Operator | Role::Approver | Role::Admin | Role::Owner,
                Some(own),
            ) if own == tenant => Ok(()),
            (Role::Viewer | Role::Operator | Role::Approver | Role::Admin | Role::Owner, _) => {
                Err(AuthError::OtherTenant)
            }
        }
    }

    /// Whether the token granted `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }

    /// A platform admin: a user (never a service) of at least admin whose token carries
    /// [`PLATFORM_ADMIN_SCOPE`].
    pub fn is_platform_admin(&self) -> bool {
        !self.is_service()
            && self.role.satisfies(Role::Admin)
            && self.has_scope(PLATFORM_ADMIN_SCOPE)
    }
}

/// The scope that makes an admin a platform admin (operators of the whole installation).
pub const PLATFORM_ADMIN_SCOPE: &str = "platform:admin";
