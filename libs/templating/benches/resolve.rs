//! Resolution benchmark: generated templates of 100, 1,000 and 5,000 resources in layers
//! of 50 (each resource wired to two in the layer before), timed for parse + validate +
//! resolve and for rendering every root config, with the peak heap of each step.
//! Run: `cargo bench -p cairn-templating --bench resolve` (goal: < 200 ms at 1,000,
//! linear growth).
#![allow(unsafe_code, clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cairn_templating::{Library, Limits, ModuleSpec, ResolveInput, check, render, resolve};

/// Counts live heap bytes and their peak.
struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const WIDTH: usize = 50;

fn library() -> Library {
    let tf = r#"
variable "name" { type = string }
variable "upstream" {
  type    = object({ id = string, kind = string })
  default = null
}
variable "peer_id" {
  type    = string
  default = ""
}
variable "size" {
  type    = number
  default = 1
}
variable "labels" {
  type    = map(string)
  default = {}
}
variable "base_dir" { type = string }
output "id" { value = var.name }
output "kind" { value = "node" }
output "secret" {
  value     = "x"
  sensitive = true
}
"#;
    let spec = ModuleSpec::from_sources(
        "bench/node",
        &[("main.tf".into(), tf.into())],
        r#"{"kind":"node","wiring":{"upstream":"node"},"target_inputs":["base_dir"]}"#,
    )
    .expect("bench module");
    Library::from_modules([spec])
}

fn template(n: usize) -> String {
    let mut s = String::from(
        "name: bench\nparameters:\n  size: {type: number, default: 3, min: 1}\n  team: {type: string, default: platform}\nresources:\n",
    );
    for i in 0..n {
        s.push_str(&format!("  r{i}:\n    module: bench/node\n    inputs:\n"));
        s.push_str(
            "      size: ${params.size}\n      labels: {team: \"${params.team}\", tier: bench}\n",
        );
        if i >= WIDTH {
            let up = i - WIDTH;
            let peer = (i / WIDTH - 1) * WIDTH + (i + 1) % WIDTH;
            s.push_str(&format!(
                "      upstream: ${{resources.r{up}}}\n      peer_id: ${{resources.r{peer}.id}}\n"
            ));
        }
    }
    s
}

fn measure<T>(f: impl FnOnce() -> T) -> (T, Duration, usize) {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    (out, took, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn main() {
    let library = library();
    let limits = Limits {
        max_document_bytes: 64 * 1024 * 1024,
        max_resources: 100_000,
        ..Limits::default()
    };
    println!(
        "| resources | document | parse+validate+resolve | peak heap | render all | peak heap | per resource |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut splits = Vec::new();
    for n in [100usize, 1_000, 5_000] {
        let text = template(n);
        let input = ResolveInput {
            template_version: cairn_templating::content_hash(&text),
            tenant_id: "t".into(),
            instance_id: "i".into(),
            instance_name: "bench".into(),
            environment: "production".into(),
            parameters: BTreeMap::new(),
            target: BTreeMap::from([("base_dir".into(), serde_json::json!("/tmp/bench"))]),
        };
        // Best of 5 runs for time; the peak is the same each run.
        let mut best = Duration::MAX;
        let mut peak = 0;
        let mut snapshot = None;
        for _ in 0..5 {
            let (s, took, p) = measure(|| {
                let t = check(&text, &limits, &library).expect("valid");
                resolve(&t, &library, &input).expect("resolves")
            });
            best = best.min(took);
            peak = p;
            snapshot = Some(s);
        }
        let snapshot = snapshot.expect("ran");
        let mut split = [Duration::MAX; 3];
        for _ in 0..5 {
            let start = Instant::now();
            let _ = cairn_templating::yaml::parse(&text).expect("yaml");
            let yaml = start.elapsed();
            let start = Instant::now();
            let t = check(&text, &limits, &library).expect("valid");
            let checked = start.elapsed();
            let start = Instant::now();
            let _ = resolve(&t, &library, &input).expect("resolves");
            let resolved = start.elapsed();
            split[0] = split[0].min(yaml);
            split[1] = split[1].min(checked);
            split[2] = split[2].min(resolved);
        }
        splits.push((n, split));
        assert_eq!(snapshot.resources.len(), n);
        let upstream: cairn_templating::UpstreamOutputs = snapshot
            .resources
            .iter()
            .map(|r| {
                (
                    r.name.clone(),
                    BTreeMap::from([
                        ("id".to_owned(), serde_json::json!(r.name)),
                        ("kind".to_owned(), serde_json::json!("node")),
                    ]),
                )
            })
            .collect();
        let (_, render_took, render_peak) = measure(|| {
            snapshot
                .resources
                .iter()
                .map(|r| render(r, &upstream).expect("renders").tf_json.len())
                .sum::<usize>()
        });
        println!(
            "| {n} | {:.0} KiB | {:.1} ms | {:.1} MiB | {:.1} ms | {:.0} KiB | {:.1} µs |",
            text.len() as f64 / 1024.0,
            best.as_secs_f64() * 1e3,
            mib(peak),
            render_took.as_secs_f64() * 1e3,
            render_peak as f64 / 1024.0,
            best.as_secs_f64() * 1e6 / n as f64,
        );
    }
    println!();
    println!("| resources | YAML only | parse+validate | resolve (validates again) |");
    println!("|---|---|---|---|");
    for (n, [yaml, checked, resolved]) in splits {
        println!(
            "| {n} | {:.1} ms | {:.1} ms | {:.1} ms |",
            yaml.as_secs_f64() * 1e3,
            checked.as_secs_f64() * 1e3,
            resolved.as_secs_f64() * 1e3
        );
    }
}
