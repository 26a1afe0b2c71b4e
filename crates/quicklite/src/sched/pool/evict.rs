//! Which open database to close when one more must open: approximate LRU over a random sample.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::sched::pool::Pool;
use crate::sched::pool::actor::Actor;
use crate::util::lock;

/// Open databases sampled to choose one to close (see [`PoolShared::evict_for`]).
const SAMPLED: usize = 16;

/// Samples drawn before falling back to a scan of every open database, when all sampled ones are busy.
const DRAWS: usize = 4;

/// The open databases, in a vector for sampling at random, with each one's place by name for removal.
#[derive(Default)]
pub(crate) struct OpenSet {
    actors: Vec<Arc<Actor>>,
    places: HashMap<String, usize>,
}

impl OpenSet {
    pub(crate) fn insert(&mut self, actor: Arc<Actor>) {
        if !self.places.contains_key(&actor.name) {
            self.places.insert(actor.name.clone(), self.actors.len());
            self.actors.push(actor);
        }
    }

    pub(crate) fn remove(&mut self, name: &str) {
        if let Some(place) = self.places.remove(name) {
            self.actors.swap_remove(place);
            if let Some(moved) = self.actors.get(place) {
                self.places.insert(moved.name.clone(), place);
            }
        }
    }

    /// Up to `n` distinct open databases at pseudo-random places.
    fn sample(&self, n: usize, seed: u64) -> Vec<Arc<Actor>> {
        sample_places(self.actors.len(), n, seed)
            .map(|place| self.actors[place].clone())
            .collect()
    }
}

/// `n` distinct places in `0..len` (all of them if `len <= n`), spread pseudo-randomly by `seed`: a start and a
/// stride coprime with `len`.
fn sample_places(len: usize, n: usize, seed: u64) -> impl Iterator<Item = usize> {
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
/// waits in the run queue. Returns whether it closed one.
fn close_one(candidates: &mut [Arc<Actor>]) -> bool {
    candidates.sort_by_key(|a| a.last_used_ms());
    candidates.iter().any(|a| a.try_close())
        || candidates.iter().rev().any(|a| a.try_close_queued())
}

impl OpenSet {
    /// The open databases.
    pub(crate) fn actors(&self) -> &[Arc<Actor>] {
        &self.actors
    }
}

impl Pool {
    /// Closes open databases (other than `opening`; `""` for none) until at most `target` are open — on the pool
    /// thread that wants to open one, so that evictions keep pace with opens, and in the registry's housekeeping.
    /// Returns whether it got there; if every open database is running a task, the housekeeping thread is asked to
    /// retry and the opening waits.
    ///
    /// An idle database goes first, the least recently used of [`SAMPLED`] open databases picked at random (as
    /// Redis approximates LRU): this runs once per open at the cap, up to thousands of times a second, where a
    /// scan of every open database each time would cost time in proportion to the cap. When none of them is idle,
    /// one whose write task waits in the run queue is closed ([`Actor::try_close_queued`]), the most recently used
    /// first (its task, queued after it last ran, is furthest back): when every database has work queued (more
    /// databases with writes due than the cap), waiting for one to go idle would stop every opening. Only after
    /// [`DRAWS`] samples are all the others tried.
    pub(crate) fn evict_for(&self, opening: &str, target: usize) -> bool {
        while self.open_count() > target {
            let mut closed = false;
            for _ in 0..DRAWS {
                let seed = self.draws.fetch_add(1, Ordering::Relaxed);
                let mut sampled = lock(&self.open).sample(SAMPLED, seed);
                sampled.retain(|a| a.name != opening);
                closed = close_one(&mut sampled);
                if closed {
                    break;
                }
            }
            if !closed {
                let mut rest = self.open_actors();
                rest.retain(|a| a.name != opening);
                closed = close_one(&mut rest);
            }
            if !closed {
                self.wake_housekeeping();
                return false;
            }
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_places_are_distinct_and_in_range() {
        for len in [1, 2, 15, 16, 17, 100, 3948, 4096] {
            for seed in 0..50 {
                let places: Vec<usize> = sample_places(len, SAMPLED, seed).collect();
                assert_eq!(places.len(), len.min(SAMPLED), "len {len}");
                let distinct: std::collections::BTreeSet<_> = places.iter().collect();
                assert_eq!(distinct.len(), places.len(), "len {len} seed {seed}");
                assert!(places.iter().all(|&p| p < len));
            }
        }
        // Different seeds look at different databases.
        let firsts: std::collections::BTreeSet<usize> = (0..50)
            .map(|seed| sample_places(4000, SAMPLED, seed).next().unwrap())
            .collect();
        assert!(firsts.len() > 25, "{firsts:?}");
    }
}
