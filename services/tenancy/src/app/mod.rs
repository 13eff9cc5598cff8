//! Use cases of tenancy, one file per resource. Authorization lives here; the gRPC
//! handlers authenticate and convert, then call these functions.

pub mod access;
pub mod audit;
pub mod bootstrap;
pub mod changes;
pub mod target_validation;
pub mod targets;
pub mod tenants;
pub mod tokens;
pub mod users;
pub mod webhooks;

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::Notify;

use crate::domain::password::{Password, PasswordHashing};
use crate::error::{Error, Result};
use crate::keys::Signer;
use crate::rate_limit::KeyedLimiter;
use crate::webhook_config::WebhookArgs;

/// Tunables (from `Config`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Lifetime of issued access tokens (at most 15 minutes).
    pub access_token_ttl: Duration,
}

/// Everything the use cases need.
#[derive(Clone)]
pub struct App {
    pub pool: PgPool,
    pub signer: Arc<Signer>,
    pub hashing: Arc<PasswordHashing>,
    /// Login attempts per email.
    pub login_limiter: Arc<KeyedLimiter<String>>,
    /// Wakes the outbox relay after a commit.
    pub outbox_notify: Arc<Notify>,
    /// Wakes the message relay after a commit that queued a message (a validation request).
    pub message_notify: Arc<Notify>,
    pub settings: Arc<Settings>,
    /// Webhook delivery settings (the address policy of new subscriptions).
    pub webhooks: Arc<WebhookArgs>,
    /// Wakes the webhook sender after deliveries were queued.
    pub webhook_notify: Arc<Notify>,
}

impl App {
    /// Hashes a password on a blocking thread.
    pub async fn hash_password(&self, password: Password) -> Result<String> {
        let hashing = Arc::clone(&self.hashing);
        tokio::task::spawn_blocking(move || hashing.hash(&password))
            .await
            .map_err(|e| Error::internal(format!("password hashing task: {e}")))?
            .map_err(Error::from)
    }

    /// Verifies a password on a blocking thread (`None`: do the work, answer false).
    pub async fn verify_password(&self, password: Password, phc: Option<String>) -> Result<bool> {
        let hashing = Arc::clone(&self.hashing);
        tokio::task::spawn_blocking(move || hashing.verify(&password, phc.as_deref()))
            .await
            .map_err(|e| Error::internal(format!("password verification task: {e}")))
    }

    /// Wakes the outbox relay (call after a commit that wrote events).
    pub fn committed(&self) {
        self.outbox_notify.notify_one();
    }

    /// Wakes the message relay (call after a commit that queued a message).
    pub fn queued(&self) {
        self.message_notify.notify_one();
    }
}

/// Page sizes: 0 means the default; larger requests are capped.
pub fn page_size(requested: u32) -> i64 {
    const DEFAULT: u32 = 100;
    const MAX: u32 = 500;
    i64::from(if requested == 0 {
        DEFAULT
    } else {
        requested.min(MAX)
    })
}
