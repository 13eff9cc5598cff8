//! Decisions on a deployment: Approve and Reject (an approver, never the requester, bound to
//! the plan-set hash they reviewed), Cancel (at once when no worker runs it, else through
//! the workflow, which cancels its runs via `cairn.runctl`), and the expiry of approvals not
//! given within CAIRN_APPROVAL_TTL.
use cairn_auth::{Principal, Role};
use cairn_contract::{DeploymentId, TenantId};
use cairn_proto::deployments::DeploymentJob;
use cairn_service::access::{require, require_human};
use prost::Message;
use uuid::Uuid;

use super::deployments::DeploymentView;
use super::{App, events};
use crate::domain::{DeploymentStatus, InstanceStatus, StepStatus};
use crate::error::{Error, Result};
use crate::store::deployments::{self as store, DeploymentRow};
use crate::store::runs;
use crate::store::steps;

/// Approve or reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Approve,
    Reject,
}

impl Decision {
    fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approved",
            Decision::Reject => "rejected",
        }
    }
}

fn status_of(d: &DeploymentRow) -> Result<DeploymentStatus> {
    DeploymentStatus::parse(&d.status).map_err(|e| Error::internal(e.to_string()))
}

impl App {
    async fn deployment_row(&self, tenant: TenantId, id: DeploymentId) -> Result<DeploymentRow> {
        let mut conn = self.pool.acquire().await?;
        store::deployment_get(&mut conn, tenant.uuid(), id.uuid())
            .await?
            .ok_or_else(|| Error::not_found(format!("deployment {id}")))
    }

    /// Approves (re-enqueues the job) or rejects (ends it REJECTED) a deployment awaiting
    /// approval of `plan_set_hash`.
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant, deployment_id = %id, decision = decision.as_str()))]
    pub async fn decide(
        &self,
        who: &Principal,
        tenant: TenantId,
        id: DeploymentId,
        decision: Decision,
        plan_set_hash: &str,
        comment: &str,
    ) -> Result<DeploymentView> {
        let what = format!("deployment {id}");
        require(who, tenant, Role::Viewer, &what)?;
        let d = self.deployment_row(tenant, id).await?;
        require_human(
            who,
            tenant,
            Role::Approver,
            &what,
            "approvals are given by a person with the approver role",
        )?;
        if who.subject == d.requested_by {
            // Audited: the refused attempt is an event.
            let deployment_id = d.deployment_id;
            cairn_db::transaction!(&self.pool, |conn| {
                let steps = steps::steps_of(conn, deployment_id).await?;
                events::deployment(conn, &d, &steps, "approval_refused", &who.subject).await?;
                Ok::<_, Error>(())
            })?;
            self.committed();
            tracing::warn!(subject = %who.subject, "the requester tried to decide on their own deployment");
            return Err(Error::permission_denied(format!(
                "{} requested deployment {id} and may not {} it: another approver decides",
                who.subject,
                if decision == Decision::Approve {
                    "approve"
                } else {
                    "reject"
                }
            )));
        }
        let status = status_of(&d)?;
        if status != DeploymentStatus::AwaitingApproval {
            return Err(Error::failed_precondition(format!(
                "deployment {id} is {status}, not awaiting approval"
            )));
        }
        if let Some(since) = d.awaiting_since
            && (chrono::Utc::now() - since).to_std().unwrap_or_default() >= self.flow.approval_ttl
        {
            self.expire(d.deployment_id).await?;
            return Err(Error::failed_precondition(format!(
                "the approval of deployment {id} expired: deploy again to plan and approve"
            )));
        }
        let hash = plan_set_hash.trim();
        if hash != d.plan_set_hash {
            return Err(Error::failed_precondition(format!(
                "the plans of deployment {id} changed since they were reviewed (plan-set hash {:?} is not the current one): review them again (GetPlans)",
                hash
            )));
        }
        let comment = comment.trim().to_owned();
        let summary = match (decision, comment.is_empty()) {
            (Decision::Approve, true) => format!("approved by {}", who.subject),
            (Decision::Approve, false) => format!("approved by {}: {comment}", who.subject),
            (Decision::Reject, true) => format!("rejected by {}", who.subject),
            (Decision::Reject, false) => format!("rejected by {}: {comment}", who.subject),
        };
        let deployment_id = d.deployment_id;
        match decision {
            Decision::Approve => {
                let job = DeploymentJob {
                    deployment_id: deployment_id.to_string(),
                }
                .encode_to_vec();
                let all_runs = self.runs_now(deployment_id).await?;
                let all_steps = self.steps_now(deployment_id).await?;
                let (_, plan_ids) = Self::plan_set_of(&all_steps, &all_runs);
                let from = [DeploymentStatus::AwaitingApproval.as_str()];
                let msg_id = Uuid::now_v7().to_string();
                cairn_db::transaction!(&self.pool, |conn| {
                    let current = store::deployment_by_id(conn, deployment_id).await?;
                    if current.as_ref().map(|c| c.plan_set_hash.as_str()) != Some(hash) {
                        return Err(Error::failed_precondition(format!(
                            "the plans of deployment {id} changed meanwhile: review them again"
                        )));
                    }
                    let Some(row) = store::deployment_move(
                        conn,
                        deployment_id,
                        &from,
                        DeploymentStatus::Queued.as_str(),
                        None,
                    )
                    .await?
                    else {
                        return Err(Error::failed_precondition(format!(
                            "deployment {id} is no longer awaiting approval"
                        )));
                    };
                    store::approval_insert(
                        conn,
                        deployment_id,
                        "approved",
                        &who.subject,
                        hash,
                        &comment,
                    )
                    .await?;
                    runs::runs_approve(conn, &plan_ids, hash).await?;
                    if let Some(a) = all_steps.iter().find(|s| s.kind == "approval") {
                        steps::step_end(
                            conn,
                            a.step_id,
                            StepStatus::Succeeded.as_str(),
                            &summary,
                            "",
                        )
                        .await?;
                    }
                    let steps = steps::steps_of(conn, deployment_id).await?;
                    events::deployment(conn, &row, &steps, "approved", &who.subject).await?;
                    cairn_bus::message_outbox_insert(
                        conn,
                        &cairn_bus::Namespace::root().deployq(),
                        &msg_id,
                        &job,
                    )
                    .await?;
                    Ok::<_, Error>(())
                })?;
                self.committed();
                tracing::info!(plan_set_hash = %hash, "deployment approved");
            }
            Decision::Reject => {
                let d = DeploymentRow {
                    cancel_reason: summary.clone(),
                    ..d
                };
                let deployment_id = d.deployment_id;
                let rejected = cairn_db::transaction!(&self.pool, |conn| {
                    let current = store::deployment_by_id(conn, deployment_id).await?;
                    if current.as_ref().map(|c| c.plan_set_hash.as_str()) != Some(hash) {
                        return Err(Error::failed_precondition(format!(
                            "the plans of deployment {id} changed meanwhile: review them again"
                        )));
                    }
                    store::approval_insert(
                        conn,
                        deployment_id,
                        "rejected",
                        &who.subject,
                        hash,
                        &comment,
                    )
                    .await?;
                    Ok::<_, Error>(())
                });
                rejected?;
                self.finish_decided(&d, DeploymentStatus::Rejected, &summary, &who.subject)
                    .await?;
            }
        }
        let row = self.deployment_row(tenant, id).await?;
        self.view_of(row).await
    }

    /// Ends a parked (or queued) deployment with `status` from outside the workflow.
    async fn finish_decided(
        &self,
        d: &DeploymentRow,
        status: DeploymentStatus,
        summary: &str,
        actor: &str,
    ) -> Result<()> {
        let steps = self.steps_now(d.deployment_id).await?;
        let changed = steps
            .iter()
            .any(|s| (s.kind == "apply" || s.kind == "destroy") && s.status == "succeeded");
        let before = InstanceStatus::parse(&d.instance_status_before)
            .map_err(|e| Error::internal(e.to_string()))?;
        let instance = match d.kind.as_str() {
            "preview" => None,
            _ if changed => Some((InstanceStatus::Failed, None)),
            _ => Some((before, None)),
        };
        let from = [
            DeploymentStatus::Queued.as_str(),
            DeploymentStatus::AwaitingApproval.as_str(),
        ];
        self.finish_with(
            d,
            &from,
            status,
            summary,
            instance,
            StepStatus::Cancelled,
            actor,
        )
        .await
    }

    /// Ends a deployment whose approval expired.
    pub async fn expire(&self, deployment_id: Uuid) -> Result<()> {
        let found = cairn_db::bounded!(&self.pool, |conn| {
            store::deployment_by_id(conn, deployment_id).await
        })?;
        let Some(d) = found else {
            return Ok(());
        };
        if d.status != DeploymentStatus::AwaitingApproval.as_str() {
            return Ok(());
        }
        let summary = format!(
            "the approval was not given within {}s: deploy again to plan and approve",
            self.flow.approval_ttl.as_secs()
        );
        let from = [DeploymentStatus::AwaitingApproval.as_str()];
        let steps = self.steps_now(d.deployment_id).await?;
        let changed = steps
            .iter()
            .any(|s| (s.kind == "apply" || s.kind == "destroy") && s.status == "succeeded");
        let before = InstanceStatus::parse(&d.instance_status_before)
            .map_err(|e| Error::internal(e.to_string()))?;
        let instance = Some((
            if changed {
                InstanceStatus::Failed
            } else {
                before
            },
            None,
        ));
        self.finish_with(
            &d,
            &from,
            DeploymentStatus::Expired,
            &summary,
            instance,
            StepStatus::Cancelled,
            "svc:deployments",
        )
        .await
    }

    /// Expires every deployment whose approval is overdue; returns how many. The search is
    /// given up after `cairn_db::BACKGROUND_LIMIT` (a connection gone silent is closed).
    pub async fn expire_overdue(&self) -> Result<usize> {
        let ttl = self.flow.approval_ttl.as_secs_f64();
        let ids = cairn_db::bounded!(&self.pool, |conn| {
            store::deployments_expired(conn, ttl).await
        })?;
        for id in &ids {
            self.expire(*id).await?;
        }
        Ok(ids.len())
    }

    /// Refreshes the gauges of active deployments and waiting approvals from the database
    /// (non-preview deployments, through the index of the active ones); the read is given up
    /// after `cairn_db::BACKGROUND_LIMIT`.
    pub async fn refresh_gauges(&self) -> Result<()> {
        let counts = cairn_db::bounded!(&self.pool, |conn| {
            store::deployments_active_counts(conn).await
        })?;
        let count = |status: DeploymentStatus| {
            let n = counts
                .iter()
                .find(|(s, _)| s == status.as_str())
                .map_or(0, |(_, n)| *n);
            #[allow(clippy::cast_precision_loss, reason = "counts far below 2^52")]
            let n = n as f64;
            n
        };
        for status in [
            DeploymentStatus::Queued,
            DeploymentStatus::Running,
            DeploymentStatus::AwaitingApproval,
        ] {
            metrics::gauge!(crate::metrics::ACTIVE, "status" => status.as_str()).set(count(status));
        }
        metrics::gauge!(crate::metrics::APPROVALS_WAITING)
            .set(count(DeploymentStatus::AwaitingApproval));
        Ok(())
    }

    /// Cancels a deployment: at once when no worker runs it (queued or awaiting approval);
    /// otherwise the workflow stops its runs (`cairn.runctl`) and ends it CANCELLED.
    /// Cancelling a cancelled deployment returns it.
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant, deployment_id = %id))]
    pub async fn cancel_deployment(
        &self,
        who: &Principal,
        tenant: TenantId,
        id: DeploymentId,
        reason: &str,
    ) -> Result<DeploymentView> {
        let what = format!("deployment {id}");
        require(who, tenant, Role::Viewer, &what)?;
        let current = self.deployment_row(tenant, id).await?;
        require(who, tenant, Role::Operator, &what)?;
        let status = status_of(&current)?;
        if status == DeploymentStatus::Cancelled {
            return self.view_of(current).await;
        }
        if !status.is_active() {
            return Err(Error::failed_precondition(format!(
                "deployment {id} already ended {status}"
            )));
        }
        let reason = reason.trim();
        let summary = if reason.is_empty() {
            format!("cancelled by {}", who.subject)
        } else {
            format!("cancelled by {}: {reason}", who.subject)
        };
        let mut conn = self.pool.acquire().await?;
        let Some(d) =
            store::deployment_request_cancel(&mut conn, current.deployment_id, &summary).await?
        else {
            drop(conn);
            let now = self.deployment_row(tenant, id).await?;
            return if now.status == DeploymentStatus::Cancelled.as_str() {
                self.view_of(now).await
            } else {
                Err(Error::failed_precondition(format!(
                    "deployment {id} already ended {}",
                    now.status
                )))
            };
        };
        drop(conn);
        let d = DeploymentRow {
            cancel_reason: if d.cancel_reason.is_empty() {
                summary.clone()
            } else {
                d.cancel_reason.clone()
            },
            ..d
        };
        // Nothing runs a queued or parked deployment: end it now (compare-and-set; a
        // worker that took it meanwhile sees the request instead).
        self.finish_decided(
            &d,
            DeploymentStatus::Cancelled,
            &d.cancel_reason,
            &who.subject,
        )
        .await?;
        let mut conn = self.pool.acquire().await?;
        let in_flight = runs::runs_in_flight(&mut conn, d.deployment_id).await?;
        drop(conn);
        for run_id in in_flight {
            self.send_cancel(run_id, &d.cancel_reason).await;
        }
        let row = self.deployment_row(tenant, id).await?;
        tracing::info!(status = %row.status, "cancel requested");
        self.view_of(row).await
    }
}
