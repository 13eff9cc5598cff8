//! Membership roles and who may grant or take them away.
use cairn_auth::Role;

use super::Invalid;

/// Parses a user role (`viewer` … `owner`); `service` is not a membership role.
pub fn parse_user_role(field: &str, s: &str) -> Result<Role, Invalid> {
    match s.parse::<Role>() {
        Ok(Role::Service) | Err(_) => Err(Invalid(format!(
            "{field} must be one of viewer, operator, approver, admin, owner"
        ))),
        Ok(role) => Ok(role),
    }
}

/// Why a role change is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantRefused {
    #[error("managing members needs admin")]
    NotAdmin,
    #[error("only an owner may grant, change or remove the owner role")]
    OwnerOnly,
    #[error("nobody may grant a role above their own")]
    AboveOwn,
}

/// May `actor` give `new_role` to a member that currently holds `current` (`None` for a
/// new member)? Admins manage members below owner; only owners touch the owner role; no
/// one grants above their own role.
pub fn may_grant(actor: Role, current: Option<Role>, new_role: Role) -> Result<(), GrantRefused> {
    if !actor.satisfies(Role::Admin) {
        return Err(GrantRefused::NotAdmin);
    }
    if !actor.satisfies(new_role) {
        return Err(GrantRefused::AboveOwn);
    }
    let touches_owner = new_role == Role::Owner || current == Some(Role::Owner);
    if touches_owner && actor != Role::Owner {
        return Err(GrantRefused::OwnerOnly);
    }
    Ok(())
}

/// May `actor` remove a member holding `current`?
pub fn may_remove(actor: Role, current: Role) -> Result<(), GrantRefused> {
    if !actor.satisfies(Role::Admin) {
        return Err(GrantRefused::NotAdmin);
    }
    if current == Role::Owner && actor != Role::Owner {
        return Err(GrantRefused::OwnerOnly);
    }
    Ok(())
}

/// The lower of two user roles (an API token never acts above its owner's current role).
pub fn lower(a: Role, b: Role) -> Role {
    match (a.rank(), b.rank()) {
        (Some(x), Some(y)) if y < x => b,
        _ => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_rules() {
        assert_eq!(
            may_grant(Role::Approver, None, Role::Viewer),
            Err(GrantRefused::NotAdmin)
        );
        assert!(may_grant(Role::Admin, None, Role::Admin).is_ok());
        assert_eq!(
            may_grant(Role::Admin, None, Role::Owner),
            Err(GrantRefused::AboveOwn)
        );
        assert_eq!(
            may_grant(Role::Admin, Some(Role::Owner), Role::Viewer),
            Err(GrantRefused::OwnerOnly)
        );
        assert!(may_grant(Role::Owner, Some(Role::Owner), Role::Admin).is_ok());
        assert_eq!(
            may_remove(Role::Admin, Role::Owner),
            Err(GrantRefused::OwnerOnly)
        );
        assert!(may_remove(Role::Admin, Role::Admin).is_ok());
    }

    #[test]
    fn roles_parse_without_service() {
        assert_eq!(parse_user_role("role", "owner"), Ok(Role::Owner));
        assert!(parse_user_role("role", "service").is_err());
        assert!(parse_user_role("role", "root").is_err());
        assert_eq!(lower(Role::Owner, Role::Viewer), Role::Viewer);
        assert_eq!(lower(Role::Viewer, Role::Admin), Role::Viewer);
    }
}
