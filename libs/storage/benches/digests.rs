//! The digests of a state body, compared in one run: the portable Rust MD5 (the md-5 crate,
//! the baseline) against aws-lc's MD5 (`cairn_storage::md5`, what Content-MD5 uses), with
//! aws-lc's SHA-256 (`cairn_storage::sha256_hex`) beside them for scale.
//!
//! ```text
//! cargo bench -p cairn-storage --bench digests
//! ```
//!
//! The candidates take turns round by round (the one that goes first turns too), so drift
//! of the machine's speed reaches all of them alike; each round times a batch of digests of
//! the same bytes. Printed: the median over the rounds of the time per digest, the
//! throughput, and each candidate's time as a ratio to the baseline's in the same run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use md5::Digest as _;

type Candidate = (&'static str, fn(&[u8]) -> usize);

const CANDIDATES: [Candidate; 3] = [
    ("md-5 crate MD5 (baseline)", |b| {
        md5::Md5::digest(b)[0].into()
    }),
    ("aws-lc MD5", |b| cairn_storage::md5(b)[0].into()),
    ("aws-lc SHA-256", |b| cairn_storage::sha256_hex(b).len()),
];

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(30);
    println!("Digests of one body, median of {rounds} rounds (candidates alternated):");
    println!("| size | candidate | per digest | MB/s | / baseline |");
    println!("|---|---|---:|---:|---:|");
    for (label, size, batch) in [("10 KiB", 10 << 10, 400), ("1 MiB", 1 << 20, 8)] {
        let body: Vec<u8> = (0..size)
            .map(|i: usize| b"abcdefghijklmnop"[i % 16])
            .collect();
        let mut times = vec![Vec::with_capacity(rounds); CANDIDATES.len()];
        for round in 0..rounds {
            for k in 0..CANDIDATES.len() {
                let c = (round + k) % CANDIDATES.len();
                let digest = CANDIDATES[c].1;
                let start = Instant::now();
                for _ in 0..batch {
                    black_box(digest(black_box(&body)));
                }
                times[c].push(start.elapsed() / batch);
            }
        }
        let medians: Vec<Duration> = times.iter_mut().map(|t| median(t)).collect();
        for (c, (name, _)) in CANDIDATES.iter().enumerate() {
            let per = medians[c];
            println!(
                "| {label} | {name} | {:.1} µs | {:.0} | {:.2}× |",
                per.as_secs_f64() * 1e6,
                size as f64 / per.as_secs_f64() / 1e6,
                per.as_secs_f64() / medians[0].as_secs_f64(),
            );
        }
    }
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}
