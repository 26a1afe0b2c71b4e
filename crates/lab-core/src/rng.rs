//! A tiny deterministic random number generator, so seeded data and operation mixes repeat exactly from
//! `Cell::seed` in every runner, whatever language or crate versions it is built with.

/// SplitMix64 (Steele, Lea, Flood 2014): one `u64` of state, fast, and good enough for choosing keys.
///
/// Not cryptographic; a benchmark only needs repeatable, well-spread values.
#[derive(Debug, Clone)]
pub struct Rng {
    /// The generator state, advanced by a fixed odd constant on each draw.
    state: u64,
}

impl Rng {
    /// A generator seeded with `seed`; two generators with the same seed yield the same sequence.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// A generator for one stream (task, database) derived from a base seed, so streams differ but repeat.
    pub fn derive(seed: u64, stream: u64) -> Self {
        let mut base = Self::new(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F));
        Self::new(base.next_u64())
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n` > 0), by Lemire's multiply-shift (the tiny bias is irrelevant here).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A value in `low..=high`.
    pub fn between(&mut self, low: i64, high: i64) -> i64 {
        let span = high.wrapping_sub(low) as u64;
        low.wrapping_add(self.below(span.saturating_add(1).max(1)) as i64)
    }

    /// `true` with probability `percent / 100`.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// `true` with probability `ppm / 1,000,000`. For a whole percent, the same draw as [`Rng::percent`]:
    /// `per_million(p × 10,000)` is `percent(p)` (both compare the same 64 random bits with `p / 100` of their range).
    pub fn per_million(&mut self, ppm: u64) -> bool {
        self.below(1_000_000) < ppm
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// `len` random lowercase ASCII letters.
    pub fn text(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| char::from(b'a' + self.below(26) as u8))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let a: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..5).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..5).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(Rng::derive(42, 0).next_u64(), Rng::derive(42, 1).next_u64());
    }

    #[test]
    fn a_whole_percent_per_million_is_the_same_draw_as_percent() {
        // The mixed workload's default share went from `percent(90)` to `per_million(900_000)`: same seed, same run.
        let (mut a, mut b) = (Rng::new(4), Rng::new(4));
        for i in 0..100_000u64 {
            let p = i % 101;
            assert_eq!(a.percent(p), b.per_million(p * 10_000), "draw {i}, {p}%");
        }
    }

    #[test]
    fn ranges_are_respected() {
        let mut r = Rng::new(7);
        for _ in 0..10_000 {
            let v = r.between(1, 10);
            assert!((1..=10).contains(&v));
            assert!(r.below(3) < 3);
        }
        assert_eq!(r.between(5, 5), 5);
        assert!(!r.per_million(0));
        assert!(r.per_million(1_000_000));
        assert_eq!(r.bytes(13).len(), 13);
        assert!(r.text(8).chars().all(|c| c.is_ascii_lowercase()));
    }
}
