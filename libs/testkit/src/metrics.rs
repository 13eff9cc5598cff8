//! Reading a service's Prometheus metrics in tests: [`scrape`] a `/metrics` listener over
//! plain HTTP (or [`scrape_until`] what a test waits for shows; an in-process service started
//! with metrics on port 0 reports the address it bound, `Server::metrics_addr`), and
//! [`sample`] a value out of the text format. The
//! recorder is process-wide, so assertions compare a value after the action with the value
//! before it.
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// `GET /metrics` from a plaintext metrics listener; the body.
pub async fn scrape(addr: SocketAddr) -> anyhow::Result<String> {
    let mut conn = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect to the metrics listener {addr}"))?;
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: metrics\r\nConnection: close\r\n\r\n")
        .await
        .context("send the scrape")?;
    let mut response = String::new();
    conn.read_to_string(&mut response)
        .await
        .context("read the scrape")?;
    let Some((head, body)) = response.split_once("\r\n\r\n") else {
        bail!("not an HTTP response: {response}");
    };
    if !head.starts_with("HTTP/1.1 200") {
        bail!("the scrape failed: {head}");
    }
    Ok(body.to_owned())
}

/// Scrapes `addr` until `done` holds for the text (every 50 ms, at most `within`); the text
/// that satisfied it, or an error with the last one.
pub async fn scrape_until(
    addr: SocketAddr,
    within: Duration,
    done: impl Fn(&str) -> bool,
) -> anyhow::Result<String> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let text = scrape(addr).await?;
        if done(&text) {
            return Ok(text);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("the metrics did not show it within {within:?}:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The sum of every series called `name` whose labels include all of `labels` (0 when
/// there is none), e.g. `sample(text, "cairn_grpc_requests_total", &[("code", "OK")])`.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (series_name, series_labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            if series_name != name {
                return None;
            }
            let have: Vec<(&str, &str)> = series_labels
                .split(',')
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    Some((k, v.trim_matches('"')))
                })
                .collect();
            labels
                .iter()
                .all(|want| have.contains(want))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_summed_over_matching_series() {
        let text = "# HELP x_total things\n# TYPE x_total counter\n\
                    x_total{a=\"1\",b=\"2\"} 3\nx_total{a=\"1\",b=\"3\"} 4\ny 7\n";
        assert_eq!(sample(text, "x_total", &[("a", "1")]), 7.0);
        assert_eq!(sample(text, "x_total", &[("b", "3")]), 4.0);
        assert_eq!(sample(text, "x_total", &[("b", "9")]), 0.0);
        assert_eq!(sample(text, "y", &[]), 7.0);
    }
}
