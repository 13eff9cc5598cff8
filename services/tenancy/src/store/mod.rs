//! All SQL of tenancy, one file per resource. Functions are named resource-first and take
//! `&mut PgConnection` so the app layer composes them inside one transaction. Every query on
//! a tenant-owned table filters by `tenant_id`. The store never decides policy.

pub mod audit;
pub mod service_accounts;
pub mod target_validations;
pub mod targets;
pub mod tenants;
pub mod tokens;
pub mod users;
pub mod webhook_deliveries;
pub mod webhooks;
