//! The HTTP edge of webhooks: one reqwest client (rustls on aws-lc-rs, no proxy, no
//! redirects, no automatic retries) whose resolver connects only to addresses the
//! [`AddressPolicy`] permits, so a name that resolves to a private address is refused at the
//! moment of connecting, not only when the subscription was created.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::domain::webhook::address::{Host, Refused};
use crate::domain::webhook::{AddressPolicy, WebhookUrl};

/// A name that resolved to a refused address (found in a request error's source chain).
#[derive(Debug, thiserror::Error)]
#[error("{host} resolves to {why}")]
pub struct AddressRefused {
    pub host: String,
    pub why: Refused,
}

/// Resolution failed or found nothing.
#[derive(Debug, thiserror::Error)]
#[error("cannot resolve {0}")]
pub struct Unresolvable(pub String);

/// Resolves `host` and checks every address (any refused one refuses the host).
pub async fn resolve_checked(
    host: &str,
    port: u16,
    policy: AddressPolicy,
) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|_| Unresolvable(host.to_owned()))?
        .collect();
    if addrs.is_empty() {
        return Err(Box::new(Unresolvable(host.to_owned())));
    }
    for a in &addrs {
        policy.check(a.ip()).map_err(|why| AddressRefused {
            host: host.to_owned(),
            why,
        })?;
    }
    Ok(addrs)
}

/// Checks a subscription URL's host as a delivery would (names are resolved).
pub async fn check_url(url: &WebhookUrl, policy: AddressPolicy) -> Result<(), String> {
    match url.host() {
        // Literal addresses were checked when the URL was parsed.
        Host::Ip(_) => Ok(()),
        Host::Name(name) => resolve_checked(name, url.port(), policy)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
    }
}

struct CheckedResolver {
    policy: AddressPolicy,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // The port is replaced by the URL's own.
            let addrs = resolve_checked(&host, 0, policy).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The client deliveries are sent with.
pub fn client(policy: AddressPolicy, timeout: Duration) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .user_agent(concat!("cairn-webhooks/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .retry(reqwest::retry::never())
        .no_proxy()
        .timeout(timeout)
        .connect_timeout(timeout)
        .https_only(!policy.allow_loopback)
        .dns_resolver(Arc::new(CheckedResolver { policy }))
        .build()
}

/// The refusal in a request error's source chain, if that is why it failed.
pub fn refusal_of(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(r) = e.downcast_ref::<AddressRefused>() {
            return Some(r.to_string());
        }
        cur = e.source();
    }
    None
}
