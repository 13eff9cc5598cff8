//! Generated gRPC and event contracts from proto/ (tonic + prost). Nothing hand-written.
#![allow(clippy::all, missing_docs)]

pub mod cairn {
    pub mod state {
        pub mod v1 {
            tonic::include_proto!("cairn.state.v1");
        }
    }
    pub mod events {
        pub mod v1 {
            tonic::include_proto!("cairn.events.v1");
        }
    }
    pub mod tenancy {
        pub mod v1 {
            tonic::include_proto!("cairn.tenancy.v1");
        }
    }
    pub mod templates {
        pub mod v1 {
            tonic::include_proto!("cairn.templates.v1");
        }
    }
    pub mod runner {
        pub mod v1 {
            tonic::include_proto!("cairn.runner.v1");
        }
    }
    pub mod deployments {
        pub mod v1 {
            tonic::include_proto!("cairn.deployments.v1");
        }
    }
    pub mod drift {
        pub mod v1 {
            tonic::include_proto!("cairn.drift.v1");
        }
    }
}

pub use cairn::deployments::v1 as deployments;
pub use cairn::drift::v1 as drift;
pub use cairn::events::v1 as events;
pub use cairn::runner::v1 as runner;
pub use cairn::state::v1 as state;
pub use cairn::templates::v1 as templates;
pub use cairn::tenancy::v1 as tenancy;

/// Encoded `FileDescriptorSet` of every contract, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("cairn_descriptor");
