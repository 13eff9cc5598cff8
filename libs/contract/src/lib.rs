//! The contract of a run, shared by the state coordinator, the runners and the workflow, so
//! a rule lives once: whichever part asks "is this production?" or "why was this refused?"
//! gets the same answer. Pure: no tonic, prost, SQL or I/O (libs/sdk re-exports it).
//!
//! - [`ids`]: one id type per entity (tenant, state, run, attempt, instance, …), parsed once
//!   at the edge.
//! - [`environment`]: the canonical environment name and the one production rule.
//! - [`run_kind`]: what a run does and the rules that follow from it (read-only token,
//!   changes state, interrupted on retry).
//! - [`refusal`]: the coordinator's machine-readable refusal reasons and their wire codes.

pub mod environment;
pub mod ids;
pub mod refusal;
pub mod run_kind;

pub use environment::{Environment, InvalidEnvironment};
pub use ids::{
    AttemptId, DeploymentId, InstanceId, InvalidId, RunId, SnapshotId, StateId, TargetId,
    TemplateId, TenantId, UserId, parse_optional,
};
pub use refusal::{REASON_METADATA, RefusalReason};
pub use run_kind::{RunKind, UnknownKind};
