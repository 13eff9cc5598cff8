//! A loopback HTTP receiver for webhook tests: answers each request as scripted (a status,
//! a status with `Retry-After`, or hang until released), records every request, and checks
//! the `Cairn-Signature` header itself (HMAC-SHA256 of "<t>.<body>" under the secret it was
//! given, and `t` within five minutes).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lc_rs::hmac;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use tokio::sync::Notify;

/// How to answer one request.
#[derive(Debug, Clone)]
pub enum Reply {
    Status(u16),
    RetryAfter(u16, u64),
    /// Hold the request until `release()`, then answer 200.
    Hang,
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub body: serde_json::Value,
    pub raw: Bytes,
    pub signature: String,
    /// Valid under the receiver's secret when it arrived.
    pub valid: bool,
    /// The status it was answered with (`None`: hung).
    pub answered: Option<u16>,
    pub at: std::time::Instant,
}

#[derive(Default)]
struct Inner {
    secret: Option<String>,
    script: VecDeque<Reply>,
    received: Vec<Received>,
}

#[derive(Clone)]
pub struct Receiver {
    inner: Arc<Mutex<Inner>>,
    arrived: Arc<Notify>,
    release: Arc<Notify>,
    pub addr: SocketAddr,
}

/// Checks `header` (`t=<unix>,v1=<hex>`) against `body` under `secret`.
pub fn verify(secret: &str, header: &str, body: &[u8]) -> bool {
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", v)) => t = Some(v.to_owned()),
            Some(("v1", v)) => v1 = Some(v.to_owned()),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else {
        return false;
    };
    let Ok(ts) = t.parse::<i64>() else {
        return false;
    };
    if (chrono::Utc::now().timestamp() - ts).abs() > 300 {
        return false;
    }
    let Ok(tag) = hex::decode(v1) else {
        return false;
    };
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    let mut msg = t.into_bytes();
    msg.push(b'.');
    msg.extend_from_slice(body);
    hmac::verify(&key, &msg, &tag).is_ok()
}

async fn handle(State(r): State<Receiver>, headers: HeaderMap, raw: Bytes) -> Response {
    let signature = headers
        .get("cairn-signature")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let reply = {
        let mut inner = r.inner.lock().unwrap();
        let valid = inner
            .secret
            .as_deref()
            .is_some_and(|s| verify(s, &signature, &raw));
        let reply = inner.script.pop_front().unwrap_or(Reply::Status(200));
        let answered = match reply {
            Reply::Status(c) | Reply::RetryAfter(c, _) => Some(c),
            Reply::Hang => None,
        };
        inner.received.push(Received {
            body: serde_json::from_slice(&raw).unwrap_or(serde_json::Value::Null),
            raw: raw.clone(),
            signature,
            valid,
            answered,
            at: std::time::Instant::now(),
        });
        reply
    };
    r.arrived.notify_waiters();
    match reply {
        Reply::Status(c) => StatusCode::from_u16(c).unwrap().into_response(),
        Reply::RetryAfter(c, secs) => {
            let mut resp = StatusCode::from_u16(c).unwrap().into_response();
            resp.headers_mut().insert(
                "retry-after",
                HeaderValue::from_str(&secs.to_string()).unwrap(),
            );
            resp
        }
        Reply::Hang => {
            r.release.notified().await;
            StatusCode::OK.into_response()
        }
    }
}

impl Receiver {
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let r = Receiver {
            inner: Arc::default(),
            arrived: Arc::new(Notify::new()),
            release: Arc::new(Notify::new()),
            addr,
        };
        let app = Router::new()
            .route("/hook", post(handle))
            .with_state(r.clone());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        r
    }

    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    pub fn set_secret(&self, secret: &str) {
        self.inner.lock().unwrap().secret = Some(secret.to_owned());
    }

    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.inner.lock().unwrap().script.extend(replies);
    }

    pub fn release(&self) {
        self.release.notify_waiters();
    }

    pub fn received(&self) -> Vec<Received> {
        self.inner.lock().unwrap().received.clone()
    }

    /// Waits until `check` holds for the requests received so far.
    pub async fn wait_for(&self, what: &str, check: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let arrived = self.arrived.notified();
            let got = self.received();
            if check(&got) {
                return got;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                panic!("receiver: timed out waiting for {what}; got {got:#?}");
            }
        }
    }
}
