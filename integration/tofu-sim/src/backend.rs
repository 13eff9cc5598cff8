//! State storage: the `http` backend (configured by `TF_HTTP_*`, with OpenTofu's request
//! sequence, retries and lock semantics) and the local `terraform.tfstate`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use md5::{Digest, Md5};
use serde_json::{Value as Json, json};

use crate::http::{self, Url};
use crate::state::{State, TOFU_VERSION};
use crate::tls::{self, TlsSettings};

/// A backend failure, in OpenTofu's words.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("{0}")]
    Msg(String),
    #[error("HTTP remote state already locked: ID={id}")]
    Locked {
        id: String,
        info: Json,
        retryable: bool,
    },
}

fn msg(s: impl Into<String>) -> BackendError {
    BackendError::Msg(s.into())
}

/// The lock this process holds.
#[derive(Clone, Debug)]
pub struct Lock {
    pub id: String,
    pub info: Json,
}

pub fn lock_info(operation: &str) -> Lock {
    let id = uuid::Uuid::new_v4().to_string();
    let who = format!(
        "{}@{}",
        std::env::var("USER").unwrap_or_else(|_| "root".into()),
        std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "localhost".into())
    );
    let info = json!({
        "ID": id,
        "Operation": operation,
        "Info": "",
        "Who": who,
        "Version": TOFU_VERSION,
        "Created": chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.9fZ").to_string(),
        "Path": ""
    });
    Lock { id, info }
}

pub struct HttpBackend {
    address: Url,
    lock_address: Option<Url>,
    unlock_address: Option<Url>,
    update_method: String,
    lock_method: String,
    unlock_method: String,
    auth: Option<String>,
    /// The client TLS: configured when a `TF_HTTP_CLIENT_*` setting is given or an address
    /// is https.
    tls: Option<Arc<rustls::ClientConfig>>,
    retry_max: u32,
    wait_min: Duration,
    wait_max: Duration,
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

fn env_secs(k: &str, default: f64) -> Duration {
    let v = env(k)
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(default);
    Duration::from_secs_f64(v.max(0.0))
}

impl HttpBackend {
    pub fn from_env() -> Result<HttpBackend, BackendError> {
        let address = env("TF_HTTP_ADDRESS")
            .ok_or_else(|| msg("The http backend requires an address: set TF_HTTP_ADDRESS."))?;
        let parse = |u: String| http::parse_url(&u).map_err(msg);
        let auth = env("TF_HTTP_USERNAME").map(|u| {
            let p = std::env::var("TF_HTTP_PASSWORD").unwrap_or_default();
            format!("Basic {}", STANDARD.encode(format!("{u}:{p}")))
        });
        let address = parse(address)?;
        let lock_address = env("TF_HTTP_LOCK_ADDRESS").map(parse).transpose()?;
        let unlock_address = env("TF_HTTP_UNLOCK_ADDRESS").map(parse).transpose()?;
        let settings = TlsSettings::from_env();
        let https = [
            Some(&address),
            lock_address.as_ref(),
            unlock_address.as_ref(),
        ]
        .into_iter()
        .flatten()
        .any(|u| u.tls);
        let tls = if settings.any() || https {
            Some(tls::client_config(&settings).map_err(msg)?)
        } else {
            None
        };
        Ok(HttpBackend {
            address,
            lock_address,
            unlock_address,
            tls,
            update_method: env("TF_HTTP_UPDATE_METHOD").unwrap_or_else(|| "POST".into()),
            lock_method: env("TF_HTTP_LOCK_METHOD").unwrap_or_else(|| "LOCK".into()),
            unlock_method: env("TF_HTTP_UNLOCK_METHOD").unwrap_or_else(|| "UNLOCK".into()),
            auth,
            retry_max: env("TF_HTTP_RETRY_MAX")
                .and_then(|v| v.parse().ok())
                .unwrap_or(2),
            wait_min: env_secs("TF_HTTP_RETRY_WAIT_MIN", 1.0),
            wait_max: env_secs("TF_HTTP_RETRY_WAIT_MAX", 30.0),
        })
    }

    pub fn locking(&self) -> bool {
        self.lock_address.is_some()
    }

    pub fn can_unlock(&self) -> bool {
        self.unlock_address.is_some()
    }

    /// One request with go-retryablehttp's retry policy.
    fn request(
        &self,
        method: &str,
        url: &Url,
        body: Option<&[u8]>,
    ) -> Result<http::Response, BackendError> {
        let mut headers: Vec<(&str, String)> = Vec::new();
        if let Some(a) = &self.auth {
            headers.push(("Authorization", a.clone()));
        }
        if let Some(b) = body {
            headers.push(("Content-Type", "application/json".into()));
            headers.push(("Content-MD5", STANDARD.encode(Md5::digest(b))));
        }
        let attempts = self.retry_max + 1;
        let full = url.full();
        // Why the last try failed, as go-retryablehttp words it: the transport error, or
        // `unexpected HTTP status <Status>` for a retried status.
        let mut cause = String::new();
        let mut tried = 0;
        for attempt in 0..attempts {
            tried += 1;
            let res = http::send(method, url, self.tls.as_ref(), &headers, body);
            // A refused server certificate is never retried (go-retryablehttp's
            // isCertError).
            let mut final_error = false;
            let (retry_after, status) = match &res {
                Ok(r) if r.status == 429 || (r.status >= 500 && r.status != 501) => {
                    cause = if r.status == 429 {
                        String::new()
                    } else {
                        format!("unexpected HTTP status {}", r.status_line)
                    };
                    let after = if r.status == 429 || r.status == 503 {
                        r.header("retry-after").and_then(|v| v.parse::<u64>().ok())
                    } else {
                        None
                    };
                    (after, Some(r.status))
                }
                Ok(_) => return res.map_err(|e| msg(e.to_string())),
                Err(e) => {
                    crate::ui::debug(&format!("[ERR] {method} {full} request failed: {e}"));
                    // Go's url.Error: `Post "http://…": <error>`.
                    let mut op = method.to_ascii_lowercase();
                    if let Some(first) = op.get_mut(..1) {
                        first.make_ascii_uppercase();
                    }
                    cause = format!("{op} \"{full}\": {e}");
                    final_error = tls::is_certificate_rejected(e);
                    (None, None)
                }
            };
            if final_error || attempt + 1 == attempts {
                break;
            }
            let wait = match retry_after {
                Some(s) => Duration::from_secs(s),
                None => {
                    let mult = self.wait_min.as_secs_f64() * 2f64.powi(attempt as i32);
                    Duration::from_secs_f64(mult.min(self.wait_max.as_secs_f64()))
                }
            };
            let desc = match status {
                Some(code) => format!("{method} {full} (status: {code})"),
                None => format!("{method} {full}"),
            };
            crate::ui::debug(&format!(
                "[DEBUG] {desc}: retrying in {wait:?} ({} left)",
                attempts - attempt - 1
            ));
            std::thread::sleep(wait);
        }
        let why = if cause.is_empty() {
            String::new()
        } else {
            format!(": {cause}")
        };
        Err(msg(format!(
            "{method} {full} giving up after {tried} attempt(s){why}"
        )))
    }

    pub fn get(&self) -> Result<Option<Json>, BackendError> {
        let r = self.request("GET", &self.address, None)?;
        match r.status {
            200 if r.body.iter().all(u8::is_ascii_whitespace) => Ok(None),
            200 => serde_json::from_slice(&r.body)
                .map(Some)
                .map_err(|e| msg(format!("Failed to parse the remote state: {e}"))),
            204 | 404 => Ok(None),
            401 => Err(msg("HTTP remote state endpoint requires auth")),
            403 => Err(msg("HTTP remote state endpoint invalid auth")),
            n => Err(msg(format!("Unexpected HTTP response code {n}"))),
        }
    }

    pub fn put(&self, body: &[u8], lock: Option<&Lock>) -> Result<(), BackendError> {
        let mut url = self.address.clone();
        if let Some(l) = lock {
            url.path_and_query = with_id(&url.path_and_query, &l.id);
        }
        let r = self.request(&self.update_method, &url, Some(body))?;
        match r.status {
            200 | 201 | 204 => Ok(()),
            n => Err(msg(format!("HTTP error: {n}"))),
        }
    }

    pub fn lock(&self, lock: &Lock) -> Result<(), BackendError> {
        let Some(url) = &self.lock_address else {
            return Ok(());
        };
        let body = serde_json::to_vec(&lock.info).unwrap_or_default();
        let r = self.request(&self.lock_method, url, Some(&body))?;
        match r.status {
            200 => Ok(()),
            409 | 423 => match serde_json::from_slice::<Json>(&r.body) {
                Ok(info) => {
                    let id = info["ID"].as_str().unwrap_or_default().to_owned();
                    Err(BackendError::Locked {
                        retryable: !id.is_empty(),
                        id,
                        info,
                    })
                }
                Err(_) => Err(BackendError::Locked {
                    id: String::new(),
                    info: Json::Null,
                    retryable: true,
                }),
            },
            n => Err(msg(format!("Unexpected HTTP response code {n}"))),
        }
    }

    pub fn unlock_body(&self, body: &[u8]) -> Result<(), BackendError> {
        let Some(url) = &self.unlock_address else {
            return Ok(());
        };
        let r = self.request(&self.unlock_method, url, Some(body))?;
        match r.status {
            200 => Ok(()),
            n => Err(msg(format!("Unexpected HTTP response code {n}"))),
        }
    }
}

/// Adds `ID=<id>` to a query, keeping the other parameters (keys sorted, as Go's url.Values).
fn with_id(path_and_query: &str, id: &str) -> String {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let mut params: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_owned(), v.to_owned())
        })
        .filter(|(k, _)| k != "ID")
        .collect();
    params.push(("ID".into(), id.to_owned()));
    params.sort_by(|a, b| a.0.cmp(&b.0));
    let q: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{path}?{}", q.join("&"))
}

/// Where the state lives for this working directory.
pub enum Backend {
    Http(Box<HttpBackend>),
    Local(PathBuf),
}

impl Backend {
    pub fn read(&self) -> Result<Option<State>, BackendError> {
        let j = match self {
            Backend::Http(h) => h.get()?,
            Backend::Local(p) => match std::fs::read(p) {
                Ok(b) if b.iter().all(u8::is_ascii_whitespace) => None,
                Ok(b) => Some(
                    serde_json::from_slice(&b)
                        .map_err(|e| msg(format!("Failed to load state: {}: {e}", p.display())))?,
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(msg(format!("Failed to load state: {e}"))),
            },
        };
        j.map(|j| State::parse(&j).map_err(msg)).transpose()
    }

    pub fn write(&self, st: &State, lock: Option<&Lock>) -> Result<(), BackendError> {
        let mut body = serde_json::to_vec(&st.to_json()).unwrap_or_default();
        match self {
            Backend::Http(h) => {
                body.push(b'\n');
                h.put(&body, lock)
            }
            Backend::Local(p) => {
                if p.exists() {
                    let _ = std::fs::copy(p, p.with_extension("tfstate.backup"));
                }
                std::fs::write(p, st.to_bytes())
                    .map_err(|e| msg(format!("Failed to save state: {e}")))
            }
        }
    }

    pub fn lock(&self, lock: &Lock) -> Result<(), BackendError> {
        match self {
            Backend::Http(h) => h.lock(lock),
            Backend::Local(p) => {
                let lp = p.with_file_name(format!(
                    ".{}.lock.info",
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .unwrap_or("terraform.tfstate")
                ));
                match std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&lp)
                {
                    Ok(f) => serde_json::to_writer(f, &lock.info)
                        .map_err(|e| msg(format!("write lock info: {e}"))),
                    Err(_) => {
                        let info: Json = std::fs::read(&lp)
                            .ok()
                            .and_then(|b| serde_json::from_slice(&b).ok())
                            .unwrap_or(Json::Null);
                        Err(BackendError::Locked {
                            id: info["ID"].as_str().unwrap_or_default().to_owned(),
                            info,
                            retryable: true,
                        })
                    }
                }
            }
        }
    }

    pub fn unlock(&self, lock: &Lock) -> Result<(), BackendError> {
        match self {
            Backend::Http(h) => h.unlock_body(&serde_json::to_vec(&lock.info).unwrap_or_default()),
            Backend::Local(p) => {
                let lp = p.with_file_name(format!(
                    ".{}.lock.info",
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .unwrap_or("terraform.tfstate")
                ));
                let _ = std::fs::remove_file(lp);
                Ok(())
            }
        }
    }

    /// Takes the lock, retrying conflicts until `timeout` (1 s doubling to 16 s).
    pub fn lock_with_timeout(&self, lock: &Lock, timeout: Duration) -> Result<(), BackendError> {
        let deadline = Instant::now() + timeout;
        let mut wait = Duration::from_secs(1);
        loop {
            match self.lock(lock) {
                Err(BackendError::Locked {
                    retryable: true, ..
                }) if Instant::now() < deadline => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    std::thread::sleep(wait.min(left));
                    wait = (wait * 2).min(Duration::from_secs(16));
                }
                other => return other,
            }
        }
    }
}
