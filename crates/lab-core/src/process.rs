//! Samples of the runner process itself: CPU time, threads, resident memory, open files; its open-file limit; and
//! the allocator behind its `malloc`.

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

/// Files the process has open (entries of `/proc/self/fd`), if known.
pub fn open_files() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

/// The allocator behind `malloc` in this process: a malloc library mapped into it (jemalloc, mimalloc, tcmalloc —
/// as `LD_PRELOAD` puts one into every program started under it), else the C library's own; `None` when
/// `/proc/self/maps` cannot be read.
///
/// The hand-off designs return values built on their own threads to the caller's, which frees them there; malloc
/// implementations differ most in what that costs, so a result says which one produced it.
pub fn allocator() -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    Some(allocator_in_maps(&maps))
}

/// [`allocator`] from the text of a `/proc/<pid>/maps` file.
fn allocator_in_maps(maps: &str) -> String {
    const LIBRARIES: [(&str, &str); 3] = [
        ("libjemalloc", "jemalloc"),
        ("libmimalloc", "mimalloc"),
        ("libtcmalloc", "tcmalloc"),
    ];
    // Columns: address, permissions, offset, device, inode, then the path — the only one with a `/` in it, and
    // the rest of the line (it may contain spaces).
    for path in maps
        .lines()
        .filter_map(|line| line.find('/').map(|at| &line[at..]))
    {
        let file = path.rsplit('/').next().unwrap_or(path);
        if let Some((_, name)) = LIBRARIES
            .iter()
            .find(|(prefix, _)| file.starts_with(prefix))
        {
            return format!("{name} ({path})");
        }
    }
    "the C library's malloc".to_owned()
}

/// The soft open-file limit (`RLIMIT_NOFILE`) and the hard one it may be raised to.
pub fn open_files_limits() -> std::io::Result<(u64, u64)> {
    // SAFETY: `getrlimit` only writes into the struct we pass, a plain C struct valid when zeroed.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((limit.rlim_cur as u64, limit.rlim_max as u64))
    }
}

/// Raises the soft open-file limit to the hard limit and returns the limit now in effect.
///
/// Every open database holds a few file descriptors (database and WAL file per connection, the shared-memory
/// file), and the usual soft limit of 1024 would cap the lab at a couple of hundred databases; the hard limit is
/// what the administrator allows. An unlimited hard limit is capped at the kernel's `fs.nr_open`, the most one
/// process may have.
#[allow(
    clippy::unnecessary_cast,
    reason = "rlim_t is u64 here, but not on every target"
)]
pub fn raise_open_files_limit() -> std::io::Result<u64> {
    let (soft, hard) = open_files_limits()?;
    let target = if hard == libc::RLIM_INFINITY as u64 {
        std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1 << 20)
    } else {
        hard
    };
    if soft >= target {
        return Ok(soft);
    }
    let limit = libc::rlimit {
        rlim_cur: target as libc::rlim_t,
        rlim_max: hard as libc::rlim_t,
    };
    // SAFETY: `setrlimit` only reads the struct we pass.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(target)
}

/// `/proc/self/status`, opened once and read again on each sample: an approach that uses up every file
/// descriptor (a thousand databases too many) leaves none to open it, and its threads and memory are exactly what
/// the report then needs.
#[derive(Debug)]
pub struct StatusFile {
    /// The open file, if it could be opened.
    file: Option<std::fs::File>,
}

impl StatusFile {
    /// Opens `/proc/self/status` now.
    pub fn open() -> Self {
        Self {
            file: std::fs::File::open("/proc/self/status").ok(),
        }
    }

    /// OS threads of the process now.
    pub fn threads(&mut self) -> Option<u64> {
        parse_status_field(&self.read()?, "Threads:")
    }

    /// Resident set size in bytes now.
    pub fn rss_bytes(&mut self) -> Option<u64> {
        parse_status_field(&self.read()?, "VmRSS:").map(|kb| kb * 1024)
    }

    /// The file's current content: procfs regenerates it when read from the start.
    fn read(&mut self) -> Option<String> {
        use std::io::{Read, Seek};
        let file = self.file.as_mut()?;
        file.rewind().ok()?;
        let mut text = String::new();
        file.read_to_string(&mut text).ok()?;
        Some(text)
    }
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
    fn the_status_file_can_be_read_again_and_again() {
        let mut status = StatusFile::open();
        for _ in 0..3 {
            assert!(status.threads().unwrap() >= 1);
            assert!(status.rss_bytes().unwrap() > 0);
        }
    }

    #[test]
    fn the_open_file_limit_is_raised_to_the_hard_limit() {
        let raised = raise_open_files_limit().unwrap();
        let (soft, hard) = open_files_limits().unwrap();
        assert_eq!(soft, raised);
        assert!(soft <= hard);
        assert!(open_files().unwrap_or(1) >= 1);
    }

    #[test]
    fn a_malloc_library_mapped_into_the_process_is_named_with_its_path() {
        let glibc = "7f1c2a000000-7f1c2a028000 r--p 00000000 fe:01 1835 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
                     7ffd8b1f6000-7ffd8b217000 rw-p 00000000 00:00 0                          [stack]\n";
        assert_eq!(allocator_in_maps(glibc), "the C library's malloc");
        let jemalloc = format!(
            "{glibc}7f1c29c00000-7f1c29c2d000 r--p 00000000 fe:01 2071 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n"
        );
        assert_eq!(
            allocator_in_maps(&jemalloc),
            "jemalloc (/usr/lib/x86_64-linux-gnu/libjemalloc.so.2)"
        );
        let spaced = "7f00-7f01 r--p 00000000 fe:01 9 /opt/my libs/libmimalloc.so.2\n";
        assert_eq!(
            allocator_in_maps(spaced),
            "mimalloc (/opt/my libs/libmimalloc.so.2)"
        );
        // Linux has `/proc/self/maps`: this process's allocator is known.
        assert!(allocator().is_some());
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
