//! The object keys of everything the coordinator stores, in one place. Every id in a key is
//! a hyphenated UUID (`Display`), never `simple()`: a path component of 32 hex digits is
//! what the file store names a version by, so no store accepts it in a new key
//! (`cairn_storage::validate_new_key`).
use uuid::Uuid;

/// A state generation: under the state key, the target generation and the pending write's
/// id (`<key>/g<generation, 12 digits>-<32 hex>`; the `g…-` prefix keeps the component from
/// looking like a version id).
pub fn generation_key(state_key: &str, generation: u64, pending_id: Uuid) -> String {
    format!("{state_key}/g{generation:012}-{}", pending_id.simple())
}

/// A saved plan (deleted once an apply took it, or at its TTL).
pub fn plan_key(state_id: Uuid, plan_id: Uuid) -> String {
    format!("plans/{state_id}/{plan_id}")
}

/// The masked plan JSON of a saved plan, kept after the plan for the review history.
pub fn masked_plan_key(state_id: Uuid, plan_id: Uuid) -> String {
    format!("masked-plans/{state_id}/{plan_id}")
}

/// A quarantined `errored.tfstate`.
pub fn quarantine_key(state_id: Uuid, quarantine_id: Uuid) -> String {
    format!("quarantine/{state_id}/{quarantine_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_a_valid_new_key_on_every_store() {
        let (state, id) = (Uuid::now_v7(), Uuid::now_v7());
        let keys = [
            generation_key("cairn/web.tfstate", 7, id),
            plan_key(state, id),
            masked_plan_key(state, id),
            quarantine_key(state, id),
        ];
        for key in &keys {
            assert!(cairn_storage::validate_new_key(key).is_ok(), "{key}");
        }
        assert_eq!(keys[1], format!("plans/{state}/{id}"));
        assert!(keys[1].ends_with(&id.hyphenated().to_string()));
        // What the plan and quarantine keys used to be is refused.
        assert!(
            cairn_storage::validate_new_key(&format!("plans/{state}/{}", id.simple())).is_err()
        );
    }
}
