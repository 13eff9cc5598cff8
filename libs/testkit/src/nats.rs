//! A NATS connection per test with a subject and stream-name prefix of its own, so tests on
//! the shared (open) server never see each other's messages, and whose streams the admin's
//! setup step has made, as `cairn-tenancy nats setup` does before a platform starts; and
//! [`NatsServer`], a nats-server process of a test's own (permission tests: its users and
//! their permissions from a generated configuration). A prefix's streams are deleted when
//! the last clone of its [`TestNats`] is dropped, so tests and benches leave nothing in the
//! shared server's store.
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use futures::{StreamExt, TryStreamExt};

use crate::env;

/// A connection to the `CAIRN_TEST_NATS_URL` server and a random namespace.
#[derive(Debug, Clone)]
pub struct TestNats {
    pub url: String,
    pub client: async_nats::Client,
    pub jetstream: jetstream::Context,
    /// `t` followed by 10 lowercase hex digits: a valid subject token and stream-name part.
    pub prefix: String,
    /// Deletes the prefix's streams once every clone is gone.
    _cleanup: Arc<Cleanup>,
}

/// The streams of one prefix, deleted on drop.
#[derive(Debug)]
struct Cleanup {
    url: String,
    prefix: String,
}

impl Drop for Cleanup {
    /// Deletes the prefix's streams over a connection of its own, on a thread with a runtime
    /// of its own (the test's runtime may be the one dropping this). Never panics: a server
    /// already gone leaves the streams to its own end.
    fn drop(&mut self) {
        let (url, prefix) = (
            std::mem::take(&mut self.url),
            std::mem::take(&mut self.prefix),
        );
        let cleanup = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                let connect = async_nats::ConnectOptions::new()
                    .connection_timeout(Duration::from_secs(2))
                    .connect(url.as_str());
                if let Ok(client) = connect.await {
                    let _ = delete_streams(&jetstream::new(client), &prefix).await;
                }
            });
        });
        let _ = cleanup.join();
    }
}

/// Deletes every JetStream stream of `prefix`: its own (`<prefix>_…`) and Cairn's in its
/// namespace (`<PREFIX>_CAIRN_…`); returns how many.
async fn delete_streams(js: &jetstream::Context, prefix: &str) -> Result<usize, String> {
    let own = format!("{prefix}_");
    let cairn = format!("{}_", prefix.to_ascii_uppercase());
    let names: Vec<String> = js
        .stream_names()
        .try_collect()
        .await
        .map_err(|err| format!("list JetStream streams: {err}"))?;
    let mut deleted = 0;
    for name in names
        .into_iter()
        .filter(|n| n.starts_with(&own) || n.starts_with(&cairn))
    {
        js.delete_stream(&name)
            .await
            .map_err(|err| format!("delete JetStream stream {name}: {err}"))?;
        deleted += 1;
    }
    Ok(deleted)
}

/// Connects to the test NATS server with a fresh prefix whose five streams exist
/// ([`cairn_bus::setup_streams`], production settings). Panics when the variable is unset or
/// the server cannot be reached.
pub async fn connect_nats() -> TestNats {
    let nats = connect_nats_without_streams().await;
    let ns = nats.namespace();
    if let Err(err) =
        cairn_bus::setup_streams(&nats.jetstream, &ns, &cairn_bus::StreamSettings::default()).await
    {
        panic!("set up the streams of {}: {err}", nats.prefix);
    }
    nats
}

/// [`connect_nats`] without the streams: for tests of the setup step itself.
pub async fn connect_nats_without_streams() -> TestNats {
    let url = env::nats_url();
    let client = match async_nats::connect(url.as_str()).await {
        Ok(client) => client,
        Err(err) => panic!("connect to NATS at {} ({url}): {err}", env::NATS_URL_VAR),
    };
    let jetstream = jetstream::new(client.clone());
    let prefix = random_prefix();
    TestNats {
        _cleanup: Arc::new(Cleanup {
            url: url.clone(),
            prefix: prefix.clone(),
        }),
        url,
        client,
        jetstream,
        prefix,
    }
}

fn random_prefix() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("t{}", &id[..10])
}

impl TestNats {
    /// The bus namespace of this prefix.
    pub fn namespace(&self) -> cairn_bus::Namespace {
        match cairn_bus::Namespace::with_prefix(&self.prefix) {
            Ok(ns) => ns,
            Err(err) => panic!("test prefix {}: {err}", self.prefix),
        }
    }

    /// `<prefix>.<rest>`.
    pub fn subject(&self, rest: &str) -> String {
        format!("{}.{rest}", self.prefix)
    }

    /// `<prefix>_<name>`: a stream or consumer name owned by this test.
    pub fn stream_name(&self, name: &str) -> String {
        format!("{}_{name}", self.prefix)
    }

    /// Deletes every JetStream stream whose name starts with this test's prefix (either
    /// case) now; returns how many. (The last clone's drop does it too.)
    pub async fn delete_streams(&self) -> usize {
        match delete_streams(&self.jetstream, &self.prefix).await {
            Ok(deleted) => deleted,
            Err(err) => panic!("{err}"),
        }
    }
}

/// Every message stored on `subject` in `stream` (a filter subject may hold wildcards),
/// decoded as `M`, oldest first, read through an ephemeral consumer that acknowledges
/// nothing, so the stream is left as it was.
pub async fn stored<M: prost::Message + Default>(
    js: &jetstream::Context,
    stream: &str,
    subject: String,
) -> Vec<M> {
    let consumer = js
        .get_stream(stream)
        .await
        .unwrap_or_else(|err| panic!("stream {stream}: {err}"))
        .create_consumer(jetstream::consumer::pull::Config {
            filter_subject: subject,
            ack_policy: jetstream::consumer::AckPolicy::None,
            ..Default::default()
        })
        .await
        .unwrap_or_else(|err| panic!("a reader of {stream}: {err}"));
    let mut batch = consumer
        .fetch()
        .max_messages(10_000)
        .messages()
        .await
        .unwrap_or_else(|err| panic!("read {stream}: {err}"));
    let mut out = Vec::new();
    while let Some(msg) = batch.next().await {
        let msg = msg.unwrap_or_else(|err| panic!("read {stream}: {err}"));
        match M::decode(msg.payload.clone()) {
            Ok(decoded) => out.push(decoded),
            Err(err) => panic!("a message on {} does not decode: {err}", msg.subject),
        }
    }
    out
}

/// The nats-server binary: `CAIRN_TEST_NATS_SERVER`, else `nats-server` on `PATH`, else
/// Debian's `/usr/sbin/nats-server` (what deploy/local/install.sh installs).
pub fn nats_server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CAIRN_TEST_NATS_SERVER").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("nats-server"))
            .find(|candidate| candidate.is_file())
    });
    on_path.unwrap_or_else(|| PathBuf::from("/usr/sbin/nats-server"))
}

/// A nats-server of a test's own on a free loopback port, JetStream in a directory of its
/// own, with `config` (e.g. `cairn_bus::server_config`'s accounts and users). Killed on drop.
pub struct NatsServer {
    pub url: String,
    pub addr: SocketAddr,
    child: Child,
    dir: tempfile::TempDir,
}

impl NatsServer {
    /// Starts it and waits until it greets clients; panics with its log when it does not.
    pub async fn start(config: &str) -> NatsServer {
        let dir = crate::temp::temp_dir();
        let conf = dir.path().join("nats-server.conf");
        let store = dir.path().join("jetstream");
        let log = dir.path().join("nats-server.log");
        if let Err(err) = std::fs::write(&conf, config) {
            panic!("write {}: {err}", conf.display());
        }
        let addr = free_loopback_addr();
        let log_file = match std::fs::File::create(&log) {
            Ok(f) => f,
            Err(err) => panic!("create {}: {err}", log.display()),
        };
        let stderr = match log_file.try_clone() {
            Ok(f) => f,
            Err(err) => panic!("clone the log file handle: {err}"),
        };
        let binary = nats_server_binary();
        let child = Command::new(&binary)
            .arg("-c")
            .arg(&conf)
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &addr.port().to_string(),
                "-js",
                "-sd",
            ])
            .arg(&store)
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(stderr)
            .spawn();
        let child = match child {
            Ok(child) => child,
            Err(err) => panic!(
                "start {} (set CAIRN_TEST_NATS_SERVER or run deploy/local/install.sh): {err}",
                binary.display()
            ),
        };
        let mut server = NatsServer {
            url: format!("nats://{addr}"),
            addr,
            child,
            dir,
        };
        server.wait_ready().await;
        server
    }

    async fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if greets(self.addr) {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("nats-server exited ({status}):\n{}", self.log());
            }
            if Instant::now() > deadline {
                panic!("nats-server not ready after 20 s:\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The directory of its configuration, store and log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("nats-server.log")).unwrap_or_default()
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A NATS server sends `INFO` to every client first.
fn greets(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut greeting = [0u8; 4];
    stream.read_exact(&mut greeting).is_ok() && &greeting == b"INFO"
}

fn free_loopback_addr() -> SocketAddr {
    match TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
        Ok(addr) => addr,
        Err(err) => panic!("find a free loopback port: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_lowercase_alphanumeric_and_distinct() {
        let a = random_prefix();
        let b = random_prefix();
        assert_ne!(a, b);
        for p in [&a, &b] {
            assert_eq!(p.len(), 11, "{p}");
            assert!(p.starts_with('t'), "{p}");
            assert!(
                p.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
                "{p}"
            );
        }
    }
}
