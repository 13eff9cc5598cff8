//! A minimal blocking HTTP/1.1 client over std::net, plain or TLS (rustls, configured by
//! [`crate::tls`]), enough for the `http` state backend.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

/// A parsed `http(s)://host:port/path?query` URL.
#[derive(Clone, Debug)]
pub struct Url {
    /// `https`.
    pub tls: bool,
    pub host: String,
    pub port: u16,
    pub path_and_query: String,
}

impl Url {
    /// The URL as it appears in errors and debug lines.
    pub fn full(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("{scheme}://{host}:{}{}", self.port, self.path_and_query)
    }
}

/// OpenTofu's check of an address (`address must be HTTP or HTTPS`), then its parts.
pub fn parse_url(u: &str) -> Result<Url, String> {
    let (tls, rest) = if let Some(rest) = u.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = u.strip_prefix("http://") {
        (false, rest)
    } else {
        return Err(format!("{u}: address must be HTTP or HTTPS"));
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !p.contains(']') => {
            (h, p.parse().map_err(|_| format!("{u}: invalid port"))?)
        }
        _ => (authority, if tls { 443 } else { 80 }),
    };
    Ok(Url {
        tls,
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
        port,
        path_and_query: path.to_owned(),
    })
}

/// A connection, plain or TLS.
enum Conn {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf).map_err(crate::tls::go_error),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf).map_err(crate::tls::go_error),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush().map_err(crate::tls::go_error),
        }
    }
}

/// Connects, and for https completes the handshake (the server verified per `tls`).
fn connect(url: &Url, tls: Option<&Arc<ClientConfig>>) -> io::Result<Conn> {
    let addr = (url.host.as_str(), url.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    stream.set_write_timeout(Some(Duration::from_secs(60)))?;
    if !url.tls {
        return Ok(Conn::Plain(stream));
    }
    let config = tls.ok_or_else(|| io::Error::other("tls: no client configuration"))?;
    let name = ServerName::try_from(url.host.clone())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("tls: {e}")))?;
    let conn = ClientConnection::new(config.clone(), name)
        .map_err(|e| io::Error::other(format!("tls: {e}")))?;
    let mut tls = StreamOwned::new(conn, stream);
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .map_err(crate::tls::go_error)?;
    }
    Ok(Conn::Tls(Box::new(tls)))
}

pub struct Response {
    pub status: u16,
    /// The status line's code and reason phrase as sent (`503 Service Unavailable`), what
    /// Go's `Response.Status` holds.
    pub status_line: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one request on a fresh connection (`tls` verifies an https server).
pub fn send(
    method: &str,
    url: &Url,
    tls: Option<&Arc<ClientConfig>>,
    headers: &[(&str, String)],
    body: Option<&[u8]>,
) -> io::Result<Response> {
    let mut stream = connect(url, tls)?;
    let mut req = format!(
        "{method} {} HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: OpenTofu/{}\r\nConnection: close\r\n",
        url.path_and_query,
        url.host,
        url.port,
        crate::state::TOFU_VERSION
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = body.unwrap_or_default();
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let written = stream
        .write_all(req.as_bytes())
        .and_then(|()| stream.write_all(body))
        .and_then(|()| stream.flush());
    if let Err(e) = written {
        // A TLS server that refused us (no or a wrong client certificate) said why in an
        // alert that may already be waiting: that is the error, as Go reports it.
        let mut probe = [0u8; 1];
        return Err(match stream.read(&mut probe) {
            Err(alert) if crate::tls::is_remote_alert(&alert) => alert,
            _ => e,
        });
    }
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad status line"))?;
    let status_line = line
        .trim_end()
        .split_once(' ')
        .map(|(_, rest)| rest.to_owned())
        .unwrap_or_default();
    let mut headers = Vec::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            break;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let mut resp = Response {
        status,
        status_line,
        headers,
        body: Vec::new(),
    };
    if method == "HEAD" || status == 204 || status == 304 {
        return Ok(resp);
    }
    if resp
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        loop {
            line.clear();
            r.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or("0"), 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
            if size == 0 {
                break;
            }
            let mut chunk = vec![0; size];
            r.read_exact(&mut chunk)?;
            resp.body.extend_from_slice(&chunk);
            line.clear();
            r.read_line(&mut line)?;
        }
    } else if let Some(len) = resp
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        let mut b = vec![0; len];
        r.read_exact(&mut b)?;
        resp.body = b;
    } else {
        match r.read_to_end(&mut resp.body) {
            // A server that closes without TLS close_notify still ended the body.
            Err(e) if url.tls && e.kind() == io::ErrorKind::UnexpectedEof => {}
            other => {
                other?;
            }
        }
    }
    Ok(resp)
}
