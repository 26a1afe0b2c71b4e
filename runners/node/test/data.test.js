'use strict';
// The generator and the seed data against the Rust definitions (rng.rs, data.rs, knobs.rs).

const test = require('node:test');
const assert = require('node:assert/strict');

const { Rng, ReferenceRng, MASK64 } = require('../lib/rng');
const W = require('../lib/workload');

test('SplitMix64 gives the published sequence', () => {
  // The reference outputs of SplitMix64 seeded with 1234567 (Vigna's splitmix64.c).
  const rng = new Rng(1234567n);
  assert.deepEqual(
    [rng.nextBig(), rng.nextBig(), rng.nextBig()],
    [6457827717110365317n, 3203168211198807973n, 9817491932198370423n],
  );
});

test('the 32-bit generator draws what the BigInt transcription of rng.rs draws', () => {
  const bounds = [26, 100, 1_000_001, 10_000, 1, 3_000_000, 2 ** 21, 2 ** 40];
  for (const [seed, stream] of [[1n, 0n], [7n, 3n], [0n, MASK64], [12345678901234567890n, MASK64 - 1n]]) {
    const fast = Rng.derive(seed, stream);
    const reference = ReferenceRng.derive(seed, stream);
    for (let i = 0; i < 20_000; i++) {
      const n = bounds[i % bounds.length];
      assert.equal(fast.below(n), reference.below(n), `seed ${seed} stream ${stream} draw ${i} below ${n}`);
    }
  }
  const rng = new Rng(7n);
  for (let i = 0; i < 1000; i++) {
    const v = rng.between(1, 10);
    assert.ok(v >= 1 && v <= 10);
  }
  assert.equal(rng.between(5, 5), 5);
  assert.match(rng.text(8), /^[a-z]{8}$/);
});

test('seed rows are deterministic and dense', () => {
  const a = [...W.itemSeed(50, 9n)];
  assert.deepEqual(a, [...W.itemSeed(50, 9n)]);
  assert.equal(a.length, 50);
  assert.equal(a[0][0], W.SEED_ITEM);
  assert.deepEqual(a[0][1].slice(0, 2), [1, 'item-1']);
  assert.equal(a[49][1][0], 50);
  assert.equal(a[0][1][3].length, 100);
  assert.notDeepEqual(a, [...W.itemSeed(50, 10n)]);
  const jobs = [...W.jobSeed(3, 1n)];
  assert.deepEqual(jobs.map(([sql, [id, , createdAt]]) => [sql, id, createdAt]), [
    [W.SEED_JOB, 1, 1],
    [W.SEED_JOB, 2, 2],
    [W.SEED_JOB, 3, 3],
  ]);
});

test('PRAGMA profiles and overrides follow knobs.rs', () => {
  const knobs = (cell) => W.knobsOf({ profile: 'server', synchronous: null, mmap_size: null, memstatus: false, mutex: 'nomutex', ...cell });
  const server = W.pragmas(knobs({ synchronous: 'full' }));
  assert.deepEqual(server.filter((p) => p.name === 'synchronous').map((p) => p.value), ['FULL']);
  assert.ok(server.some((p) => p.name === 'journal_mode' && p.file));
  assert.ok(W.connectionPragmas(knobs({})).every((p) => p.name !== 'journal_mode'));
  assert.deepEqual(W.pragmas(knobs({ profile: 'sqlite-default', mmap_size: 0 })).map(W.pragmaSql), ['PRAGMA mmap_size = 0']);
  assert.deepEqual(W.pragmas(knobs({ profile: 'sqlite-default' })), []);
});
