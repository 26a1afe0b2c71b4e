package main

import "math/bits"

// Rng is lab-core's SplitMix64 (crates/lab-core/src/rng.rs), reproduced bit for bit so that seeded data, keys and
// operation mixes are the same as the Rust runners'.
type Rng struct {
	state uint64
}

// NewRng is `Rng::new`.
func NewRng(seed uint64) *Rng { return &Rng{state: seed} }

// DeriveRng is `Rng::derive`: a stream (task, database) derived from a base seed.
func DeriveRng(seed, stream uint64) *Rng {
	base := NewRng(seed ^ (stream * 0xA0761D6478BD642F))
	return NewRng(base.NextU64())
}

// NextU64 is `Rng::next_u64`.
func (r *Rng) NextU64() uint64 {
	r.state += 0x9E3779B97F4A7C15
	z := r.state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Below is `Rng::below`: a value in `0..n` by Lemire's multiply-shift.
func (r *Rng) Below(n uint64) uint64 {
	hi, _ := bits.Mul64(r.NextU64(), n)
	return hi
}

// Between is `Rng::between`: a value in `low..=high`.
func (r *Rng) Between(low, high int64) int64 {
	span := uint64(high - low)
	n := span + 1
	if span == ^uint64(0) { // saturating_add
		n = span
	}
	if n < 1 {
		n = 1
	}
	return low + int64(r.Below(n))
}

// Percent is `Rng::percent`.
func (r *Rng) Percent(p uint64) bool { return r.Below(100) < p }

// Bytes is `Rng::bytes`: `n` random bytes, little-endian words truncated.
func (r *Rng) Bytes(n int) []byte {
	out := make([]byte, 0, n+8)
	for len(out) < n {
		v := r.NextU64()
		for i := 0; i < 8; i++ {
			out = append(out, byte(v>>(8*i)))
		}
	}
	return out[:n]
}

// Text is `Rng::text`: `n` random lowercase ASCII letters.
func (r *Rng) Text(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.Below(26))
	}
	return string(b)
}
