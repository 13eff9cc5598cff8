//! Pure types and rules of the state coordinator: no SQL, gRPC, AWS or HTTP here.

pub mod ids;
pub mod run;
pub mod token;
pub mod write_rules;

pub use ids::{AttemptId, RunId, StateId, TenantId};
pub use run::{ExecutionContext, Outcome, RunKind};
pub use token::RunToken;
