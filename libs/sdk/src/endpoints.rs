//! Where each Cairn service answers: one URL per service, defaulting to the local ports of
//! ARCHITECTURE.md §2 (50051–50056).
use std::fmt;

use serde::{Deserialize, Serialize};

/// A Cairn service an SDK call goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Tenancy,
    Templates,
    State,
    Runner,
    Deployments,
    Drift,
}

impl Endpoint {
    /// Every service, in port order.
    pub const ALL: [Endpoint; 6] = [
        Self::Tenancy,
        Self::Templates,
        Self::State,
        Self::Runner,
        Self::Deployments,
        Self::Drift,
    ];

    /// The service's name (as in a config file).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Tenancy => "tenancy",
            Self::Templates => "templates",
            Self::State => "state",
            Self::Runner => "runner",
            Self::Deployments => "deployments",
            Self::Drift => "drift",
        }
    }

    /// The local default port.
    pub const fn default_port(self) -> u16 {
        match self {
            Self::Tenancy => 50051,
            Self::Templates => 50052,
            Self::State => 50053,
            Self::Runner => 50054,
            Self::Deployments => 50055,
            Self::Drift => 50056,
        }
    }

    /// `http://127.0.0.1:<default port>`.
    pub fn default_url(self) -> String {
        format!("http://127.0.0.1:{}", self.default_port())
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The URL of every service. `Default` is the local ports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Endpoints {
    pub tenancy: String,
    pub templates: String,
    pub state: String,
    pub runner: String,
    pub deployments: String,
    pub drift: String,
}

impl Default for Endpoints {
    fn default() -> Self {
        Endpoints {
            tenancy: Endpoint::Tenancy.default_url(),
            templates: Endpoint::Templates.default_url(),
            state: Endpoint::State.default_url(),
            runner: Endpoint::Runner.default_url(),
            deployments: Endpoint::Deployments.default_url(),
            drift: Endpoint::Drift.default_url(),
        }
    }
}

impl Endpoints {
    /// The URL of `endpoint`.
    pub fn url(&self, endpoint: Endpoint) -> &str {
        match endpoint {
            Endpoint::Tenancy => &self.tenancy,
            Endpoint::Templates => &self.templates,
            Endpoint::State => &self.state,
            Endpoint::Runner => &self.runner,
            Endpoint::Deployments => &self.deployments,
            Endpoint::Drift => &self.drift,
        }
    }

    /// Sets the URL of `endpoint`.
    pub fn set(&mut self, endpoint: Endpoint, url: impl Into<String>) {
        let slot = match endpoint {
            Endpoint::Tenancy => &mut self.tenancy,
            Endpoint::Templates => &mut self.templates,
            Endpoint::State => &mut self.state,
            Endpoint::Runner => &mut self.runner,
            Endpoint::Deployments => &mut self.deployments,
            Endpoint::Drift => &mut self.drift,
        };
        *slot = url.into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_local_ports() {
        let e = Endpoints::default();
        assert_eq!(e.url(Endpoint::Tenancy), "http://127.0.0.1:50051");
        assert_eq!(e.url(Endpoint::Drift), "http://127.0.0.1:50056");
        let partial: Endpoints =
            serde_json::from_str(r#"{"templates": "http://t:1"}"#).expect("parse");
        assert_eq!(partial.templates, "http://t:1");
        assert_eq!(partial.tenancy, "http://127.0.0.1:50051");
    }
}
