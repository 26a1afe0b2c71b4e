//! Which open database to close when one more must open: approximate LRU over a random sample.

use std::collections::HashMap;
use std::sync::Arc;

use crate::sched::pool::task::PooledDatabase;

/// Open databases sampled to choose one to close (see [`Pool::evict_for`](crate::sched::pool::Pool::evict_for)).
pub(crate) const SAMPLED: usize = 16;

/// Samples drawn before falling back to a scan of every open database, when all sampled ones are busy.
pub(crate) const DRAWS: usize = 4;

/// The open databases, in a vector for sampling at random, with each one's index by name for removal.
pub(crate) struct OpenSet<D> {
    actors: Vec<Arc<D>>,
    indices: HashMap<String, usize>,
}

impl<D> Default for OpenSet<D> {
    fn default() -> Self {
        OpenSet {
            actors: Vec::new(),
            indices: HashMap::new(),
        }
    }
}

impl<D: PooledDatabase> OpenSet<D> {
    pub(crate) fn insert(&mut self, actor: Arc<D>) {
        if !self.indices.contains_key(actor.name()) {
            self.indices
                .insert(actor.name().to_string(), self.actors.len());
            self.actors.push(actor);
        }
    }

    pub(crate) fn remove(&mut self, name: &str) {
        if let Some(index) = self.indices.remove(name) {
            self.actors.swap_remove(index);
            if let Some(moved) = self.actors.get(index) {
                self.indices.insert(moved.name().to_string(), index);
            }
        }
    }

    /// Up to `n` distinct open databases at pseudo-random indices.
    pub(crate) fn sample(&self, n: usize, seed: u64) -> Vec<Arc<D>> {
        sample_indices(self.actors.len(), n, seed)
            .map(|index| self.actors[index].clone())
            .collect()
    }
}

/// `n` distinct indices in `0..len` (all of them if `len <= n`), spread pseudo-randomly by `seed`: a start and a
/// stride coprime with `len`.
fn sample_indices(len: usize, n: usize, seed: u64) -> impl Iterator<Item = usize> {
    let mut x = seed.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    let (start, mut stride) = if len <= n {
        (0, 1)
    } else {
        ((x % len as u64) as usize, (x >> 32) as usize % len)
    };
    while len > n && (stride == 0 || gcd(stride, len) != 1) {
        stride = (stride + 1) % len;
    }
    (0..n.min(len)).map(move |i| (start + i * stride) % len)
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Closes one of `candidates`: the least recently used idle one, else the most recently used one whose work
/// waits in the run queue. One whose checkpoint runs is closed only if no other can be: closing it would hold the
/// calling pool thread until the checkpoint ends. Returns whether it closed one.
pub(crate) fn close_one<D: PooledDatabase>(candidates: &mut [Arc<D>]) -> bool {
    // Each key read once: tasks on other threads move `last_used` during the sort, and a sort whose keys change
    // under it has no consistent order (the standard library's sort panics on one).
    candidates.sort_by_cached_key(|a| a.last_used_ms());
    let (calm, checkpointing): (Vec<&Arc<D>>, Vec<&Arc<D>>) =
        candidates.iter().partition(|a| !a.is_checkpointing());
    [calm, checkpointing].iter().any(|round| {
        round.iter().any(|a| a.try_close()) || round.iter().rev().any(|a| a.try_close_queued())
    })
}

impl<D> OpenSet<D> {
    /// The open databases.
    pub(crate) fn actors(&self) -> &[Arc<D>] {
        &self.actors
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    use super::*;
    use crate::Error;

    /// A database whose `last_used` moves every time it is read, as it does under tasks on other threads.
    struct Busy {
        name: String,
        clock: Arc<AtomicU64>,
        closed: AtomicBool,
    }

    impl PooledDatabase for Busy {
        fn name(&self) -> &str {
            &self.name
        }
        fn run_write(self: &Arc<Self>) {}
        fn run_read(self: &Arc<Self>) {}
        fn fail_queued(&self, _: &Error) {}
        fn is_idle(&self) -> bool {
            true
        }
        fn last_used_ms(&self) -> u64 {
            // Every read sees a later time than the one before, over all databases.
            self.clock.fetch_sub(1, Ordering::SeqCst)
        }
        fn is_checkpointing(&self) -> bool {
            false
        }
        fn try_close(self: &Arc<Self>) -> bool {
            !self.closed.swap(true, Ordering::SeqCst)
        }
        fn try_close_queued(self: &Arc<Self>) -> bool {
            false
        }
    }

    #[test]
    fn choosing_among_databases_whose_use_moves_during_the_choice_is_consistent() {
        let clock = Arc::new(AtomicU64::new(u64::MAX / 2));
        let mut candidates: Vec<Arc<Busy>> = (0..1_000)
            .map(|i| {
                Arc::new(Busy {
                    name: format!("db-{i}"),
                    clock: clock.clone(),
                    closed: AtomicBool::new(false),
                })
            })
            .collect();
        // A sort that read the moving keys at every comparison would see no consistent order (and panic).
        assert!(close_one(&mut candidates));
        // Each key was read once, the last read the smallest: the last database is the least recently used.
        assert!(candidates[0].closed.load(Ordering::SeqCst));
        assert_eq!(candidates[0].name, "db-999");
        assert_eq!(
            candidates
                .iter()
                .filter(|c| c.closed.load(Ordering::SeqCst))
                .count(),
            1
        );
    }

    /// An open database last used at a fixed time, idle or with its write task queued, its checkpoint running or not.
    struct Open {
        last_used: u64,
        queued: bool,
        checkpointing: bool,
        closed: AtomicBool,
    }

    impl PooledDatabase for Open {
        fn name(&self) -> &str {
            "open"
        }
        fn run_write(self: &Arc<Self>) {}
        fn run_read(self: &Arc<Self>) {}
        fn fail_queued(&self, _: &Error) {}
        fn is_idle(&self) -> bool {
            !self.queued
        }
        fn last_used_ms(&self) -> u64 {
            self.last_used
        }
        fn is_checkpointing(&self) -> bool {
            self.checkpointing
        }
        fn try_close(self: &Arc<Self>) -> bool {
            !self.queued && !self.closed.swap(true, Ordering::SeqCst)
        }
        fn try_close_queued(self: &Arc<Self>) -> bool {
            self.queued && !self.closed.swap(true, Ordering::SeqCst)
        }
    }

    /// Which of `dbs` (last used, queued, checkpointing) `close_one` closes.
    fn closed_of(dbs: &[(u64, bool, bool)]) -> Vec<usize> {
        let open: Vec<Arc<Open>> = dbs
            .iter()
            .map(|&(last_used, queued, checkpointing)| {
                Arc::new(Open {
                    last_used,
                    queued,
                    checkpointing,
                    closed: AtomicBool::new(false),
                })
            })
            .collect();
        assert!(close_one(&mut open.clone()));
        (0..dbs.len())
            .filter(|&i| open[i].closed.load(Ordering::SeqCst))
            .collect()
    }

    #[test]
    fn a_database_whose_checkpoint_runs_is_closed_only_when_no_other_can_be() {
        // The least recently used idle one, unless its checkpoint runs.
        assert_eq!(closed_of(&[(1, false, false), (2, false, false)]), [0]);
        assert_eq!(closed_of(&[(1, false, true), (2, false, false)]), [1]);
        // One whose write waits goes before an idle one whose checkpoint runs.
        assert_eq!(closed_of(&[(1, false, true), (2, true, false)]), [1]);
        // When every one's checkpoint runs, the least recently used idle one all the same.
        assert_eq!(closed_of(&[(2, false, true), (1, false, true)]), [1]);
        assert_eq!(closed_of(&[(1, true, true), (2, true, true)]), [1]);
    }

    #[test]
    fn sampled_indices_are_distinct_and_in_range() {
        for len in [1, 2, 15, 16, 17, 100, 3948, 4096] {
            for seed in 0..50 {
                let indices: Vec<usize> = sample_indices(len, SAMPLED, seed).collect();
                assert_eq!(indices.len(), len.min(SAMPLED), "len {len}");
                let distinct: std::collections::BTreeSet<_> = indices.iter().collect();
                assert_eq!(distinct.len(), indices.len(), "len {len} seed {seed}");
                assert!(indices.iter().all(|&p| p < len));
            }
        }
        // Different seeds look at different databases.
        let firsts: std::collections::BTreeSet<usize> = (0..50)
            .map(|seed| sample_indices(4000, SAMPLED, seed).next().unwrap())
            .collect();
        assert!(firsts.len() > 25, "{firsts:?}");
    }
}
