//! Pure values and rules of the service: names and references, instance and deployment
//! statuses, parameters, the step list a deployment request creates, the instance's
//! outputs and its resources' drift status. No gRPC, SQL or NATS here.

pub mod deployment;
pub mod drift;
pub mod instance;
pub mod outputs;
pub mod steps;
pub mod workflow;

pub use deployment::{DeploymentKind, DeploymentStatus, StepKind, StepStatus};
pub use instance::{InstanceName, InstanceStatus, Parameters, Ref};
pub use steps::{Change, NewStep, ResourceSpec, plan_steps};

/// A stored value that is not one of its type's names: the database and this code
/// disagree, a bug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {value:?}")]
pub struct UnknownName {
    pub what: &'static str,
    pub value: String,
}

/// Defines a string-named enum with `as_str` and `parse`.
macro_rules! named_enum {
    ($(#[$doc:meta])* $name:ident ($what:literal) { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            pub fn parse(s: &str) -> Result<Self, $crate::domain::UnknownName> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err($crate::domain::UnknownName { what: $what, value: s.to_owned() }),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use named_enum;
