//! [`Profile`]: how strict start-up is (`CAIRN_PROFILE`, `local` by default). The one rule:
//! a service states the [`Fact`]s of its configuration that production does not accept
//! (a listener without TLS, a local key file, a local object store, the process executor,
//! `CAIRN_WEBHOOK_ALLOW_LOOPBACK`, no NATS credentials, plaintext trace export), and
//! [`Profile::check`] refuses the first one in production and accepts everything in `local`.
//! libs/service states the listener and trace facts itself ([`crate::GrpcServer`],
//! [`crate::run()`]); each service states its own at the top of its `start`. Two facts are
//! deliberately accepted in production too, decided in [`Profile::check`]: the health-only
//! listener in plaintext ([`Fact::PlaintextHealth`]) and plaintext trace export to a
//! collector on loopback ([`Fact::PlaintextOtlp`]).
use std::net::SocketAddr;

use crate::tls::TlsArgs;

/// The start-up profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Profile {
    /// Today's behaviour: plaintext on loopback, embedded defaults.
    #[default]
    Local,
    /// TLS on every listener, KMS, S3, the Docker executor, NATS credentials.
    Production,
}

/// A configuration fact production refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact {
    /// No certificate configured: every listener would be plaintext.
    TlsNotConfigured,
    /// A listener without TLS on a loopback address.
    NoTls {
        listener: &'static str,
        addr: SocketAddr,
    },
    /// A listener in plaintext on a non-loopback address.
    PlaintextNonLoopback {
        listener: &'static str,
        addr: SocketAddr,
    },
    /// The health-only listener (`CAIRN_HEALTH_ADDR`), always plaintext: accepted in
    /// production ([`Profile::check`]).
    PlaintextHealth { addr: SocketAddr },
    /// `CAIRN_KMS_KEY` is a local key file.
    LocalKeyFile,
    /// `CAIRN_OBJECT_STORE` is a local directory.
    LocalObjectStore,
    /// `CAIRN_EXECUTOR=process`.
    ProcessExecutor,
    /// `CAIRN_WEBHOOK_ALLOW_LOOPBACK` is on.
    WebhookAllowLoopback,
    /// NATS without credentials.
    NoNatsCredentials,
    /// Spans exported without TLS (`CAIRN_OTLP_ENDPOINT` is not `https://`), to a collector
    /// on loopback (a local agent: accepted in production, [`Profile::check`]) or not.
    PlaintextOtlp { endpoint: String, loopback: bool },
}

impl Fact {
    /// The fact of a listener at `addr`: none with TLS.
    pub fn listener(listener: &'static str, addr: SocketAddr, tls: bool) -> Option<Fact> {
        match (tls, addr.ip().is_loopback()) {
            (true, _) => None,
            (false, true) => Some(Fact::NoTls { listener, addr }),
            (false, false) => Some(Fact::PlaintextNonLoopback { listener, addr }),
        }
    }
}

impl std::fmt::Display for Fact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fact::TlsNotConfigured => {
                f.write_str("listeners without TLS (set CAIRN_TLS_CERT and CAIRN_TLS_KEY)")
            }
            Fact::NoTls { listener, addr } => write!(
                f,
                "the {listener} listener {addr} without TLS (set CAIRN_TLS_CERT and CAIRN_TLS_KEY)"
            ),
            Fact::PlaintextNonLoopback { listener, addr } => write!(
                f,
                "the {listener} listener {addr} in plaintext on a non-loopback address \
                 (set CAIRN_TLS_CERT and CAIRN_TLS_KEY)"
            ),
            Fact::PlaintextHealth { addr } => write!(
                f,
                "the health listener {addr} in plaintext (CAIRN_HEALTH_ADDR)"
            ),
            Fact::LocalKeyFile => f.write_str(
                "a local key file in CAIRN_KMS_KEY (production needs a KMS key id, ARN or alias)",
            ),
            Fact::LocalObjectStore => f.write_str(
                "a local object store in CAIRN_OBJECT_STORE (production needs S3: s3://…)",
            ),
            Fact::ProcessExecutor => f.write_str(
                "the process executor (CAIRN_EXECUTOR=process; production runs tofu in containers)",
            ),
            Fact::WebhookAllowLoopback => f.write_str(
                "CAIRN_WEBHOOK_ALLOW_LOOPBACK (webhooks may reach loopback and plain http)",
            ),
            Fact::NoNatsCredentials => f.write_str("NATS without credentials (CAIRN_NATS_CREDS)"),
            Fact::PlaintextOtlp {
                endpoint,
                loopback: true,
            } => write!(
                f,
                "plaintext trace export to {endpoint} on loopback (CAIRN_OTLP_ENDPOINT)"
            ),
            Fact::PlaintextOtlp {
                endpoint,
                loopback: false,
            } => write!(
                f,
                "plaintext trace export to {endpoint} off this host (CAIRN_OTLP_ENDPOINT: \
                 use https://, or a collector on loopback)"
            ),
        }
    }
}

/// Why the production profile refused to start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CAIRN_PROFILE=production refuses {0}")]
pub struct Refusal(pub Fact);

impl Profile {
    /// Refuses the first fact in production; `local` accepts all.
    ///
    /// The deliberate exceptions, decided here:
    /// - production accepts the health-only listener in plaintext on any address
    ///   ([`Fact::PlaintextHealth`], `CAIRN_HEALTH_ADDR`). It serves `grpc.health.v1.Health`
    ///   and nothing else: no token, no data, only whether the service is serving, and
    ///   kubelet's `grpc:` probe speaks plaintext only. Every other plaintext listener stays
    ///   refused.
    /// - production accepts plaintext trace export to a collector on loopback
    ///   ([`Fact::PlaintextOtlp`] with `loopback`: an agent next to the service, the spans
    ///   never leave the host); off the host it takes `https://`.
    pub fn check<I>(self, facts: I) -> Result<(), Refusal>
    where
        I: IntoIterator<Item = Fact>,
    {
        match self {
            Profile::Local => Ok(()),
            Profile::Production => facts
                .into_iter()
                .find(|f| {
                    !matches!(
                        f,
                        Fact::PlaintextHealth { .. } | Fact::PlaintextOtlp { loopback: true, .. }
                    )
                })
                .map_or(Ok(()), |f| Err(Refusal(f))),
        }
    }
}

/// What every listener shares: the profile and the TLS settings.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ListenArgs {
    /// `local` (plaintext allowed, embedded defaults) or `production` (refuses to start
    /// without TLS, with a local key file or object store, the process executor, …).
    #[arg(long, env = "CAIRN_PROFILE", value_enum, default_value_t)]
    pub profile: Profile,
    #[command(flatten)]
    pub tls: TlsArgs,
}

impl ListenArgs {
    /// The generic rule, decidable before anything binds: production needs TLS.
    pub fn check(&self) -> Result<(), Refusal> {
        if self.profile == Profile::Production && !self.tls.enabled() {
            return Err(Refusal(Fact::TlsNotConfigured));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_accepts_everything_and_production_refuses_the_first_fact() {
        let facts = || [Fact::LocalKeyFile, Fact::ProcessExecutor];
        assert_eq!(Profile::Local.check(facts()), Ok(()));
        assert_eq!(
            Profile::Production.check(facts()),
            Err(Refusal(Fact::LocalKeyFile))
        );
        assert_eq!(Profile::Production.check([]), Ok(()));
    }

    #[test]
    fn production_accepts_only_the_plaintext_health_listener() {
        let any = SocketAddr::from(([0; 4], 8086));
        let health = Fact::PlaintextHealth { addr: any };
        assert_eq!(Profile::Production.check([health.clone()]), Ok(()));
        // It does not hide a refused fact after it.
        let grpc = Fact::listener("gRPC", any, false);
        assert!(matches!(
            Profile::Production.check(std::iter::once(health).chain(grpc)),
            Err(Refusal(Fact::PlaintextNonLoopback {
                listener: "gRPC",
                ..
            }))
        ));
    }

    #[test]
    fn a_listener_fact_depends_on_tls_and_the_address() {
        let lo: SocketAddr = "127.0.0.1:1"
            .parse()
            .unwrap_or(SocketAddr::from(([0; 4], 0)));
        let any: SocketAddr = "0.0.0.0:1".parse().unwrap_or(lo);
        assert_eq!(Fact::listener("gRPC", lo, true), None);
        assert!(matches!(
            Fact::listener("gRPC", lo, false),
            Some(Fact::NoTls { .. })
        ));
        assert!(matches!(
            Fact::listener("gRPC", any, false),
            Some(Fact::PlaintextNonLoopback { .. })
        ));
    }
}
