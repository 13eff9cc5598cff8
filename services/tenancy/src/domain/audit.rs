//! Audit entries and the filter used to query them.
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Who wrote an entry: tenancy itself (in the transaction of the change) or the consumer
/// of `cairn.events.>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Tenancy,
    Events,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Tenancy => "tenancy",
            Source::Events => "events",
        }
    }
}

/// One entry to append.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    /// The event id; appending the same id twice records it once.
    pub entry_id: Uuid,
    pub tenant_id: Option<Uuid>,
    pub actor: String,
    pub object_type: String,
    pub object_id: String,
    /// The event, e.g. `created`; the stored action is `<object_type>.<event>`.
    pub event: String,
    pub source: Source,
    /// Ids and names only: never a credential, password or token.
    pub detail: serde_json::Value,
    pub occurred_at: DateTime<Utc>,
}

impl AuditRecord {
    pub fn action(&self) -> String {
        format!("{}.{}", self.object_type, self.event)
    }
}

/// Which tenants' entries a query may see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenantScope {
    /// One tenant's entries.
    Tenant(Uuid),
    /// Every entry (platform admins).
    All,
}

/// A query over the audit log. Entries come newest first; `before_seq` continues a page.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditFilter {
    pub scope: TenantScope,
    pub actor: Option<String>,
    pub object_type: Option<String>,
    pub object_id: Option<String>,
    pub action: Option<String>,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    pub before_seq: Option<i64>,
    pub limit: i64,
}
