//! A bounded fuzz test of the parser, validator and resolver, with a deterministic
//! pseudo-random mutator of valid templates: no input may panic, every rejection carries at
//! least one problem with a path, and accepted documents resolve and render. Runs about 3
//! seconds by default; set `CAIRN_FUZZ_SECONDS` for longer runs and `CAIRN_FUZZ_SEED` to
//! replay. (The libFuzzer target in `fuzz/` covers the same entry point with coverage
//! guidance: `cargo +nightly fuzz run parse`.)
#![allow(clippy::unwrap_used)]
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cairn_templating::{Limits, check, render, resolve};
use common::*;

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TOKENS: &[&str] = &[
    ":",
    "- ",
    "\n",
    "  ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "\"",
    "'",
    "&a ",
    "*a",
    "<<: *a\n",
    "!!str ",
    "!!binary ",
    "|\n  ",
    ">-\n  ",
    "? ",
    "#",
    "${",
    "}",
    "${params.replicas}",
    "${resources.db}",
    "${resources.app.url}",
    "${resources.x.y.z}",
    "$${",
    "%{",
    "~",
    "null",
    "true",
    "no",
    "0x1F",
    "1e999",
    "-.inf",
    ".nan",
    "\t",
    "\u{feff}",
    "\u{0}",
    "é",
    "---\n",
    "...\n",
    "module: local/database\n",
    "depends_on: [app]\n",
    "inputs: {}\n",
    "type: list\n",
    "sensitive: true\n",
    "default: [1, {a: b}]\n",
    "outputs:\n  o:\n    value: ${resources.db.password}\n",
    "value: ${resources.net.id}\n",
];

/// An `outputs:` section for the fixture template (one of them sensitive by its module).
const WEBAPP_OUTPUTS: &str = "outputs:\n  url:\n    value: ${resources.app.url}\n    description: the app\n  password:\n    value: ${resources.db.password}\n    sensitive: true\n";

fn mutate(rng: &mut Rng, seed: &str) -> String {
    let mut s: Vec<u8> = seed.as_bytes().to_vec();
    for _ in 0..=rng.below(8) {
        let at = rng.below(s.len() + 1);
        match rng.below(6) {
            0 => {
                let tok = TOKENS[rng.below(TOKENS.len())];
                s.splice(at..at, tok.bytes());
            }
            1 => {
                let end = (at + rng.below(40)).min(s.len());
                s.drain(at..end);
            }
            2 => {
                let end = (at + rng.below(80)).min(s.len());
                let chunk: Vec<u8> = s[at..end].to_vec();
                let to = rng.below(s.len() + 1);
                s.splice(to..to, chunk);
            }
            3 => {
                if at < s.len() {
                    s[at] = (rng.next() & 0x7f) as u8;
                }
            }
            4 => s.truncate(at),
            _ => {
                // Deep nesting.
                let depth = rng.below(300);
                let nest: String = "[".repeat(depth) + &"]".repeat(depth);
                s.splice(at..at, nest.bytes());
            }
        }
    }
    String::from_utf8_lossy(&s).into_owned()
}

#[test]
fn mutated_templates_never_panic() {
    let seconds: u64 = std::env::var("CAIRN_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let seed: u64 = std::env::var("CAIRN_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_cafe);
    let library = library();
    let seeds = [
        webapp_text(),
        "name: t\nresources:\n  a:\n    module: local/network\n".to_owned(),
        format!("{}{WEBAPP_OUTPUTS}", webapp_text()),
    ];
    let mut rng = Rng(seed);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let (mut runs, mut accepted) = (0u64, 0u64);
    while Instant::now() < deadline {
        let pick = rng.below(seeds.len());
        let text = mutate(&mut rng, &seeds[pick]);
        runs += 1;
        match check(&text, &Limits::default(), &library) {
            Err(problems) => {
                assert!(!problems.is_empty(), "rejected without a problem: {text:?}");
            }
            Ok(template) => {
                accepted += 1;
                let mut i = input("production");
                i.parameters = BTreeMap::new();
                if template.parameters.iter().any(|p| p.name == "db_password") {
                    i.parameters
                        .insert("db_password".into(), serde_json::json!("ref:x"));
                }
                if let Ok(snapshot) = resolve(&template, &library, &i) {
                    for r in &snapshot.resources {
                        // Upstream outputs may be missing here: an error, never a panic.
                        let _ = render(r, &BTreeMap::new());
                    }
                }
            }
        }
    }
    eprintln!("parser fuzz: {runs} documents, {accepted} accepted, seed {seed}");
    assert!(runs > 100, "only {runs} documents in {seconds}s");
    assert!(accepted > 0, "the mutator never produced a valid document");
}
