//! A webhook receiver on loopback, as a tenant would run one: it accepts HTTP POSTs, answers
//! 200, keeps every request (headers and body) and checks the `Cairn-Signature` header the
//! way a receiver must (HMAC-SHA256 of `"<t>.<body>"` under the subscription's secret).
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    /// Header names lower-cased.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// Whether `Cairn-Signature` is valid for the body under `secret`.
    pub fn signed_with(&self, secret: &str) -> bool {
        let Some(header) = self.headers.get("cairn-signature") else {
            return false;
        };
        let mut t = None;
        let mut v1 = None;
        for part in header.split(',') {
            match part.split_once('=') {
                Some(("t", value)) => t = Some(value),
                Some(("v1", value)) => v1 = Some(value),
                _ => {}
            }
        }
        let (Some(t), Some(v1)) = (t, v1) else {
            return false;
        };
        let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret.as_bytes());
        let mut signed = format!("{t}.").into_bytes();
        signed.extend_from_slice(&self.body);
        let tag = aws_lc_rs::hmac::sign(&key, &signed);
        let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        hex == v1
    }
}

pub struct Receiver {
    addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a receiver");
        let addr = listener.local_addr().expect("its address");
        let received = Arc::new(Mutex::new(Vec::new()));
        let sink = received.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let sink = sink.clone();
                tokio::spawn(async move {
                    if let Some(r) = read_request(&mut conn).await {
                        sink.lock().expect("receiver lock").push(r);
                        let _ = conn
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                            .await;
                    }
                    let _ = conn.shutdown().await;
                });
            }
        });
        Receiver {
            addr,
            received,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/hooks/cairn", self.addr)
    }

    /// Everything received so far, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().expect("receiver lock").clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One HTTP/1.1 request: headers up to the blank line, then `content-length` bytes of body.
async fn read_request(conn: &mut tokio::net::TcpStream) -> Option<Received> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > 1 << 20 {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let headers: BTreeMap<String, String> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[header_end + 4..].to_vec();
    while body.len() < length {
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Some(Received { headers, body })
}
