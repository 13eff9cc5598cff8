//! Where a webhook may be delivered. A subscription URL is https (http only when loopback
//! delivery is allowed, for local runs and tests), carries no user info, and its host must
//! not be — or resolve to — a loopback, private, link-local (cloud metadata), shared,
//! multicast or reserved address. The check runs when a subscription is created and again
//! on every delivery, against the addresses actually connected to (DNS can change).
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::Uri;

use super::super::Invalid;

/// Longest URL accepted.
pub const MAX_URL_LEN: usize = 2048;

/// Which addresses deliveries may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AddressPolicy {
    /// `CAIRN_WEBHOOK_ALLOW_LOOPBACK=1`: http and loopback addresses are allowed (never the
    /// private ranges).
    pub allow_loopback: bool,
}

/// Why an address is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("a loopback address (allowed only with CAIRN_WEBHOOK_ALLOW_LOOPBACK=1)")]
    Loopback,
    #[error("a private, link-local, shared or reserved address")]
    NotPublic,
}

impl AddressPolicy {
    /// May a delivery connect to `ip`?
    pub fn check(&self, ip: IpAddr) -> Result<(), Refused> {
        let ip = canonical(ip);
        if ip.is_loopback() {
            return if self.allow_loopback {
                Ok(())
            } else {
                Err(Refused::Loopback)
            };
        }
        let public = match ip {
            IpAddr::V4(v4) => public_v4(v4),
            IpAddr::V6(v6) => public_v6(v6),
        };
        if public {
            Ok(())
        } else {
            Err(Refused::NotPublic)
        }
    }
}

/// An IPv4 address hidden in an IPv6 one (mapped, or NAT64 `64:ff9b::/96`) is judged as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(v4);
            }
            let s = v6.segments();
            if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
                let [a, b] = s[6].to_be_bytes();
                let [c, d] = s[7].to_be_bytes();
                return IpAddr::V4(Ipv4Addr::new(a, b, c, d));
            }
            IpAddr::V6(v6)
        }
        v4 => v4,
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240) // reserved
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    !(ip.is_unspecified()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local
        || (s[0] & 0xffc0) == 0xfe80 // link-local
        || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x0100 && s[1..4] == [0, 0, 0]) // discard
        || s[0..6] == [0, 0, 0, 0, 0, 0]) // IPv4-compatible (deprecated)
}

/// A subscription URL that passed the syntactic checks; its host may still be a name
/// that must be resolved and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookUrl {
    url: String,
    host: Host,
    port: u16,
}

/// The host of a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Ip(IpAddr),
    Name(String),
}

impl WebhookUrl {
    pub fn parse(s: &str, policy: AddressPolicy) -> Result<Self, Invalid> {
        let s = s.trim();
        if s.is_empty() {
            return Err(Invalid::new("url is required"));
        }
        if s.len() > MAX_URL_LEN {
            return Err(Invalid::new(format!(
                "url is longer than {MAX_URL_LEN} bytes"
            )));
        }
        let uri: Uri = s
            .parse()
            .map_err(|_| Invalid::new("url is not a valid absolute URL"))?;
        let port_default = match uri.scheme_str() {
            Some("https") => 443,
            Some("http") if policy.allow_loopback => 80,
            Some("http") => {
                return Err(Invalid::new(
                    "url must be https (http only with CAIRN_WEBHOOK_ALLOW_LOOPBACK=1)",
                ));
            }
            _ => return Err(Invalid::new("url must be an https URL")),
        };
        let authority = uri
            .authority()
            .ok_or_else(|| Invalid::new("url has no host"))?;
        if authority.as_str().contains('@') {
            return Err(Invalid::new("url must not carry user info"));
        }
        let raw_host = authority.host();
        let bare = raw_host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(raw_host);
        let host = match bare.parse::<IpAddr>() {
            Ok(ip) => Host::Ip(ip),
            Err(_) => {
                let name = bare.trim_end_matches('.').to_ascii_lowercase();
                if name.is_empty() {
                    return Err(Invalid::new("url has no host"));
                }
                Host::Name(name)
            }
        };
        let url = WebhookUrl {
            url: s.to_owned(),
            host,
            port: uri.port_u16().unwrap_or(port_default),
        };
        url.check_host(policy)?;
        Ok(url)
    }

    /// The checks that need no resolution: an IP literal's address, and `localhost`.
    pub fn check_host(&self, policy: AddressPolicy) -> Result<(), Invalid> {
        match &self.host {
            Host::Ip(ip) => policy
                .check(*ip)
                .map_err(|why| Invalid::new(format!("url points to {why}"))),
            Host::Name(name) if name == "localhost" || name.ends_with(".localhost") => policy
                .check(IpAddr::V6(Ipv6Addr::LOCALHOST))
                .map_err(|why| Invalid::new(format!("url points to {why}"))),
            Host::Name(_) => Ok(()),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.url
    }

    pub fn host(&self) -> &Host {
        &self.host
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The host as text, for logs and the audit log (the path may carry a token).
    pub fn host_str(&self) -> String {
        match &self.host {
            Host::Ip(ip) => ip.to_string(),
            Host::Name(name) => name.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: AddressPolicy = AddressPolicy {
        allow_loopback: false,
    };
    const LOCAL: AddressPolicy = AddressPolicy {
        allow_loopback: true,
    };

    #[test]
    fn https_public_hosts_pass() {
        let u = WebhookUrl::parse("https://hooks.example.com/cairn?x=1", STRICT).unwrap();
        assert_eq!(u.host(), &Host::Name("hooks.example.com".into()));
        assert_eq!(u.port(), 443);
        assert!(WebhookUrl::parse("https://93.184.216.34:8443/h", STRICT).is_ok());
        assert!(WebhookUrl::parse("https://[2606:2800:220:1::1]/h", STRICT).is_ok());
    }

    #[test]
    fn http_and_loopback_need_the_flag() {
        for url in [
            "http://hooks.example.com/",
            "https://127.0.0.1/",
            "https://127.1.2.3:9000/",
            "https://[::1]/",
            "https://localhost/",
            "https://a.localhost/",
            "https://[::ffff:127.0.0.1]/",
        ] {
            assert!(WebhookUrl::parse(url, STRICT).is_err(), "{url} passed");
        }
        assert!(WebhookUrl::parse("http://127.0.0.1:8080/hook", LOCAL).is_ok());
        assert!(WebhookUrl::parse("http://localhost:8080/hook", LOCAL).is_ok());
    }

    #[test]
    fn private_link_local_and_reserved_are_refused_even_with_the_flag() {
        for url in [
            "https://10.0.0.1/",
            "https://172.16.5.4/",
            "https://192.168.1.1/",
            "https://169.254.169.254/latest/meta-data/",
            "https://100.64.0.1/",
            "https://0.0.0.0/",
            "https://[fd00::1]/",
            "https://[fe80::1]/",
            "https://[::ffff:10.0.0.1]/",
            "https://[64:ff9b::a9fe:a9fe]/",
            "https://[::]/",
            "https://255.255.255.255/",
        ] {
            assert!(WebhookUrl::parse(url, LOCAL).is_err(), "{url} passed");
        }
    }

    #[test]
    fn malformed_urls_are_refused() {
        for url in [
            "",
            "hooks.example.com/path",
            "ftp://example.com/",
            "https://user:pw@example.com/",
            "https:///nohost",
        ] {
            assert!(WebhookUrl::parse(url, STRICT).is_err(), "{url:?} passed");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
        assert!(WebhookUrl::parse(&long, STRICT).is_err());
    }
}
