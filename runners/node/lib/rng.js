'use strict';
// SplitMix64, bit for bit the generator of crates/lab-core/src/rng.rs, so a cell's seeded rows, keys and
// payloads are the ones every other runner sees for the same seed.
//
// The state is kept as two unsigned 32-bit halves and multiplied with 16-bit partial products: BigInt
// arithmetic costs about a microsecond a draw, and an insert draws 113 times. `reference` below is the
// straightforward BigInt transcription the tests check this one against.

const MASK64 = (1n << 64n) - 1n;

// Scratch space of `text`.
let textBuffer = Buffer.allocUnsafe(256);

// The high 32 bits of the product of two unsigned 32-bit values, exactly.
function mulHigh32(a, b) {
  const a0 = a & 0xffff;
  const a1 = a >>> 16;
  const b0 = b & 0xffff;
  const b1 = b >>> 16;
  const p00 = a0 * b0;
  const mid = a1 * b0 + a0 * b1 + (p00 >>> 16); // < 2^34: exact in a double
  return (a1 * b1 + Math.floor(mid / 65536)) >>> 0;
}

class Rng {
  /** A generator whose 64-bit state is `seed` (a BigInt, taken modulo 2^64). */
  constructor(seed) {
    const s = BigInt(seed) & MASK64;
    // [state high, state low, last draw high, last draw low]: a typed array keeps the unsigned halves
    // unboxed (object fields would hold most of them as heap numbers).
    this.w = new Uint32Array(4);
    this.w[0] = Number(s >> 32n);
    this.w[1] = Number(s & 0xffffffffn);
  }

  /** The generator of one stream (client task, seed table) derived from a base seed: `Rng::derive`. */
  static derive(seed, stream) {
    const mixed = (BigInt(stream) * 0xa0761d6478bd642fn) & MASK64;
    const base = new Rng((BigInt(seed) & MASK64) ^ mixed);
    return new Rng(base.nextBig());
  }

  // Advances the generator; leaves the 64 output bits in w[2] (high) and w[3] (low).
  step() {
    const w = this.w;
    // state += 0x9E3779B97F4A7C15
    const lo = w[1] + 0x7f4a7c15;
    const carry = lo > 0xffffffff ? 1 : 0;
    w[1] = lo;
    w[0] = w[0] + 0x9e3779b9 + carry;
    let zh = w[0];
    let zl = w[1];
    // z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
    zl = (zl ^ ((zl >>> 30) | (zh << 2))) >>> 0;
    zh = (zh ^ (zh >>> 30)) >>> 0;
    let h = (mulHigh32(zl, 0x1ce4e5b9) + Math.imul(zh, 0x1ce4e5b9) + Math.imul(zl, 0xbf58476d)) >>> 0;
    zl = Math.imul(zl, 0x1ce4e5b9) >>> 0;
    zh = h;
    // z = (z ^ (z >> 27)) * 0x94D049BB133111EB
    zl = (zl ^ ((zl >>> 27) | (zh << 5))) >>> 0;
    zh = (zh ^ (zh >>> 27)) >>> 0;
    h = (mulHigh32(zl, 0x133111eb) + Math.imul(zh, 0x133111eb) + Math.imul(zl, 0x94d049bb)) >>> 0;
    zl = Math.imul(zl, 0x133111eb) >>> 0;
    zh = h;
    // z ^ (z >> 31)
    w[3] = zl ^ ((zl >>> 31) | (zh << 1));
    w[2] = zh ^ (zh >>> 31);
  }

  /** The next 64 random bits, as a BigInt (`next_u64`). */
  nextBig() {
    this.step();
    return (BigInt(this.w[2]) << 32n) | BigInt(this.w[3]);
  }

  /** A value in `0..n` for a positive safe integer `n`, by Lemire's multiply-shift (`below`). */
  below(n) {
    this.step();
    const zh = this.w[2];
    const zl = this.w[3];
    if (n <= 0x200000) {
      // floor(x * n / 2^64) with x = zh * 2^32 + zl: every partial result stays below 2^53.
      const carry = Math.floor((zl * n) / 4294967296);
      return Math.floor((zh * n + carry) / 4294967296);
    }
    const x = (BigInt(zh) << 32n) | BigInt(zl);
    return Number((x * BigInt(n)) >> 64n);
  }

  /** A value in `low..=high` (safe integers, low <= high). */
  between(low, high) {
    return low + this.below(high - low + 1);
  }

  /** `true` with probability `percent / 100`. */
  percent(percent) {
    return this.below(100) < percent;
  }

  /** `len` random lowercase ASCII letters. */
  text(len) {
    if (textBuffer.length < len) textBuffer = Buffer.allocUnsafe(len);
    for (let i = 0; i < len; i++) {
      textBuffer[i] = 97 + this.below(26);
    }
    return textBuffer.latin1Slice(0, len);
  }
}

/** The plain BigInt transcription of rng.rs, for tests. */
class ReferenceRng {
  constructor(seed) {
    this.state = BigInt(seed) & MASK64;
  }

  static derive(seed, stream) {
    const base = new ReferenceRng((BigInt(seed) & MASK64) ^ ((BigInt(stream) * 0xa0761d6478bd642fn) & MASK64));
    return new ReferenceRng(base.nextBig());
  }

  nextBig() {
    this.state = (this.state + 0x9e3779b97f4a7c15n) & MASK64;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
    return z ^ (z >> 31n);
  }

  below(n) {
    return Number((this.nextBig() * BigInt(n)) >> 64n);
  }
}

module.exports = { Rng, ReferenceRng, MASK64 };
