//! The `target_validations` table: the last validation of each target. A request replaces
//! the row (a new validation id, pending); an answer is written only by compare-and-set on
//! the row's validation id while it is pending, so a late answer to an older request, or a
//! second copy of an answer, changes nothing.
use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgConnection};
use uuid::Uuid;

use crate::domain::validation::{ValidationOutcome, ValidationStatus};

/// A target's last validation.
#[derive(Debug, Clone, FromRow)]
pub struct ValidationRow {
    pub validation_id: Uuid,
    pub status: String,
    pub account_id: Option<String>,
    pub arn: Option<String>,
    pub error: Option<String>,
    pub transient: bool,
    pub runner_instance: Option<String>,
    pub requested_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// The validation columns of a target read with `LEFT JOIN target_validations v` (all null
/// when it has none), named as [`JOINED_COLS`] selects them.
#[derive(Debug, Clone, Default, FromRow)]
pub struct JoinedValidation {
    pub validation_id: Option<Uuid>,
    pub validation_status: Option<String>,
    pub validation_account_id: Option<String>,
    pub validation_arn: Option<String>,
    pub validation_error: Option<String>,
    pub validation_transient: Option<bool>,
    pub validation_runner_instance: Option<String>,
    pub validation_requested_at: Option<DateTime<Utc>>,
    pub validation_finished_at: Option<DateTime<Utc>>,
}

/// What [`JoinedValidation`] reads, from the alias `v`.
pub const JOINED_COLS: &str = "v.validation_id, v.status AS validation_status, \
     v.account_id AS validation_account_id, v.arn AS validation_arn, \
     v.error AS validation_error, v.transient AS validation_transient, \
     v.runner_instance AS validation_runner_instance, \
     v.requested_at AS validation_requested_at, v.finished_at AS validation_finished_at";

impl JoinedValidation {
    /// The validation, when the target has one.
    pub fn row(&self) -> Option<ValidationRow> {
        Some(ValidationRow {
            validation_id: self.validation_id?,
            status: self.validation_status.clone()?,
            account_id: self.validation_account_id.clone(),
            arn: self.validation_arn.clone(),
            error: self.validation_error.clone(),
            transient: self.validation_transient.unwrap_or(false),
            runner_instance: self.validation_runner_instance.clone(),
            requested_at: self.validation_requested_at?,
            finished_at: self.validation_finished_at,
        })
    }
}

const COLS: &str = "validation_id, status, account_id, arn, error, transient, runner_instance, \
                    requested_at, finished_at";

/// Records a new pending validation of the target, replacing the one before.
pub async fn validation_request(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    target_id: Uuid,
    validation_id: Uuid,
) -> sqlx::Result<ValidationRow> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO target_validations (target_id, tenant_id, validation_id, status)
         VALUES ($1, $2, $3, 'pending')
         ON CONFLICT (target_id) DO UPDATE SET
             validation_id = EXCLUDED.validation_id, status = 'pending', account_id = NULL,
             arn = NULL, error = NULL, transient = false, runner_instance = NULL,
             requested_at = now(), finished_at = NULL
         WHERE target_validations.tenant_id = EXCLUDED.tenant_id
         RETURNING {COLS}"
    )))
    .bind(target_id)
    .bind(tenant_id)
    .bind(validation_id)
    .fetch_one(conn)
    .await
}

/// Stores the answer to `validation_id` if it is still the target's pending validation;
/// false when it is not (superseded by a newer request, already answered, or the target
/// gone or another tenant's).
pub async fn validation_finish(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    target_id: Uuid,
    validation_id: Uuid,
    outcome: &ValidationOutcome,
) -> sqlx::Result<bool> {
    let blank = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let updated = sqlx::query(
        "UPDATE target_validations SET status = $4, account_id = $5, arn = $6, error = $7,
                transient = $8, runner_instance = $9, finished_at = now()
         WHERE tenant_id = $1 AND target_id = $2 AND validation_id = $3 AND status = 'pending'",
    )
    .bind(tenant_id)
    .bind(target_id)
    .bind(validation_id)
    .bind(outcome.status().as_str())
    .bind(blank(&outcome.account_id))
    .bind(blank(&outcome.arn))
    .bind(blank(&outcome.error))
    .bind(outcome.transient && !outcome.ok)
    .bind(blank(&outcome.runner_instance))
    .execute(conn)
    .await?
    .rows_affected();
    Ok(updated == 1)
}

/// Forgets the target's last validation (its settings changed: it no longer describes it).
pub async fn validation_clear(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    target_id: Uuid,
) -> sqlx::Result<()> {
    sqlx::query("DELETE FROM target_validations WHERE tenant_id = $1 AND target_id = $2")
        .bind(tenant_id)
        .bind(target_id)
        .execute(conn)
        .await?;
    Ok(())
}

impl ValidationRow {
    /// The stored status.
    pub fn status(&self) -> Option<ValidationStatus> {
        ValidationStatus::parse(&self.status)
    }
}
