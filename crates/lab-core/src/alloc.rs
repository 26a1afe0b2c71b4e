//! A counting global allocator for runner processes: heap allocations per operation, as Go's `-benchmem` reports
//! them (seed 002 compares drivers by allocations per queue cycle).
//!
//! A runner installs it with
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: quicklite_lab_core::CountingAllocator = quicklite_lab_core::CountingAllocator;
//! ```
//!
//! It wraps [`System`] and counts only while counting is switched on ([`start_counting`]): the driver switches it on
//! for the workloads that report allocations, so every other cell pays one relaxed load per allocation and nothing
//! else. The counters are process-wide: every thread's allocations count — the tokio workers, an approach's own
//! threads and channels, the lab's client tasks — which is what an approach costs. SQLite's own allocations are
//! not Rust allocations (SQLite calls the C library's `malloc` directly) and are not counted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Allocations (including reallocations) counted so far.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// Bytes requested by the counted allocations.
static BYTES: AtomicU64 = AtomicU64::new(0);
/// Whether allocations are being counted.
static COUNTING: AtomicBool = AtomicBool::new(false);
/// Set by the first counted allocation: tells an installed allocator from one that is not (whose counters stay 0).
static SEEN: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set while the lab records its own measurements on this thread ([`uncounted`]): those allocations (a histogram
    /// growing, an error message) are the lab's, not the approach's.
    static PAUSED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// [`System`], counting allocations while [`start_counting`] is in effect.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAllocator;

impl CountingAllocator {
    #[inline]
    fn count(size: usize) {
        if COUNTING.load(Ordering::Relaxed) && !PAUSED.try_with(|p| p.get()).unwrap_or(false) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(size as u64, Ordering::Relaxed);
            SEEN.store(true, Ordering::Relaxed);
        }
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so `System`'s guarantees hold;
// the counting only touches atomics and never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::count(layout.size());
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which is `System::alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::count(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` through this allocator with `layout`, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::count(new_size);
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract, which is `System::realloc`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations and bytes counted so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocCount {
    /// Allocations and reallocations.
    pub allocations: u64,
    /// Bytes they requested.
    pub bytes: u64,
}

impl AllocCount {
    /// What was counted between `earlier` and `self`.
    pub fn since(self, earlier: AllocCount) -> AllocCount {
        AllocCount {
            allocations: self.allocations.saturating_sub(earlier.allocations),
            bytes: self.bytes.saturating_sub(earlier.bytes),
        }
    }
}

/// Runs `f` without counting the allocations it makes on this thread: for the lab's own bookkeeping.
pub fn uncounted<T>(f: impl FnOnce() -> T) -> T {
    let before = PAUSED.try_with(|p| p.replace(true)).unwrap_or(false);
    let out = f();
    let _ = PAUSED.try_with(|p| p.set(before));
    out
}

/// Switches counting on for the rest of the process.
pub fn start_counting() {
    COUNTING.store(true, Ordering::SeqCst);
}

/// The counters now, or `None` when the process does not count (the allocator is not installed, or counting is
/// off): a result then says "not measured" rather than zero.
pub fn allocations() -> Option<AllocCount> {
    if !COUNTING.load(Ordering::SeqCst) || !SEEN.load(Ordering::SeqCst) {
        return None;
    }
    Some(AllocCount {
        allocations: ALLOCATIONS.load(Ordering::SeqCst),
        bytes: BYTES.load(Ordering::SeqCst),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_saturate() {
        let a = AllocCount {
            allocations: 10,
            bytes: 100,
        };
        let b = AllocCount {
            allocations: 4,
            bytes: 40,
        };
        assert_eq!(
            a.since(b),
            AllocCount {
                allocations: 6,
                bytes: 60
            }
        );
        assert_eq!(b.since(a), AllocCount::default());
    }

    #[test]
    fn without_the_allocator_installed_nothing_is_reported() {
        // This test binary uses the default allocator: counting on or off, no number is made up.
        start_counting();
        let _v: Vec<u8> = Vec::with_capacity(64);
        assert_eq!(allocations(), None);
    }
}
