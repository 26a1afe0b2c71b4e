//! The machine behind a number: CPU, kernel, date, allocator.

use std::time::{SystemTime, UNIX_EPOCH};

use time::OffsetDateTime;
use time::macros::format_description;

use crate::result::Environment;

impl Environment {
    /// An environment with the machine fields filled (CPU model and count, kernel, current UTC date, allocator) and
    /// the runner's name; the runner adds the SQLite fields.
    pub fn for_machine(runner: impl Into<String>) -> Self {
        Self {
            runner: runner.into(),
            cpu_model: cpu_model(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            date: rfc3339_utc(SystemTime::now()),
            allocator: crate::process::allocator(),
            ..Self::default()
        }
    }
}

/// CPU model name from `/proc/cpuinfo` (`model name` on x86, `Model`/`Hardware` elsewhere).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| parse_cpu_model(&info))
        .unwrap_or_else(|| "unknown".into())
}

fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Model", "Hardware", "cpu model"]
        .iter()
        .find_map(|key| {
            cpuinfo.lines().find_map(|line| {
                let (k, v) = line.split_once(':')?;
                (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_string())
            })
        })
}

/// `time` as RFC 3339 in UTC with second precision, e.g. `2026-11-21T23:05:00Z`; the epoch for a time before it.
pub fn rfc3339_utc(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let format = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    i64::try_from(secs)
        .ok()
        .and_then(|secs| OffsetDateTime::from_unix_timestamp(secs).ok())
        .and_then(|utc| utc.format(&format).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn formats_utc_dates() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        // 2026-11-21T23:05:09Z
        let t = UNIX_EPOCH + Duration::from_secs(1_795_302_309);
        assert_eq!(rfc3339_utc(t), "2026-11-21T23:05:09Z");
        // A leap day.
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339_utc(t), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn finds_the_cpu_model() {
        let info =
            "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU\n";
        assert_eq!(
            parse_cpu_model(info).as_deref(),
            Some("Intel(R) Xeon(R) CPU")
        );
        assert_eq!(parse_cpu_model("processor: 0\n"), None);
    }

    #[test]
    fn machine_fields_are_filled() {
        let env = Environment::for_machine("test-runner 1");
        assert_eq!(env.runner, "test-runner 1");
        assert!(env.cpus >= 1);
        assert!(env.date.ends_with('Z'));
    }
}
