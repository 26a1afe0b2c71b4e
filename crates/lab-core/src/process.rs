//! Samples of the runner process itself: CPU time, threads, resident memory.

use std::time::Duration;

/// User + system CPU time used by the whole process so far (all threads).
pub fn cpu_time() -> Duration {
    // SAFETY: `getrusage` only writes into the zero-initialised struct we pass, which is a plain C struct
    // for which all-zero bytes are a valid value.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return Duration::ZERO;
        }
        usage
    };
    let tv =
        |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32).saturating_mul(1_000));
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// OS threads of the process (`Threads:` in `/proc/self/status`), if known.
pub fn threads() -> Option<u64> {
    status_field("Threads:")
}

/// Resident set size in bytes (`VmRSS:` in `/proc/self/status`, reported in kB), if known.
pub fn rss_bytes() -> Option<u64> {
    status_field("VmRSS:").map(|kb| kb * 1024)
}

/// The first number on the line of `/proc/self/status` that starts with `key`.
fn status_field(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_status_field(&status, key)
}

fn parse_status_field(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_status_lines() {
        let status = "Name:\tx\nVmRSS:\t   12345 kB\nThreads:\t7\n";
        assert_eq!(parse_status_field(status, "VmRSS:"), Some(12345));
        assert_eq!(parse_status_field(status, "Threads:"), Some(7));
        assert_eq!(parse_status_field(status, "Missing:"), None);
    }

    #[test]
    fn this_process_has_threads_and_memory() {
        assert!(threads().unwrap_or(1) >= 1);
        assert!(rss_bytes().unwrap_or(1) > 0);
        // CPU time never goes backwards.
        let a = cpu_time();
        assert!(cpu_time() >= a);
    }
}
