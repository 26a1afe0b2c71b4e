//! Which open database to close when one more must open: approximate LRU over a random sample.

use std::collections::HashMap;
use std::sync::Arc;

use crate::sched::pool::task::PooledDatabase;

/// Open databases sampled to choose one to close (see [`Pool::evict_for`](crate::sched::pool::Pool::evict_for)).
pub(crate) const SAMPLED: usize = 16;

/// Samples drawn before falling back to a scan of every open database, when all sampled ones are busy.
pub(crate) const DRAWS: usize = 4;

/// The open databases, in a vector for sampling at random, with each one's place by name for removal.
pub(crate) struct OpenSet<D> {
    actors: Vec<Arc<D>>,
    places: HashMap<String, usize>,
}

impl<D> Default for OpenSet<D> {
    fn default() -> Self {
        OpenSet {
            actors: Vec::new(),
            places: HashMap::new(),
        }
    }
}

impl<D: PooledDatabase> OpenSet<D> {
    pub(crate) fn insert(&mut self, actor: Arc<D>) {
        if !self.places.contains_key(actor.name()) {
            self.places
                .insert(actor.name().to_string(), self.actors.len());
            self.actors.push(actor);
        }
    }

    pub(crate) fn remove(&mut self, name: &str) {
        if let Some(place) = self.places.remove(name) {
            self.actors.swap_remove(place);
            if let Some(moved) = self.actors.get(place) {
                self.places.insert(moved.name().to_string(), place);
            }
        }
    }

    /// Up to `n` distinct open databases at pseudo-random places.
    pub(crate) fn sample(&self, n: usize, seed: u64) -> Vec<Arc<D>> {
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
pub(crate) fn close_one<D: PooledDatabase>(candidates: &mut [Arc<D>]) -> bool {
    candidates.sort_by_key(|a| a.last_used_ms());
    candidates.iter().any(|a| a.try_close())
        || candidates.iter().rev().any(|a| a.try_close_queued())
}

impl<D> OpenSet<D> {
    /// The open databases.
    pub(crate) fn actors(&self) -> &[Arc<D>] {
        &self.actors
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
