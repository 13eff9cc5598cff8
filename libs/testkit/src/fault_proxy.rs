//! A TCP proxy a test puts in front of S3/KMS, PostgreSQL or NATS to cut, delay or reset the
//! connections to it on command.
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Bytes read from one side before they are forwarded to the other.
const CHUNK: usize = 16 * 1024;

/// What the proxy does to traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward everything as it comes.
    None,
    /// Close every proxied connection and close new ones as soon as they are accepted. Peers
    /// see EOF, or a reset when the kernel still held bytes the proxy had not read yet.
    Cut,
    /// Hold every chunk for this long after it was read before forwarding it. Switching to
    /// another fault re-evaluates held chunks: `None` forwards them at once.
    Delay(Duration),
    /// Abort every proxied connection with a TCP RST (`SO_LINGER` 0) and reset new ones as
    /// soon as they are accepted.
    Reset,
}

/// A proxy on `127.0.0.1:<random port>` forwarding to one upstream address. Dropping it
/// closes the listener and every proxied connection.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    fault: watch::Sender<Fault>,
    /// How many times the open connections were stalled ([`FaultProxy::stall_open_connections`]).
    stalls: watch::Sender<u64>,
    accept: JoinHandle<()>,
}

impl FaultProxy {
    /// Starts forwarding a fresh local port to `upstream`, with no fault.
    pub async fn start(upstream: SocketAddr) -> io::Result<FaultProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (fault, _) = watch::channel(Fault::None);
        let (stalls, _) = watch::channel(0);
        let accept = tokio::spawn(accept_loop(
            listener,
            upstream,
            fault.clone(),
            stalls.clone(),
        ));
        tracing::debug!(%addr, %upstream, "fault proxy started");
        Ok(FaultProxy {
            addr,
            upstream,
            fault,
            stalls,
            accept,
        })
    }

    /// Starts a proxy in front of the host and port of `url` (e.g. `postgres://…@host:5432/db`,
    /// `nats://host:4222`, `http://host:9000`); the port defaults from the scheme.
    pub async fn start_for_url(url: &str) -> io::Result<FaultProxy> {
        let authority = host_port(url).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "url has no host:port and no scheme with a known default port",
            )
        })?;
        let upstream = tokio::net::lookup_host(authority.as_str())
            .await?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "host has no address"))?;
        FaultProxy::start(upstream).await
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where traffic goes.
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// Applies `fault` to existing and new connections.
    pub fn set(&self, fault: Fault) {
        tracing::debug!(addr = %self.addr, ?fault, "fault proxy set");
        self.fault.send_replace(fault);
    }

    /// The connections open now stop forwarding, both ways and for good, without being
    /// closed: what a peer sees when the other end vanished without FIN or RST (a host that
    /// died, a dropped NAT entry, a load balancer that failed over). Connections accepted
    /// later are not affected (they follow [`Fault`]), so a client that gives the dead
    /// connection up and connects again gets through.
    pub fn stall_open_connections(&self) {
        tracing::debug!(addr = %self.addr, "fault proxy stalls its open connections");
        self.stalls.send_modify(|n| *n += 1);
    }

    /// Stops injecting faults: `set(Fault::None)`.
    pub fn heal(&self) {
        self.set(Fault::None);
    }

    /// The fault in force.
    pub fn fault(&self) -> Fault {
        *self.fault.borrow()
    }

    /// `original_url` with its host and port replaced by the proxy's, keeping the scheme,
    /// credentials, path and query: `postgres://u:p@db:5432/x` → `postgres://u:p@127.0.0.1:PORT/x`.
    pub fn url_for(&self, original_url: &str) -> String {
        replace_host_port(original_url, self.addr)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        // Proxied connections end when they see the sender gone.
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    fault: watch::Sender<Fault>,
    stalls: watch::Sender<u64>,
) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(err) => {
                // Out of file descriptors and the like: keep serving once it passes.
                tracing::warn!(error = %err, "fault proxy accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let current = *fault.borrow();
        match current {
            Fault::Cut => drop(client),
            Fault::Reset => abort(client),
            Fault::None | Fault::Delay(_) => {
                let stall = Stall::after(stalls.subscribe());
                tokio::spawn(proxy_connection(client, upstream, fault.subscribe(), stall));
            }
        }
    }
}

/// Closes a connection with RST instead of FIN.
fn abort(stream: TcpStream) {
    if let Err(err) = stream.set_zero_linger() {
        tracing::debug!(error = %err, "set SO_LINGER 0");
    }
    drop(stream);
}

/// How a proxied connection ended.
enum End {
    /// Both sides finished (or one failed); close normally.
    Done,
    /// One side failed: abort both so each sees a reset, as it would without the proxy.
    Failed,
    /// The test cut the connection.
    Cut,
    /// The test reset the connection.
    Reset,
}

/// Whether a connection was stalled: the stall count moved past the one it was accepted at.
#[derive(Clone)]
struct Stall {
    stalls: watch::Receiver<u64>,
    accepted_at: u64,
}

impl Stall {
    fn after(stalls: watch::Receiver<u64>) -> Self {
        let accepted_at = *stalls.borrow();
        Stall {
            stalls,
            accepted_at,
        }
    }

    fn stalled(&self) -> bool {
        *self.stalls.borrow() > self.accepted_at
    }
}

async fn proxy_connection(
    mut client: TcpStream,
    upstream: SocketAddr,
    mut fault: watch::Receiver<Fault>,
    stall: Stall,
) {
    let mut server = match TcpStream::connect(upstream).await {
        Ok(server) => server,
        Err(err) => {
            tracing::debug!(%upstream, error = %err, "fault proxy cannot reach upstream");
            abort(client);
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let end = {
        let (client_read, client_write) = client.split();
        let (server_read, server_write) = server.split();
        let both_ways = futures::future::try_join(
            pump(client_read, server_write, fault.clone(), stall.clone()),
            pump(server_read, client_write, fault.clone(), stall),
        );
        tokio::select! {
            result = both_ways => match result {
                Ok(_) => End::Done,
                Err(_) => End::Failed,
            },
            end = wait_for_break(&mut fault) => end,
        }
    };
    match end {
        End::Done | End::Cut => {}
        End::Failed | End::Reset => {
            abort(client);
            abort(server);
        }
    }
}

/// Resolves when the test cuts or resets the connection, or the proxy is dropped.
async fn wait_for_break(fault: &mut watch::Receiver<Fault>) -> End {
    loop {
        match *fault.borrow_and_update() {
            Fault::Cut => return End::Cut,
            Fault::Reset => return End::Reset,
            Fault::None | Fault::Delay(_) => {}
        }
        if fault.changed().await.is_err() {
            return End::Cut;
        }
    }
}

/// Copies one direction, holding each chunk while a delay is in force, and nothing more once
/// the connection is stalled (it stays open, silent). On end of stream the write side is
/// shut down so the peer sees the half-close.
async fn pump<R, W>(
    mut from: R,
    mut to: W,
    mut fault: watch::Receiver<Fault>,
    stall: Stall,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = from.read(&mut buf).await?;
        if stall.stalled() {
            // Until the test cuts it or drops the proxy (the connection's other branch).
            return std::future::pending().await;
        }
        if n == 0 {
            to.shutdown().await?;
            return Ok(());
        }
        hold(Instant::now(), &mut fault).await;
        to.write_all(&buf[..n]).await?;
    }
}

/// Waits until a chunk read at `read_at` may be forwarded under the fault in force.
async fn hold(read_at: Instant, fault: &mut watch::Receiver<Fault>) {
    loop {
        let delay = match *fault.borrow_and_update() {
            Fault::Delay(delay) => delay,
            // Cut and Reset are handled by the connection; None forwards.
            Fault::None | Fault::Cut | Fault::Reset => return,
        };
        tokio::select! {
            () = tokio::time::sleep_until(read_at + delay) => return,
            changed = fault.changed() => if changed.is_err() { return },
        }
    }
}

/// Splits a URL into (scheme with `://`, userinfo with `@`, host:port, rest). Without a
/// scheme the whole URL up to the first `/`, `?` or `#` is the authority.
fn split_url(url: &str) -> (&str, &str, &str, &str) {
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let (scheme, after) = url.split_at(scheme_end);
    let authority_end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (authority, rest) = after.split_at(authority_end);
    let userinfo_end = authority.rfind('@').map_or(0, |i| i + 1);
    let (userinfo, host_port) = authority.split_at(userinfo_end);
    (scheme, userinfo, host_port, rest)
}

fn replace_host_port(url: &str, addr: SocketAddr) -> String {
    let (scheme, userinfo, _, rest) = split_url(url);
    format!("{scheme}{userinfo}{addr}{rest}")
}

/// `host:port` of a URL, with the scheme's default port when it has none.
fn host_port(url: &str) -> Option<String> {
    let (scheme, _, host_port, _) = split_url(url);
    if host_port.is_empty() {
        return None;
    }
    // A port follows the last ':' unless that ':' is inside an IPv6 literal.
    let has_port = host_port
        .rfind(':')
        .is_some_and(|i| !host_port[i..].contains(']'));
    if has_port {
        return Some(host_port.to_owned());
    }
    let port = match scheme.trim_end_matches("://") {
        "postgres" | "postgresql" => 5432,
        "nats" => 4222,
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    Some(format!("{host_port}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 40001))
    }

    #[test]
    fn url_for_keeps_everything_but_host_and_port() {
        let cases = [
            (
                "postgres://cairn:s3cr@t@db.internal:5432/app?sslmode=disable",
                "postgres://cairn:s3cr@t@127.0.0.1:40001/app?sslmode=disable",
            ),
            ("nats://127.0.0.1:54222", "nats://127.0.0.1:40001"),
            ("http://127.0.0.1:55000/", "http://127.0.0.1:40001/"),
            ("https://kms.example.com?x=1", "https://127.0.0.1:40001?x=1"),
            ("http://[::1]:9000/bucket", "http://127.0.0.1:40001/bucket"),
            ("localhost:4222", "127.0.0.1:40001"),
        ];
        for (url, want) in cases {
            assert_eq!(replace_host_port(url, addr()), want, "{url}");
        }
    }

    #[test]
    fn host_port_uses_default_ports() {
        assert_eq!(
            host_port("postgres://u:p@db:6543/x").as_deref(),
            Some("db:6543")
        );
        assert_eq!(host_port("postgres://u@db/x").as_deref(), Some("db:5432"));
        assert_eq!(host_port("nats://n").as_deref(), Some("n:4222"));
        assert_eq!(host_port("http://[::1]/").as_deref(), Some("[::1]:80"));
        assert_eq!(host_port("http://[::1]:81/").as_deref(), Some("[::1]:81"));
        assert_eq!(host_port("foo://bar"), None);
        assert_eq!(host_port("http:///path"), None);
    }
}
