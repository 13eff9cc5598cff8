//! Webhook delivery settings, from `CAIRN_WEBHOOK_*` environment variables (or flags):
//! flattened into [`crate::Config`] as `webhooks`, so `cairn-tenancy serve --help` lists
//! them. Test harnesses that build `Config` as a struct literal pass
//! `webhooks: WebhookArgs::default()` (or their own settings).
use std::time::Duration;

use cairn_service::duration;
use clap::Parser;
use clap::builder::BoolishValueParser;

use crate::domain::webhook::AddressPolicy;
use crate::domain::webhook::retry::RetryPolicy;

/// How webhooks are delivered by this replica.
#[derive(Debug, Clone, Parser)]
#[command(name = "cairn-tenancy webhooks")]
pub struct WebhookArgs {
    /// Allow http URLs and loopback addresses (local runs and tests; never private ranges).
    #[arg(long, env = "CAIRN_WEBHOOK_ALLOW_LOOPBACK", default_value = "false", action = clap::ArgAction::Set, value_parser = BoolishValueParser::new())]
    pub webhook_allow_loopback: bool,
    /// Deliveries this replica sends at once (0: this replica sends none).
    #[arg(long, env = "CAIRN_WEBHOOK_CONCURRENCY", default_value_t = 8)]
    pub webhook_concurrency: usize,
    /// How long one HTTP request may take.
    #[arg(long, env = "CAIRN_WEBHOOK_TIMEOUT", default_value = "10s", value_parser = duration)]
    pub webhook_timeout: Duration,
    /// How long a sender holds a claimed delivery; another replica takes it over after this
    /// (must exceed the timeout).
    #[arg(long, env = "CAIRN_WEBHOOK_LEASE", default_value = "60s", value_parser = duration)]
    pub webhook_lease: Duration,
    /// Delay after the first failed attempt, doubled after each further one (with jitter).
    #[arg(long, env = "CAIRN_WEBHOOK_RETRY_BASE", default_value = "5s", value_parser = duration)]
    pub webhook_retry_base: Duration,
    /// The longest backoff between attempts (a receiver's `Retry-After` is honoured up to 1h).
    #[arg(long, env = "CAIRN_WEBHOOK_RETRY_MAX", default_value = "15m", value_parser = duration)]
    pub webhook_retry_max: Duration,
    /// Attempts per delivery before it is given up (marked failed).
    #[arg(long, env = "CAIRN_WEBHOOK_MAX_ATTEMPTS", default_value_t = 12)]
    pub webhook_max_attempts: u32,
    /// Failed attempts in a row after which a subscription is disabled.
    #[arg(long, env = "CAIRN_WEBHOOK_DISABLE_AFTER", default_value_t = 20)]
    pub webhook_disable_after: u32,
    /// How often the sender looks for due deliveries (it is also woken by new ones).
    #[arg(long, env = "CAIRN_WEBHOOK_POLL_INTERVAL", default_value = "1s", value_parser = duration)]
    pub webhook_poll_interval: Duration,
}

impl Default for WebhookArgs {
    fn default() -> Self {
        // Every argument has a default, so parsing no arguments and no environment works.
        WebhookArgs {
            webhook_allow_loopback: false,
            webhook_concurrency: 8,
            webhook_timeout: Duration::from_secs(10),
            webhook_lease: Duration::from_secs(60),
            webhook_retry_base: Duration::from_secs(5),
            webhook_retry_max: Duration::from_secs(15 * 60),
            webhook_max_attempts: 12,
            webhook_disable_after: 20,
            webhook_poll_interval: Duration::from_secs(1),
        }
    }
}

impl WebhookArgs {
    /// Checks what clap cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.webhook_timeout.is_zero() || self.webhook_lease <= self.webhook_timeout {
            return Err("CAIRN_WEBHOOK_LEASE must exceed CAIRN_WEBHOOK_TIMEOUT (> 0)".to_owned());
        }
        if self.webhook_retry_base.is_zero() || self.webhook_retry_max < self.webhook_retry_base {
            return Err(
                "CAIRN_WEBHOOK_RETRY_BASE must be > 0 and at most CAIRN_WEBHOOK_RETRY_MAX"
                    .to_owned(),
            );
        }
        if self.webhook_max_attempts == 0 || self.webhook_disable_after == 0 {
            return Err(
                "CAIRN_WEBHOOK_MAX_ATTEMPTS and CAIRN_WEBHOOK_DISABLE_AFTER must be at least 1"
                    .to_owned(),
            );
        }
        if self.webhook_poll_interval.is_zero() {
            return Err("CAIRN_WEBHOOK_POLL_INTERVAL must be > 0".to_owned());
        }
        Ok(())
    }

    pub fn address_policy(&self) -> AddressPolicy {
        AddressPolicy {
            allow_loopback: self.webhook_allow_loopback,
        }
    }

    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            base: self.webhook_retry_base,
            max: self.webhook_retry_max,
            max_attempts: self.webhook_max_attempts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_flags_parse() {
        let d = WebhookArgs::try_parse_from(["x"]).unwrap();
        assert!(d.validate().is_ok());
        assert_eq!(
            d.webhook_disable_after,
            WebhookArgs::default().webhook_disable_after
        );
        assert_eq!(d.webhook_lease, WebhookArgs::default().webhook_lease);
        let l = WebhookArgs::try_parse_from(["x", "--webhook-allow-loopback", "1"]).unwrap();
        assert!(l.address_policy().allow_loopback);
        let mut bad = d.clone();
        bad.webhook_lease = bad.webhook_timeout;
        assert!(bad.validate().is_err());
    }
}
