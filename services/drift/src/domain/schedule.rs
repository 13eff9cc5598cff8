//! When each tracked resource is scanned: once per interval, at an offset of its own (a
//! hash of its id modulo the interval), so scans spread evenly over the interval and the
//! same resource keeps its slot across restarts and replicas.
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use uuid::Uuid;

/// The time given to a resource that is never due on schedule (interval 0 = off); a
/// TriggerScan still makes it due now.
pub fn never() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(9999, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// The resource's phase: 63 bits of sha256 of its id.
pub fn phase_of(resource_id: Uuid) -> i64 {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, resource_id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest.as_ref()[..8]);
    i64::from_be_bytes(first) & i64::MAX
}

/// The schedule of every resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// Zero: off.
    pub interval: Duration,
}

impl Schedule {
    pub fn is_off(&self) -> bool {
        self.interval.is_zero()
    }

    /// The resource's first slot strictly after `after` (slots are `k · interval +
    /// phase mod interval` since the epoch); [`never()`] when the schedule is off.
    pub fn next_slot(&self, phase: i64, after: DateTime<Utc>) -> DateTime<Utc> {
        let interval = i64::try_from(self.interval.as_millis()).unwrap_or(i64::MAX);
        if interval <= 0 {
            return never();
        }
        let offset = phase.rem_euclid(interval);
        let now = after.timestamp_millis();
        let k = (now - offset).div_euclid(interval) + 1;
        let at = k.saturating_mul(interval).saturating_add(offset);
        DateTime::<Utc>::from_timestamp_millis(at).unwrap_or_else(never)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_one_interval_apart_at_the_resources_phase() {
        let s = Schedule {
            interval: Duration::from_secs(600),
        };
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let phase = 123_456_789;
        let first = s.next_slot(phase, start);
        assert!(first > start && first <= start + chrono::Duration::seconds(600));
        let second = s.next_slot(phase, first);
        assert_eq!(second - first, chrono::Duration::seconds(600));
        // Strictly after: a slot exactly at `after` is the next one.
        assert_eq!(s.next_slot(phase, first), second);
        assert_eq!(
            first.timestamp_millis().rem_euclid(600_000),
            phase.rem_euclid(600_000)
        );
    }

    #[test]
    fn phases_spread_resources_over_the_interval() {
        let s = Schedule {
            interval: Duration::from_secs(600),
        };
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let mut per_minute = [0u32; 10];
        let n = 10_000;
        for _ in 0..n {
            let slot = s.next_slot(phase_of(Uuid::new_v4()), start);
            let minute = ((slot - start).num_seconds() / 60) as usize;
            per_minute[minute.min(9)] += 1;
        }
        let mean = n as f64 / 10.0;
        let max = f64::from(*per_minute.iter().max().unwrap());
        assert!(max <= 1.2 * mean, "{per_minute:?}");
    }

    #[test]
    fn off_means_never() {
        let s = Schedule {
            interval: Duration::ZERO,
        };
        assert!(s.is_off());
        assert_eq!(s.next_slot(5, Utc::now()), never());
    }
}
