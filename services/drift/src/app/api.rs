//! The API's use cases with their authorization: viewers read an instance's drift and
//! findings; operators trigger scans and set ignore rules. An instance of another tenant
//! (or one drift has never heard of) is NOT_FOUND.
use cairn_auth::{Principal, Role};
use cairn_service::access;
use cairn_tofu::IgnoreRule;
use uuid::Uuid;

use super::{App, page_size};
use crate::error::{Error, Result};
use crate::store::findings::{self, FindingRow};
use crate::store::tracking::{self, TrackedRow};

/// Most ignore rules an instance may have.
pub const MAX_RULES: usize = 100;

pub struct StatusView {
    pub resources: Vec<TrackedRow>,
    pub ignore_rules: Vec<String>,
}

pub struct FindingsPage {
    pub findings: Vec<FindingRow>,
    pub next: Option<Uuid>,
}

fn what(instance_id: Uuid) -> String {
    format!("instance {instance_id}")
}

impl App {
    async fn known_instance(&self, tenant: Uuid, instance: Uuid) -> Result<Vec<String>> {
        let mut conn = self.pool.acquire().await?;
        let Some((_, rules)) = tracking::instance_get(&mut conn, tenant, instance).await? else {
            return Err(Error::not_found(what(instance)));
        };
        Ok(rules)
    }

    pub async fn drift_status(
        &self,
        who: &Principal,
        tenant: Uuid,
        instance: Uuid,
    ) -> Result<StatusView> {
        access::require(who, tenant, Role::Viewer, &what(instance))?;
        let ignore_rules = self.known_instance(tenant, instance).await?;
        let mut conn = self.pool.acquire().await?;
        let resources = tracking::tracked_of_instance(&mut conn, tenant, instance).await?;
        Ok(StatusView {
            resources,
            ignore_rules,
        })
    }

    pub async fn list_findings(
        &self,
        who: &Principal,
        tenant: Uuid,
        instance: Option<Uuid>,
        status: Option<&str>,
        page: u32,
        after: Option<Uuid>,
    ) -> Result<FindingsPage> {
        access::require(who, tenant, Role::Viewer, &format!("tenant {tenant}"))?;
        if let Some(status) = status
            && !matches!(status, "open" | "resolved")
        {
            return Err(Error::invalid_argument(format!(
                "status must be open or resolved, not {status:?}"
            )));
        }
        if let Some(instance) = instance {
            self.known_instance(tenant, instance).await?;
        }
        let limit = page_size(page);
        let mut conn = self.pool.acquire().await?;
        let mut rows =
            findings::findings_page(&mut conn, tenant, instance, status, after, limit + 1).await?;
        let next = if rows.len() as i64 > limit {
            rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
            rows.last().map(|r| r.finding_id)
        } else {
            None
        };
        Ok(FindingsPage {
            findings: rows,
            next,
        })
    }

    /// Makes the instance's resources (or one) due now; the scheduler picks them up at once
    /// within the per-target bound. Returns how many were queued.
    pub async fn trigger_scan(
        &self,
        who: &Principal,
        tenant: Uuid,
        instance: Uuid,
        resource: Option<&str>,
    ) -> Result<u64> {
        access::require(who, tenant, Role::Operator, &what(instance))?;
        self.known_instance(tenant, instance).await?;
        let mut conn = self.pool.acquire().await?;
        let queued = tracking::tracked_due_now(&mut conn, tenant, instance, resource).await?;
        drop(conn);
        self.scheduler_notify.notify_one();
        tracing::info!(%instance, queued, by = %who.subject, "drift scan triggered");
        Ok(queued)
    }

    /// Replaces the instance's ignore rules (checked, trimmed, deduplicated); applied from
    /// the next scan on.
    pub async fn set_ignore_rules(
        &self,
        who: &Principal,
        tenant: Uuid,
        instance: Uuid,
        rules: &[String],
    ) -> Result<Vec<String>> {
        access::require(who, tenant, Role::Operator, &what(instance))?;
        if rules.len() > MAX_RULES {
            return Err(Error::invalid_argument(format!(
                "at most {MAX_RULES} ignore rules per instance"
            )));
        }
        let mut parsed = Vec::new();
        for rule in rules {
            let rule =
                IgnoreRule::parse(rule).map_err(|e| Error::invalid_argument(e.to_string()))?;
            let text = rule.as_str().to_owned();
            if !parsed.contains(&text) {
                parsed.push(text);
            }
        }
        let mut conn = self.pool.acquire().await?;
        if !tracking::ignore_rules_set(&mut conn, tenant, instance, &parsed).await? {
            return Err(Error::not_found(what(instance)));
        }
        tracing::info!(%instance, rules = parsed.len(), by = %who.subject, "ignore rules set");
        Ok(parsed)
    }
}
