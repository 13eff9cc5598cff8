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
    /// The client presented a certificate (TLS only).
    pub client_cert: bool,
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

/// Reads one request from `conn`, records it, answers with the handler.
fn handle<S: Read + Write>(
    conn: S,
    client_cert: bool,
    log: &Mutex<Vec<Req>>,
    store: &Mutex<Store>,
    handler: &Mutex<Box<Handler>>,
) -> std::io::Result<()> {
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Ok(());
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = BTreeMap::new();
    loop {
        line.clear();
        r.read_line(&mut line)?;
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
    r.read_exact(&mut body)?;
    let req = Req {
        method,
        path,
        headers,
        body,
        client_cert,
    };
    log.lock().unwrap().push(req.clone());
    let (status, resp) = {
        let h = handler.lock().unwrap();
        let mut s = store.lock().unwrap();
        h(&req, &mut s)
    };
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
        resp.len()
    );
    let conn = r.get_mut();
    conn.write_all(head.as_bytes())?;
    conn.write_all(&resp)?;
    conn.flush()
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
        Self::serve(None)
    }

    /// The same backend over TLS with `config` (https addresses).
    pub fn start_tls(config: Arc<rustls::ServerConfig>) -> Mock {
        Self::serve(Some(config))
    }

    fn serve(tls: Option<Arc<rustls::ServerConfig>>) -> Mock {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let base = format!("{scheme}://{}", listener.local_addr().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let store = Arc::new(Mutex::new(Store::default()));
        let handler: Arc<Mutex<Box<Handler>>> = Arc::new(Mutex::new(Box::new(standard)));
        let (l2, s2, h2) = (log.clone(), store.clone(), handler.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let handled = match &tls {
                    None => handle(conn, false, &l2, &s2, &h2),
                    Some(config) => {
                        let Ok(server) = rustls::ServerConnection::new(config.clone()) else {
                            continue;
                        };
                        let mut stream = rustls::StreamOwned::new(server, conn);
                        // A refused handshake (the client did not trust us, or we did not
                        // trust it) is no request.
                        let mut shaken = Ok((0, 0));
                        while stream.conn.is_handshaking() && shaken.is_ok() {
                            shaken = stream.conn.complete_io(&mut stream.sock);
                        }
                        if shaken.is_err() {
                            // Close gracefully (the alert sent, what the client sent read),
                            // so the client can read the alert instead of a reset.
                            let _ = stream.sock.shutdown(std::net::Shutdown::Write);
                            let _ = stream
                                .sock
                                .set_read_timeout(Some(std::time::Duration::from_secs(2)));
                            let _ = std::io::copy(&mut stream.sock, &mut std::io::sink());
                            continue;
                        }
                        let client_cert = stream.conn.peer_certificates().is_some();
                        handle(stream, client_cert, &l2, &s2, &h2)
                    }
                };
                let _ = handled;
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
