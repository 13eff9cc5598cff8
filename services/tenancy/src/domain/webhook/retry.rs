//! What follows an attempt: delivered, retried later (network errors, timeouts, 5xx, 429 —
//! after `Retry-After` when the receiver sends one (up to an hour), else exponential backoff
//! with jitter), or
//! failed for good (any other status, a refused address, or the attempts used up).
use std::time::Duration;

use chrono::{DateTime, Utc};

/// The longest `Retry-After` honoured (a longer one is shortened to this).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// Backoff and give-up settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The delay after the first failed attempt; doubled after each further one.
    pub base: Duration,
    /// The longest backoff delay.
    pub max: Duration,
    /// Attempts per delivery before it is given up.
    pub max_attempts: u32,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// An HTTP status, and the `Retry-After` header's value if any.
    Status {
        code: u16,
        retry_after: Option<String>,
    },
    /// No response: connect error, reset, timeout (the short reason is logged).
    Network(String),
    /// The host resolved to no permitted address (see `address`).
    Refused(String),
}

/// What to do with the delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Delivered,
    RetryIn(Duration),
    Failed,
}

impl Response {
    /// The short classification kept in the attempt log (never a response body).
    pub fn error(&self) -> Option<String> {
        match self {
            Response::Status { code, .. } if (200..300).contains(code) => None,
            Response::Status { code, .. } => Some(format!("HTTP {code}")),
            Response::Network(why) => Some(why.clone()),
            Response::Refused(why) => Some(format!("refused: {why}")),
        }
    }

    pub fn code(&self) -> Option<u16> {
        match self {
            Response::Status { code, .. } => Some(*code),
            Response::Network(_) | Response::Refused(_) => None,
        }
    }
}

impl RetryPolicy {
    /// The decision after attempt number `attempt` (from 1) ended with `response`; `jitter`
    /// is a random fraction in [0, 1) and `now` the current time (for an HTTP-date
    /// `Retry-After`).
    pub fn next(&self, attempt: u32, response: &Response, jitter: f64, now: DateTime<Utc>) -> Next {
        let retry_after = match response {
            Response::Status { code, .. } if (200..300).contains(code) => return Next::Delivered,
            Response::Status { code, retry_after } if *code == 429 || *code >= 500 => retry_after
                .as_deref()
                .and_then(|v| parse_retry_after(v, now)),
            Response::Status { .. } | Response::Refused(_) => return Next::Failed,
            Response::Network(_) => None,
        };
        if attempt >= self.max_attempts {
            return Next::Failed;
        }
        Next::RetryIn(match retry_after {
            Some(asked) => asked.min(MAX_RETRY_AFTER),
            None => self.backoff(attempt, jitter),
        })
    }

    /// Exponential backoff with jitter: `base · 2^(attempt-1)`, capped at `max`, then a
    /// random point in its upper half (so retries of many subscriptions spread out).
    pub fn backoff(&self, attempt: u32, jitter: f64) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        let capped = exp.min(self.max);
        capped.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
    }
}

/// `Retry-After`: delay seconds, or an HTTP date.
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = DateTime::parse_from_rfc2822(value).ok()?;
    (at.with_timezone(&Utc) - now)
        .to_std()
        .ok()
        .or(Some(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: RetryPolicy = RetryPolicy {
        base: Duration::from_secs(1),
        max: Duration::from_secs(600),
        max_attempts: 5,
    };

    fn status(code: u16) -> Response {
        Response::Status {
            code,
            retry_after: None,
        }
    }

    #[test]
    fn what_is_retried() {
        let now = Utc::now();
        assert_eq!(P.next(1, &status(204), 0.0, now), Next::Delivered);
        assert!(matches!(
            P.next(1, &status(500), 0.0, now),
            Next::RetryIn(_)
        ));
        assert!(matches!(
            P.next(1, &status(503), 0.0, now),
            Next::RetryIn(_)
        ));
        assert!(matches!(
            P.next(1, &status(429), 0.0, now),
            Next::RetryIn(_)
        ));
        assert!(matches!(
            P.next(1, &Response::Network("timeout".into()), 0.0, now),
            Next::RetryIn(_)
        ));
        for code in [400, 401, 404, 410, 301] {
            assert_eq!(P.next(1, &status(code), 0.0, now), Next::Failed, "{code}");
        }
        assert_eq!(
            P.next(1, &Response::Refused("private".into()), 0.0, now),
            Next::Failed
        );
        assert_eq!(
            P.next(5, &status(500), 0.0, now),
            Next::Failed,
            "attempts used up"
        );
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        assert_eq!(P.backoff(1, 1.0), Duration::from_secs(1));
        assert_eq!(P.backoff(1, 0.0), Duration::from_millis(500));
        assert_eq!(P.backoff(4, 1.0), Duration::from_secs(8));
        assert_eq!(P.backoff(40, 1.0), Duration::from_secs(600));
        let d = P.backoff(3, 0.5);
        assert!(d >= Duration::from_secs(2) && d <= Duration::from_secs(4));
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let now = Utc::now();
        let r = Response::Status {
            code: 429,
            retry_after: Some("7".into()),
        };
        assert_eq!(
            P.next(1, &r, 0.0, now),
            Next::RetryIn(Duration::from_secs(7))
        );
        let r = Response::Status {
            code: 503,
            retry_after: Some("86400".into()),
        };
        assert_eq!(P.next(1, &r, 0.0, now), Next::RetryIn(MAX_RETRY_AFTER));
        let r = Response::Status {
            code: 503,
            retry_after: Some("900".into()),
        };
        assert_eq!(
            P.next(1, &r, 0.0, now),
            Next::RetryIn(Duration::from_secs(900)),
            "Retry-After beyond the backoff cap is still honoured"
        );
        let date = (now + chrono::Duration::seconds(30)).to_rfc2822();
        let d = parse_retry_after(&date, now).unwrap();
        assert!(d <= Duration::from_secs(30) && d >= Duration::from_secs(29));
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
