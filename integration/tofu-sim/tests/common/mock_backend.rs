//! A scripted HTTP state backend that records every request (method, path, headers, body),
//! to check the exact request sequence of CLIENT.md.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

#[derive(Clone, Debug)]
pub struct Req {
    pub method: String,
    pub path: String,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Req {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

type Handler = dyn Fn(&Req, &mut Store) -> (u16, Vec<u8>) + Send;

/// Server-side memory the handler may use.
#[derive(Default)]
pub struct Store {
    pub state: Option<Vec<u8>>,
    pub lock: Option<serde_json::Value>,
    pub counter: BTreeMap<String, u32>,
}

pub struct Mock {
    pub base: String,
    pub log: Arc<Mutex<Vec<Req>>>,
    pub store: Arc<Mutex<Store>>,
    handler: Arc<Mutex<Box<Handler>>>,
}

/// The standard behaviour: a lock table and a state, as a conforming server.
pub fn standard(r: &Req, s: &mut Store) -> (u16, Vec<u8>) {
    match r.method.as_str() {
        "LOCK" => match &s.lock {
            Some(l) if l["ID"] != r.json()["ID"] => (423, serde_json::to_vec(l).unwrap()),
            _ => {
                s.lock = Some(r.json());
                (200, Vec::new())
            }
        },
        "UNLOCK" => {
            s.lock = None;
            (200, Vec::new())
        }
        "GET" => match &s.state {
            Some(b) => (200, b.clone()),
            None => (404, Vec::new()),
        },
        "POST" => {
            s.state = Some(r.body.clone());
            (200, Vec::new())
        }
        _ => (405, Vec::new()),
    }
}

impl Mock {
    pub fn start() -> Mock {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let store = Arc::new(Mutex::new(Store::default()));
        let handler: Arc<Mutex<Box<Handler>>> = Arc::new(Mutex::new(Box::new(standard)));
        let (l2, s2, h2) = (log.clone(), store.clone(), handler.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    continue;
                }
                let mut parts = line.split_whitespace();
                let method = parts.next().unwrap_or_default().to_owned();
                let path = parts.next().unwrap_or_default().to_owned();
                let mut headers = BTreeMap::new();
                loop {
                    line.clear();
                    r.read_line(&mut line).unwrap();
                    let l = line.trim_end();
                    if l.is_empty() {
                        break;
                    }
                    if let Some((k, v)) = l.split_once(':') {
                        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
                    }
                }
                let len: usize = headers
                    .get("content-length")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0; len];
                r.read_exact(&mut body).unwrap();
                let req = Req {
                    method,
                    path,
                    headers,
                    body,
                };
                l2.lock().unwrap().push(req.clone());
                let (status, resp) = {
                    let h = h2.lock().unwrap();
                    let mut s = s2.lock().unwrap();
                    h(&req, &mut s)
                };
                let head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
                    resp.len()
                );
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(&resp);
            }
        });
        Mock {
            base,
            log,
            store,
            handler,
        }
    }

    pub fn set_handler(&self, h: impl Fn(&Req, &mut Store) -> (u16, Vec<u8>) + Send + 'static) {
        *self.handler.lock().unwrap() = Box::new(h);
    }

    pub fn requests(&self) -> Vec<Req> {
        self.log.lock().unwrap().clone()
    }

    pub fn clear(&self) {
        self.log.lock().unwrap().clear();
    }

    /// "METHOD path" of every request so far.
    pub fn sequence(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }

    /// TF_HTTP_* for a work dir.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("TF_HTTP_ADDRESS".into(), format!("{}/state", self.base)),
            (
                "TF_HTTP_LOCK_ADDRESS".into(),
                format!("{}/state/lock", self.base),
            ),
            (
                "TF_HTTP_UNLOCK_ADDRESS".into(),
                format!("{}/state/lock", self.base),
            ),
            ("TF_HTTP_USERNAME".into(), "run".into()),
            ("TF_HTTP_PASSWORD".into(), "tok".into()),
            ("TF_HTTP_RETRY_WAIT_MIN".into(), "0".into()),
            ("TF_HTTP_RETRY_WAIT_MAX".into(), "0".into()),
        ]
    }
}
