//! A minimal blocking HTTP/1.1 client over std::net (plain http only), enough for the
//! `http` state backend.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// A parsed `http://host:port/path?query` URL.
#[derive(Clone, Debug)]
pub struct Url {
    pub host: String,
    pub port: u16,
    pub path_and_query: String,
}

pub fn parse_url(u: &str) -> Result<Url, String> {
    let rest = u.strip_prefix("http://").ok_or_else(|| {
        if u.starts_with("https://") {
            format!("{u}: https is not emulated by tofu-sim (use http)")
        } else {
            format!("{u}: address must be an http URL")
        }
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, p.parse().map_err(|_| format!("{u}: invalid port"))?),
        None => (authority, 80),
    };
    Ok(Url {
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
        port,
        path_and_query: path.to_owned(),
    })
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

/// Sends one request on a fresh connection.
pub fn send(
    method: &str,
    url: &Url,
    headers: &[(&str, String)],
    body: Option<&[u8]>,
) -> io::Result<Response> {
    let addr = (url.host.as_str(), url.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    stream.set_write_timeout(Some(Duration::from_secs(60)))?;
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
    stream.write_all(req.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()?;
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
        r.read_to_end(&mut resp.body)?;
    }
    Ok(resp)
}
