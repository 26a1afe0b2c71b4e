'use strict';
// Latencies of one kind of operation, and the OpStats of result.rs made from them (stats.rs).
//
// The Rust runners keep HDR histograms (3 significant figures); here every latency is kept (8 bytes an
// operation) and the percentiles are exact order statistics with the same rank rule
// (the value at rank ceil(q * n)), so the two agree to the histogram's 0.1% rounding.

/** Distinct error messages kept for the report. */
const MAX_ERROR_SAMPLES = 5;

class Latencies {
  constructor() {
    this.values = new Float64Array(1 << 16);
    this.count = 0;
  }

  /** Records one successful operation that took `nanos` nanoseconds (at least 1, as stats.rs records). */
  record(nanos) {
    if (this.count === this.values.length) {
      const grown = new Float64Array(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    this.values[this.count++] = nanos > 1 ? nanos : 1;
  }

  /** `OpStats` over `wallSecs`: ops, ops/s, mean, p50, p99 and max in microseconds; zeros when empty. */
  opStats(wallSecs) {
    const n = this.count;
    if (n === 0) return emptyOpStats();
    const sorted = this.values.slice(0, n).sort();
    let sum = 0;
    for (let i = 0; i < n; i++) sum += sorted[i];
    const at = (q) => sorted[Math.max(1, Math.ceil(q * n)) - 1] / 1000;
    return {
      ops: n,
      ops_per_sec: wallSecs > 0 ? n / wallSecs : 0,
      avg_us: sum / n / 1000,
      p50_us: at(0.5),
      p99_us: at(0.99),
      max_us: sorted[n - 1] / 1000,
    };
  }
}

function emptyOpStats() {
  return { ops: 0, ops_per_sec: 0, avg_us: 0, p50_us: 0, p99_us: 0, max_us: 0 };
}

/** Failed operations in the window: a count and the first few distinct messages. */
class Errors {
  constructor() {
    this.count = 0;
    this.samples = [];
  }

  record(error) {
    this.count++;
    const message = error instanceof Error ? error.message : String(error);
    if (this.samples.length < MAX_ERROR_SAMPLES && !this.samples.includes(message)) {
      this.samples.push(message);
    }
  }
}

module.exports = { Latencies, Errors, emptyOpStats };
