//! The fault proxy in front of a local echo server: traffic passes, cut and reset break
//! existing and new connections, delay holds data until healed, a stall silences the open
//! connections only, heal restores service.
#![allow(clippy::unwrap_used)]

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use cairn_testkit::{Fault, FaultProxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

/// Long enough that a healthy loopback round trip never takes it; only guards against hangs.
const PATIENCE: Duration = Duration::from_secs(10);

/// An echo server on a random port; runs until the test ends.
async fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let (mut r, mut w) = conn.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

async fn round_trip(conn: &mut TcpStream, msg: &[u8]) -> std::io::Result<Vec<u8>> {
    conn.write_all(msg).await?;
    let mut buf = vec![0; msg.len()];
    timeout(PATIENCE, conn.read_exact(&mut buf))
        .await
        .expect("echo answered in time")?;
    Ok(buf)
}

/// What the client sees when it next reads.
#[derive(Debug, PartialEq)]
enum Seen {
    Eof,
    Reset,
    Data,
    OtherError(ErrorKind),
}

async fn next_read(conn: &mut TcpStream) -> Seen {
    let mut buf = [0u8; 64];
    match timeout(PATIENCE, conn.read(&mut buf))
        .await
        .expect("the connection was closed in time")
    {
        Ok(0) => Seen::Eof,
        Ok(_) => Seen::Data,
        Err(e) if e.kind() == ErrorKind::ConnectionReset => Seen::Reset,
        Err(e) => Seen::OtherError(e.kind()),
    }
}

async fn proxied() -> (FaultProxy, SocketAddr) {
    let echo = echo_server().await;
    (FaultProxy::start(echo).await.unwrap(), echo)
}

#[tokio::test]
async fn forwards_both_ways() {
    let (proxy, echo) = proxied().await;
    assert_ne!(proxy.addr(), echo);
    assert_eq!(proxy.upstream(), echo);
    assert_eq!(proxy.fault(), Fault::None);
    let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut conn, b"hello").await.unwrap(), b"hello");
    // More than one proxy chunk, to see large writes arrive whole and in order.
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(round_trip(&mut conn, &big).await.unwrap(), big);
}

#[tokio::test]
async fn half_close_is_passed_on() {
    let (proxy, _) = proxied().await;
    let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
    conn.write_all(b"last words").await.unwrap();
    conn.shutdown().await.unwrap();
    let mut all = Vec::new();
    timeout(PATIENCE, conn.read_to_end(&mut all))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(all, b"last words");
}

#[tokio::test]
async fn cut_closes_existing_and_new_connections_until_healed() {
    let (proxy, _) = proxied().await;
    let mut existing = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut existing, b"a").await.unwrap(), b"a");

    proxy.set(Fault::Cut);
    assert_eq!(proxy.fault(), Fault::Cut);
    assert_eq!(next_read(&mut existing).await, Seen::Eof);

    let mut during = TcpStream::connect(proxy.addr()).await.unwrap();
    let _ = during.write_all(b"anyone?").await;
    let seen = next_read(&mut during).await;
    assert!(matches!(seen, Seen::Eof | Seen::Reset), "{seen:?}");

    proxy.heal();
    assert_eq!(proxy.fault(), Fault::None);
    let mut after = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut after, b"back").await.unwrap(), b"back");
}

#[tokio::test]
async fn reset_aborts_existing_and_new_connections_with_rst() {
    let (proxy, _) = proxied().await;
    let mut existing = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut existing, b"a").await.unwrap(), b"a");

    proxy.set(Fault::Reset);
    assert_eq!(next_read(&mut existing).await, Seen::Reset);

    let mut during = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(next_read(&mut during).await, Seen::Reset);

    proxy.heal();
    let mut after = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut after, b"back").await.unwrap(), b"back");
}

#[tokio::test]
async fn delay_holds_data_until_healed() {
    let (proxy, _) = proxied().await;
    let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut conn, b"warm").await.unwrap(), b"warm");

    proxy.set(Fault::Delay(Duration::from_secs(3600)));
    conn.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    let early = timeout(Duration::from_millis(300), conn.read_exact(&mut buf)).await;
    assert!(early.is_err(), "data arrived while held: {early:?}");

    proxy.heal();
    timeout(PATIENCE, conn.read_exact(&mut buf))
        .await
        .expect("held data is released by heal")
        .unwrap();
    assert_eq!(&buf, b"ping");
}

#[tokio::test]
async fn stalled_connections_stay_open_and_silent_while_new_ones_pass() {
    let (proxy, _) = proxied().await;
    let mut stalled = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut stalled, b"warm").await.unwrap(), b"warm");

    proxy.stall_open_connections();
    stalled.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    let early = timeout(Duration::from_millis(300), stalled.read_exact(&mut buf)).await;
    assert!(early.is_err(), "a stalled connection answered: {early:?}");

    // A connection made after the stall passes, also in a fault-free proxy after heal().
    let mut fresh = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut fresh, b"new").await.unwrap(), b"new");
    proxy.heal();
    assert_eq!(round_trip(&mut fresh, b"again").await.unwrap(), b"again");
    // The stalled one is neither revived nor closed: no data, no EOF, no reset.
    let late = timeout(Duration::from_millis(300), stalled.read(&mut buf)).await;
    assert!(late.is_err(), "the stalled connection saw {late:?}");
}

#[tokio::test]
async fn short_delay_still_delivers_in_order() {
    let (proxy, _) = proxied().await;
    proxy.set(Fault::Delay(Duration::from_millis(20)));
    let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
    for i in 0..5u8 {
        let msg = [b'm', b'0' + i];
        assert_eq!(round_trip(&mut conn, &msg).await.unwrap(), msg);
    }
}

#[tokio::test]
async fn cut_during_delay_drops_held_data() {
    let (proxy, _) = proxied().await;
    let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(round_trip(&mut conn, b"warm").await.unwrap(), b"warm");
    proxy.set(Fault::Delay(Duration::from_secs(3600)));
    conn.write_all(b"lost").await.unwrap();
    proxy.set(Fault::Cut);
    // EOF, or RST when the kernel still held the unread bytes as the proxy closed: never data.
    let seen = next_read(&mut conn).await;
    assert!(matches!(seen, Seen::Eof | Seen::Reset), "{seen:?}");
}

#[tokio::test]
async fn dropping_the_proxy_closes_its_connections() {
    let (proxy, _) = proxied().await;
    let addr = proxy.addr();
    let mut conn = TcpStream::connect(addr).await.unwrap();
    assert_eq!(round_trip(&mut conn, b"a").await.unwrap(), b"a");
    drop(proxy);
    assert_eq!(next_read(&mut conn).await, Seen::Eof);
}

#[tokio::test]
async fn unreachable_upstream_resets_the_client() {
    // Bind then drop to get a port nobody listens on.
    let dead = TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let proxy = FaultProxy::start(dead).await.unwrap();
    let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(next_read(&mut conn).await, Seen::Reset);
}

#[tokio::test]
async fn start_for_url_and_url_for_point_through_the_proxy() {
    let echo = echo_server().await;
    let url = format!("nats://{echo}");
    let proxy = FaultProxy::start_for_url(&url).await.unwrap();
    assert_eq!(proxy.upstream(), echo);
    let proxied_url = proxy.url_for(&url);
    assert_eq!(proxied_url, format!("nats://{}", proxy.addr()));
    let mut conn = TcpStream::connect(proxied_url.trim_start_matches("nats://"))
        .await
        .unwrap();
    assert_eq!(round_trip(&mut conn, b"x").await.unwrap(), b"x");
    assert!(FaultProxy::start_for_url("foo://nowhere").await.is_err());
}
