//! TOFU_SIM_* fault knobs: per-resource delay, permanent and transient apply failures,
//! crashes after the lock or mid-apply, and ignoring SIGINT.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

fn truthy(k: &str) -> bool {
    env(k).is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// Parses a Go duration ("250ms", "1m30s", "2h") or a plain number of seconds.
pub fn duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        return (secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let mut total = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += num * mult;
        rest = &rest[unit_len..];
    }
    Some(Duration::from_secs_f64(total))
}

pub fn resource_delay() -> Option<Duration> {
    env("TOFU_SIM_RESOURCE_DELAY").and_then(|v| duration(&v))
}

pub fn crash_after_lock() -> bool {
    truthy("TOFU_SIM_CRASH_AFTER_LOCK")
}

pub fn crash_mid_apply() -> bool {
    truthy("TOFU_SIM_CRASH_MID_APPLY")
}

pub fn ignore_sigint() -> bool {
    truthy("TOFU_SIM_IGNORE_SIGINT")
}

/// Exit code of a simulated crash.
pub const CRASH_EXIT: i32 = 86;

pub fn crash(what: &str) -> ! {
    eprintln!("tofu-sim: simulated crash ({what}); exiting without unlocking");
    std::process::exit(CRASH_EXIT)
}

fn listed(k: &str, address: &str) -> bool {
    env(k).is_some_and(|v| v.split(',').any(|a| a.trim() == address))
}

/// A permanent failure for this resource, if configured.
pub fn permanent_failure(address: &str) -> Option<String> {
    listed("TOFU_SIM_FAIL_RESOURCE", address).then(|| {
        format!("tofu-sim: simulated permanent failure applying {address}: AccessDenied: the operation is not permitted")
    })
}

fn counter_file() -> PathBuf {
    match env("TOFU_SIM_STATE_DIR") {
        Some(d) => PathBuf::from(d).join("tofu-sim-faults.json"),
        None => PathBuf::from(env("TF_DATA_DIR").unwrap_or_else(|| ".terraform".into()))
            .join("tofu-sim-faults.json"),
    }
}

/// A transient failure: `TOFU_SIM_FAIL_TRANSIENT=addr:N[,addr:N]` fails the first N applies
/// of that resource (counted across runs in a file).
pub fn transient_failure(address: &str) -> Option<String> {
    let spec = env("TOFU_SIM_FAIL_TRANSIENT")?;
    let n: u64 = spec.split(',').find_map(|p| {
        let (a, n) = p.trim().rsplit_once(':')?;
        (a == address).then(|| n.parse().ok()).flatten()
    })?;
    let path = counter_file();
    let mut counts: BTreeMap<String, u64> = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let seen = counts.entry(address.to_owned()).or_insert(0);
    if *seen >= n {
        return None;
    }
    *seen += 1;
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(&path, serde_json::to_vec(&counts).unwrap_or_default());
    Some(format!(
        "tofu-sim: simulated transient failure applying {address}: RequestError: send request failed: dial tcp: i/o timeout (503 Service Unavailable, retry later)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(duration("5m0s"), Some(Duration::from_secs(300)));
        assert_eq!(duration("2"), Some(Duration::from_secs(2)));
        assert_eq!(duration("0s"), Some(Duration::ZERO));
        assert_eq!(duration("soon"), None);
        assert_eq!(duration("3x"), None);
    }
}
